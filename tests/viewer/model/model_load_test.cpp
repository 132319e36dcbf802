// model_load_test.cpp: TraceModel loads every event of a fixture into the expected
// lanes and rows, lays lanes out, lines up several files, and refuses foreign files.
#include "profiler/store/writer.h"
#include "tests/support/trace_builder.h"
#include "tests/viewer/fixture_trace.h"
#include "tests/viewer/model/loaded_fixture.h"
#include "viewer/model/event_details.h"
#include "viewer/model/lane_layout.h"
#include "viewer/model/trace_model.h"
#include "viewer/model/view_state.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>

namespace ember::viewer {
namespace {

int find_lane(const TraceModel& model, LaneKind kind, const std::string& title_part) {
    for (int index = 0; index < model.lane_count(); ++index)
        if (model.lane(index).kind == kind && model.lane(index).title.find(title_part) != std::string::npos)
            return index;
    return -1;
}

// The fixture, loaded (model_); tests of loading itself open their own model on path_.
class ModelLoadTest : public testing::LoadedFixtureTest {
  protected:
    ModelLoadTest() : LoadedFixtureTest("load") {}
    // The loaded lane of `kind` whose title holds `title_part`; nullptr when none.
    const Lane* lane_titled(LaneKind kind, const std::string& title_part) const {
        const int index = find_lane(*model_, kind, title_part);
        return index >= 0 ? &model_->lane(index) : nullptr;
    }
};

TEST_F(ModelLoadTest, EveryEventLandsInALane) {
    TraceModel model({path_});
    model.load_all();
    ASSERT_TRUE(model.loaded());
    EXPECT_EQ(model.progress().error, "");
    EXPECT_EQ(model.total_events(), totals_.events);
    std::int64_t loaded = 0;
    for (int index = 0; index < model.lane_count(); ++index) {
        EXPECT_TRUE(model.lane(index).ready.load());
        loaded += model.lane(index).event_count();
    }
    EXPECT_EQ(loaded, totals_.events);
    EXPECT_EQ(model.progress().events_loaded, totals_.events);
    // 2 threads, 2 streams, 2 counters.
    EXPECT_EQ(model.lane_count(), 6);
    EXPECT_EQ(model.files()[0].stack_samples.size(), static_cast<std::size_t>(totals_.stack_samples));
}

TEST_F(ModelLoadTest, ThreadRowsAreDepthsThenApiCalls) {
    const Lane* main_lane = lane_titled(LaneKind::thread, "main");
    ASSERT_NE(main_lane, nullptr);
    const Lane& lane = *main_lane;
    EXPECT_EQ(lane.group, "process 4242 trainer");
    ASSERT_EQ(lane.rows.size(), 3u);
    EXPECT_EQ(lane.rows[0].kind, RowKind::ranges);
    EXPECT_EQ(lane.rows[0].depth, 0);
    EXPECT_EQ(lane.rows[0].events.size(), 4u);  // steps
    EXPECT_EQ(lane.rows[1].depth, 1);
    EXPECT_EQ(lane.rows[1].events.size(), 8u);  // forward + backward
    EXPECT_EQ(lane.rows[2].kind, RowKind::api_calls);
    for (const Row& row : lane.rows) {
        EXPECT_TRUE(row.non_overlapping);
        for (std::size_t i = 1; i < row.events.size(); ++i)
            EXPECT_LE(row.events[i - 1].start_ns, row.events[i].start_ns);
    }
    EXPECT_EQ(model_->name(lane.rows[0].events[0].name_id), "step");
}

TEST_F(ModelLoadTest, StreamLaneMergesGpuWorkByStart) {
    const Lane* copy_lane = lane_titled(LaneKind::stream, "copy");
    ASSERT_NE(copy_lane, nullptr);
    EXPECT_EQ(copy_lane->group, "GPU 0 Fixture GPU");
    ASSERT_EQ(copy_lane->rows.size(), 1u);
    const TimelineEvent& copy = copy_lane->rows[0].events[0];
    EXPECT_EQ(copy.kind, EventKind::memcpy);
    EXPECT_EQ(copy.value, 1u << 20);
    EXPECT_EQ(model_->name(copy.name_id), "Memcpy HtoD (pinned -> device)");
    EXPECT_EQ(model_->operation_name(copy.name_id), "[CUDA memcpy HtoD]");
}

TEST_F(ModelLoadTest, DetailsAndFlowsComeFromTheFile) {
    TraceModel model({path_});
    model.load_all();
    const int compute = find_lane(model, LaneKind::stream, "compute");
    ASSERT_GE(compute, 0);
    const EventRef kernel{compute, 0, 0};
    auto lines = describe_event(model, kernel);
    auto value_of = [&lines](const std::string& key) {
        for (const DetailLine& line : lines)
            if (line.key == key) return line.value;
        return std::string("<missing>");
    };
    EXPECT_EQ(value_of("grid"), "128 x 1 x 1");
    EXPECT_EQ(value_of("block"), "256 x 1 x 1");
    EXPECT_EQ(value_of("registers per thread"), "64");
    EXPECT_EQ(value_of("static shared memory"), "4 KiB");
    // Kernel -> its cudaLaunchKernel, and back.
    auto api = find_flow_partner(model, kernel);
    ASSERT_TRUE(api.has_value());
    const TimelineEvent* call = model.event(*api);
    ASSERT_NE(call, nullptr);
    EXPECT_EQ(call->kind, EventKind::api_call);
    EXPECT_EQ(call->link, model.event(kernel)->link);
    EXPECT_LT(call->start_ns, model.event(kernel)->start_ns);
    auto back = find_flow_partner(model, *api);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, kernel);

