// Device paths (label `gpu`): the gather/augment kernel against its CPU twin, the
// GPU-resident loader against the threaded loader, and the threaded loader's H2D copies
// against its own host batches.
#include "engine/core/cuda_check.h"
#include "engine/data/gpu_resident.h"
#include "engine/data/loader.h"
#include "engine/data/staging_buffer.h"
#include "tests/support/gpu.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

namespace ember::data {
namespace {

std::shared_ptr<InMemoryDataset> synthetic_dataset(int64_t count) {
    ImageShape shape{1, 28, 28};
    std::vector<uint8_t> pixels(size_t(count * shape.pixels()));
    for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = uint8_t((i * 29 + i / 5) & 255);
    std::vector<int32_t> labels(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) labels[size_t(i)] = int32_t((i * 7) % 10);
    return std::make_shared<InMemoryDataset>(shape, 10, std::move(pixels), std::move(labels), "synthetic");
}

AugmentOptions augment_options() {
    AugmentOptions options{.crop_padding = 4, .horizontal_flip = true, .mean = 0.2860f, .std = 0.3530f, .seed = 77};
    return options;
}

TEST(GpuResident, LoaderMatchesThreadedLoaderBatchForBatch) {
    EMBER_REQUIRE_GPU();
    auto dataset = synthetic_dataset(1000);
    auto sampler = std::make_shared<RandomSampler>(1000, 3);
    GpuResidentLoader resident(*dataset, sampler, 64, false, augment_options());
    EXPECT_EQ(resident.resident_bytes(), size_t(1000) * 784 + 1000 * sizeof(int32_t));
    LoaderOptions options;
    options.batch_size = 64;
    options.workers = 2;
    options.augment = augment_options();
    DataLoader threaded(dataset, sampler, options);
    ASSERT_TRUE(threaded.copies_to_device());
    // Known before the first epoch starts: the run sizes its schedule from it (a count of
    // 0 here once made `ember train --set data.source=gpu` run zero steps per epoch).
    EXPECT_EQ(resident.batches_per_epoch(), 16);
    EXPECT_EQ(resident.batches_per_epoch(), threaded.batches_per_epoch());
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
        resident.start_epoch(epoch);
        threaded.start_epoch(epoch);
        int64_t batches = 0;
        while (const Batch* device_batch = resident.next()) {
            const Batch* host_batch = threaded.next();
            ASSERT_NE(host_batch, nullptr);
            size_t floats = size_t(device_batch->size * device_batch->shape.pixels());
            std::vector<float> images(floats), copied(floats);
            std::vector<int32_t> labels(size_t(device_batch->size)), copied_labels(labels.size());
            EMBER_CUDA_CHECK(cudaEventSynchronize(device_batch->ready));
            EMBER_CUDA_CHECK(
                cudaMemcpy(images.data(), device_batch->device_images, floats * sizeof(float), cudaMemcpyDeviceToHost));
            EMBER_CUDA_CHECK(cudaMemcpy(labels.data(), device_batch->device_labels, labels.size() * sizeof(int32_t),
                                        cudaMemcpyDeviceToHost));
            EMBER_CUDA_CHECK(cudaEventSynchronize(host_batch->ready));
            EMBER_CUDA_CHECK(
                cudaMemcpy(copied.data(), host_batch->device_images, floats * sizeof(float), cudaMemcpyDeviceToHost));
            EMBER_CUDA_CHECK(cudaMemcpy(copied_labels.data(), host_batch->device_labels,
                                        labels.size() * sizeof(int32_t), cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < floats; ++i) {
                ASSERT_NEAR(images[i], host_batch->images[i], 1e-6f) << "batch " << batches << " element " << i;
                ASSERT_EQ(copied[i], host_batch->images[i]);  // the H2D copy is exact
            }
            for (size_t i = 0; i < labels.size(); ++i) {
                ASSERT_EQ(labels[i], host_batch->labels[i]);
                ASSERT_EQ(copied_labels[i], host_batch->labels[i]);
            }
            resident.release(device_batch);
            threaded.release(host_batch);
            ++batches;
        }
        EXPECT_EQ(threaded.next(), nullptr);
        EXPECT_EQ(batches, 16);
    }
}

TEST(GpuResident, PinnedStagingWhenADeviceExists) {
    EMBER_REQUIRE_GPU();
    HostBuffer pinned(4096, true);
    EXPECT_TRUE(pinned.pinned());
    HostBuffer pageable(4096, false);
    EXPECT_FALSE(pageable.pinned());
}

}  // namespace
}  // namespace ember::data
