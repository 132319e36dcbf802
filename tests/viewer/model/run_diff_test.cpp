// run_diff_test.cpp: the diff mode's model on two hand-built runs whose difference is
// known: B's backward kernels take twice as long (50 us -> 100 us), its steps are
// 1.2 ms instead of 1 ms and start 3 ms later. Checked: the shift that aligns B's
// steps on A's, what shifting moves, the diff's kernel rows, which events a clicked
// row outlines in each run, and the differential flamegraphs' per-frame deltas.
#include "tests/viewer/fixture_trace.h"
#include "viewer/model/flamegraph.h"
#include "viewer/model/run_diff.h"

#include <gtest/gtest.h>

namespace ember::viewer {
namespace {

using trace::TimeNs;

std::uint32_t child_named(const FlameGraph& graph, std::uint32_t parent, const std::string& name) {
    for (std::uint32_t child : graph.nodes[parent].children)
        if (graph.nodes[child].name == name) return child;
    return 0;
}

const analysis::NameDelta* row_named(const std::vector<analysis::NameDelta>& rows, const std::string& name) {
    for (const analysis::NameDelta& row : rows)
        if (row.name == name) return &row;
    return nullptr;
}

class RunDiffTest : public ::testing::Test {
  protected:
    static constexpr TimeNs kAOrigin = 1'000'000'000;
    static constexpr TimeNs kBOrigin = 1'003'000'000;  // B starts 3 ms later
    static constexpr TimeNs kBStep = 1'200'000;

    void SetUp() override {
        a_path_ = testing::temporary_trace_path("diff_a");
        b_path_ = testing::temporary_trace_path("diff_b");
        testing::write_fixture_trace(a_path_);
        testing::FixtureShape slower;
        slower.slowdown = 2.0;
        slower.origin_ns = kBOrigin;
        slower.step_ns = kBStep;
        testing::write_fixture_trace(b_path_, slower);
        model_ = std::make_unique<TraceModel>(std::vector<std::string>{a_path_, b_path_});
        model_->load_all();
        diff_ = compute_run_diff(a_path_, b_path_);
        ASSERT_TRUE(diff_->error.empty()) << diff_->error;
    }
    void TearDown() override {
        model_.reset();
        std::filesystem::remove(a_path_);
        std::filesystem::remove(b_path_);
    }

    // The first event of file `file`'s lane titled `title`, row `row`.
    const TimelineEvent* first_event(int file, const std::string& title, RowKind kind) const {
        for (int index = 0; index < model_->lane_count(); ++index) {
            const Lane& lane = model_->lane(index);
            if (lane.file_index != file || lane.title.find(title) == std::string::npos) continue;
            for (const Row& row : lane.rows)
                if (row.kind == kind && !row.events.empty()) return &row.events.front();
        }
        return nullptr;
    }