    const int copy_lane = find_lane(model, LaneKind::stream, "copy");
    lines = describe_event(model, EventRef{copy_lane, 0, 0});
    EXPECT_EQ(value_of("source memory"), "pinned");
    EXPECT_EQ(value_of("bytes"), "1 MiB (1048576)");
    EXPECT_EQ(value_of("bandwidth"), "48.8 GiB/s");  // 1 MiB in 20 us
}

TEST_F(ModelLoadTest, LayoutGroupsCollapsesAndReorders) {
    TraceModel model({path_});
    model.load_all();
    LayoutMetrics metrics;
    auto order = default_lane_order(model);
    // The event rows only (the sampled stacks below them: sample_stacks_test.cpp).
    SampleTracks no_stacks;
    no_stacks.stacks = false;
    auto placements = layout_lanes(model, order, metrics, {}, no_stacks);
    // 3 groups (process, GPU, counters) + 6 lanes.
    ASSERT_EQ(placements.size(), 9u);
    EXPECT_EQ(placements[0].lane, -1);
    EXPECT_EQ(placements[0].group, "process 4242 trainer");
    EXPECT_EQ(placements[1].rows_shown, 3);
    EXPECT_FLOAT_EQ(placements[1].height, 3 * metrics.row_height);
    for (std::size_t i = 1; i < placements.size(); ++i)
        EXPECT_GE(placements[i].y, placements[i - 1].y + placements[i - 1].height);
    const float full = layout_height(placements);
    order[0].collapsed = true;
    placements = layout_lanes(model, order, metrics, {}, no_stacks);
    EXPECT_EQ(placements[1].rows_shown, 1);
    EXPECT_FLOAT_EQ(layout_height(placements), full - 2 * metrics.row_height);
    // Moving a GPU lane to the top puts its group header first.
    const int first_stream = order[2].lane;
    move_lane(order, 2, 0);
    placements = layout_lanes(model, order, metrics);
    EXPECT_EQ(placements[1].lane, first_stream);
    EXPECT_EQ(placements[0].group, "GPU 0 Fixture GPU");
}

TEST_F(ModelLoadTest, BackgroundLoadingPublishesLanes) {
    TraceModel model({path_});
    EXPECT_FALSE(model.loaded());
    model.start_loading();
    model.load_all();  // joins
    EXPECT_TRUE(model.loaded());
    EXPECT_EQ(model.progress().lanes_ready, model.lane_count());
}

// Two copies of the fixture, as two ranks' files.
class TwoFiles : public ::testing::Test {
  protected:
    void SetUp() override {
        testing::write_fixture_trace(first_);
        testing::write_fixture_trace(second_);
    }
    void TearDown() override {
        std::filesystem::remove(first_);
        std::filesystem::remove(second_);
    }
    const std::string first_ = testing::temporary_trace_path("rank0");
    const std::string second_ = testing::temporary_trace_path("rank1");
};

TEST_F(TwoFiles, ShareOneTimeBase) {
    TraceModel model({first_, second_});
    model.load_all();
    EXPECT_EQ(model.lane_count(), 12);
    EXPECT_NE(model.lane(0).group.find("rank 0"), std::string::npos);
    // Same clock offsets: the two ranks' first steps coincide.
    EXPECT_EQ(model.files()[0].shift_ns, 0);
    EXPECT_EQ(model.files()[1].shift_ns, 0);
}

// An imported input is read from its ember cache, but the details name the file the
// user opened (the viewer sets it), not the cache.
TEST_F(TwoFiles, DetailsNameEachFileAsTheUserOpenedIt) {
    {
        TraceModel model({first_, second_});
        EXPECT_EQ(model.files()[1].shown_as, second_);  // a plain ember trace: its own path
        model.set_shown_as(1, "/runs/b.pt.trace.json.gz");
        model.load_all();
        int lane = -1;
        for (int index = 0; index < model.lane_count() && lane < 0; ++index)
            if (model.lane(index).file_index == 1 && model.lane(index).kind == LaneKind::stream &&
                model.lane(index).title.find("compute") != std::string::npos)
                lane = index;
        ASSERT_GE(lane, 0);
        std::string file_line = "<missing>";
        for (const DetailLine& line : describe_event(model, EventRef{lane, 0, 0}))
            if (line.key == "file") file_line = line.value;
        EXPECT_EQ(file_line, "/runs/b.pt.trace.json.gz");
        EXPECT_EQ(model.files()[1].path, second_);  // still read from where it is
    }
}

// A rank's own file of a distributed run: its groups say which rank. A job trace from
// `ember merge` (one process per rank, named "rank R"): no file-level prefix on top.
TEST(ModelFilesTest, RankPrefixForARankFileNotForAJobTrace) {
    auto write = [](const std::string& path, int processes) {
        trace::RunInfo run;
        run.pid = 100;
        run.rank = 1;
        run.world_size = 2;
        store::TraceWriter writer(path, run);
        for (int p = 0; p < processes; ++p) {
            const std::int64_t pid = 100 + p;
            writer.register_process({pid, processes > 1 ? "rank " + std::to_string(p) : "trainer"});
            trace::RangeEvent range;
            range.range_id = writer.next_range_id();
            range.start_ns = 1000;
            range.end_ns = 2000;
            range.thread_id = writer.register_thread({0, pid, pid, "main"});
            range.name_id = writer.intern("step");
            writer.record_range(range);
        }
        writer.close();
    };
    const std::string rank_file = testing::temporary_trace_path("rank1");
    const std::string job_file = testing::temporary_trace_path("job");
    write(rank_file, 1);
    write(job_file, 2);
    {
        TraceModel rank_model({rank_file});
        rank_model.load_all();
        ASSERT_EQ(rank_model.lane_count(), 1);
        EXPECT_EQ(rank_model.lane(0).group.rfind("rank 1 · ", 0), 0u) << rank_model.lane(0).group;
        TraceModel job_model({job_file});
        job_model.load_all();
        ASSERT_EQ(job_model.lane_count(), 2);
        for (int lane = 0; lane < 2; ++lane) {
            const std::string& group = job_model.lane(lane).group;
            EXPECT_EQ(group.find("·"), std::string::npos) << group;
            EXPECT_NE(group.find("rank " + std::to_string(lane)), std::string::npos) << group;
        }
    }
    std::filesystem::remove(rank_file);
    std::filesystem::remove(job_file);
}

// A GPU's memory events become two lanes of that GPU, allocated and reserved bytes, one
// point per instant: the replay of `ember stats --report gpu_memory`.
TEST(ModelMemoryTest, MemoryEventsBecomeLanesOfTheirGpu) {
    const std::string path = testing::temporary_trace_path("memory");
    {
        ember::testing::TraceBuilder b(path, trace::RunInfo{});
        b.device({1, "Memory GPU", "", 9, 0, 132, 80ll << 30, 3.35e12});
        const ember::testing::MemoryContext gpu1{.device = 1};
        b.memory(10, trace::MemoryAction::segment_live_at_start, 0x1000, 400, gpu1);
        b.memory(10, trace::MemoryAction::live_at_start, 0x100, 100, gpu1);
        b.memory(20, trace::MemoryAction::alloc, 0x200, 50, gpu1);
        b.memory(30, trace::MemoryAction::free_completed, 0x100, 100, gpu1);
        b.close();
    }
    {
        TraceModel model({path});
        model.load_all();
        const int allocated = find_lane(model, LaneKind::memory, "memory allocated");
        const int reserved = find_lane(model, LaneKind::memory, "memory reserved");
        ASSERT_GE(allocated, 0);
        ASSERT_GE(reserved, 0);
        const Lane& lane = model.lane(allocated);
        EXPECT_EQ(lane.group, "GPU 1 Memory GPU");
        EXPECT_EQ(lane.unit, "bytes");
        EXPECT_TRUE(lane.plots_values());
        ASSERT_EQ(lane.points.size(), 3u);  // 10, 20, 30
        EXPECT_EQ(lane.points[0].value, 100);
        EXPECT_EQ(lane.points[1].value, 150);
        EXPECT_EQ(lane.points[2].value, 50);
        EXPECT_EQ(lane.min_value, 50);
        EXPECT_EQ(lane.max_value, 150);
        ASSERT_EQ(model.lane(reserved).points.size(), 3u);
        EXPECT_EQ(model.lane(reserved).points[2].value, 400);
        EXPECT_EQ(lane.points[1].time_ns - lane.points[0].time_ns, 10);

        // Clicked at 20: both blocks live, the one from before the trace the larger.
        std::map<std::string, std::string> details;
        for (const DetailLine& line : describe_memory_at(model, allocated, lane.points[1].time_ns))
            details[line.key] = line.value;
        EXPECT_EQ(details["allocated"], format_bytes(150) + " in 2 live blocks");
        EXPECT_EQ(details["reserved"], format_bytes(400));
        EXPECT_EQ(details["allocated at (allocated before the trace began)"], format_bytes(100) + " in 1 block");
        EXPECT_EQ(details["allocated at (no stack recorded)"], format_bytes(50) + " in 1 block");
        // At 30 the block from before the trace is freed.
        details.clear();
        for (const DetailLine& line : describe_memory_at(model, allocated, lane.points[2].time_ns))
            details[line.key] = line.value;
        EXPECT_EQ(details["allocated"], format_bytes(50) + " in 1 live blocks");
        EXPECT_EQ(details.count("allocated at (allocated before the trace began)"), 0u);
        EXPECT_TRUE(describe_memory_at(model, find_lane(model, LaneKind::counter, ""), 0).empty());
    }
    std::filesystem::remove(path);
}

// The host's allocator (device -1: the CPU backend's caching allocator) is a lane of the
// host, not of a "GPU -1".
TEST(ModelMemoryTest, HostMemoryIsALaneOfTheHost) {
    const std::string path = testing::temporary_trace_path("host_memory");
    {
        ember::testing::TraceBuilder b(path, trace::RunInfo{});
        b.memory(10, trace::MemoryAction::alloc, 0x100, 64, {.device = trace::kNoDevice});
        b.memory(20, trace::MemoryAction::free_completed, 0x100, 64, {.device = trace::kNoDevice});
        b.close();
    }
    {
        TraceModel model({path});
        model.load_all();
        const int allocated = find_lane(model, LaneKind::memory, "memory allocated");
        ASSERT_GE(allocated, 0);
        EXPECT_EQ(model.lane(allocated).group, "host");
        ASSERT_EQ(model.lane(allocated).points.size(), 2u);
        EXPECT_EQ(model.lane(allocated).points[0].value, 64);
    }
    std::filesystem::remove(path);
}

// A block listed at a clicked time leads to its allocating op on the timeline (the range
// open on its thread when it was allocated, past aten::empty) and to its stack.
TEST(ModelMemoryTest, LiveBlocksLeadToTheirOpAndStack) {
    const std::string path = testing::temporary_trace_path("memory_ops");
    trace::RangeId layer2 = 0;
    {
        trace::RunInfo run;
        run.pid = 7;
        ember::testing::TraceBuilder b(path, run);
        b.device({0, "Memory GPU", "", 9, 0, 132, 80ll << 30, 3.35e12});
        const trace::ThreadId main = b.thread("main", 7, 70);
        b.range(main, "", "step", 0, 1000);
        b.range(main, "", "layer1", 100, 200, 0, 1);
        layer2 = b.range(main, "", "layer2", 200, 400, 0, 1);
        b.range(main, "", "aten::empty", 250, 260, 0, 2);
        store::TraceWriter& w = b.writer();
        const trace::FrameId frames[] = {w.intern_frame("<module>", "/home/user/train.py", 0, 3),
                                         w.intern_frame("forward", "/home/user/model.py", 0, 21)};
        const trace::StackId stack = w.intern_stack(frames);
        b.memory(150, trace::MemoryAction::alloc, 0x100, 10, {.thread = main});  // in layer1
        // In aten::empty in layer2: layer2.
        b.memory(255, trace::MemoryAction::alloc, 0x200, 300, {.thread = main, .stack = stack});
        b.memory(500, trace::MemoryAction::alloc, 0x300, 20, {.thread = main});  // in step alone
        b.close();
    }
    {
        TraceModel model({path});
        model.load_all();
        const int allocated = find_lane(model, LaneKind::memory, "memory allocated");
        ASSERT_GE(allocated, 0);
        // Model time of file time 600.
        const trace::TimeNs at = 600 + model.files()[0].shift_ns;
        const std::vector<LiveBlockLink> live = live_blocks_at(model, allocated, at, 2);
        ASSERT_EQ(live.size(), 2u);  // the two largest of three
        EXPECT_EQ(live[0].address, 0x200u);
        EXPECT_EQ(live[0].bytes, 300);
        EXPECT_EQ(live[0].op, "layer2");
        EXPECT_EQ(live[0].line, "forward (/home/user/model.py:21)");
        EXPECT_EQ(live[0].alloc_ns, 255 + model.files()[0].shift_ns);
        EXPECT_EQ(live[0].stack,
                  (std::vector<std::string>{"<module> (/home/user/train.py:3)", "forward (/home/user/model.py:21)"}));
        ASSERT_TRUE(live[0].op_event);
        const TimelineEvent* op = model.event(*live[0].op_event);
        ASSERT_NE(op, nullptr);
        EXPECT_EQ(op->kind, EventKind::range);
        EXPECT_EQ(op->link, layer2);
        EXPECT_EQ(model.name(op->name_id), "layer2");
        EXPECT_EQ(op->start_ns, 200 + model.files()[0].shift_ns);
        EXPECT_EQ(model.lane(live[0].op_event->lane).kind, LaneKind::thread);
        EXPECT_EQ(live[1].op, "step");
        EXPECT_TRUE(live[1].stack.empty());
        // Not a memory lane: nothing.
        EXPECT_TRUE(live_blocks_at(model, live[0].op_event->lane, at).empty());
        // The clicked time's details list the ops too.
        std::map<std::string, std::string> details;
        for (const DetailLine& line : describe_memory_at(model, allocated, at)) details[line.key] = line.value;
        EXPECT_EQ(details["allocated in layer2"], format_bytes(300) + " in 1 block");
        EXPECT_EQ(details["allocated in layer1"], format_bytes(10) + " in 1 block");
    }
    std::filesystem::remove(path);
}

TEST(ModelFilesTest, ForeignFileIsRefusedWithItsName) {
    const std::string path = testing::temporary_trace_path("foreign");
    {
        std::ofstream out(path);
        out << "this is not a trace\n";
    }
    try {
        TraceModel model({path});
        FAIL() << "a text file opened as a trace";
    } catch (const store::TraceError& error) {
        EXPECT_NE(std::string(error.what()).find(path), std::string::npos);
    }
    std::filesystem::remove(path);
    EXPECT_THROW(TraceModel({"/nonexistent/trace.db"}), store::TraceError);
}

}  // namespace
}  // namespace ember::viewer
