// Image-folder data set: PNGs written by `prepare` decode back to the IDX pixels,
// classes map to labels in folder order, and unreadable / wrong-size PNGs raise a
// DataError naming the file and the sample index.
#include "engine/data/data_error.h"
#include "engine/data/image_folder.h"
#include "engine/data/png_io.h"
#include "engine/data/prepare.h"
#include "tests/engine/data/test_support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

namespace ember::data {
namespace {

using testing::error_of;
using testing::TempDir;

TEST(Png, RoundTripsGrayAndRgb) {
    TempDir dir;
    std::vector<uint8_t> gray(5 * 3);
    for (size_t i = 0; i < gray.size(); ++i) gray[i] = uint8_t(i * 17);
    write_png(dir.path("g.png"), gray.data(), 5, 3, 1);
    std::vector<uint8_t> back(gray.size());
    read_png(dir.path("g.png"), 0, 5, 3, 1, back.data());
    EXPECT_EQ(back, gray);
    PngHeader header = read_png_header(dir.path("g.png"), 0);
    EXPECT_EQ(header.width, 5);
    EXPECT_EQ(header.height, 3);

    std::vector<uint8_t> rgb(4 * 2 * 3);
    for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = uint8_t(i * 11);
    write_png(dir.path("c.png"), rgb.data(), 4, 2, 3);
    std::vector<uint8_t> rgb_back(rgb.size());
    read_png(dir.path("c.png"), 0, 4, 2, 3, rgb_back.data());
    EXPECT_EQ(rgb_back, rgb);
}

TEST(Prepare, ClassFoldersSortInLabelOrder) {
    std::vector<std::string> names;
    for (int label = 0; label < 10; ++label) names.push_back(fashion_mnist_class_folder(label));
    EXPECT_EQ(names[0], "0_t_shirt_top");
    EXPECT_EQ(names[9], "9_ankle_boot");
    EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
}

TEST(Prepare, PngFolderDecodesToTheIdxPixels) {
    EMBER_REQUIRE_FASHION_MNIST(Split::test);
    TempDir dir;
    PrepareOptions options;
    options.root = testing::fashion_mnist_root();
    options.out = dir.path().string();
    options.splits = {Split::test};
    options.limit = 200;
    int64_t last_progress = 0;
    int64_t written = prepare_fashion_mnist_png(options, [&](Split, int64_t done, int64_t) { last_progress = done; });
    EXPECT_EQ(written, 200);
    EXPECT_EQ(last_progress, 200);

    InMemoryDataset idx = load_fashion_mnist(options.root, Split::test);
    ImageFolderDataset folder((dir.path() / "test").string());
    ASSERT_EQ(folder.size(), 200);
    EXPECT_EQ(folder.num_classes(), 10);
    EXPECT_EQ(folder.shape().height, 28);
    EXPECT_EQ(folder.shape().width, 28);
    std::vector<uint8_t> pixels(784);
    for (int64_t i = 0; i < folder.size(); ++i) {
        // Files are named by their IDX index: compare each with the image it came from.
        std::string stem = std::filesystem::path(folder.file(i)).stem().string();
        int64_t idx_index = std::stoll(stem);
        int32_t label = folder.read(i, pixels.data());
        EXPECT_EQ(label, idx.label(idx_index)) << folder.file(i);
        EXPECT_EQ(folder.label(i), label);
        EXPECT_EQ(0, std::memcmp(pixels.data(), idx.image(idx_index), 784)) << folder.file(i);
    }
}

// A small folder with classes "a" and "b", 3 gray 4x4 images each.
void make_folder(const std::filesystem::path& root) {
    for (const char* name : {"a", "b"}) {
        std::filesystem::create_directories(root / name);
        for (int i = 0; i < 3; ++i) {
            std::vector<uint8_t> pixels(16, uint8_t(i * 40 + (name[0] == 'b' ? 1 : 0)));
            write_png((root / name / ("img" + std::to_string(i) + ".png")).string(), pixels.data(), 4, 4, 1);
        }
    }
}

// Reading sample `index` of the folder at `root` throws a DataError naming `path`, the
// sample and (when one is given) `message`.
void expect_read_error(const std::filesystem::path& root, int64_t index, const std::string& path,
                       const std::string& message = "") {
    ImageFolderDataset folder(root.string());
    std::vector<uint8_t> pixels(16);
    DataError error = error_of([&] { folder.read(index, pixels.data()); });
    EXPECT_EQ(error.path(), path);
    EXPECT_EQ(error.sample_index(), index);
    if (!message.empty()) {
        EXPECT_NE(std::string(error.what()).find(message), std::string::npos) << error.what();
    }
}

TEST(ImageFolder, LabelsFollowSortedClassFolders) {
    TempDir dir;
    make_folder(dir.path());
    ImageFolderDataset folder(dir.path().string());
    ASSERT_EQ(folder.size(), 6);
    EXPECT_EQ(folder.class_names(), (std::vector<std::string>{"a", "b"}));
    std::vector<uint8_t> pixels(16);
    EXPECT_EQ(folder.read(4, pixels.data()), 1);
    EXPECT_EQ(pixels[0], uint8_t(41));
    EXPECT_EQ(folder.read(0, pixels.data()), 0);
    EXPECT_EQ(pixels[0], uint8_t(0));
}

TEST(ImageFolder, UnreadablePngNamesFileAndSample) {
    TempDir dir;
    make_folder(dir.path());
    std::string broken = (dir.path() / "a" / "img1.png").string();
    testing::write_bytes(broken, {'n', 'o', 't', ' ', 'p', 'n', 'g'});
    expect_read_error(dir.path(), 1, broken, "unreadable PNG");
}

TEST(ImageFolder, TruncatedPngNamesFile) {
    TempDir dir;
    make_folder(dir.path());
    std::string path = (dir.path() / "b" / "img2.png").string();
    std::vector<uint8_t> bytes = testing::read_bytes(path);
    bytes.resize(bytes.size() - 20);  // cut into the image data / end chunk
    testing::write_bytes(path, bytes);
    expect_read_error(dir.path(), 5, path);
}

TEST(ImageFolder, WrongSizePngNamesFileAndSample) {
    TempDir dir;
    make_folder(dir.path());
    std::vector<uint8_t> big(25, 9);
    std::string path = (dir.path() / "b" / "img0.png").string();
    write_png(path, big.data(), 5, 5, 1);
    expect_read_error(dir.path(), 3, path, "wrong image size 5x5, expected 4x4");
}

TEST(ImageFolder, MissingOrEmptyRootIsAnError) {
    TempDir dir;
    EXPECT_THROW(ImageFolderDataset((dir.path() / "nope").string()), DataError);
    EXPECT_THROW(ImageFolderDataset(dir.path().string()), DataError);  // no class folders
    std::filesystem::create_directories(dir.path() / "empty_class");
    EXPECT_THROW(ImageFolderDataset(dir.path().string()), DataError);  // no PNG files
}

}  // namespace
}  // namespace ember::data