    std::string a_path_, b_path_;
    std::unique_ptr<TraceModel> model_;
    std::unique_ptr<RunDiff> diff_;
};

TEST_F(RunDiffTest, StepAlignmentShiftPutsBsStepUnderAs) {
    ASSERT_EQ(diff_->a_steps.size(), 4u);
    ASSERT_EQ(diff_->b_steps.size(), 4u);
    // Both files have the same clock offset: on the recorded clocks B is 3 ms later.
    ASSERT_EQ(model_->files()[0].shift_ns, 0);
    ASSERT_EQ(model_->files()[1].shift_ns, 0);
    EXPECT_EQ(step_alignment_shift(*diff_, *model_, 0), -3'000'000);
    // Step 2 of B starts 2 x 1.2 ms after its first, A's 2 x 1 ms: 0.4 ms more to take back.
    EXPECT_EQ(step_alignment_shift(*diff_, *model_, 2), -3'400'000);
    EXPECT_FALSE(step_alignment_shift(*diff_, *model_, 4).has_value());

    const TimeNs a_step_before = first_event(0, "main", RowKind::ranges)->start_ns;
    const TimeNs b_kernel_before = first_event(1, "compute", RowKind::gpu_work)->start_ns;
    const TimeNs end_before = model_->end_ns();
    model_->shift_file(1, *step_alignment_shift(*diff_, *model_, 0));
    EXPECT_EQ(model_->files()[1].shift_ns, -3'000'000);
    EXPECT_EQ(first_event(1, "main", RowKind::ranges)->start_ns, kAOrigin);       // B's step 0 under A's
    EXPECT_EQ(first_event(0, "main", RowKind::ranges)->start_ns, a_step_before);  // A never moves
    EXPECT_EQ(first_event(1, "compute", RowKind::gpu_work)->start_ns, b_kernel_before - 3'000'000);
    EXPECT_EQ(model_->end_ns(), end_before - 3'000'000);  // B ended last
    EXPECT_EQ(model_->begin_ns(), kAOrigin);
    // The GPU breakdowns moved with the lanes: B's first step window starts at A's.
    const GpuAnalysis* gpu = model_->gpu_analysis();
    ASSERT_NE(gpu, nullptr);
    for (const RankBreakdown& rank : gpu->ranks) {
        ASSERT_FALSE(rank.steps.empty());
        EXPECT_EQ(rank.steps.front().start_ns, kAOrigin) << rank.title;
    }
    // Aligning again on the same step changes nothing; on step 2 it moves 0.4 ms more.
    EXPECT_EQ(step_alignment_shift(*diff_, *model_, 0), -3'000'000);
    model_->shift_file(1, *step_alignment_shift(*diff_, *model_, 2));
    EXPECT_EQ(first_event(1, "main", RowKind::ranges)->start_ns, kAOrigin - 400'000);
    // Back on the recorded clocks.
    model_->shift_file(1, 0);
    EXPECT_EQ(first_event(1, "compute", RowKind::gpu_work)->start_ns, b_kernel_before);
}

TEST_F(RunDiffTest, KernelRowsCarryTheInjectedChange) {
    const auto& kernels = diff_->diff.kernels;
    ASSERT_GE(kernels.size(), 3u);
    // Per step: sgemm runs twice in backward (+50 us each), relu once (+50 us); 4 steps.
    EXPECT_EQ(kernels[0].name, "sgemm_128x64");
    EXPECT_EQ(kernels[0].a_total_ns, 800'000);
    EXPECT_EQ(kernels[0].b_total_ns, 1'200'000);
    EXPECT_EQ(kernels[0].delta_ns(), 400'000);
    EXPECT_EQ(kernels[0].a_instances, 16);
    EXPECT_EQ(kernels[1].name, "relu_kernel");
    EXPECT_EQ(kernels[1].delta_ns(), 200'000);
    const analysis::NameDelta* copy = row_named(kernels, "[CUDA memcpy HtoD]");
    ASSERT_NE(copy, nullptr);
    EXPECT_EQ(copy->delta_ns(), 0);
    EXPECT_EQ(copy->a_instances, 4);
    EXPECT_EQ(diff_rows(diff_->diff, DiffTable::ranges).size(), diff_->diff.ranges.size());
    EXPECT_NE(row_named(diff_->diff.ranges, "backward"), nullptr);
}

TEST_F(RunDiffTest, ClickedRowOutlinesItsEventsInBothRuns) {
    EventSearch search;
    highlight_diff_row(search, *model_, DiffTable::kernels, "sgemm_128x64");
    EXPECT_EQ(matches_per_file(search, *model_), (std::vector<std::int64_t>{16, 16}));
    // Stepping visits them: the first is A's first sgemm, and every one is a kernel of that name.
    auto found = search.next(*model_, {}, model_->begin_ns());
    ASSERT_TRUE(found.has_value());
    EXPECT_EQ(model_->name(model_->event(*found)->name_id), "sgemm_128x64");
    EXPECT_EQ(model_->lane(found->lane).file_index, 0);

    // Copies: the model's "Memcpy HtoD (pinned -> device)" is the diff's "[CUDA memcpy HtoD]".
    const auto id_of = [&](std::string_view text) {
        const std::int64_t id = model_->find_name(text);
        EXPECT_GE(id, 0) << text;
        return static_cast<std::uint32_t>(std::max<std::int64_t>(id, 0));
    };
    EXPECT_EQ(diff_table_name(*model_, DiffTable::kernels, id_of("Memcpy HtoD (pinned -> device)")),
              "[CUDA memcpy HtoD]");
    EXPECT_EQ(diff_table_name(*model_, DiffTable::kernels, id_of("Memset (device)")), "[CUDA memset]");
    EXPECT_EQ(diff_table_name(*model_, DiffTable::kernels, id_of("sgemm_128x64")), "sgemm_128x64");
    // A file's own kernel named like a display name is not taken for a copy.
    EXPECT_EQ(model_->operation_name(id_of("sgemm_128x64")), "sgemm_128x64");
    highlight_diff_row(search, *model_, DiffTable::kernels, "[CUDA memcpy HtoD]");
    EXPECT_EQ(matches_per_file(search, *model_), (std::vector<std::int64_t>{4, 4}));

    // A range row outlines ranges only; an API row API calls only.
    highlight_diff_row(search, *model_, DiffTable::ranges, "forward");
    EXPECT_EQ(matches_per_file(search, *model_), (std::vector<std::int64_t>{4, 4}));
    EXPECT_TRUE(search.matches_row(RowKind::ranges));
    EXPECT_FALSE(search.matches_row(RowKind::gpu_work));
    highlight_diff_row(search, *model_, DiffTable::api, "cudaLaunchKernel");
    EXPECT_EQ(matches_per_file(search, *model_), (std::vector<std::int64_t>{24, 24}));
    // A kernel row never outlines a range of the same name: "forward" is no kernel.
    highlight_diff_row(search, *model_, DiffTable::kernels, "forward");
    EXPECT_EQ(matches_per_file(search, *model_), (std::vector<std::int64_t>{0, 0}));
    // CPU functions are not on the timeline.
    highlight_diff_row(search, *model_, DiffTable::cpu_functions, "train_step");
    EXPECT_TRUE(search.empty());
}

TEST_F(RunDiffTest, DifferentialFlamegraphsGiveBMinusAPerFrame) {
    // GPU time by range: the launching stack step > forward|backward holds the kernels' time.
    const FlameGraph by_range =
        difference_flamegraph(build_flamegraph(*model_, FlameSource::gpu_by_range, FlameOrder::left_heavy, 0),
                              build_flamegraph(*model_, FlameSource::gpu_by_range, FlameOrder::left_heavy, 1));
    const std::uint32_t step = child_named(by_range, 0, "step");
    const std::uint32_t forward = child_named(by_range, step, "forward");
    const std::uint32_t backward = child_named(by_range, step, "backward");
    ASSERT_NE(forward, 0u);
    ASSERT_NE(backward, 0u);
    EXPECT_DOUBLE_EQ(by_range.nodes[backward].baseline, 600'000.0);
    EXPECT_DOUBLE_EQ(by_range.nodes[backward].delta(), 600'000.0);  // 12 kernels x 50 us
    EXPECT_DOUBLE_EQ(by_range.nodes[forward].delta(), 0.0);
    EXPECT_DOUBLE_EQ(by_range.nodes[step].delta(), 600'000.0);
    EXPECT_DOUBLE_EQ(by_range.nodes[0].delta(), 600'000.0);
    EXPECT_TRUE(by_range.nodes[backward].children.empty());  // no kernel level

    // GPU time by kernel: flat, each kernel's change as in the diff's table.
    const FlameGraph by_kernel =
        difference_flamegraph(build_flamegraph(*model_, FlameSource::gpu_kernel_names, FlameOrder::left_heavy, 0),
                              build_flamegraph(*model_, FlameSource::gpu_kernel_names, FlameOrder::left_heavy, 1));
    const std::uint32_t gemm = child_named(by_kernel, 0, "sgemm_128x64");
    const std::uint32_t relu = child_named(by_kernel, 0, "relu_kernel");
    ASSERT_NE(gemm, 0u);
    ASSERT_NE(relu, 0u);
    EXPECT_DOUBLE_EQ(by_kernel.nodes[gemm].delta(), 400'000.0);
    EXPECT_DOUBLE_EQ(by_kernel.nodes[relu].delta(), 200'000.0);
    EXPECT_EQ(by_kernel.nodes[0].children.size(), 2u);
    // Both views hold the same total as the kernel graph.
    EXPECT_DOUBLE_EQ(by_kernel.nodes[0].total, by_range.nodes[0].total);
}

TEST(RunDiffNames, DifferenceMatchesFramesByNormalisedName) {
    FlameGraph a, b;
    for (FlameGraph* graph : {&a, &b}) {
        graph->nodes.resize(2);
        graph->nodes[0].children = {1};
    }
    a.nodes[1].name = "ProfilerStep#3";
    a.nodes[0].total = a.nodes[1].total = 10.0;
    b.nodes[1].name = "ProfilerStep#41";
    b.nodes[0].total = b.nodes[1].total = 14.0;
    const FlameGraph difference = difference_flamegraph(a, b);
    ASSERT_EQ(difference.nodes.size(), 2u);  // one frame, not a new and a gone one
    EXPECT_EQ(difference.nodes[1].name, "ProfilerStep");
    EXPECT_DOUBLE_EQ(difference.nodes[1].delta(), 4.0);
}

}  // namespace
}  // namespace ember::viewer
