// gpu_analysis_test.cpp: what the viewer shows of the GPU breakdowns — the idle gaps of
// each stream lane with their category and position, the queue-length series, the
// per-rank numbers and the steps — on a hand-built trace whose every answer is worked
// out below; the folding of gaps for the zoom level; the lanes' extra tracks; two files
// on one time base; and, when ../shared/real-traces is there, the A100 job trace.
//
// Times in µs from 1 ms (the file stores ns). One process (one rank), two GPUs:
//   GPU 0 stream 7:  K1 gemm    [0,100)    launch [-30,-20)  first on the stream
//                    K2 gemm    [110,200)  launch [-10,-5)   gap 10, launched early: kernel_wait
//                    K3 relu    [300,400)  launch [250,260)  gap 100, launched late: host_wait
//                    S1 memset  [450,460)  launch [270,280)  gap 50, launched early: other
//   GPU 0 stream 13: N1 nccl    [150,350)  launch [100,110)  first
//                    N2 nccl    [600,700)  no launching call gap 250: other
//   GPU 1 stream 7:  K4 gemm    [50,80)    launch [20,30)    first (same CUDA stream id as GPU 0's)
//                    K5 relu    [85,95)    launch [21,31)    gap 5, launched early: kernel_wait
//                    K6 gemm    [500,600)  launch [400,410)  gap 405, launched late: host_wait
// Profiler steps ProfilerStep#1 [-50,300), ProfilerStep#2 [300,800).
#include "tests/viewer/fixture_trace.h"
#include "viewer/model/gpu_analysis.h"
#include "viewer/model/lane_layout.h"
#include "viewer/model/lod.h"
#include "viewer/model/trace_model.h"

#include "profiler/analysis/rank_map.h"
#include "profiler/import/import.h"
#include "profiler/job/import_job.h"
#include "tests/support/trace_builder.h"
#include "tests/support/store.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>
#include <random>
#include <set>

