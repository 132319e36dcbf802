// IDX reading: the real Fashion-MNIST files against checksums computed independently
// (Python's gzip + zlib.crc32 over the raw IDX payload) and the published class counts,
// and every malformed-file case against the error it must raise.
#include "engine/data/data_error.h"
#include "engine/data/fashion_mnist.h"
#include "engine/data/idx_reader.h"
#include "tests/engine/data/test_support.h"

#include <gtest/gtest.h>

#include <array>

namespace ember::data {
namespace {

using testing::error_of;
using testing::TempDir;

TEST(FashionMnist, TrainSplitMatchesKnownChecksumsAndCounts) {
    EMBER_REQUIRE_FASHION_MNIST(Split::train);
    InMemoryDataset train = load_fashion_mnist(testing::fashion_mnist_root(), Split::train);
    ASSERT_EQ(train.size(), 60000);
    EXPECT_EQ(train.shape().channels, 1);
    EXPECT_EQ(train.shape().height, 28);
    EXPECT_EQ(train.shape().width, 28);
    EXPECT_EQ(train.num_classes(), 10);
    EXPECT_EQ(testing::crc32_of(train.pixels(), size_t(60000) * 784), 0xae65dccdu);
    EXPECT_EQ(testing::crc32_of(train.image(0), 784), 0xf270beb5u);
    EXPECT_EQ(testing::crc32_of(train.image(1), 784), 0x8679905eu);
    EXPECT_EQ(testing::crc32_of(train.image(59999), 784), 0x6d595368u);
    EXPECT_EQ(train.label(0), 9);  // the first training image is an ankle boot
    EXPECT_EQ(train.label(1), 0);
    EXPECT_EQ(train.label(59999), 5);
    std::vector<uint8_t> label_bytes(train.labels().begin(), train.labels().end());
    EXPECT_EQ(testing::crc32_of(label_bytes.data(), label_bytes.size()), 0x2ed6e46au);
    std::array<int, 10> counts{};
    for (int32_t label : train.labels()) ++counts[size_t(label)];
    for (int c = 0; c < 10; ++c) EXPECT_EQ(counts[size_t(c)], 6000) << "class " << c;
    // The normalization constant kFashionMnistMean is the training set's pixel mean.
    double sum = 0;
    for (int64_t i = 0; i < 60000 * 784; ++i) sum += train.pixels()[i];
    EXPECT_NEAR(sum / (60000.0 * 784) / 255.0, kFashionMnistMean, 1e-4);
}

TEST(FashionMnist, TestSplitMatchesKnownChecksumsAndCounts) {
    EMBER_REQUIRE_FASHION_MNIST(Split::test);
    InMemoryDataset test = load_fashion_mnist(testing::fashion_mnist_root(), Split::test);
    ASSERT_EQ(test.size(), 10000);
    EXPECT_EQ(testing::crc32_of(test.pixels(), size_t(10000) * 784), 0x12728439u);
    EXPECT_EQ(testing::crc32_of(test.image(0), 784), 0x52830860u);
    EXPECT_EQ(testing::crc32_of(test.image(9999), 784), 0x4c5edc96u);
    EXPECT_EQ(test.label(0), 9);
    EXPECT_EQ(test.label(1), 2);
    std::array<int, 10> counts{};
    for (int32_t label : test.labels()) ++counts[size_t(label)];
    for (int c = 0; c < 10; ++c) EXPECT_EQ(counts[size_t(c)], 1000) << "class " << c;
}

TEST(FashionMnist, HeaderOfRealFileAgreesWithParsedSize) {
    EMBER_REQUIRE_FASHION_MNIST(Split::test);
    IdxImages images = read_idx_images(fashion_mnist_images_path(testing::fashion_mnist_root(), Split::test));
    EXPECT_EQ(images.count, 10000);
    EXPECT_EQ(images.rows, 28);
    EXPECT_EQ(images.columns, 28);
    EXPECT_EQ(images.pixels.size(), size_t(10000) * 28 * 28);
}

TEST(FashionMnist, MissingRootSaysHowToInstall) {
    TempDir dir;
    std::string message = fashion_mnist_missing(dir.path().string(), Split::train);
    EXPECT_NE(message.find("apt-get install dataset-fashion-mnist"), std::string::npos) << message;
    EXPECT_NE(message.find("train-images-idx3-ubyte"), std::string::npos) << message;
    EXPECT_THROW(load_fashion_mnist(dir.path().string(), Split::train), DataError);
}

TEST(IdxReader, ReadsSmallGzipAndPlainFiles) {
    TempDir dir;
    std::vector<uint8_t> body = testing::idx_images(3, 2, 4);
    testing::write_gzip(dir.path("a.gz"), body);
    testing::write_bytes(dir.path("a"), body);
    for (const std::string& path : {dir.path("a.gz"), dir.path("a")}) {
        IdxImages images = read_idx_images(path);
        EXPECT_EQ(images.count, 3);
        EXPECT_EQ(images.rows, 2);
        EXPECT_EQ(images.columns, 4);
        ASSERT_EQ(images.pixels.size(), 24u);
        EXPECT_EQ(images.pixels[5], uint8_t(35));
    }
}

TEST(IdxReader, TruncatedGzipNamesFileAndSample) {
    TempDir dir;
    // 10 images of 100 bytes; cut the compressed stream in half.
    std::vector<uint8_t> body = testing::idx_images(10, 10, 10);
    testing::write_gzip(dir.path("full.gz"), body);
    std::vector<uint8_t> compressed = testing::read_bytes(dir.path("full.gz"));
    compressed.resize(compressed.size() / 2);
    std::string path = dir.path("cut.gz");
    testing::write_bytes(path, compressed);
    DataError error = error_of([&] { read_idx_images(path); });
    EXPECT_EQ(error.path(), path);
    EXPECT_NE(std::string(error.what()).find("cut.gz"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("truncated"), std::string::npos) << error.what();
}

TEST(IdxReader, ShortDataNamesFirstIncompleteSample) {
    TempDir dir;
    std::vector<uint8_t> body = testing::idx_images(10, 10, 10);
    body.resize(16 + 4 * 100 + 50);  // header + 4.5 images
    std::string path = dir.path("short.gz");
    testing::write_gzip(path, body);
    DataError error = error_of([&] { read_idx_images(path); });
    EXPECT_EQ(error.sample_index(), 4);
    EXPECT_NE(std::string(error.what()).find("sample 4"), std::string::npos) << error.what();
}

TEST(IdxReader, WrongMagicIsRefused) {
    TempDir dir;
    std::string images_path = dir.path("labels-as-images.gz");
    testing::write_gzip(images_path, testing::idx_labels({1, 2, 3}));
    DataError error = error_of([&] { read_idx_images(images_path); });
    EXPECT_NE(std::string(error.what()).find("magic"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("0x00000801"), std::string::npos) << error.what();

    std::string labels_path = dir.path("bad-magic-labels.gz");
    testing::write_gzip(labels_path, testing::idx_labels({1, 2, 3}, 0x00000901));
    EXPECT_THROW(read_idx_labels(labels_path), DataError);
}

TEST(IdxReader, ImageLabelCountMismatchIsRefused) {
    TempDir dir;
    testing::write_gzip(dir.path("images.gz"), testing::idx_images(4, 2, 2));
    testing::write_gzip(dir.path("labels.gz"), testing::idx_labels({0, 1, 2}));
    DataError error = error_of([&] { load_idx_pair(dir.path("images.gz"), dir.path("labels.gz"), 10, "tiny"); });
    EXPECT_NE(std::string(error.what()).find("count mismatch"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("labels.gz"), std::string::npos) << error.what();
}

TEST(IdxReader, LabelOutOfRangeNamesSample) {
    TempDir dir;
    testing::write_gzip(dir.path("images.gz"), testing::idx_images(4, 2, 2));
    testing::write_gzip(dir.path("labels.gz"), testing::idx_labels({0, 9, 10, 3}));
    DataError error = error_of([&] { load_idx_pair(dir.path("images.gz"), dir.path("labels.gz"), 10, "tiny"); });
    EXPECT_EQ(error.sample_index(), 2);
    EXPECT_NE(std::string(error.what()).find("label 10 out of range"), std::string::npos) << error.what();
}

TEST(IdxReader, TrailingBytesAreRefused) {
    TempDir dir;
    std::vector<uint8_t> body = testing::idx_labels({0, 1});
    body.push_back(7);
    testing::write_gzip(dir.path("labels.gz"), body);
    EXPECT_THROW(read_idx_labels(dir.path("labels.gz")), DataError);
}

TEST(IdxReader, MissingFileNamesPath) {
    DataError error = error_of([] { read_idx_labels("/nonexistent/ember/labels.gz"); });
    EXPECT_NE(std::string(error.what()).find("/nonexistent/ember/labels.gz"), std::string::npos) << error.what();
}

}  // namespace
}  // namespace ember::data
