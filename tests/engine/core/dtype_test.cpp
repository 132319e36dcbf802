// f16/bf16 conversions against known IEEE bit patterns, round-to-nearest-even ties,
// subnormals, overflow and NaN, and exhaustive round trips of every 16-bit pattern.
#include "engine/core/dtype.h"
#include "engine/core/tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace {

using namespace ember;

TEST(Float16, KnownBitPatterns) {
    EXPECT_EQ(float_to_f16_bits(0.0f), 0x0000);
    EXPECT_EQ(float_to_f16_bits(-0.0f), 0x8000);
    EXPECT_EQ(float_to_f16_bits(1.0f), 0x3c00);
    EXPECT_EQ(float_to_f16_bits(-2.0f), 0xc000);
    EXPECT_EQ(float_to_f16_bits(0.5f), 0x3800);
    EXPECT_EQ(float_to_f16_bits(65504.0f), 0x7bff);                 // largest finite
    EXPECT_EQ(float_to_f16_bits(6.103515625e-05f), 0x0400);         // smallest normal 2^-14
    EXPECT_EQ(float_to_f16_bits(5.9604644775390625e-08f), 0x0001);  // smallest subnormal 2^-24
    EXPECT_EQ(float_to_f16_bits(0.333333343f), 0x3555);
    EXPECT_EQ(float_to_f16_bits(std::numeric_limits<float>::infinity()), 0x7c00);
    EXPECT_EQ(float_to_f16_bits(-std::numeric_limits<float>::infinity()), 0xfc00);
    EXPECT_EQ(float_to_f16_bits(1e6f), 0x7c00);  // overflow -> inf
    uint16_t nan = float_to_f16_bits(std::numeric_limits<float>::quiet_NaN());
    EXPECT_EQ(nan & 0x7c00, 0x7c00);
    EXPECT_NE(nan & 0x03ff, 0);
}

TEST(Float16, RoundsToNearestEven) {
    // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
    EXPECT_EQ(float_to_f16_bits(1.0f + 0x1p-11f), 0x3c00);
    // 1 + 3 * 2^-11 is halfway between 1+2^-10 (odd) and 1+2^-9 (even): rounds up.
    EXPECT_EQ(float_to_f16_bits(1.0f + 3 * 0x1p-11f), 0x3c02);
    // Just above the halfway point rounds up.
    EXPECT_EQ(float_to_f16_bits(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
    // 65520 is halfway between 65504 (odd mantissa) and 65536 (inf): ties to even -> inf.
    EXPECT_EQ(float_to_f16_bits(65519.0f), 0x7bff);
    EXPECT_EQ(float_to_f16_bits(65520.0f), 0x7c00);
    // 2^-25 is halfway between 0 and the smallest subnormal: ties to even (0).
    EXPECT_EQ(float_to_f16_bits(0x1p-25f), 0x0000);
    EXPECT_EQ(float_to_f16_bits(0x1p-25f * 1.0001f), 0x0001);
    // 3 * 2^-25 is halfway between subnormals 1 and 2: ties to even (2).
    EXPECT_EQ(float_to_f16_bits(3 * 0x1p-25f), 0x0002);
}

TEST(Float16, EveryPatternRoundTrips) {
    for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
        uint16_t h = static_cast<uint16_t>(bits);
        float f = f16_bits_to_float(h);
        if (std::isnan(f)) {
            EXPECT_EQ(h & 0x7c00, 0x7c00);
            continue;
        }
        ASSERT_EQ(float_to_f16_bits(f), h) << "pattern 0x" << std::hex << bits;
    }
    EXPECT_EQ(f16_bits_to_float(0x3c00), 1.0f);
    EXPECT_EQ(f16_bits_to_float(0x0001), 0x1p-24f);
    EXPECT_EQ(f16_bits_to_float(0x7bff), 65504.0f);
}

TEST(BFloat16, KnownBitPatterns) {
    EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3f80);
    EXPECT_EQ(float_to_bf16_bits(-2.0f), 0xc000);
    EXPECT_EQ(float_to_bf16_bits(3.140625f), 0x4049);
    EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::infinity()), 0x7f80);
    // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
    EXPECT_EQ(float_to_bf16_bits(1.0f + 0x1p-8f), 0x3f80);
    // 1 + 3 * 2^-8: halfway, odd neighbour below: rounds up to 1 + 2^-6.
    EXPECT_EQ(float_to_bf16_bits(1.0f + 3 * 0x1p-8f), 0x3f82);
    EXPECT_EQ(float_to_bf16_bits(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
    // The largest float rounds to infinity.
    EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7f80);
    uint16_t nan = float_to_bf16_bits(std::numeric_limits<float>::quiet_NaN());
    EXPECT_TRUE(std::isnan(bf16_bits_to_float(nan)));
}

TEST(BFloat16, EveryPatternRoundTrips) {
    for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
        uint16_t b = static_cast<uint16_t>(bits);
        float f = bf16_bits_to_float(b);
        if (std::isnan(f)) continue;
        ASSERT_EQ(float_to_bf16_bits(f), b) << "pattern 0x" << std::hex << bits;
    }
}

TEST(DType, LoadStoreRoundThroughEachType) {
    uint16_t half[1];
    store_from_float(half, DType::f16, 0, 0.1f);
    EXPECT_EQ(half[0], 0x2e66);  // 0.1 in binary16 (0.0999755859375)
    EXPECT_FLOAT_EQ(load_as_float(half, DType::f16, 0), 0.0999755859375f);
    store_from_float(half, DType::bf16, 0, 0.1f);
    EXPECT_EQ(half[0], 0x3dcd);
    EXPECT_EQ(round_to_dtype(0.1f, DType::f32), 0.1f);
    EXPECT_EQ(dtype_size(DType::bf16), 2u);
    EXPECT_STREQ(dtype_name(DType::bf16), "bf16");
}

TEST(TensorView, ShapesOffsetsAndFlatten) {
    float storage[2 * 3 * 4 * 5];
    Tensor t = make_tensor(storage, DType::f32, {2, 3, 4, 5});
    EXPECT_EQ(t.numel(), 120);
    EXPECT_EQ(t.bytes(), 480u);
    EXPECT_EQ(t.offset4(1, 2, 3, 4), 119);
    EXPECT_EQ(t.offset4(1, 0, 0, 0), 60);
    Tensor channels_last = make_tensor(storage, DType::f32, {2, 3, 4, 5}, Device::cpu, Layout::nhwc);
    EXPECT_EQ(channels_last.offset4(0, 1, 0, 0), 1);
    EXPECT_EQ(channels_last.offset4(0, 0, 0, 1), 3);
    EXPECT_EQ(channels_last.offset4(1, 0, 0, 0), 60);
    Tensor flat = flatten(t);
    EXPECT_EQ(flat.rank, 2);
    EXPECT_EQ(flat.shape[0], 2);
    EXPECT_EQ(flat.shape[1], 60);
    EXPECT_EQ(flat.data, t.data);
    EXPECT_THROW(flatten(channels_last), std::invalid_argument);
    EXPECT_THROW(reshape(t, {7, 7}), std::invalid_argument);
    EXPECT_EQ(reshape(t, {6, 20}).rows(), 6);
    EXPECT_EQ(t.describe(), "f32[2,3,4,5] nchw cpu");
}

}  // namespace
