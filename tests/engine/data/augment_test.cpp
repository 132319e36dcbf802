// Augmentation: crop/flip/normalize against hand-worked pixels, per-sample seeding
// (same (seed, epoch, index) -> same transform; all choices reachable), and the
// GPU-resident gather's CPU twin against per-sample augmentation.
#include "engine/data/augment.h"
#include "engine/data/gpu_resident.h"

#include <gtest/gtest.h>

#include <set>

namespace ember::data {
namespace {

// 3x3 image with values 10..90 (row-major): 10 20 30 / 40 50 60 / 70 80 90.
std::vector<uint8_t> small_image() {
    return {10, 20, 30, 40, 50, 60, 70, 80, 90};
}

TEST(Augment, IdentityTransformOnlyNormalizes) {
    std::vector<uint8_t> image = small_image();
    SampleTransform none;
    for (int y = 0; y < 3; ++y)
        for (int x = 0; x < 3; ++x) {
            float expected = (image[size_t(y * 3 + x)] / 255.0f - 0.5f) / 0.25f;
            EXPECT_FLOAT_EQ(augmented_pixel(image.data(), 3, 3, 0, y, x, none, 0, 0.5f, 4.0f), expected);
        }
}

TEST(Augment, FlipMirrorsColumns) {
    std::vector<uint8_t> image = small_image();
    SampleTransform flip;
    flip.flip = true;
    EXPECT_FLOAT_EQ(augmented_pixel(image.data(), 3, 3, 0, 0, 0, flip, 0, 0.0f, 1.0f), 30 / 255.0f);
    EXPECT_FLOAT_EQ(augmented_pixel(image.data(), 3, 3, 0, 2, 2, flip, 0, 0.0f, 1.0f), 70 / 255.0f);
}

TEST(Augment, CropShiftsWithZeroPadding) {
    std::vector<uint8_t> image = small_image();
    // padding 1, window at (0, 0) of the padded image: output (0,0) is padding, (1,1) is source (0,0).
    SampleTransform top_left;
    top_left.offset_y = 0;
    top_left.offset_x = 0;
    EXPECT_FLOAT_EQ(augmented_pixel(image.data(), 3, 3, 0, 0, 0, top_left, 1, 0.0f, 1.0f), 0.0f);
    EXPECT_FLOAT_EQ(augmented_pixel(image.data(), 3, 3, 0, 1, 1, top_left, 1, 0.0f, 1.0f), 10 / 255.0f);
    // Window at (2, 2): output (0,0) is source (1,1); (2,2) is padding.
    SampleTransform bottom_right;
    bottom_right.offset_y = 2;
    bottom_right.offset_x = 2;
    EXPECT_FLOAT_EQ(augmented_pixel(image.data(), 3, 3, 0, 0, 0, bottom_right, 1, 0.0f, 1.0f), 50 / 255.0f);
    EXPECT_FLOAT_EQ(augmented_pixel(image.data(), 3, 3, 0, 2, 2, bottom_right, 1, 0.0f, 1.0f), 0.0f);
    // Padding normalizes like a black pixel.
    EXPECT_FLOAT_EQ(augmented_pixel(image.data(), 3, 3, 0, 2, 2, bottom_right, 1, 0.25f, 2.0f), -0.5f);
}

TEST(Augment, TransformIsAFunctionOfSeedEpochAndIndex) {
    AugmentOptions options;
    options.crop_padding = 4;
    options.horizontal_flip = true;
    options.seed = 123;
    std::set<int> offsets;
    int flips = 0;
    for (int64_t index = 0; index < 4000; ++index) {
        SampleTransform a = sample_transform(options, 2, index);
        SampleTransform b = sample_transform(options, 2, index);
        EXPECT_EQ(a.offset_y, b.offset_y);
        EXPECT_EQ(a.offset_x, b.offset_x);
        EXPECT_EQ(a.flip, b.flip);
        EXPECT_GE(a.offset_y, 0);
        EXPECT_LE(a.offset_y, 8);
        offsets.insert(a.offset_y * 9 + a.offset_x);
        flips += a.flip;
    }
    EXPECT_EQ(offsets.size(), 81u);  // every window position occurs
    EXPECT_NEAR(flips / 4000.0, 0.5, 0.04);
    // A different epoch gives a different transform for most samples.
    int same = 0;
    for (int64_t index = 0; index < 100; ++index) {
        SampleTransform a = sample_transform(options, 0, index), b = sample_transform(options, 1, index);
        same += a.offset_y == b.offset_y && a.offset_x == b.offset_x && a.flip == b.flip;
    }
    EXPECT_LT(same, 10);
}

TEST(Augment, GatherTwinEqualsPerSampleAugmentation) {
    ImageShape shape{2, 5, 4};
    const int64_t n = 6;
    std::vector<uint8_t> pixels(size_t(n * shape.pixels()));
    for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = uint8_t(i * 13 + 1);
    std::vector<int32_t> labels = {5, 4, 3, 2, 1, 0};
    std::vector<int64_t> indices = {4, 0, 4, 2};
    AugmentOptions options{.crop_padding = 2, .horizontal_flip = true, .mean = 0.3f, .std = 0.2f, .seed = 9};
    std::vector<float> gathered(indices.size() * size_t(shape.pixels()));
    std::vector<int32_t> gathered_labels(indices.size());
    gather_augment_cpu(pixels.data(), labels.data(), shape, indices.data(), int64_t(indices.size()), options, 3,
                       gathered.data(), gathered_labels.data());
    EXPECT_EQ(gathered_labels, (std::vector<int32_t>{1, 5, 1, 3}));
    std::vector<float> one(size_t(shape.pixels()));
    for (size_t s = 0; s < indices.size(); ++s) {
        augment_sample_cpu(pixels.data() + indices[s] * shape.pixels(), shape.channels, shape.height, shape.width,
                           options, 3, indices[s], one.data());
        for (size_t p = 0; p < one.size(); ++p) ASSERT_EQ(gathered[s * one.size() + p], one[p]);
    }
}

}  // namespace
}  // namespace ember::data
