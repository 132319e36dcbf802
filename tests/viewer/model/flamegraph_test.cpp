// flamegraph_test.cpp: flamegraph totals equal the trace's totals, nesting follows
// the NVTX stack, time order keeps sequence, and difference graphs carry both sides.
#include "tests/support/temp_dir.h"
#include "tests/viewer/model/loaded_fixture.h"
#include "viewer/model/flamegraph.h"

#include <gtest/gtest.h>

namespace ember::viewer {
namespace {

std::uint32_t child_named(const FlameGraph& graph, std::uint32_t parent, const std::string& name) {
    for (std::uint32_t child : graph.nodes[parent].children)
        if (graph.nodes[child].name == name) return child;
    return 0;
}

class FlamegraphTest : public testing::LoadedFixtureTest {
  protected:
    FlamegraphTest() : LoadedFixtureTest("flame") {}
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

// Sum of a node's children (the totals of a tree must add up at every level).
double children_total(const FlameGraph& graph, std::uint32_t node) {
    double sum = 0.0;
    for (std::uint32_t child : graph.nodes[node].children) sum += graph.nodes[child].total;
    return sum;
}

TEST_F(FlamegraphTest, GpuKernelsTimeOrderKeepsTotalsAndSequence) {
    const FlameGraph merged = build_flamegraph(*model_, FlameSource::gpu_kernels, FlameOrder::left_heavy);
    const FlameGraph timed = build_flamegraph(*model_, FlameSource::gpu_kernels, FlameOrder::time_order);
    EXPECT_EQ(timed.order, FlameOrder::time_order);
    EXPECT_DOUBLE_EQ(merged.total(), static_cast<double>(totals_.kernel_ns));
    EXPECT_DOUBLE_EQ(timed.total(), static_cast<double>(totals_.kernel_ns));
    EXPECT_DOUBLE_EQ(children_total(timed, 0), timed.total());
    // One subtree per stream with kernels (the copy stream has none).
    ASSERT_EQ(timed.nodes[0].children.size(), 1u);
    const std::uint32_t stream = timed.nodes[0].children[0];
    EXPECT_NE(timed.nodes[stream].name.find("stream 7"), std::string::npos) << timed.nodes[stream].name;
    // Consecutive steps share one node; inside it forward and backward alternate, and
    // inside a phase gemm, relu, gemm stay three boxes (never adjacent equals).
    ASSERT_EQ(timed.nodes[stream].children.size(), 1u);
    const std::uint32_t step = timed.nodes[stream].children[0];
    EXPECT_EQ(timed.nodes[step].name, "step");
    ASSERT_EQ(timed.nodes[step].children.size(), 8u);
    const std::uint32_t forward = timed.nodes[step].children[0];
    EXPECT_EQ(timed.nodes[forward].name, "forward");
    EXPECT_EQ(timed.nodes[timed.nodes[step].children[1]].name, "backward");
    ASSERT_EQ(timed.nodes[forward].children.size(), 3u);
    EXPECT_EQ(timed.nodes[timed.nodes[forward].children[0]].name, "sgemm_128x64");
    EXPECT_EQ(timed.nodes[timed.nodes[forward].children[1]].name, "relu_kernel");
    EXPECT_EQ(timed.nodes[timed.nodes[forward].children[2]].name, "sgemm_128x64");
    EXPECT_EQ(timed.nodes[timed.nodes[forward].children[0]].count, 1);
    // Every kernel is counted once in both views.
    std::int64_t merged_leaves = 0, timed_leaves = 0;
    for (const FlameNode& node : merged.nodes)
        if (node.children.empty()) merged_leaves += node.count;
    for (const FlameNode& node : timed.nodes)
        if (node.children.empty()) timed_leaves += node.count;
    EXPECT_EQ(merged_leaves, totals_.kernels);
    EXPECT_EQ(timed_leaves, totals_.kernels);
}

TEST_F(FlamegraphTest, CpuSamplesTimeOrderKeepsTotalsPerThread) {
    const FlameGraph merged = build_flamegraph(*model_, FlameSource::cpu_samples, FlameOrder::left_heavy);
    const FlameGraph timed = build_flamegraph(*model_, FlameSource::cpu_samples, FlameOrder::time_order);
    EXPECT_DOUBLE_EQ(merged.total(), static_cast<double>(totals_.stack_samples));
    EXPECT_DOUBLE_EQ(timed.total(), static_cast<double>(totals_.stack_samples));
    EXPECT_DOUBLE_EQ(children_total(timed, 0), timed.total());
    // Main thread: train_step sampled 8 times in a row (its samples interleave with the
    // loader's in the file, but each thread is its own sequence); loader: decode_png 4.
    ASSERT_EQ(timed.nodes[0].children.size(), 2u);
    const std::uint32_t main_thread = timed.nodes[0].children[0];
    const std::uint32_t loader_thread = timed.nodes[0].children[1];
    EXPECT_NE(timed.nodes[main_thread].name.find("main"), std::string::npos);
    EXPECT_NE(timed.nodes[loader_thread].name.find("loader"), std::string::npos);
    const std::uint32_t train = child_named(timed, child_named(timed, main_thread, "main"), "train_step");
    const std::uint32_t decode = child_named(timed, child_named(timed, loader_thread, "main"), "decode_png");
    ASSERT_NE(train, 0u);
    ASSERT_NE(decode, 0u);
    EXPECT_DOUBLE_EQ(timed.nodes[train].total, 8.0);
    EXPECT_EQ(timed.nodes[train].count, 8);
    EXPECT_DOUBLE_EQ(timed.nodes[decode].total, 4.0);
}

// Speedscope's time order: stacks A A B A on one thread give boxes A(2) B(1) A(1).
TEST(FlamegraphTimeOrder, OnlyConsecutiveIdenticalStacksMerge) {
    const std::string path = testing::temporary_trace_path("flame_sequence");
    {
        trace::RunInfo run;
        run.pid = 7;
        store::TraceWriter writer(path, run, store::testing::quiet_options());
        writer.register_process({7, "sampled"});
        const trace::ThreadId thread = writer.register_thread({0, 7, 7, "main"});
        const trace::FrameId main_frame = writer.intern_frame("main", "m", 1);
        const trace::FrameId work_a = writer.intern_frame("work_a", "m", 2);
        const trace::FrameId work_b = writer.intern_frame("work_b", "m", 3);
        const trace::FrameId stack_a_frames[] = {main_frame, work_a};
        const trace::FrameId stack_b_frames[] = {main_frame, work_b};
        const trace::StackId stack_a = writer.intern_stack(stack_a_frames);
        const trace::StackId stack_b = writer.intern_stack(stack_b_frames);
        const trace::StackId sequence[] = {stack_a, stack_a, stack_b, stack_a};
        for (int index = 0; index < 4; ++index)
            writer.record_stack_sample({1000 + index * 100, thread, sequence[index]});
        // A range so the thread has a lane (and the thread root its title).
        writer.record_range(
            {writer.next_range_id(), 1000, 1400, thread, writer.intern("d"), writer.intern("r"), 0, 0, 0, 0, {}});
        writer.close();
    }
    {
        TraceModel model({path});
        model.load_all();
        const FlameGraph timed = build_flamegraph(model, FlameSource::cpu_samples, FlameOrder::time_order);
        ASSERT_EQ(timed.nodes[0].children.size(), 1u);
        const std::uint32_t thread = timed.nodes[0].children[0];
        ASSERT_EQ(timed.nodes[thread].children.size(), 1u);
        const std::uint32_t main_node = timed.nodes[thread].children[0];
        EXPECT_DOUBLE_EQ(timed.nodes[main_node].total, 4.0);
        std::vector<std::pair<std::string, double>> boxes;
        for (std::uint32_t child : timed.nodes[main_node].children)
            boxes.emplace_back(timed.nodes[child].name, timed.nodes[child].total);
        EXPECT_EQ(boxes,
                  (std::vector<std::pair<std::string, double>>{{"work_a", 2.0}, {"work_b", 1.0}, {"work_a", 1.0}}));
        const FlameGraph merged = build_flamegraph(model, FlameSource::cpu_samples, FlameOrder::left_heavy);
        const std::uint32_t merged_main = child_named(merged, 0, "main");
        EXPECT_DOUBLE_EQ(merged.nodes[child_named(merged, merged_main, "work_a")].total, 3.0);
        EXPECT_DOUBLE_EQ(merged.total(), timed.total());
    }
    std::filesystem::remove(path);
}

// Python frames (schema 2: a frame with a line) are CPU samples like native ones: the
// CPU flamegraph counts them in the same tree, named as `ember stats --report cpu` and
// py-spy name them, "function (file:line)", so two forwards of different files stay
// apart; native frames keep their function name. A live refresh names new stacks alike.
TEST(FlamegraphPythonFrames, PythonFramesAreSampledFramesNamedByFileAndLine) {
    const test_support::TempDir dir("ember-viewer-flame");  // removed with the trace's companions, last
    const std::string path = (dir.path() / "flame_python.db").string();
    store::TraceWriter writer(
        path,
        [] {
            trace::RunInfo run;
            run.pid = 9;
            return run;
        }(),
        store::testing::quiet_options());
    writer.register_process({9, "python"});
    const trace::ThreadId thread = writer.register_thread({0, 9, 9, "MainThread"});
    const trace::FrameId main_frame = writer.intern_frame("main", "python3.11", 0x10);
    const trace::FrameId model_forward = writer.intern_frame("forward", "model.py", 0, 42);
    const trace::FrameId block_forward = writer.intern_frame("forward", "block.py", 0, 7);
    const trace::FrameId gemm = writer.intern_frame("sgemm_kernel", "libopenblas.so", 0x20);
    const trace::FrameId first[] = {main_frame, model_forward, block_forward, gemm};
    const trace::FrameId second[] = {main_frame, model_forward};
    const trace::StackId deep = writer.intern_stack(first);
    const trace::StackId shallow = writer.intern_stack(second);
    writer.record_stack_sample({1000, thread, deep});
    writer.record_stack_sample({1100, thread, deep});
    writer.record_stack_sample({1200, thread, shallow});
    writer.record_range(
        {writer.next_range_id(), 1000, 1400, thread, writer.intern("d"), writer.intern("r"), 0, 0, 0, 0, {}});
    writer.flush();

    TraceModel model({path});
    model.load_all();
    const FlameGraph graph = build_flamegraph(model, FlameSource::cpu_samples, FlameOrder::left_heavy);
    EXPECT_DOUBLE_EQ(graph.total(), 3.0);
    const std::uint32_t main_node = child_named(graph, 0, "main");
    const std::uint32_t model_node = child_named(graph, main_node, "forward (model.py:42)");
    const std::uint32_t block_node = child_named(graph, model_node, "forward (block.py:7)");
    ASSERT_NE(block_node, 0u);
    EXPECT_DOUBLE_EQ(graph.nodes[model_node].total, 3.0);
    EXPECT_DOUBLE_EQ(graph.nodes[block_node].total, 2.0);
    EXPECT_DOUBLE_EQ(graph.nodes[child_named(graph, block_node, "sgemm_kernel")].total, 2.0);

    // A stack first sampled after the load arrives through a refresh, named the same way.
    const trace::FrameId step_frame = writer.intern_frame("train_step", "train.py", 0, 3);
    const trace::FrameId third[] = {main_frame, step_frame};
    writer.record_stack_sample({1300, thread, writer.intern_stack(third)});
    writer.close();
    model.refresh();
    const FlameGraph refreshed = build_flamegraph(model, FlameSource::cpu_samples, FlameOrder::left_heavy);
    EXPECT_DOUBLE_EQ(refreshed.total(), 4.0);
    EXPECT_NE(child_named(refreshed, child_named(refreshed, 0, "main"), "train_step (train.py:3)"), 0u);
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
