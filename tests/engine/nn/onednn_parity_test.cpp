// onednn_parity_test.cpp: one training step of every model, in both memory layouts and
// in f32, bf16 and f16 activations, with the CPU fast paths (oneDNN convolutions and
// GEMMs, threaded loops) against the same step with the reference loops: the logits and
// the gradient of every parameter agree. CTest runs this suite once per oneDNN ISA cap
// (the machine's own, AVX2, AVX, SSE41; tests/CMakeLists.txt), so each kernel family a
// user's CPU may take is checked against the loops on whatever machine runs the suite.
//
// Tolerances, relative L2 per tensor (||fast - reference|| / ||reference||):
//   - f32: 1e-4. Both sides sum in f32 in different orders (oneDNN blocks its
//     reductions, the loops sum in order), about 1e-7 relative per sum; a step goes
//     through up to ~12 layers forward and back, BatchNorm and the residual joins
//     amplify it, and the largest error seen under any of the four ISA caps is 4.1e-6
//     (a ResNet BatchNorm bias). A layout or padding bug moves a tensor by its own size
//     (the 1x1 stride-2 shortcut's filter gradient was off by 1.0 under AVX2).
//   - bf16 / f16: 0, bit for bit. The fast paths take f32 tensors only, so low-precision
//     activations run the reference loops on both sides; a fast path that starts taking
//     them must state its own tolerance here.
#include "engine/cpu/implementation.h"
#include "engine/nn/models.h"
#include "engine/nn/training_step.h"

#include "tests/engine/nn/batches.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

namespace ember::nn {
namespace {

using cpu::OpImplementation;
using cpu::ScopedOpImplementation;

using test::small_models;

struct Step {
    std::vector<float> logits, gradients;
};

Step one_step(const std::string& name, bool channels_last, DType activation, OpImplementation implementation,
              std::unique_ptr<Model>& model) {
    ScopedOpImplementation scoped(implementation);
    model = make_model(name, small_models());
    BuildOptions build;
    build.seed = 17;
    build.pool_chunk_bytes = 8u << 20;
    build.channels_last = channels_last;
    build.activation_dtype = activation;
    model->build(build);
    test::Batch batch = test::make_batch(8, 23);
    Tensor logits = model->forward(batch.x, true);
    LossOutput loss = model->loss(logits, batch.y, 1.0f / 8);
    model->backward(loss.dlogits, ops::GradWrite::store);
    Step step;
    for (int64_t i = 0; i < logits.numel(); ++i)
        step.logits.push_back(float(load_as_double(logits.data, logits.dtype, i)));
    step.gradients = test::download(model->parameters().gradients(), model->parameters().flat_length());
    return step;
}

double relative_l2(const float* got, const float* want, std::size_t count) {
    double difference = 0.0, norm = 0.0;
    for (std::size_t i = 0; i < count; ++i) {
        difference += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
        norm += double(want[i]) * want[i];
    }
    return std::sqrt(difference) / std::max(std::sqrt(norm), 1e-30);
}

double tolerance(DType activation) {
    return activation == DType::f32 ? 1e-4 : 0.0;
}

std::string isa_cap() {
    const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
    return cap != nullptr && *cap != '\0' ? cap : "the machine's own";
}

class OneDnnParity : public ::testing::TestWithParam<std::tuple<std::string, bool, DType>> {};

TEST_P(OneDnnParity, OneStepsGradientsMatchTheReferenceLoops) {
    const auto& [name, channels_last, activation] = GetParam();
    SCOPED_TRACE(name + (channels_last ? " nhwc " : " nchw ") + dtype_name(activation) +
                 ", oneDNN ISA cap: " + isa_cap());
    std::unique_ptr<Model> reference_model, fast_model;
    const Step reference = one_step(name, channels_last, activation, OpImplementation::reference, reference_model);
    const Step fast = one_step(name, channels_last, activation, OpImplementation::fast, fast_model);
    const double allowed = tolerance(activation);
    ASSERT_EQ(fast.logits.size(), reference.logits.size());
    for (float v : fast.logits) ASSERT_TRUE(std::isfinite(v)) << "logits";
    EXPECT_LE(relative_l2(fast.logits.data(), reference.logits.data(), fast.logits.size()), allowed) << "logits";
    for (const ParameterEntry& entry : reference_model->parameters().parameters()) {
        const double error =
            relative_l2(fast.gradients.data() + entry.offset, reference.gradients.data() + entry.offset, entry.length);
        EXPECT_LE(error, allowed) << "gradient of " << entry.name;
    }
}

std::string case_name(const ::testing::TestParamInfo<OneDnnParity::ParamType>& info) {
    const auto& [name, channels_last, activation] = info.param;
    return name + (channels_last ? "_nhwc_" : "_nchw_") + dtype_name(activation);
}

INSTANTIATE_TEST_SUITE_P(EveryModel, OneDnnParity,
                         ::testing::Combine(::testing::ValuesIn(model_names()), ::testing::Bool(),
                                            ::testing::Values(DType::f32, DType::bf16, DType::f16)),
                         case_name);

}  // namespace
}  // namespace ember::nn