namespace ember::viewer {
namespace {

using trace::TimeNs;

using namespace ember::testing::breakdown_time;

void write_gpu_trace(const std::string& path, TimeNs clock_offset = 0) {
    trace::RunInfo run = ember::testing::TraceBuilder::run_info(kBase - 100'000);
    run.clock_offset_to_wall_ns = clock_offset;
    ember::testing::TraceBuilder b(path, run);
    const trace::ThreadId thread = b.thread("main", 0, 42);
    b.device({0, "GPU A", "GPU-a", 9, 0, 132, 80ll << 30, 3.35e12});
    b.device({1, "GPU B", "GPU-b", 9, 0, 132, 80ll << 30, 3.35e12});
    const trace::StreamId s7 = b.stream(7, 0, "compute");
    const trace::StreamId s13 = b.stream(13, 0, "nccl");
    const trace::StreamId s7b = b.stream(7, 1, "other gpu");
    auto launch = [&](const char* api, double start, double end) { return b.call(thread, api, us(start), us(end)); };
    auto kernel = [&](trace::StreamId stream, const char* name, double start, double end, trace::CorrelationId c) {
        b.kernel(stream, name, us(start), us(end), c);
    };
    ember::testing::add_breakdown_work(b, thread, s7, s13);
    kernel(s7b, "gemm", 50, 80, launch("cudaLaunchKernel", 20, 30));
    kernel(s7b, "relu", 85, 95, launch("cudaLaunchKernel", 21, 31));
    kernel(s7b, "gemm", 500, 600, launch("cudaLaunchKernel", 400, 410));
    b.close();
}

// The stream lane titled `title` ("stream 7 compute", ...).
int lane_titled(const TraceModel& model, const std::string& title, int file_index = 0) {
    for (int index = 0; index < model.lane_count(); ++index)
        if (model.lane(index).title == title && model.lane(index).file_index == file_index) return index;
    ADD_FAILURE() << "no lane " << title;
    return -1;
}

struct ExpectedGap {
    double start_us, end_us;
    IdleCategory category;
};

void expect_gaps(const StreamOverlay& overlay, const std::vector<ExpectedGap>& expected, TimeNs shift = 0) {
    ASSERT_EQ(overlay.gaps.size(), expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
        SCOPED_TRACE("gap " + std::to_string(i));
        EXPECT_EQ(overlay.gaps[i].start_ns, us(expected[i].start_us) + shift);
        EXPECT_EQ(overlay.gaps[i].end_ns, us(expected[i].end_us) + shift);
        EXPECT_EQ(overlay.categories[i], expected[i].category);
    }
}

void expect_queue(const StreamOverlay& overlay, const std::vector<std::pair<double, double>>& expected,
                  TimeNs shift = 0) {
    ASSERT_EQ(overlay.queue.size(), expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
        SCOPED_TRACE("queue point " + std::to_string(i));
        EXPECT_EQ(overlay.queue[i].time_ns, us(expected[i].first) + shift);
        EXPECT_EQ(overlay.queue[i].value, expected[i].second);
    }
}

class GpuAnalysisTest : public ::testing::Test {
  protected:
    void SetUp() override {
        path_ = testing::temporary_trace_path("gpu_analysis");
        write_gpu_trace(path_);
        model_ = std::make_unique<TraceModel>(std::vector<std::string>{path_});
        model_->load_all();
        ASSERT_TRUE(model_->loaded());
        ASSERT_NE(model_->gpu_analysis(), nullptr);
        ASSERT_EQ(model_->gpu_analysis()->error, "");
    }
    void TearDown() override {
        model_.reset();
        std::filesystem::remove(path_);
    }
    const GpuAnalysis& analysis() const { return *model_->gpu_analysis(); }
    std::string path_;
    std::unique_ptr<TraceModel> model_;
};

TEST_F(GpuAnalysisTest, GapsOfEachStreamLaneHaveTheirCategoryAndPlace) {
    const int compute = lane_titled(*model_, "stream 7 compute");
    const int nccl = lane_titled(*model_, "stream 13 nccl");
    const int other_gpu = lane_titled(*model_, "stream 7 other gpu");
    ASSERT_NE(analysis().overlay(compute), nullptr);
    expect_gaps(
        *analysis().overlay(compute),
        {{100, 110, IdleCategory::kernel_wait}, {200, 300, IdleCategory::host_wait}, {400, 450, IdleCategory::other}});
    expect_gaps(*analysis().overlay(nccl), {{350, 600, IdleCategory::other}});
    // GPU 1's stream 7 has its own gaps, never one between its events and GPU 0's
    // stream 7 (the analyses know a stream only by its CUDA id).
    expect_gaps(*analysis().overlay(other_gpu),
                {{80, 85, IdleCategory::kernel_wait}, {95, 500, IdleCategory::host_wait}});
    // Thread lanes have nothing.
    for (int lane = 0; lane < model_->lane_count(); ++lane) {
        if (model_->lane(lane).kind != LaneKind::stream) {
            EXPECT_EQ(analysis().overlay(lane), nullptr);
        }
    }
    // Each gap lies exactly between two consecutive events of the lane's row.
    for (int lane : {compute, nccl, other_gpu}) {
        const Row& row = model_->lane(lane).rows[0];
        for (const IdleGap& gap : analysis().overlay(lane)->gaps) {
            const auto next = std::find_if(row.events.begin(), row.events.end(),
                                           [&](const TimelineEvent& e) { return e.start_ns == gap.end_ns; });
            ASSERT_NE(next, row.events.end());
            ASSERT_NE(next, row.events.begin());
            EXPECT_EQ(std::prev(next)->end_ns, gap.start_ns);
        }
    }
    // Prefix sums for folded runs.
    const StreamOverlay& overlay = *analysis().overlay(compute);
    const IdleSplit all = overlay.idle_between(0, overlay.gaps.size());
    EXPECT_EQ(all[0], ns_of_us(100));  // host_wait
    EXPECT_EQ(all[1], ns_of_us(10));   // kernel_wait
    EXPECT_EQ(all[2], ns_of_us(50));   // other
    const IdleSplit middle = overlay.idle_between(1, 2);
    EXPECT_EQ(middle[0], ns_of_us(100));
    EXPECT_EQ(middle[1] + middle[2], 0);
}

TEST(GapPrefixSums, RunsOfAnyLengthAddUp) {
    // Runs longer than a block use the per-block sums; shorter ones add directly.
    StreamOverlay overlay;
    for (int i = 0; i < 1000; ++i) overlay.add_gap(10 * i, 10 * i + 1 + i % 7, static_cast<IdleCategory>(i % 3));
    overlay.finish();
    for (auto [first, last] : {std::pair{0, 1000}, std::pair{1, 999}, std::pair{63, 65}, std::pair{64, 128},
                               std::pair{100, 700}, std::pair{500, 500}, std::pair{990, 1000}}) {
        IdleSplit expected{};
        for (int i = first; i < last; ++i) expected[static_cast<std::size_t>(i % 3)] += 1 + i % 7;
        EXPECT_EQ(overlay.idle_between(static_cast<std::size_t>(first), static_cast<std::size_t>(last)), expected)
            << first << ".." << last;
    }
}

TEST_F(GpuAnalysisTest, QueueLengthSeriesPerLane) {
    // +1 when a call launches work on the stream, -1 when that work starts; work without
    // a launching call (N2) is not counted.
    const StreamOverlay& compute = *analysis().overlay(lane_titled(*model_, "stream 7 compute"));
    expect_queue(compute, {{-30, 1}, {-10, 2}, {0, 1}, {110, 0}, {250, 1}, {270, 2}, {300, 1}, {450, 0}});
    EXPECT_EQ(compute.queue_max, 2.0);
    EXPECT_EQ(compute.queue_at(us(-40)), 0.0);
    EXPECT_EQ(compute.queue_at(us(-10)), 2.0);
    EXPECT_EQ(compute.queue_at(us(50)), 1.0);
    EXPECT_EQ(compute.queue_at(us(1000)), 0.0);
    expect_queue(*analysis().overlay(lane_titled(*model_, "stream 13 nccl")), {{100, 1}, {150, 0}});
    expect_queue(*analysis().overlay(lane_titled(*model_, "stream 7 other gpu")),
                 {{20, 1}, {21, 2}, {50, 1}, {85, 0}, {400, 1}, {500, 0}});
}

TEST_F(GpuAnalysisTest, RankBreakdownHasTheLibrarysNumbers) {
    ASSERT_EQ(analysis().ranks.size(), 1u);
    const RankBreakdown& rank = analysis().ranks[0];
    EXPECT_EQ(rank.title, "rank 0");
    EXPECT_EQ(rank.gpu_events, 9);
    EXPECT_EQ(rank.unlinked_events, 1);
    EXPECT_EQ(rank.gpu_begin_ns, us(0));
    EXPECT_EQ(rank.gpu_end_ns, us(700));
    // Busy = [0,100) ∪ [110,400) ∪ [450,460) ∪ [500,700) = 600 of a 700 µs span;
    // computation = [0,100) ∪ [110,200) ∪ [300,400) ∪ [500,600) = 390.
    EXPECT_EQ(rank.temporal.span_ns, ns_of_us(700));
    EXPECT_EQ(rank.temporal.idle_ns, ns_of_us(100));
    EXPECT_EQ(rank.temporal.compute_ns, ns_of_us(390));
    EXPECT_EQ(rank.temporal.non_compute_ns, ns_of_us(210));
    TimeNs combinations = 0;
    for (const analysis::KernelTypeRow& row : rank.kernel_types) combinations += row.total_ns;
    EXPECT_EQ(combinations, ns_of_us(600));  // the exclusive combinations tile the busy time
    // Communication [150,350) ∪ [600,700) = 300, under computation [150,200) ∪ [300,350).
    EXPECT_EQ(rank.overlap.communication_ns, ns_of_us(300));
    EXPECT_EQ(rank.overlap.overlapped_ns, ns_of_us(100));
    ASSERT_TRUE(rank.overlap.percent.has_value());
    EXPECT_NEAR(*rank.overlap.percent, 100.0 / 3.0, 1e-9);
    EXPECT_FALSE(rank.top_kernels.empty());

    // Idle per stream, as `ember stats --report idle_breakdown` keys it (rank, CUDA
    // stream id): stream 13 has one lane; the two stream 7 lanes share the id, so the
    // row (the library's, over both) names no lane.
    ASSERT_EQ(rank.streams.size(), 2u);
    const StreamIdleRow* nccl = nullptr;
    const StreamIdleRow* seven = nullptr;
    for (const StreamIdleRow& row : rank.streams) (row.cuda_stream == 13 ? nccl : seven) = &row;
    ASSERT_TRUE(nccl && seven);
    EXPECT_EQ(nccl->lane, lane_titled(*model_, "stream 13 nccl"));
    EXPECT_EQ(nccl->title, "stream 13 nccl");
    EXPECT_EQ(nccl->idle_ns[static_cast<int>(IdleCategory::other)], ns_of_us(250));
    EXPECT_EQ(nccl->gaps[static_cast<int>(IdleCategory::other)], 1);
    EXPECT_EQ(nccl->total_ns(), ns_of_us(250));
    EXPECT_EQ(seven->lane, -1);
    EXPECT_EQ(seven->title, "stream 7");

    ASSERT_EQ(rank.queues.size(), 2u);
    for (const QueueSummaryRow& queue : rank.queues) {
        if (queue.cuda_stream == 13) {
            EXPECT_EQ(queue.max, 1);
        }
    }
}

TEST_F(GpuAnalysisTest, StepsAreOnTheModelTimeBaseAndAddUp) {
    const RankBreakdown& rank = analysis().ranks.at(0);
    ASSERT_EQ(rank.steps.size(), 2u);
    EXPECT_EQ(rank.steps[0].step, 1);
    EXPECT_EQ(rank.steps[1].step, 2);
    EXPECT_EQ(rank.steps[0].start_ns, us(-50));
    EXPECT_EQ(rank.steps[0].end_ns, rank.steps[1].start_ns);  // windows follow each other
    for (const StepSplit& step : rank.steps) {
        const TimeNs total = std::accumulate(step.ns.begin(), step.ns.end(), TimeNs{0});
        EXPECT_EQ(total, step.duration_ns());
    }
    // Kernels run in both windows.
    EXPECT_GT(rank.steps[0].ns[0], 0);
    EXPECT_GT(rank.steps[1].ns[0], 0);
    EXPECT_STREQ(step_category_name(0), "Kernel");
    EXPECT_STREQ(step_category_name(7), "Other");
}

TEST_F(GpuAnalysisTest, FoldingKeepsCategoriesWhenZoomedInAndTheirShareWhenZoomedOut) {
    const StreamOverlay& overlay = *analysis().overlay(lane_titled(*model_, "stream 7 compute"));
    std::vector<GapItem> items;
    // 1000 px over 1 ms: 1 µs per pixel, every gap (10 µs and more) is its own item.
    LodParams zoomed_in{us(-100), us(900), 1000.0, 3.0};
    fold_gaps(overlay, zoomed_in, items);
    ASSERT_EQ(items.size(), 3u);
    for (std::size_t i = 0; i < items.size(); ++i) {
        EXPECT_EQ(items[i].count, 1u);
        EXPECT_EQ(items[i].start_ns, overlay.gaps[i].start_ns);
        EXPECT_EQ(items[i].end_ns, overlay.gaps[i].end_ns);
        EXPECT_EQ(items[i].idle_ns[static_cast<int>(overlay.categories[i])], overlay.gaps[i].duration_ns());
    }
    // Only the part of the view: [150, 420) µs shows the host_wait gap and the other one.
    items.clear();
    fold_gaps(overlay, {us(150), us(420), 1000.0, 3.0}, items);
    ASSERT_EQ(items.size(), 2u);
    EXPECT_EQ(items[0].first_index, 1u);
    EXPECT_EQ(items[1].first_index, 2u);
    // 1 ms per pixel: narrow gaps go into 3 ms bins aligned to multiples of 3 ms; all
    // three start in [0, 3 ms) and the bin carries each category's time.
    items.clear();
    fold_gaps(overlay, {us(-1000), us(10000), 1e6, 3.0}, items);
    ASSERT_EQ(items.size(), 1u);
    EXPECT_TRUE(items[0].binned);
    EXPECT_EQ(items[0].count, 3u);
    EXPECT_EQ(items[0].start_ns, 0);
    EXPECT_EQ(items[0].end_ns, 3'000'000);
    EXPECT_EQ(items[0].idle_ns[0], ns_of_us(100));
    EXPECT_EQ(items[0].idle_ns[1], ns_of_us(10));
    EXPECT_EQ(items[0].idle_ns[2], ns_of_us(50));
    // 20 µs per pixel (60 µs bins): the 10 µs kernel_wait gap is alone in its bin, the
    // 100 µs host_wait gap is wide enough to draw itself, the 50 µs one is alone too.
    items.clear();
    fold_gaps(overlay, {us(-100), us(900), 20'000.0, 3.0}, items);
    ASSERT_EQ(items.size(), 3u);
    for (const GapItem& item : items) EXPECT_EQ(item.count, 1u);
    EXPECT_TRUE(items[0].binned);
    EXPECT_EQ(items[0].start_ns, us(80));
    EXPECT_EQ(items[0].end_ns, us(140));
    EXPECT_FALSE(items[1].binned);
    EXPECT_EQ(items[1].start_ns, us(200));
    EXPECT_TRUE(items[2].binned);
    EXPECT_EQ(items[2].start_ns, us(380));
    // Bins stay where they are while the view pans.
    std::vector<GapItem> panned;
    fold_gaps(overlay, {us(-77), us(923), 20'000.0, 3.0}, panned);
    ASSERT_EQ(panned.size(), items.size());
    for (std::size_t i = 0; i < items.size(); ++i) EXPECT_EQ(panned[i].start_ns, items[i].start_ns);
}

// Random gaps: the items take the visible gaps in order, counts and idle time add up,
// bins hold only narrow gaps that start in them, and the items are bounded by the pixels.
TEST(GapFolding, ItemsTileTheVisibleGapsAndAddUp) {
    std::mt19937_64 random(7);
    StreamOverlay overlay;
    TimeNs time = 0;
    for (int i = 0; i < 200'000; ++i) {
        time += 1 + static_cast<TimeNs>(random() % (random() % 100 == 0 ? 500'000 : 3'000));  // the event before
        const TimeNs length = 1 + static_cast<TimeNs>(random() % (random() % 50 == 0 ? 400'000 : 2'000));
        overlay.add_gap(time, time + length, static_cast<IdleCategory>(random() % 3));
        time += length;
    }
    overlay.finish();
    for (double ns_per_pixel : {10.0, 1'000.0, 100'000.0, 1e7}) {
        SCOPED_TRACE(ns_per_pixel);
        const TimeNs begin = time / 3, end = begin + static_cast<TimeNs>(ns_per_pixel * 1500);
        std::vector<GapItem> items;
        fold_gaps(overlay, {begin, end, ns_per_pixel, 3.0}, items);
        std::size_t expected_first = overlay.gaps.size(), expected_last = 0;
        for (std::size_t i = 0; i < overlay.gaps.size(); ++i)
            if (overlay.gaps[i].start_ns < end && overlay.gaps[i].end_ns > begin) {
                expected_first = std::min(expected_first, i);
                expected_last = i + 1;
            }
        ASSERT_FALSE(items.empty());
        std::size_t next = expected_first;
        for (const GapItem& item : items) {
            ASSERT_EQ(item.first_index, next);
            ASSERT_GE(item.count, 1u);
            IdleSplit sum{};
            for (std::size_t i = item.first_index; i < item.first_index + item.count; ++i)
                sum[static_cast<int>(overlay.categories[i])] += overlay.gaps[i].duration_ns();
            EXPECT_EQ(item.idle_ns, sum);
            const TimeNs min_ns = static_cast<TimeNs>(3.0 * ns_per_pixel);
            if (item.binned) {
                // A bin of narrow gaps that all start in it, min_pixels wide, aligned.
                ASSERT_EQ(item.end_ns - item.start_ns, min_ns);
                ASSERT_EQ(item.start_ns % min_ns, 0);
                for (std::size_t i = item.first_index; i < item.first_index + item.count; ++i) {
                    ASSERT_LT(overlay.gaps[i].duration_ns(), min_ns);
                    ASSERT_GE(overlay.gaps[i].start_ns, item.start_ns);
                    ASSERT_LT(overlay.gaps[i].start_ns, item.end_ns);
                }
            } else {
                ASSERT_EQ(item.count, 1u);
                ASSERT_EQ(item.start_ns, overlay.gaps[item.first_index].start_ns);
                ASSERT_EQ(item.end_ns, overlay.gaps[item.first_index].end_ns);
                ASSERT_GE(item.end_ns - item.start_ns, min_ns);
            }
            next = item.first_index + item.count;
        }
        EXPECT_EQ(next, expected_last);
        EXPECT_LE(items.size(), 1003u);  // a bin and a wide gap per 3 px at most
    }
}

TEST_F(GpuAnalysisTest, StreamLanesGetAnIdleRowAndAQueueTrack) {
    const int compute = lane_titled(*model_, "stream 7 compute");
    const LayoutMetrics metrics;
    std::vector<LaneDisplay> order = default_lane_order(*model_);
    auto placement_of = [&](const std::vector<LanePlacement>& placements) {
        for (const LanePlacement& placement : placements)
            if (placement.lane == compute) return placement;
        ADD_FAILURE() << "compute lane not placed";
        return LanePlacement{};
    };
    const LanePlacement both = placement_of(layout_lanes(*model_, order, metrics));
    EXPECT_EQ(both.rows_shown, 1);
    EXPECT_EQ(both.idle_offset, metrics.row_height);
    EXPECT_EQ(both.queue_offset, 2 * metrics.row_height);
    EXPECT_EQ(both.queue_height, metrics.queue_height);
    EXPECT_EQ(both.height, 2 * metrics.row_height + metrics.queue_height);

    const LanePlacement queue_only = placement_of(layout_lanes(*model_, order, metrics, {false, true}));
    EXPECT_LT(queue_only.idle_offset, 0.0f);
    EXPECT_EQ(queue_only.queue_offset, metrics.row_height);
    const LanePlacement neither = placement_of(layout_lanes(*model_, order, metrics, {false, false}));
    EXPECT_EQ(neither.height, metrics.row_height);
    EXPECT_LT(neither.queue_offset, 0.0f);

    for (LaneDisplay& display : order)
        if (display.lane == compute) display.collapsed = true;
    const LanePlacement collapsed = placement_of(layout_lanes(*model_, order, metrics));
    EXPECT_EQ(collapsed.height, metrics.row_height);
    EXPECT_LT(collapsed.idle_offset, 0.0f);
}

TEST(GpuAnalysisFiles, SecondFileIsShiftedAndRanksAreNamedByFile) {
    // Two recordings of rank 0, the second 2 ms later on the wall clock.
    const std::string first = testing::temporary_trace_path("gpu_analysis_a");
    const std::string second = testing::temporary_trace_path("gpu_analysis_b");
    write_gpu_trace(first, 5'000'000);
    write_gpu_trace(second, 7'000'000);
    {
        TraceModel model({first, second});
        model.load_all();
        const GpuAnalysis* analysis = model.gpu_analysis();
        ASSERT_NE(analysis, nullptr);
        ASSERT_EQ(analysis->ranks.size(), 2u);
        EXPECT_EQ(analysis->ranks[0].title, "rank 0 · " + std::filesystem::path(first).filename().string());
        EXPECT_EQ(analysis->ranks[1].title, "rank 0 · " + std::filesystem::path(second).filename().string());
        const TimeNs shift = model.files()[1].shift_ns;
        EXPECT_EQ(shift, 2'000'000);
        EXPECT_EQ(analysis->ranks[1].steps.at(0).start_ns, us(-50) + shift);
        EXPECT_EQ(analysis->ranks[1].gpu_begin_ns, us(0) + shift);
        const StreamOverlay* overlay = analysis->overlay(lane_titled(model, "stream 7 compute", 1));
        ASSERT_NE(overlay, nullptr);
        expect_gaps(*overlay,
                    {{100, 110, IdleCategory::kernel_wait},
                     {200, 300, IdleCategory::host_wait},
                     {400, 450, IdleCategory::other}},
                    shift);
        expect_queue(*overlay, {{-30, 1}, {-10, 2}, {0, 1}, {110, 0}, {250, 1}, {270, 2}, {300, 1}, {450, 0}}, shift);
        // Analysed again (a live file grew): the same result from the files as they are.
        std::unique_ptr<GpuAnalysis> again =
            model.compute_gpu_analysis(model.analysis_lanes(), model.lane_count(), model.total_events());
        ASSERT_EQ(again->error, "");
        ASSERT_EQ(again->ranks.size(), 2u);
        EXPECT_EQ(again->ranks[1].temporal.idle_ns, analysis->ranks[1].temporal.idle_ns);
        model.set_gpu_analysis(std::move(again));
        EXPECT_EQ(model.gpu_analysis()->ranks[1].gpu_begin_ns, us(0) + shift);
    }
    std::filesystem::remove(first);
    std::filesystem::remove(second);
}

TEST(GpuAnalysisFiles, ViewerFixtureGapsFollowItsLaunches) {
    // The other viewer tests' fixture (4 steps of 6 kernels, launched 10 µs ahead of the
    // stream except at each phase's start, and one copy per step on its own stream).
    const std::string path = testing::temporary_trace_path("gpu_analysis_fixture");
    const testing::FixtureTotals totals = testing::write_fixture_trace(path);
    {
        TraceModel model({path});
        model.load_all();
        const GpuAnalysis* analysis = model.gpu_analysis();
        ASSERT_NE(analysis, nullptr);
        ASSERT_EQ(analysis->ranks.size(), 1u);
        EXPECT_EQ(analysis->ranks[0].gpu_events, totals.kernels + totals.copies);
        EXPECT_EQ(analysis->ranks[0].steps.size(), 4u);
        // Every kernel but the first of a stream has a gap before it; the fixture
        // launches each kernel well ahead except the first of each phase.
        const StreamOverlay* compute = analysis->overlay(lane_titled(model, "stream 7 compute"));
        ASSERT_NE(compute, nullptr);
        EXPECT_EQ(compute->gaps.size(), static_cast<std::size_t>(totals.kernels - 1));
        int host_waits = 0;
        for (IdleCategory category : compute->categories) host_waits += category == IdleCategory::host_wait;
        EXPECT_EQ(host_waits, 2 * 4 - 1);  // forward and backward of 4 steps, but the very first kernel
        EXPECT_GT(model.memory_bytes(), analysis->memory_bytes());
    }
    std::filesystem::remove(path);
}

// A rank's own file is one rank, the one its run records, however many processes it
// holds (a second process not named "rank R" is no rank of its own): the rank every
// report gives it (rank_map.h).
TEST(GpuAnalysisRanks, ARanksOwnFileIsItsRecordedRankWhateverItsProcesses) {
    const std::string path = testing::temporary_trace_path("gpu_analysis_rank3");
    {
        ember::testing::TraceBuilder b(path, ember::testing::TraceBuilder::run_info(kBase, 3, 4));
        const trace::ThreadId main = b.thread("main");
        const trace::ThreadId helper = b.thread("helper", 77);  // another process
        const trace::StreamId s7 = b.stream(7);
        b.kernel(s7, "gemm", us(10), us(20), b.call(main, "cudaLaunchKernel", us(1), us(2)));
        b.kernel(s7, "gemm", us(30), us(40), b.call(helper, "cudaLaunchKernel", us(3), us(4)));
        b.range(main, "ember", "step", us(0), us(50), 0, 0, 1);
        b.close();
    }
    {
        TraceModel model({path});
        model.load_all();
        const GpuAnalysis* analysis = model.gpu_analysis();
        ASSERT_NE(analysis, nullptr);
        ASSERT_EQ(analysis->error, "");
        const analysis::RankMap ranks = analysis::rank_map(*model.files()[0].reader);
        EXPECT_EQ(ranks.ranks, (std::set<std::int32_t>{3}));
        ASSERT_EQ(analysis->ranks.size(), 1u);
        EXPECT_EQ(analysis->ranks[0].rank, 3);
        EXPECT_EQ(analysis->ranks[0].title, "rank 3");
        EXPECT_EQ(analysis->ranks[0].gpu_events, 2);
        ASSERT_EQ(analysis->ranks[0].steps.size(), 1u);
        ASSERT_EQ(analysis->ranks[0].streams.size(), 1u);
        EXPECT_GE(analysis->ranks[0].streams[0].lane, 0);
    }
    std::filesystem::remove(path);
}

// The two A100 ranks (NCCL kernels, several streams) as one job file: every stream lane
// of both ranks gets gaps that sit between its own events and add up, per category, to
// the idle-time row of its stream; the queue series match the library's summary.
TEST(GpuAnalysisRealTraces, A100JobTraceGapsAddUpPerStream) {
    const std::filesystem::path root = EMBER_REAL_TRACES_DIR;
    if (!std::filesystem::exists(root / "kineto" / "a100_sampled_rank0.json.gz"))
        GTEST_SKIP() << root << " is absent (a fresh clone has no ../shared): no real traces";
    const std::string job = testing::temporary_trace_path("a100_job");
    job::import_job_file({(root / "kineto" / "a100_sampled_rank0.json.gz").string(),
                          (root / "kineto" / "a100_sampled_rank1.json.gz").string()},
                         job);
    {
        TraceModel model({job});
        model.load_all();
        const GpuAnalysis* analysis = model.gpu_analysis();
        ASSERT_NE(analysis, nullptr);
        ASSERT_EQ(analysis->error, "");
        ASSERT_EQ(analysis->ranks.size(), 2u);
        EXPECT_EQ(analysis->ranks[0].rank, 0);
        EXPECT_EQ(analysis->ranks[1].rank, 1);
        // The ranks every report gives the file (rank_map.h), and each stream lane's.
        const analysis::RankMap ranks = analysis::rank_map(*model.files()[0].reader);
        EXPECT_EQ(ranks.ranks, (std::set<std::int32_t>{0, 1}));
        int checked_streams = 0;
        for (const RankBreakdown& rank : analysis->ranks) {
            EXPECT_GT(rank.temporal.span_ns, 0);
            EXPECT_GT(rank.overlap.communication_ns, 0);
            EXPECT_FALSE(rank.steps.empty());
            for (const StreamIdleRow& stream : rank.streams) {
                ASSERT_GE(stream.lane, 0) << rank.title << " " << stream.title;
                EXPECT_EQ(ranks.of_stream(model.lane(stream.lane).track_id), rank.rank) << stream.title;
                EXPECT_NE(model.lane(stream.lane).group.find("rank " + std::to_string(rank.rank)), std::string::npos);
                const StreamOverlay* overlay = analysis->overlay(stream.lane);
                if (stream.total_ns() == 0) continue;  // one event: nothing between
                ASSERT_NE(overlay, nullptr);
                EXPECT_EQ(overlay->idle_between(0, overlay->gaps.size()), stream.idle_ns) << stream.title;
                // A gap runs from the end of one of the lane's events to the start of another.
                const Row& row = model.lane(stream.lane).rows[0];
                std::set<TimeNs> starts, ends;
                for (const TimelineEvent& event : row.events) {
                    starts.insert(event.start_ns);
                    ends.insert(event.end_ns);
                }
                for (const IdleGap& gap : overlay->gaps) {
                    ASSERT_TRUE(ends.count(gap.start_ns)) << stream.title;
                    ASSERT_TRUE(starts.count(gap.end_ns)) << stream.title;
                }
                ++checked_streams;
            }
            // The drawn series keeps the value after each instant; the library's maximum
            // also counts a launch and a start at the same instant: never less.
            for (const QueueSummaryRow& queue : rank.queues) {
                for (const StreamIdleRow& stream : rank.streams) {
                    if (stream.cuda_stream == queue.cuda_stream && analysis->overlay(stream.lane)) {
                        EXPECT_LE(analysis->overlay(stream.lane)->queue_max, static_cast<double>(queue.max));
                    }
                }
            }
        }
        EXPECT_GE(checked_streams, 4);
    }
    std::filesystem::remove(job);
}

}  // namespace
}  // namespace ember::viewer
