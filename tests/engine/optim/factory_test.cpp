// make_optimizer: names, validation errors that name the field, segment checks, the
// step-level options (gradient scale, skip flag, rewind, low-precision copy) on cpu.
#include "engine/core/cuda_check.h"
#include "engine/core/device.h"
#include "tests/engine/optim/optimizer_test_problem.h"
#include "tests/support/error_message.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <stdexcept>
#include <string>

namespace ember::optim::test {
namespace {

std::string error_of(const std::function<void()>& f) {
    return test_support::error_message<std::invalid_argument>(f);
}

TEST(OptimizerFactory, EveryNameBuildsOnCpu) {
    for (const std::string& name : optimizer_names()) {
        auto optimizer = make_optimizer(name, {}, two_segments(), OptimizerBackend::cpu);
        EXPECT_EQ(optimizer->name(), name);
        EXPECT_EQ(optimizer->parameter_count(), 5u);
    }
}

TEST(OptimizerFactory, TorchDefaultLearningRates) {
    auto lr_of = [](const char* name) { return make_optimizer(name, {}, two_segments(), OptimizerBackend::cpu)->lr(); };
    EXPECT_DOUBLE_EQ(lr_of("sgd"), 1e-3);
    EXPECT_DOUBLE_EQ(lr_of("adagrad"), 1e-2);
    EXPECT_DOUBLE_EQ(lr_of("adadelta"), 1.0);
    EXPECT_DOUBLE_EQ(lr_of("rmsprop"), 1e-2);
    EXPECT_DOUBLE_EQ(lr_of("adam"), 1e-3);
    EXPECT_DOUBLE_EQ(lr_of("nadam"), 2e-3);
    EXPECT_DOUBLE_EQ(lr_of("adamax"), 2e-3);
    EXPECT_DOUBLE_EQ(lr_of("lbfgs"), 1.0);
}

TEST(OptimizerFactory, ErrorsNameTheField) {
    struct Case {
        const char* name;
        Hyperparameters hyperparameters;
        OptimizerBackend backend;
        const char* named;  // what the message must name
    };
    const Case cases[] = {
        {"adamm", {}, OptimizerBackend::cpu, "adamm"},
        {"adam", {{"momentum", 0.9}}, OptimizerBackend::cpu, "'momentum'"},
        {"adam", {{"beta2", 1.5}}, OptimizerBackend::cpu, "'beta2'"},
        {"sgd", {{"lr", -1}}, OptimizerBackend::cpu, "'lr'"},
        {"sgd", {{"nesterov", 1}}, OptimizerBackend::cpu, "'nesterov'"},
        {"rmsprop", {{"centered", 2}}, OptimizerBackend::cpu, "'centered'"},
        {"lbfgs", {}, OptimizerBackend::cuda_fused, "'backend'"},
    };
    for (const Case& c : cases) {
        const std::string message =
            error_of([&] { make_optimizer(c.name, c.hyperparameters, two_segments(), c.backend); });
        EXPECT_NE(message.find(c.named), std::string::npos) << c.name << ": " << message;
    }
    EXPECT_NE(error_of([] { parse_optimizer_backend("gpu"); }).find("gpu"), std::string::npos);
}

TEST(OptimizerFactory, SegmentsMustNotOverlap) {
    std::vector<ParameterSegment> overlapping = {{0, 4, 0, "a"}, {3, 2, 0, "b"}};
    EXPECT_NE(error_of([&] { make_optimizer("sgd", {}, overlapping, OptimizerBackend::cpu); }).find("overlap"),
              std::string::npos);
    std::vector<ParameterSegment> empty = {{0, 0, 0, "nothing"}};
    EXPECT_NE(error_of([&] { make_optimizer("sgd", {}, empty, OptimizerBackend::cpu); }).find("nothing"),
              std::string::npos);
}

TEST(OptimizerStep, GradScaleIsFusedUnscaling) {
    // grad_scale = 1/8 on gradients multiplied by 8 gives the unscaled result.
    auto optimizer = make_optimizer("adam", {{"lr", 0.01}}, two_segments(), OptimizerBackend::cpu);
    std::vector<float> params(initial_params().begin(), initial_params().end());
    for (int s = 0; s < 3; ++s) {
        std::vector<float> grads;
        for (double g : gradient_steps()[s]) grads.push_back((float)(g * 8.0));
        StepOptions options;
        options.grad_scale = 0.125f;
        optimizer->step(params.data(), grads.data(), options);
    }
    auto expected = run_cpu("adam", {{"lr", 0.01}}, 3);
    for (std::size_t i = 0; i < params.size(); ++i) EXPECT_NEAR(params[i], expected[i], 1e-6);
}

TEST(OptimizerStep, SkipFlagThenRewindMatchesNeverSteppedAtAll) {
    auto optimizer = make_optimizer("nadam", {{"lr", 0.01}}, two_segments(), OptimizerBackend::cpu);
    std::vector<float> params(initial_params().begin(), initial_params().end());
    int32_t skip = 0;
    StepOptions options;
    options.skip_flag = &skip;
    for (int s = 0; s < 3; ++s) {
        std::vector<float> grads(gradient_steps()[s].begin(), gradient_steps()[s].end());
        if (s == 1) {  // an overflowing step first: nothing may change
            skip = 1;
            std::vector<float> before = params;
            optimizer->step(params.data(), grads.data(), options);
            EXPECT_EQ(params, before);
            optimizer->rewind_step();
            skip = 0;
        }
        optimizer->step(params.data(), grads.data(), options);
    }
    EXPECT_EQ(optimizer->step_count(), 3);
    auto expected = run_cpu("nadam", {{"lr", 0.01}}, 3);
    for (std::size_t i = 0; i < params.size(); ++i) EXPECT_FLOAT_EQ(params[i], expected[i]);
}

TEST(OptimizerStep, LowPrecisionCopyIsRefreshed) {
    for (LowPrecision format : {LowPrecision::fp16, LowPrecision::bf16}) {
        auto optimizer = make_optimizer("sgd", {{"lr", 0.1}}, two_segments(), OptimizerBackend::cpu);
        std::vector<float> params(initial_params().begin(), initial_params().end());
        std::vector<float> grads(gradient_steps()[0].begin(), gradient_steps()[0].end());
        std::vector<uint16_t> copy(params.size(), 0);
        StepOptions options;
        options.low_precision_params = copy.data();
        options.low_precision = format;
        optimizer->step(params.data(), grads.data(), options);
        for (std::size_t i = 0; i < params.size(); ++i) {
            float back;
            if (format == LowPrecision::fp16) {
                __half_raw raw;
                raw.x = copy[i];
                back = __half2float(__half(raw));
            } else {
                __nv_bfloat16_raw raw;
                raw.x = copy[i];
                back = __bfloat162float(__nv_bfloat16(raw));
            }
            const double relative = format == LowPrecision::fp16 ? 1.0 / 2048 : 1.0 / 256;
            EXPECT_NEAR(back, params[i], std::fabs(params[i]) * relative) << "element " << i;
        }
    }
}

TEST(OptimizerStep, ClosureFormEvaluatesOnceAndSteps) {
    auto optimizer = make_optimizer("sgd", {{"lr", 0.1}}, two_segments(), OptimizerBackend::cpu);
    std::vector<float> params(initial_params().begin(), initial_params().end());
    std::vector<float> grads(5, 0.0f);
    int calls = 0;
    double loss = optimizer->step(params.data(), grads.data(), [&] {
        ++calls;
        for (std::size_t i = 0; i < 5; ++i) grads[i] = (float)gradient_steps()[0][i];
        return 42.0;
    });
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(loss, 42.0);
    EXPECT_NEAR(params[0], 0.49, 1e-7);
}

}  // namespace
}  // namespace ember::optim::test

