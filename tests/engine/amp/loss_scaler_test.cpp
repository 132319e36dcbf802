// loss_scaler_test.cpp: the mixed-precision policy. The dynamic loss scaler follows
// torch.cuda.amp.GradScaler's published defaults and update rule (start 65536, halve
// and skip on inf/NaN, double after 2000 clean steps); autocast picks the dtypes
// docs/engine.md lists per precision.
#include "engine/amp/autocast.h"
#include "engine/amp/loss_scaler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>

namespace ember {
namespace {

TEST(LossScaler, OverflowSkipsAndHalvesGrowthAfterInterval) {
    amp::LossScalerOptions options;
    options.growth_interval = 3;
    amp::DynamicLossScaler scaler(options);
    EXPECT_EQ(scaler.scale(), 65536.0);
    EXPECT_FALSE(scaler.update(true));
    EXPECT_EQ(scaler.scale(), 32768.0);
    EXPECT_EQ(scaler.skipped_steps(), 1);
    EXPECT_TRUE(scaler.update(false));
    EXPECT_TRUE(scaler.update(false));
    EXPECT_EQ(scaler.scale(), 32768.0);
    EXPECT_EQ(scaler.growth_tracker(), 2);
    EXPECT_TRUE(scaler.update(false));
    EXPECT_EQ(scaler.scale(), 65536.0);
    EXPECT_EQ(scaler.growth_tracker(), 0);
    EXPECT_FALSE(scaler.update(true));  // an overflow also resets the clean-step count
    EXPECT_EQ(scaler.growth_tracker(), 0);
    EXPECT_EQ(scaler.skipped_steps(), 2);
    amp::DynamicLossScaler defaults;
    for (int i = 0; i < 1999; ++i) defaults.update(false);
    EXPECT_EQ(defaults.scale(), 65536.0);
    defaults.update(false);
    EXPECT_EQ(defaults.scale(), 131072.0);
    float values[3] = {1.0f, 2.0f, 3.0f};
    EXPECT_TRUE(amp::all_finite_cpu(values, 3));
    values[1] = std::nanf("");
    EXPECT_FALSE(amp::all_finite_cpu(values, 3));
}

TEST(LossScaler, RefusesOptionsThatCannotConverge) {
    amp::LossScalerOptions options;
    options.backoff_factor = 1.0;  // an overflow would never lower the scale
    EXPECT_THROW(amp::DynamicLossScaler{options}, std::invalid_argument);
    options = {};
    options.growth_factor = 1.0;
    EXPECT_THROW(amp::DynamicLossScaler{options}, std::invalid_argument);
    options = {};
    options.growth_interval = 0;
    EXPECT_THROW(amp::DynamicLossScaler{options}, std::invalid_argument);
}

TEST(Autocast, PrecisionPicksComputeDtypeAndLossScaling) {
    EXPECT_EQ(amp::parse_precision("fp32"), amp::Precision::fp32);
    EXPECT_EQ(amp::parse_precision("bf16"), amp::Precision::bf16);
    const amp::AutocastPolicy fp32{amp::Precision::fp32}, fp16{amp::Precision::fp16}, bf16{amp::Precision::bf16};
    EXPECT_EQ(fp32.compute_dtype(), DType::f32);
    EXPECT_EQ(fp16.compute_dtype(), DType::f16);
    EXPECT_EQ(bf16.compute_dtype(), DType::bf16);
    // Master weights, reductions and statistics stay fp32 under every precision.
    for (const amp::AutocastPolicy& policy : {fp32, fp16, bf16}) {
        EXPECT_EQ(policy.master_dtype(), DType::f32);
        EXPECT_EQ(policy.reduction_dtype(), DType::f32);
    }
    // Only fp16 lacks the range that makes loss scaling unnecessary.
    EXPECT_FALSE(fp32.needs_loss_scaling());
    EXPECT_TRUE(fp16.needs_loss_scaling());
    EXPECT_FALSE(bf16.needs_loss_scaling());
    EXPECT_FALSE(fp32.low_precision());
    EXPECT_TRUE(bf16.low_precision());
    try {
        amp::parse_precision("fp8");
        FAIL() << "expected invalid_argument";
    } catch (const std::invalid_argument& error) {
        EXPECT_NE(std::string(error.what()).find("fp8"), std::string::npos) << error.what();
    }
}

}  // namespace
}  // namespace ember
