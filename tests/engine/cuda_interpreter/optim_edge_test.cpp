// The optimizer and clipping kernels in the kernel interpreter at the layouts the `gpu`
// tests do not reach: hundreds of small segments (one chunk each, many below a warp)
// with the grid capped at 3 blocks so the update and reduction kernels walk chunks
// grid-stride, and gradient clipping of 0, 1 and off-block counts and past its 1024
// blocks. The optimizer comparison is optimizer_parity.h's, shared with the `gpu` test.
#include "engine/cuda/interpreter/interpreter.h"
#include "engine/optim/clip.h"
#include "tests/engine/optim/optimizer_parity.h"

namespace ember::optim {
namespace {

using namespace ember::optim::test;
namespace interpreter = ember::cuda_interpreter;

// 300 segments of 1 to 45 elements, then one just over a chunk.
std::vector<ParameterSegment> many_small_segments() {
    std::vector<ParameterSegment> segments;
    std::size_t offset = 0;
    for (std::size_t k = 0; k < 300; ++k) {
        const std::size_t length = 1 + (k * 7) % 45;
        segments.push_back({offset, length, k % 3 == 0 ? kSegmentNoWeightDecay : 0u, "small" + std::to_string(k)});
        offset += length;
    }
    segments.push_back({offset, kOptimizerChunkElements + 1, 0u, "large"});
    return segments;
}

class OptimizerManySegments : public ::testing::TestWithParam<Case> {
  protected:
    void TearDown() override { interpreter::set_grid_stride_cap(0); }
};

TEST_P(OptimizerManySegments, FusedAndPerTensorMatchCpu) {
    interpreter::set_grid_stride_cap(3);
    check_fused_and_per_tensor_match_cpu(GetParam(), many_small_segments());
}

INSTANTIATE_TEST_SUITE_P(EveryOptimizer, OptimizerManySegments, ::testing::ValuesIn(every_optimizer()),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

class ClipEdges : public ::testing::Test {
  protected:
    void TearDown() override { interpreter::set_grid_stride_cap(0); }
};

void check_clip(std::size_t n, float max_norm) {
    std::mt19937 rng(static_cast<unsigned>(n));
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> g(n);
    for (auto& v : g) v = dist(rng);
    DeviceBuffer device(std::max<std::size_t>(n, 1) * 4);
    if (n) EMBER_CUDA_CHECK(cudaMemcpy(device.ptr, g.data(), n * 4, cudaMemcpyHostToDevice));
    GradientClipper clipper(n);
    clipper.clip(device.f(), max_norm);
    const double cpu_norm = clip_grad_norm_cpu(g.data(), n, max_norm);
    EXPECT_NEAR(clipper.read_total_norm(), cpu_norm, 1e-5 * std::max(1.0, cpu_norm)) << n;
    expect_close(download(device.f(), n), g, ("clipped " + std::to_string(n)).c_str());
}

TEST_F(ClipEdges, ZeroOneAndOffBlockCounts) {
    for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(255), std::size_t(257), std::size_t(5000)})
        check_clip(n, 1.0f);
    check_clip(300, 1e6f);  // a norm under the limit: nothing scales
}

TEST_F(ClipEdges, PastTheBlockCap) {
    interpreter::set_grid_stride_cap(3);
    check_clip(10007, 2.0f);
}

TEST_F(ClipEdges, ShardedWithOddHalves) {
    interpreter::set_grid_stride_cap(2);
    check_sharded_clip_matches_cpu(2001);
}

}  // namespace
}  // namespace ember::optim
