// The GPU-resident gather/augment kernel (engine/data/gpu_resident.cu) against its CPU
// twin in the kernel interpreter, at the sizes the loader test does not reach: batches
// of 0 and 1 samples, three-channel images whose size is not a multiple of the block,
// repeated indices, and past the kernel's block cap (lowered to 2).
#include "engine/core/cuda_check.h"
#include "engine/cuda/interpreter/interpreter.h"
#include "engine/data/gpu_resident.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace ember::data {
namespace {

namespace interpreter = ember::cuda_interpreter;

template <class T>
T* upload(const std::vector<T>& host) {
    T* device = nullptr;
    EMBER_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&device), std::max<std::size_t>(host.size(), 1) * sizeof(T)));
    if (!host.empty())
        EMBER_CUDA_CHECK(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    return device;
}

template <class T>
std::vector<T> download_and_free(T* device, std::size_t n) {
    std::vector<T> host(n);
    if (n) EMBER_CUDA_CHECK(cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost));
    EMBER_CUDA_CHECK(cudaFree(device));
    return host;
}

void check_gather_augment(ImageShape shape, const std::vector<int64_t>& indices, int64_t epoch) {
    const int64_t samples = 13, count = static_cast<int64_t>(indices.size());
    std::vector<uint8_t> pixels(static_cast<std::size_t>(samples * shape.pixels()));
    for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = uint8_t((i * 31 + i / 7) & 255);
    std::vector<int32_t> labels(samples);
    for (int64_t i = 0; i < samples; ++i) labels[i] = int32_t(i % 10);
    AugmentOptions options{.crop_padding = 2, .horizontal_flip = true, .mean = 0.25f, .std = 0.5f, .seed = 9};

    const std::size_t floats = static_cast<std::size_t>(count * shape.pixels());
    std::vector<float> cpu_images(floats);
    std::vector<int32_t> cpu_labels(indices.size());
    gather_augment_cpu(pixels.data(), labels.data(), shape, indices.data(), count, options, epoch, cpu_images.data(),
                       cpu_labels.data());

    uint8_t* d_pixels = upload(pixels);
    int32_t* d_labels = upload(labels);
    int64_t* d_indices = upload(indices);
    float* d_images = upload(std::vector<float>(floats, std::numeric_limits<float>::quiet_NaN()));
    int32_t* d_out_labels = upload(std::vector<int32_t>(indices.size(), -1));
    gather_augment_cuda(d_pixels, d_labels, shape, d_indices, count, options, epoch, d_images, d_out_labels, nullptr);
    const auto images = download_and_free(d_images, floats);
    const auto out_labels = download_and_free(d_out_labels, indices.size());
    EMBER_CUDA_CHECK(cudaFree(d_pixels));
    EMBER_CUDA_CHECK(cudaFree(d_labels));
    EMBER_CUDA_CHECK(cudaFree(d_indices));
    for (std::size_t i = 0; i < floats; ++i) ASSERT_NEAR(images[i], cpu_images[i], 1e-6f) << "element " << i;
    EXPECT_EQ(out_labels, cpu_labels);
}

class GatherAugmentEdges : public ::testing::Test {
  protected:
    void TearDown() override { interpreter::set_grid_stride_cap(0); }
};

TEST_F(GatherAugmentEdges, EmptyAndSingleBatches) {
    check_gather_augment({1, 28, 28}, {}, 0);
    check_gather_augment({1, 28, 28}, {5}, 1);
}

TEST_F(GatherAugmentEdges, ThreeChannelOddImagesWithRepeatedIndices) {
    check_gather_augment({3, 5, 7}, {0, 12, 3, 3, 7, 12, 1}, 2);  // 735 values: 3 blocks, the last partial
}

TEST_F(GatherAugmentEdges, PastTheBlockCap) {
    interpreter::set_grid_stride_cap(2);
    check_gather_augment({1, 28, 28}, {4, 8, 1, 9, 2, 11}, 3);
}

}  // namespace
}  // namespace ember::data