namespace ember::optim::test {
namespace {

TEST(OptimizerFactory, CudaBackendWithoutDeviceThrowsNamingTheCall) {
    if (cuda_device_available()) GTEST_SKIP() << "a device is present: nothing to refuse";
    try {
        make_optimizer("adam", {}, two_segments(), OptimizerBackend::cuda_fused);
        FAIL() << "cuda_fused built without a device";
    } catch (const std::runtime_error& e) {
        // Adam's state comes from the device allocator first, which names the reason.
        EXPECT_NE(std::string(e.what()).find("device_allocator: no CUDA device"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace ember::optim::test

namespace ember::optim::test {
namespace {

// Two steps, checkpoint, a fresh optimizer restored from it takes step 3: the result
// equals three uninterrupted steps.
TEST(OptimizerCheckpoint, ExportImportResumesExactly) {
    for (const char* name : {"sgd", "rmsprop", "adam", "nadam", "lamb", "novograd"}) {
        SCOPED_TRACE(name);
        Hyperparameters h = {{"lr", 0.01}};
        if (name == std::string("sgd") || name == std::string("rmsprop")) h["momentum"] = 0.9;
        auto first = make_optimizer(name, h, two_segments(), OptimizerBackend::cpu);
        std::vector<float> params(initial_params().begin(), initial_params().end());
        for (int s = 0; s < 2; ++s) {
            std::vector<float> grads(gradient_steps()[s].begin(), gradient_steps()[s].end());
            first->step(params.data(), grads.data());
        }
        OptimizerState saved = first->export_state();
        EXPECT_EQ(saved.step_count, 2);
        auto resumed = make_optimizer(name, h, two_segments(), OptimizerBackend::cpu);
        resumed->import_state(saved);
        std::vector<float> grads(gradient_steps()[2].begin(), gradient_steps()[2].end());
        resumed->step(params.data(), grads.data());
        auto expected = run_cpu(name, h, 3);
        for (std::size_t i = 0; i < params.size(); ++i) EXPECT_FLOAT_EQ(params[i], expected[i]) << i;
    }
}

TEST(OptimizerCheckpoint, MismatchedStateIsRefused) {
    auto adam = make_optimizer("adam", {}, two_segments(), OptimizerBackend::cpu);
    OptimizerState state = adam->export_state();
    state.buffers[1].resize(4);
    EXPECT_NE(error_of([&] { adam->import_state(state); }).find("state buffer 1"), std::string::npos);
    auto lbfgs = make_optimizer("lbfgs", {}, two_segments(), OptimizerBackend::cpu);
    EXPECT_THROW(lbfgs->export_state(), std::logic_error);
}

}  // namespace
}  // namespace ember::optim::test

namespace ember::optim::test {
namespace {

// For every optimizer with weight decay: the no-weight-decay segment moves exactly as
// with weight decay 0, the other segment does not.
TEST(OptimizerFlags, NoWeightDecaySegmentIgnoresWeightDecay) {
    for (const std::string& name : optimizer_names()) {
        if (name == "lbfgs") continue;  // no weight decay in L-BFGS
        SCOPED_TRACE(name);
        Hyperparameters with = {{"lr", 0.01}, {"weight_decay", 0.5}};
        Hyperparameters without = {{"lr", 0.01}, {"weight_decay", 0.0}};
        auto decayed = run_cpu(name, with, 3);
        auto plain = run_cpu(name, without, 3);
        EXPECT_EQ(decayed[3], plain[3]);
        EXPECT_EQ(decayed[4], plain[4]);
        EXPECT_GT(std::fabs(decayed[0] - plain[0]) + std::fabs(decayed[2] - plain[2]), 1e-6);
    }
}

}  // namespace
}  // namespace ember::optim::test
