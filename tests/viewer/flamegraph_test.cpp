// flamegraph_test.cpp: flamegraph totals equal the trace's totals, nesting follows
// the NVTX stack, time order keeps sequence, and difference graphs carry both sides.
#include "tests/viewer/fixture_trace.h"
#include "viewer/model/flamegraph.h"

#include <gtest/gtest.h>

namespace ember::viewer {
namespace {

std::uint32_t child_named(const FlameGraph& graph, std::uint32_t parent, const std::string& name) {
    for (std::uint32_t child : graph.nodes[parent].children)
        if (graph.nodes[child].name == name) return child;
    return 0;
}

class FlamegraphTest : public ::testing::Test {
protected:
    void SetUp() override {
        path_ = testing::temporary_trace_path("flame");
        totals_ = testing::write_fixture_trace(path_);
        model_ = std::make_unique<TraceModel>(std::vector<std::string>{path_});
        model_->load_all();
    }
    void TearDown() override {
        model_.reset();
        std::filesystem::remove(path_);
    }
    std::string path_;
    testing::FixtureTotals totals_;
    std::unique_ptr<TraceModel> model_;
};

TEST_F(FlamegraphTest, NvtxTotalsEqualOutermostRanges) {
    const FlameGraph graph = build_flamegraph(*model_, FlameSource::nvtx_ranges, FlameOrder::left_heavy);
    EXPECT_DOUBLE_EQ(graph.total(), static_cast<double>(totals_.range_depth0_ns));
    const std::uint32_t step = child_named(graph, 0, "step");
    ASSERT_NE(step, 0u);
    EXPECT_EQ(graph.nodes[step].count, 4);
    const std::uint32_t forward = child_named(graph, step, "forward");
    const std::uint32_t backward = child_named(graph, step, "backward");
    ASSERT_NE(forward, 0u);
    ASSERT_NE(backward, 0u);
    EXPECT_EQ(graph.nodes[forward].count, 4);
    // Self time of a step is what its children do not cover.
    EXPECT_DOUBLE_EQ(graph.nodes[step].self(),
                     graph.nodes[step].total - graph.nodes[forward].total - graph.nodes[backward].total);
    EXPECT_NE(child_named(graph, 0, "dataloader/wait"), 0u);
    // Left heavy: the heaviest child first.
    EXPECT_EQ(graph.nodes[0].children[0], step);
    EXPECT_EQ((graph.path(forward)), (std::vector<std::string>{"step", "forward"}));
}

TEST_F(FlamegraphTest, TimeOrderKeepsThreadsAndSequence) {
    const FlameGraph graph = build_flamegraph(*model_, FlameSource::nvtx_ranges, FlameOrder::time_order);
    EXPECT_DOUBLE_EQ(graph.total(), static_cast<double>(totals_.range_depth0_ns));
    ASSERT_EQ(graph.nodes[0].children.size(), 2u);  // one node per thread
    const std::uint32_t main_thread = graph.nodes[0].children[0];
    // Consecutive steps merge into one node; inside it forward then backward.
    ASSERT_EQ(graph.nodes[main_thread].children.size(), 1u);
    const std::uint32_t step = graph.nodes[main_thread].children[0];
    ASSERT_EQ(graph.nodes[step].children.size(), 8u);  // forward, backward alternate: never adjacent equals
    EXPECT_EQ(graph.nodes[graph.nodes[step].children[0]].name, "forward");
    EXPECT_EQ(graph.nodes[graph.nodes[step].children[1]].name, "backward");
}

TEST_F(FlamegraphTest, GpuKernelsHangUnderTheLaunchingStack) {
    const FlameGraph graph = build_flamegraph(*model_, FlameSource::gpu_kernels, FlameOrder::left_heavy);
    EXPECT_DOUBLE_EQ(graph.total(), static_cast<double>(totals_.kernel_ns));
    const std::uint32_t step = child_named(graph, 0, "step");
    ASSERT_NE(step, 0u);
    const std::uint32_t forward = child_named(graph, step, "forward");
    ASSERT_NE(forward, 0u);
    const std::uint32_t gemm = child_named(graph, forward, "sgemm_128x64");
    ASSERT_NE(gemm, 0u);
    // 3 kernels per phase: gemm, relu, gemm -> 2 gemms per forward, 4 steps.
    EXPECT_EQ(graph.nodes[gemm].count, 8);
    EXPECT_DOUBLE_EQ(graph.nodes[gemm].total, 8 * 50'000.0);
}

TEST_F(FlamegraphTest, CpuSamplesCountSamples) {
    const FlameGraph graph = build_flamegraph(*model_, FlameSource::cpu_samples, FlameOrder::left_heavy);
    EXPECT_EQ(graph.unit, "samples");
    EXPECT_DOUBLE_EQ(graph.total(), static_cast<double>(totals_.stack_samples));
    const std::uint32_t main_frame = child_named(graph, 0, "main");
    ASSERT_NE(main_frame, 0u);
    EXPECT_DOUBLE_EQ(graph.nodes[child_named(graph, main_frame, "train_step")].total, 8.0);
    EXPECT_DOUBLE_EQ(graph.nodes[child_named(graph, main_frame, "decode_png")].total, 4.0);
}

TEST_F(FlamegraphTest, DifferenceCarriesBaselineAndCurrent) {
    const std::string slower_path = testing::temporary_trace_path("flame_slow");
    testing::FixtureShape slower;
    slower.slowdown = 2.0;
    const auto slower_totals = testing::write_fixture_trace(slower_path, slower);
    {
        TraceModel slower_model({slower_path});
        slower_model.load_all();
        const FlameGraph baseline = build_flamegraph(*model_, FlameSource::gpu_kernels, FlameOrder::left_heavy);
        const FlameGraph current = build_flamegraph(slower_model, FlameSource::gpu_kernels, FlameOrder::left_heavy);
        const FlameGraph difference = difference_flamegraph(baseline, current);
        EXPECT_TRUE(difference.is_difference);
        EXPECT_DOUBLE_EQ(difference.nodes[0].total, static_cast<double>(slower_totals.kernel_ns));
        EXPECT_DOUBLE_EQ(difference.nodes[0].baseline, static_cast<double>(totals_.kernel_ns));
        const std::uint32_t step = child_named(difference, 0, "step");
        const std::uint32_t backward = child_named(difference, step, "backward");
        const std::uint32_t forward = child_named(difference, step, "forward");
        ASSERT_NE(backward, 0u);
        EXPECT_DOUBLE_EQ(difference.nodes[backward].total, 2.0 * difference.nodes[backward].baseline);
        EXPECT_DOUBLE_EQ(difference.nodes[forward].total, difference.nodes[forward].baseline);
    }
    std::filesystem::remove(slower_path);
}

TEST_F(FlamegraphTest, LayoutSkipsNarrowBoxesAndZooms) {
    const FlameGraph graph = build_flamegraph(*model_, FlameSource::nvtx_ranges, FlameOrder::left_heavy);
    auto boxes = layout_flamegraph(graph, 0, 0.0);
    EXPECT_EQ(boxes.size(), graph.nodes.size());
    for (const FlameBox& box : boxes) {
        EXPECT_GE(box.x0, 0.0);
        EXPECT_LE(box.x1, 1.0 + 1e-9);
    }
    const std::uint32_t step = child_named(graph, 0, "step");
    const std::uint32_t forward = child_named(graph, step, "forward");
    boxes = layout_flamegraph(graph, forward, 0.0);
    // Ancestors (all, step) full width, then forward itself full width.
    ASSERT_EQ(boxes.size(), 3u);
    EXPECT_EQ(boxes[2].node, forward);
    EXPECT_DOUBLE_EQ(boxes[2].x1 - boxes[2].x0, 1.0);
    // A threshold above the loader's share drops it.
    boxes = layout_flamegraph(graph, 0, 0.2);
    for (const FlameBox& box : boxes) EXPECT_NE(graph.nodes[box.node].name, "dataloader/wait");
}

}  // namespace
}  // namespace ember::viewer
