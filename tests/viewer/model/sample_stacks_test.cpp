// sample_stacks_test.cpp: the stack charts of the thread lanes. Known samples give known
// boxes (start, end, depth, frame, samples); a box continues only under the same
// parents; idle samples are gaps by default and their own dimmed boxes on request; a
// silence longer than two periods ends a sample after one period; folding keeps every
// box; and the fixture's Python samples load into the lanes of their threads (a thread
// with samples only gets a lane of its own, and the layout gives each chart its rows).
#include "tests/viewer/fixture_trace.h"
#include "viewer/model/flamegraph.h"
#include "viewer/model/lane_layout.h"
#include "viewer/model/lod.h"
#include "viewer/model/sample_stacks.h"
#include "viewer/model/trace_model.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace ember::viewer {
namespace {

using trace::TimeNs;

struct Expected {
    TimeNs start_ns, end_ns;
    std::uint32_t frame, samples;
    bool idle = false;
};

void expect_row(const StackRow& row, const std::vector<Expected>& expected, const std::string& what) {
    ASSERT_EQ(row.boxes.size(), expected.size()) << what;
    for (std::size_t index = 0; index < expected.size(); ++index) {
        const StackBox& box = row.boxes[index];
        const Expected& want = expected[index];
        EXPECT_EQ(box.start_ns, want.start_ns) << what << " box " << index;
        EXPECT_EQ(box.end_ns, want.end_ns) << what << " box " << index;
        EXPECT_EQ(box.frame, want.frame) << what << " box " << index;
        EXPECT_EQ(box.samples, want.samples) << what << " box " << index;
        EXPECT_EQ(box.idle != 0, want.idle) << what << " box " << index;
    }
}

// Frames 0 main, 1 a, 2 b, 3 c, 5 other: stack 1 = main>a, 2 = main>b, 3 = main>a>c,
// 4 = other>a.
const std::unordered_map<trace::StackId, std::vector<std::uint32_t>> kStacks = {
    {1, {0, 1}}, {2, {0, 2}}, {3, {0, 1, 3}}, {4, {5, 1}}};

TEST(SampleStacks, ConsecutiveSamplesMergeDepthByDepth) {
    // Every 10 ns, then a silence: the median interval (the period) is 10 ns.
    const std::vector<StackSampleRef> samples = {{0, 1, 1},        {10, 1, 3}, {20, 1, 3}, {30, 1, 2},
                                                 {40, 1, 2, true}, {50, 1, 4}, {60, 1, 4}, {200, 1, 1}};
    const SampleStackLane lane = build_sample_stack_lane(samples, kStacks);
    EXPECT_EQ(lane.period_ns, 10);
    EXPECT_EQ(lane.samples, 8);
    EXPECT_EQ(lane.idle_samples, 1);
    // Active samples only: the idle one at 40 is a gap; 60 is followed by 140 ns of
    // silence, so it lasts one period; 200 is the last, one period too.
    ASSERT_EQ(lane.depth(false), 3);
    expect_row(lane.active[0], {{0, 40, 0, 4}, {50, 70, 5, 2}, {200, 210, 0, 1}}, "active depth 0");
    // "a" under "main" then "a" under "other": two boxes, though both are "a".
    expect_row(lane.active[1], {{0, 30, 1, 3}, {30, 40, 2, 1}, {50, 70, 1, 2}, {200, 210, 1, 1}}, "active depth 1");
    expect_row(lane.active[2], {{10, 30, 3, 2}}, "active depth 2");
    // With the idle sample: its own boxes, marked idle, between the active ones.
    ASSERT_EQ(lane.depth(true), 3);
    expect_row(lane.with_idle[0], {{0, 40, 0, 4}, {40, 50, 0, 1, true}, {50, 70, 5, 2}, {200, 210, 0, 1}},
               "with idle depth 0");
    expect_row(lane.with_idle[1],
               {{0, 30, 1, 3}, {30, 40, 2, 1}, {40, 50, 2, 1, true}, {50, 70, 1, 2}, {200, 210, 1, 1}},
               "with idle depth 1");
    // The outer frames of a box: the boxes above it that hold its first sample.
    EXPECT_EQ(stack_of_box(lane.active, 2, 0), (std::vector<std::uint32_t>{0, 1, 3}));
    EXPECT_EQ(stack_of_box(lane.active, 1, 2), (std::vector<std::uint32_t>{5, 1}));
    EXPECT_TRUE(stack_of_box(lane.active, 3, 0).empty());
}

TEST(SampleStacks, UnknownStacksAndLoneSamples) {
    // A stack the file does not list draws nothing and ends the boxes before it.
    const std::vector<StackSampleRef> samples = {{0, 1, 1}, {10, 1, 99}, {20, 1, 1}};
    const SampleStackLane lane = build_sample_stack_lane(samples, kStacks);
    ASSERT_EQ(lane.depth(false), 2);
    expect_row(lane.active[0], {{0, 10, 0, 1}, {20, 30, 0, 1}}, "depth 0");
    // One sample: no interval to measure, so the fallback period.
    const SampleStackLane lone = build_sample_stack_lane({{1000, 1, 2}}, kStacks, 7);
    EXPECT_EQ(lone.period_ns, 7);
    expect_row(lone.active[1], {{1000, 1007, 2, 1}}, "lone");
    const SampleStackLane empty = build_sample_stack_lane({}, kStacks);
    EXPECT_EQ(empty.depth(true), 0);
    EXPECT_EQ(empty.period_ns, kDefaultSamplePeriodNs);
}

TEST(SampleStacks, TheRecordedPeriodWinsOverTheMeasuredOne) {
    // Samples 10 ns apart, but the sampler recorded 25 ns: a sample followed by 40 ns of
    // silence (within two recorded periods) lasts until the next one, and the last one
    // lasts one recorded period.
    const std::vector<StackSampleRef> samples = {{0, 1, 1}, {10, 1, 1}, {20, 1, 1}, {60, 1, 2}};
    const SampleStackLane measured = build_sample_stack_lane(samples, kStacks);
    EXPECT_EQ(measured.period_ns, 10);
    expect_row(measured.active[1], {{0, 30, 1, 3}, {60, 70, 2, 1}}, "measured");
    const SampleStackLane recorded = build_sample_stack_lane(samples, kStacks, kDefaultSamplePeriodNs, true, 25);
    EXPECT_EQ(recorded.period_ns, 25);
    expect_row(recorded.active[1], {{0, 60, 1, 3}, {60, 85, 2, 1}}, "recorded");
}

TEST(SampleStacks, FoldingKeepsEveryBoxAndTheirExtent) {
    // 100000 samples, 1 us apart, whose leaf changes every sample: depth 0 is one box,
    // depth 1 100000 boxes of 1 us.
    const std::unordered_map<trace::StackId, std::vector<std::uint32_t>> stacks = {{1, {0, 1}}, {2, {0, 2}}};
    std::vector<StackSampleRef> samples;
    constexpr int kCount = 100'000;
    for (int index = 0; index < kCount; ++index)
        samples.push_back({index * 1'000LL, 1, static_cast<trace::StackId>(1 + index % 2)});
    const SampleStackLane lane = build_sample_stack_lane(samples, stacks);
    ASSERT_EQ(lane.active.size(), 2u);
    ASSERT_EQ(lane.active[0].boxes.size(), 1u);
    ASSERT_EQ(lane.active[1].boxes.size(), static_cast<std::size_t>(kCount));
    EXPECT_EQ(lane.active[0].boxes[0].samples, static_cast<std::uint32_t>(kCount));

    // Zoomed out (the whole 100 ms on 1000 pixels): the leaf row folds into a handful of
    // items whose counts add up to the boxes and which span them all.
    LodParams params;
    params.view_begin_ns = 0;
    params.view_end_ns = kCount * 1'000LL;
    params.ns_per_pixel = 100'000.0;
    std::vector<DrawItem> items;
    fold_stack_row(lane.active[1], params, items);
    ASSERT_FALSE(items.empty());
    EXPECT_LE(items.size(), 400u);
    std::uint64_t folded = 0;
    for (const DrawItem& item : items) folded += item.count;
    EXPECT_EQ(folded, static_cast<std::uint64_t>(kCount));
    EXPECT_EQ(items.front().start_ns, 0);
    EXPECT_EQ(items.back().end_ns, kCount * 1'000LL);
    // Zoomed in on 10 us: every box its own item, exactly the visible ones.
    params.view_begin_ns = 50'000'500;
    params.view_end_ns = 50'010'500;
    params.ns_per_pixel = 10.0;
    items.clear();
    fold_stack_row(lane.active[1], params, items);
    ASSERT_EQ(items.size(), 11u);
    for (const DrawItem& item : items) EXPECT_EQ(item.count, 1u);
    EXPECT_EQ(items.front().first_index, 50'000u);
    EXPECT_EQ(items.front().start_ns, 50'000'000);
}

// Same boxes in both charts of two lanes.
bool stack_boxes_equal(const SampleStackLane& a, const SampleStackLane& b) {
    for (bool with_idle : {false, true}) {
        if (a.depth(with_idle) != b.depth(with_idle)) return false;
        for (int depth = 0; depth < a.depth(with_idle); ++depth) {
            const auto& x = a.rows(with_idle)[static_cast<std::size_t>(depth)].boxes;
            const auto& y = b.rows(with_idle)[static_cast<std::size_t>(depth)].boxes;
            if (x.size() != y.size()) return false;
            for (std::size_t index = 0; index < x.size(); ++index)
                if (x[index].start_ns != y[index].start_ns || x[index].end_ns != y[index].end_ns ||
                    x[index].frame != y[index].frame || x[index].samples != y[index].samples ||
                    x[index].idle != y[index].idle)
                    return false;
        }
    }
    return true;
}

class SampleStacksModelTest : public ::testing::Test {
  protected:
    void SetUp() override {
        path_ = testing::temporary_trace_path("sample_stacks");
        testing::FixtureShape shape;
        shape.python_stacks = true;
        shape_ = shape;
        totals_ = testing::write_fixture_trace(path_, shape);
        model_ = std::make_unique<TraceModel>(std::vector<std::string>{path_});
        model_->load_all();
        model_->include_idle_stacks();
    }
    void TearDown() override {
        model_.reset();
        std::filesystem::remove(path_);
    }
    int lane_titled(const std::string& title) const {
        for (int index = 0; index < model_->lane_count(); ++index)
            if (model_->lane(index).title.find(title) != std::string::npos) return index;
        return -1;
    }
    std::string frame_name(const StackBox& box) const { return model_->files()[0].frame_names[box.frame]; }
    std::string path_;
    testing::FixtureShape shape_;
    testing::FixtureTotals totals_;
    std::unique_ptr<TraceModel> model_;
};

TEST_F(SampleStacksModelTest, PythonFunctionsSitOnTheirThreadLanes) {
    const int main_lane = lane_titled("main");
    ASSERT_GE(main_lane, 0);
    const SampleStackLane* stacks = model_->sample_stacks(main_lane);
    ASSERT_NE(stacks, nullptr);
    EXPECT_EQ(stacks->samples, (2 + testing::kPythonSamplesPerStep) * shape_.steps);
    EXPECT_EQ(stacks->period_ns, testing::kPythonSampleNs);
    ASSERT_EQ(stacks->depth(false), 3);
    // Depth 2: forward and backward alternate, one box of 10 samples per phase and step,
    // from the phase's first sample to the next sample after its last.
    const StackRow& leaves = stacks->active[2];
    ASSERT_EQ(leaves.boxes.size(), static_cast<std::size_t>(2 * shape_.steps));
    for (int step = 0; step < shape_.steps; ++step) {
        const TimeNs step_start = shape_.origin_ns + step * shape_.step_ns;
        const StackBox& forward = leaves.boxes[static_cast<std::size_t>(2 * step)];
        const StackBox& backward = leaves.boxes[static_cast<std::size_t>(2 * step + 1)];
        EXPECT_EQ(frame_name(forward), "forward (model.py:12)");
        EXPECT_EQ(frame_name(backward), "backward (model.py:20)");
        EXPECT_EQ(forward.samples, 10u);
        EXPECT_EQ(backward.samples, 10u);
        EXPECT_EQ(forward.start_ns, step_start + 5'000);
        EXPECT_EQ(forward.end_ns, step_start + 5'000 + 10 * testing::kPythonSampleNs);
        EXPECT_EQ(backward.start_ns, forward.end_ns);
        // The next step's first sample (native, 1234 ns in) ends it; the last step's
        // last sample lasts one period.
        const TimeNs next = step + 1 < shape_.steps ? step_start + shape_.step_ns + 1'234
                                                    : step_start + 5'000 + 20 * testing::kPythonSampleNs;
        EXPECT_EQ(backward.end_ns, next);
    }
    // Depth 0 alternates the native "main" (two samples a step) and "<module>".
    const StackRow& outer = stacks->active[0];
    ASSERT_EQ(outer.boxes.size(), static_cast<std::size_t>(2 * shape_.steps));
    EXPECT_EQ(frame_name(outer.boxes[0]), "main");
    EXPECT_EQ(outer.boxes[0].samples, 2u);
    EXPECT_EQ(frame_name(outer.boxes[1]), "<module> (train.py:40)");
    EXPECT_EQ(outer.boxes[1].samples, 20u);
    EXPECT_EQ(stack_of_box(stacks->active, 2, 1).size(), 3u);
}

TEST_F(SampleStacksModelTest, ChartsWithIdleSamplesAreBuiltWhenAsked) {
    TraceModel model({path_});
    model.load_all();
    const int loader_lane = lane_titled("loader");
    ASSERT_NE(model.sample_stacks(loader_lane), nullptr);
    EXPECT_EQ(model.sample_stacks(loader_lane)->depth(true), 0);
    EXPECT_EQ(model.sample_stacks(loader_lane)->depth(false), 2);
    model.include_idle_stacks();
    EXPECT_EQ(model.sample_stacks(loader_lane)->depth(true), 2);
    EXPECT_EQ(stack_boxes_equal(*model.sample_stacks(loader_lane), *model_->sample_stacks(loader_lane)), true);
}

TEST_F(SampleStacksModelTest, IdleSamplesAreGapsUnlessAsked) {
    const int loader_lane = lane_titled("loader");
    ASSERT_GE(loader_lane, 0);
    const SampleStackLane* stacks = model_->sample_stacks(loader_lane);
    ASSERT_NE(stacks, nullptr);
    // Per step: one native sample, 4 active "decode" samples, 16 idle "get" samples.
    EXPECT_EQ(stacks->idle_samples, 16 * shape_.steps);
    std::int64_t active = 0, idle = 0;
    for (const StackBox& box : stacks->active[0].boxes) {
        EXPECT_EQ(box.idle, 0u);
        active += box.samples;
    }
    EXPECT_EQ(active, 5 * shape_.steps);
    ASSERT_EQ(stacks->active.size(), 2u);
    for (const StackBox& box : stacks->active[1].boxes)
        EXPECT_TRUE(frame_name(box) == "decode (loader.py:15)" || frame_name(box) == "decode_png") << frame_name(box);
    // With idle samples: every sample is in a box of depth 0, the idle ones in idle boxes.
    active = 0;
    for (const StackBox& box : stacks->with_idle[0].boxes) (box.idle ? idle : active) += box.samples;
    EXPECT_EQ(active, 5 * shape_.steps);
    EXPECT_EQ(idle, 16 * shape_.steps);
    bool saw_get = false;
    for (const StackBox& box : stacks->with_idle[1].boxes)
        if (frame_name(box) == "get (queue.py:171)") {
            saw_get = true;
            EXPECT_EQ(box.idle, 1u);
        }
    EXPECT_TRUE(saw_get);
}

TEST_F(SampleStacksModelTest, TheCpuFlamegraphCountsIdleSamplesOnlyWhenAsked) {
    for (FlameOrder order : {FlameOrder::left_heavy, FlameOrder::time_order}) {
        const FlameGraph active = build_flamegraph(*model_, FlameSource::cpu_samples, order);
        EXPECT_DOUBLE_EQ(active.total(), static_cast<double>(totals_.stack_samples - totals_.idle_samples));
        const FlameGraph all = build_flamegraph(*model_, FlameSource::cpu_samples, order, -1, true);
        EXPECT_DOUBLE_EQ(all.total(), static_cast<double>(totals_.stack_samples));
    }
}

TEST_F(SampleStacksModelTest, AThreadWithSamplesOnlyGetsALane) {
    const int pin_lane = lane_titled("pin_memory");
    ASSERT_GE(pin_lane, 0);
    EXPECT_EQ(model_->lane(pin_lane).kind, LaneKind::thread);
    EXPECT_TRUE(model_->lane(pin_lane).rows.empty());
    const SampleStackLane* stacks = model_->sample_stacks(pin_lane);
    ASSERT_NE(stacks, nullptr);
    EXPECT_EQ(stacks->depth(false), 0);  // all idle: nothing by default
    ASSERT_EQ(stacks->depth(true), 1);
    // Sampled every 50 us across the steps: one idle box of all its samples.
    ASSERT_EQ(stacks->with_idle[0].boxes.size(), 1u);
    EXPECT_EQ(stacks->with_idle[0].boxes[0].samples,
              static_cast<std::uint32_t>(testing::kPythonSamplesPerStep * shape_.steps));
    EXPECT_EQ(stacks->with_idle[0].boxes[0].idle, 1u);
    // Lanes that are not threads have no chart.
    for (int index = 0; index < model_->lane_count(); ++index) {
        if (model_->lane(index).kind == LaneKind::thread) continue;
        EXPECT_EQ(model_->sample_stacks(index), nullptr);
    }
}

TEST_F(SampleStacksModelTest, ShiftingAFileMovesItsBoxes) {
    const int main_lane = lane_titled("main");
    ASSERT_GE(main_lane, 0);
    const TimeNs before = model_->sample_stacks(main_lane)->active[2].boxes[0].start_ns;
    model_->shift_file(0, 1'000);
    EXPECT_EQ(model_->sample_stacks(main_lane)->active[2].boxes[0].start_ns, before + 1'000);
    EXPECT_EQ(model_->sample_stacks(main_lane)->with_idle[2].boxes[0].start_ns, before + 1'000);
}

TEST_F(SampleStacksModelTest, LayoutPutsTheChartBelowTheEventRows) {
    const int main_lane = lane_titled("main"), pin_lane = lane_titled("pin_memory");
    ASSERT_GE(main_lane, 0);
    ASSERT_GE(pin_lane, 0);
    std::vector<LaneDisplay> order = default_lane_order(*model_);
    const LayoutMetrics metrics;
    auto placement_of = [](const std::vector<LanePlacement>& placements, int lane) {
        for (const LanePlacement& placement : placements)
            if (placement.lane == lane) return placement;
        ADD_FAILURE() << "no placement for lane " << lane;
        return LanePlacement{};
    };
    const int main_rows = static_cast<int>(model_->lane(main_lane).rows.size());
    LanePlacement main = placement_of(layout_lanes(*model_, order, metrics), main_lane);
    EXPECT_EQ(main.rows_shown, main_rows);
    EXPECT_FLOAT_EQ(main.stack_offset, static_cast<float>(main_rows) * metrics.row_height);
    EXPECT_EQ(main.stack_rows, 3);
    EXPECT_FLOAT_EQ(main.height, static_cast<float>(main_rows + 3) * metrics.row_height);
    // The depth cap cuts the chart; turning stacks off removes it.
    SampleTracks capped;
    capped.max_depth = 2;
    EXPECT_EQ(placement_of(layout_lanes(*model_, order, metrics, {}, capped), main_lane).stack_rows, 2);
    SampleTracks off;
    off.stacks = false;
    main = placement_of(layout_lanes(*model_, order, metrics, {}, off), main_lane);
    EXPECT_EQ(main.stack_rows, 0);
    EXPECT_LT(main.stack_offset, 0.0f);
    // The samples-only thread: all idle, so an empty row by default, its chart with idle.
    LanePlacement pin = placement_of(layout_lanes(*model_, order, metrics), pin_lane);
    EXPECT_EQ(pin.stack_rows, 0);
    SampleTracks with_idle;
    with_idle.idle = true;
    pin = placement_of(layout_lanes(*model_, order, metrics, {}, with_idle), pin_lane);
    EXPECT_EQ(pin.rows_shown, 0);
    EXPECT_EQ(pin.stack_rows, 1);
    EXPECT_FLOAT_EQ(pin.stack_offset, 0.0f);
    // Collapsed: a lane with event rows hides its chart.
    for (LaneDisplay& display : order) display.collapsed = display.lane == main_lane;
    main = placement_of(layout_lanes(*model_, order, metrics), main_lane);
    EXPECT_EQ(main.rows_shown, 1);
    EXPECT_EQ(main.stack_rows, 0);
}

}  // namespace
}  // namespace ember::viewer
