// The CUDA optimizer paths (fused multi-tensor and per-tensor) against the cpu
// reference for every elementwise optimizer, their launch counts, the device skip flag
// and low-precision copy, and the fused global-norm clipping (label `gpu`). The kernel
// interpreter compiles this same file into engine_cuda_interpreter_optim_test and runs
// it on the CPU; the comparisons shared with its edge cases are in optimizer_parity.h.
#include "engine/optim/clip.h"
#include "tests/engine/optim/optimizer_parity.h"
#include "tests/support/gpu.h"

#include <cstring>

namespace ember::optim {
namespace {

using namespace ember::optim::test;

class OptimizerGpu : public ::testing::TestWithParam<Case> {};

TEST_P(OptimizerGpu, FusedAndPerTensorMatchCpu) {
    EMBER_REQUIRE_GPU();
    check_fused_and_per_tensor_match_cpu(GetParam(), odd_segments());
}

INSTANTIATE_TEST_SUITE_P(EveryOptimizer, OptimizerGpu, ::testing::ValuesIn(every_optimizer()),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST(OptimizerGpuOptions, SkipFlagLowPrecisionAndGradScale) {
    EMBER_REQUIRE_GPU();
    auto segments = odd_segments();
    const std::size_t n = segments.back().offset + segments.back().length;
    std::vector<float> params0(n, 0.5f), grads(n, 0.25f);
    auto gpu = make_optimizer("novograd", {{"lr", 0.01}}, segments, OptimizerBackend::cuda_fused);
    auto cpu = make_optimizer("novograd", {{"lr", 0.01}}, segments, OptimizerBackend::cpu);
    DeviceBuffer params(n * 4), grad(n * 4), flag(4), half(n * 2);
    EMBER_CUDA_CHECK(cudaMemcpy(params.ptr, params0.data(), n * 4, cudaMemcpyHostToDevice));
    std::vector<float> scaled(n, 0.25f * 4.0f);
    EMBER_CUDA_CHECK(cudaMemcpy(grad.ptr, scaled.data(), n * 4, cudaMemcpyHostToDevice));
    std::vector<float> cpu_params = params0;

    StepOptions options;
    options.grad_scale = 0.25f;
    options.skip_flag = static_cast<const int32_t*>(flag.ptr);
    options.low_precision_params = half.ptr;
    options.low_precision = LowPrecision::bf16;
    for (int s = 0; s < 3; ++s) {
        const int32_t skip = s == 1;
        EMBER_CUDA_CHECK(cudaMemcpy(flag.ptr, &skip, 4, cudaMemcpyHostToDevice));
        gpu->step(params.f(), grad.f(), options);
        if (skip)
            gpu->rewind_step();
        else
            cpu->step(cpu_params.data(), grads.data());
    }
    EMBER_CUDA_CHECK(cudaDeviceSynchronize());
    expect_close(download(params.f(), n), cpu_params, "params");
    std::vector<uint16_t> bits(n);
    EMBER_CUDA_CHECK(cudaMemcpy(bits.data(), half.ptr, n * 2, cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < n; i += 997) {
        uint32_t word = uint32_t(bits[i]) << 16;
        float back;
        std::memcpy(&back, &word, 4);
        EXPECT_NEAR(back, cpu_params[i], std::fabs(cpu_params[i]) / 256) << i;
    }
}

TEST(ClipGpu, MatchesCpuInTwoLaunches) {
    EMBER_REQUIRE_GPU();
    const std::size_t n = 1000003;
    std::mt19937 rng(5);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> g(n);
    for (auto& v : g) v = dist(rng);
    DeviceBuffer device(n * 4);
    EMBER_CUDA_CHECK(cudaMemcpy(device.ptr, g.data(), n * 4, cudaMemcpyHostToDevice));
    GradientClipper clipper(n);
    clipper.clip(device.f(), 5.0f);
    const double cpu_norm = clip_grad_norm_cpu(g.data(), n, 5.0);
    EXPECT_NEAR(clipper.read_total_norm(), cpu_norm, 1e-5 * cpu_norm);
    expect_close(download(device.f(), n), g, "clipped");
    EXPECT_EQ(clipper.launches_per_clip(), 2);
}

// The sharded form (optimizer_parity.h).
TEST(ClipGpu, ShardedMatchesCpu) {
    EMBER_REQUIRE_GPU();
    check_sharded_clip_matches_cpu(200003);
}

}  // namespace
}  // namespace ember::optim

namespace ember::optim {
namespace {

using namespace ember::optim::test;

// A step captured in a CUDA graph and replayed must equal real steps while the
// per-step scalars do not change (after step 1 for these settings): nothing may depend
// on host-side bookkeeping between launches (NovoGrad's per-segment norms included).
TEST(OptimizerGpuGraph, CapturedStepReplaysLikeRealSteps) {
    EMBER_REQUIRE_GPU();
    const std::pair<const char*, Hyperparameters> cases[] = {
        {"sgd", {{"lr", 0.1}, {"momentum", 0.9}}},
        {"lars", {{"lr", 0.1}, {"weight_decay", 1e-3}}},
        {"novograd", {{"lr", 0.01}, {"bias_correction", 0}, {"weight_decay", 0.01}}}};
    for (const auto& [name, hyperparameters] : cases) {
        SCOPED_TRACE(name);
        auto segments = odd_segments();
        const std::size_t n = segments.back().offset + segments.back().length;
        std::mt19937 rng(21);
        std::normal_distribution<float> dist(0.0f, 1.0f);
        std::vector<float> params0(n), grads(n);
        for (auto& v : params0) v = dist(rng);
        for (auto& v : grads) v = 0.1f * dist(rng);

        auto cpu = make_optimizer(name, hyperparameters, segments, OptimizerBackend::cpu);
        std::vector<float> cpu_params = params0;
        for (int s = 0; s < 4; ++s) cpu->step(cpu_params.data(), grads.data());

        auto gpu = make_optimizer(name, hyperparameters, segments, OptimizerBackend::cuda_fused);
        DeviceBuffer params(n * 4), grad(n * 4);
        EMBER_CUDA_CHECK(cudaMemcpy(params.ptr, params0.data(), n * 4, cudaMemcpyHostToDevice));
        EMBER_CUDA_CHECK(cudaMemcpy(grad.ptr, grads.data(), n * 4, cudaMemcpyHostToDevice));
        cudaStream_t stream;
        EMBER_CUDA_CHECK(cudaStreamCreate(&stream));
        StepOptions options;
        options.stream = stream;
        gpu->step(params.f(), grad.f(), options);  // step 1: first_step differs
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        EMBER_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
        gpu->step(params.f(), grad.f(), options);
        EMBER_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
        EMBER_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
        for (int s = 0; s < 3; ++s) EMBER_CUDA_CHECK(cudaGraphLaunch(exec, stream));  // steps 2..4
        EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
        expect_close(download(params.f(), n), cpu_params, "params");
        EMBER_CUDA_CHECK(cudaGraphExecDestroy(exec));
        EMBER_CUDA_CHECK(cudaGraphDestroy(graph));
        EMBER_CUDA_CHECK(cudaStreamDestroy(stream));
    }
}

}  // namespace
}  // namespace ember::optim
