// DataLoader: identical batches for 0, 1 and 4 workers (and any prefetch factor or
// persistence), contents equal to a direct per-sample computation, drop_last, epochs,
// and errors: a bad PNG in the middle of a folder read by 4 workers reaches next()
// naming the file and sample, and neither next() nor the destructor hangs.
#include "engine/data/data_error.h"
#include "engine/data/image_folder.h"
#include "engine/data/in_memory_dataset.h"
#include "engine/data/loader.h"
#include "engine/data/png_io.h"
#include "tests/engine/data/test_support.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

namespace ember::data {
namespace {

using testing::TempDir;

std::shared_ptr<InMemoryDataset> synthetic_dataset(int64_t count) {
    ImageShape shape{1, 6, 5};
    std::vector<uint8_t> pixels(size_t(count * shape.pixels()));
    for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = uint8_t((i * 31 + i / 7) & 255);
    std::vector<int32_t> labels(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) labels[size_t(i)] = int32_t(i % 10);
    return std::make_shared<InMemoryDataset>(shape, 10, std::move(pixels), std::move(labels), "synthetic");
}

LoaderOptions augmenting_options(int workers) {
    LoaderOptions options;
    options.batch_size = 16;
    options.workers = workers;
    options.augment.crop_padding = 2;
    options.augment.horizontal_flip = true;
    options.augment.mean = kFashionMnistMean;
    options.augment.std = kFashionMnistStd;
    options.augment.seed = 42;
    return options;
}

struct CollectedBatch {
    std::vector<float> images;
    std::vector<int32_t> labels;
    std::vector<int64_t> indices;
    bool operator==(const CollectedBatch& other) const {
        return images == other.images && labels == other.labels && indices == other.indices;
    }
};

std::vector<CollectedBatch> collect_epoch(DataLoader& loader, int64_t epoch) {
    std::vector<CollectedBatch> result;
    loader.start_epoch(epoch);
    while (const Batch* batch = loader.next()) {
        CollectedBatch copy;
        size_t floats = size_t(batch->size * batch->shape.pixels());
        copy.images.assign(batch->images, batch->images + floats);
        copy.labels.assign(batch->labels, batch->labels + batch->size);
        copy.indices.assign(batch->sample_indices, batch->sample_indices + batch->size);
        EXPECT_EQ(batch->index, int64_t(result.size()));
        EXPECT_EQ(batch->epoch, epoch);
        result.push_back(std::move(copy));
        loader.release(batch);
    }
    return result;
}

TEST(DataLoader, BatchesIdenticalForZeroOneAndFourWorkers) {
    auto dataset = synthetic_dataset(203);
    auto sampler = std::make_shared<RandomSampler>(dataset->size(), 5);
    DataLoader reference_loader(dataset, sampler, augmenting_options(0));
    std::vector<CollectedBatch> reference0 = collect_epoch(reference_loader, 0);
    std::vector<CollectedBatch> reference1 = collect_epoch(reference_loader, 1);
    ASSERT_EQ(reference0.size(), 13u);  // ceil(203 / 16)
    EXPECT_EQ(reference0.back().labels.size(), 11u);
    EXPECT_FALSE(reference0 == reference1);  // new shuffle and new augmentation per epoch

    for (int workers : {1, 4}) {
        for (bool persistent : {false, true}) {
            for (int prefetch : {1, 2, 3}) {
                LoaderOptions options = augmenting_options(workers);
                options.persistent_workers = persistent;
                options.prefetch_factor = prefetch;
                DataLoader loader(dataset, sampler, options);
                EXPECT_EQ(loader.staging_slots(), workers * prefetch + 1);
                EXPECT_TRUE(collect_epoch(loader, 0) == reference0)
                    << workers << " workers, prefetch " << prefetch << ", persistent " << persistent;
                EXPECT_TRUE(collect_epoch(loader, 1) == reference1)
                    << workers << " workers, prefetch " << prefetch << ", persistent " << persistent;
                // Persistent workers start once; others once per epoch.
                EXPECT_EQ(loader.stats().worker_starts, persistent ? workers : 2 * workers);
            }
        }
    }
}

TEST(DataLoader, BatchContentsEqualDirectComputation) {
    auto dataset = synthetic_dataset(40);
    auto sampler = std::make_shared<RandomSampler>(dataset->size(), 1);
    LoaderOptions options = augmenting_options(2);
    DataLoader loader(dataset, sampler, options);
    std::vector<CollectedBatch> batches = collect_epoch(loader, 3);
    std::vector<int64_t> order = sampler->epoch_indices(3);
    size_t position = 0;
    std::vector<float> expected(size_t(dataset->shape().pixels()));
    for (const CollectedBatch& batch : batches) {
        for (size_t s = 0; s < batch.indices.size(); ++s, ++position) {
            int64_t index = order[position];
            ASSERT_EQ(batch.indices[s], index);
            EXPECT_EQ(batch.labels[s], dataset->label(index));
            augment_sample_cpu(dataset->image(index), 1, 6, 5, options.augment, 3, index, expected.data());
            for (size_t p = 0; p < expected.size(); ++p) ASSERT_EQ(batch.images[s * expected.size() + p], expected[p]);
        }
    }
    EXPECT_EQ(position, 40u);
}

TEST(DataLoader, DropLastDropsTheShortBatch) {
    auto dataset = synthetic_dataset(40);
    LoaderOptions options = augmenting_options(2);
    options.drop_last = true;
    DataLoader loader(dataset, std::make_shared<SequentialSampler>(dataset->size()), options);
    EXPECT_EQ(loader.batches_per_epoch(), 2);
    std::vector<CollectedBatch> batches = collect_epoch(loader, 0);
    ASSERT_EQ(batches.size(), 2u);
    EXPECT_EQ(batches[1].indices.front(), 16);
    EXPECT_EQ(loader.stats().batches, 2);
}

TEST(DataLoader, WorksWithoutADeviceOnHostMemory) {
    auto dataset = synthetic_dataset(20);
    DataLoader loader(dataset, std::make_shared<SequentialSampler>(20), augmenting_options(1));
    if (!loader.copies_to_device()) {
        EXPECT_FALSE(loader.pinned());
        EXPECT_NE(loader.fallback_note().find("no CUDA device"), std::string::npos);
    }
    loader.start_epoch(0);
    const Batch* batch = loader.next();
    ASSERT_NE(batch, nullptr);
    EXPECT_EQ(batch->device_images == nullptr, !loader.copies_to_device());
    loader.release(batch);
}

TEST(DataLoader, HoldingEverySlotIsAnErrorNotAHang) {
    auto dataset = synthetic_dataset(200);
    LoaderOptions options = augmenting_options(1);
    options.prefetch_factor = 1;  // 2 slots
    DataLoader loader(dataset, std::make_shared<SequentialSampler>(200), options);
    loader.start_epoch(0);
    const Batch* first = loader.next();
    const Batch* second = loader.next();
    ASSERT_NE(first, nullptr);
    ASSERT_NE(second, nullptr);
    EXPECT_THROW(loader.next(), std::logic_error);
    loader.release(first);
    loader.release(second);
    EXPECT_NE(loader.next(), nullptr);
}

TEST(DataLoader, NextBeforeStartEpochIsAnError) {
    auto dataset = synthetic_dataset(4);
    DataLoader loader(dataset, std::make_shared<SequentialSampler>(4), augmenting_options(0));
    EXPECT_THROW(loader.next(), std::logic_error);
}

TEST(DataLoader, AbandonedEpochRestartsCleanly) {
    auto dataset = synthetic_dataset(300);
    auto sampler = std::make_shared<RandomSampler>(300, 2);
    DataLoader loader(dataset, sampler, augmenting_options(4));
    loader.start_epoch(0);
    loader.release(loader.next());  // leave the rest of epoch 0 in flight
    DataLoader reference(dataset, sampler, augmenting_options(0));
    EXPECT_TRUE(collect_epoch(loader, 1) == collect_epoch(reference, 1));
}

// A 28x28 gray image folder of `count` files over 2 classes, sample i named i.png.
void write_folder(const std::filesystem::path& root, int count) {
    std::vector<uint8_t> pixels(784);
    for (int i = 0; i < count; ++i) {
        std::filesystem::path dir = root / (i % 2 == 0 ? "class_a" : "class_b");
        std::filesystem::create_directories(dir);
        for (size_t p = 0; p < pixels.size(); ++p) pixels[p] = uint8_t(p + size_t(i));
        char name[32];
        std::snprintf(name, sizeof name, "%04d.png", i);
        write_png((dir / name).string(), pixels.data(), 28, 28, 1);
    }
}

TEST(DataLoader, PngFolderBatchesIdenticalForZeroOneAndFourWorkers) {
    TempDir dir;
    write_folder(dir.path(), 90);
    auto dataset = std::make_shared<ImageFolderDataset>(dir.path().string());
    auto sampler = std::make_shared<RandomSampler>(dataset->size(), 17);
    LoaderOptions options = augmenting_options(0);
    options.batch_size = 7;
    DataLoader reference(dataset, sampler, options);
    std::vector<CollectedBatch> expected = collect_epoch(reference, 2);
    ASSERT_EQ(expected.size(), 13u);  // ceil(90 / 7)
    for (int workers : {1, 4}) {
        options.workers = workers;
        DataLoader loader(dataset, sampler, options);
        EXPECT_TRUE(collect_epoch(loader, 2) == expected) << workers << " workers";
    }
}

TEST(DataLoader, BadPngInTheMiddleReachesTheTrainingLoop) {
    TempDir dir;
    write_folder(dir.path(), 120);
    // Samples are class_a files first (60), then class_b: sample 70 is class_b/0021.png.
    std::string broken = (dir.path() / "class_b" / "0021.png").string();
    testing::write_bytes(broken, {0x89, 'P', 'N', 'G', 0, 0, 0, 0});
    auto dataset = std::make_shared<ImageFolderDataset>(dir.path().string());
    ASSERT_EQ(dataset->file(70), broken);
    LoaderOptions options;
    options.batch_size = 8;
    options.workers = 4;
    options.augment.seed = 1;

    // Run in a thread with a deadline so a hang fails the test instead of stalling CTest.
    auto run = std::async(std::launch::async, [&] {
        DataLoader loader(dataset, std::make_shared<SequentialSampler>(dataset->size()), options);
        loader.start_epoch(0);
        int64_t good_batches = 0;
        try {
            while (const Batch* batch = loader.next()) {
                ++good_batches;
                loader.release(batch);
            }
        } catch (const DataError& error) {
            EXPECT_EQ(error.path(), broken);
            EXPECT_EQ(error.sample_index(), 70);
            EXPECT_NE(std::string(error.what()).find("0021.png: sample 70"), std::string::npos) << error.what();
            EXPECT_EQ(good_batches, 8);              // batches 0..7 (samples 0..63) arrive before the bad one
            EXPECT_THROW(loader.next(), DataError);  // the epoch stays failed
            // A new epoch works up to the same bad sample again.
            loader.start_epoch(1);
            EXPECT_NE(loader.next(), nullptr);
            return true;  // the destructor joins the workers here
        }
        return false;
    });
    ASSERT_EQ(run.wait_for(std::chrono::seconds(30)), std::future_status::ready) << "loader hung";
    EXPECT_TRUE(run.get()) << "the bad PNG did not raise a DataError";
}

TEST(DataLoader, ErrorInTrainingThreadLoadingToo) {
    TempDir dir;
    write_folder(dir.path(), 10);
    std::vector<uint8_t> wrong(30 * 30, 1);
    std::string path = (dir.path() / "class_a" / "0008.png").string();
    write_png(path, wrong.data(), 30, 30, 1);
    auto dataset = std::make_shared<ImageFolderDataset>(dir.path().string());
    LoaderOptions options;
    options.batch_size = 4;
    DataLoader loader(dataset, std::make_shared<SequentialSampler>(dataset->size()), options);
    loader.start_epoch(0);
    loader.release(loader.next());  // samples 0..3
    try {
        loader.next();
        FAIL() << "wrong-size PNG not reported";
    } catch (const DataError& error) {
        EXPECT_EQ(error.path(), path);
        EXPECT_EQ(error.sample_index(), 4);
    }
}

}  // namespace
}  // namespace ember::data
