// live_refresh_test.cpp: a model loaded from a trace that is still being written grows
// by refresh (read_new_events + apply_new_events): new events appear exactly once,
// new threads and streams become lanes, and the result equals a full reload of the
// finished file.
#include "profiler/store/writer.h"
#include "tests/viewer/fixture_trace.h"
#include "viewer/model/flamegraph.h"
#include "viewer/model/lane_layout.h"
#include "viewer/model/trace_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace ember::viewer {
namespace {

using trace::TimeNs;

// Every event of the model as (lane title, row kind, depth, start, end, name, link),
// in lane/row/index order: comparing two models compares their contents exactly.
using EventKey = std::tuple<std::string, int, int, TimeNs, TimeNs, std::string, std::uint64_t>;

std::map<std::string, std::vector<EventKey>> events_by_lane(const TraceModel& model) {
    std::map<std::string, std::vector<EventKey>> lanes;
    for (int index = 0; index < model.lane_count(); ++index) {
        const Lane& lane = model.lane(index);
        auto& out = lanes[lane.group + " / " + lane.title];
        for (const Row& row : lane.rows)
            for (const TimelineEvent& event : row.events)
                out.emplace_back(lane.title, static_cast<int>(row.kind), row.depth, event.start_ns, event.end_ns,
                                 std::string(model.name(event.name_id)), event.link);
        for (const CounterPoint& point : lane.points)
            out.emplace_back(lane.title, -1, 0, point.time_ns, point.time_ns, std::to_string(point.value), 0);
    }
    return lanes;
}

std::int64_t events_in_lanes(const TraceModel& model) {
    std::int64_t count = 0;
    for (int index = 0; index < model.lane_count(); ++index) count += model.lane(index).event_count();
    return count;
}

class LiveRefreshTest : public ::testing::Test {
  protected:
    void SetUp() override {
        path_ = testing::temporary_trace_path("live");
        trace::RunInfo run;
        run.pid = 5151;
        writer_ = std::make_unique<store::TraceWriter>(path_, run, store::testing::quiet_options());
        writer_->register_process({5151, "live"});
        main_thread_ = writer_->register_thread({0, 5151, 5151, "main"});
        writer_->register_device({0, "Live GPU", "GPU-0", 9, 0, 132, 80ll << 30, 3.3e12});
        stream_ = writer_->register_stream({0, 0, 1, 7, 0, "compute"});
        counter_ = writer_->register_counter({0, "loss", "", trace::kNoDevice});
        step_name_ = writer_->intern("step");
        launch_name_ = writer_->intern("cudaLaunchKernel");
        gemm_name_ = writer_->intern("sgemm");
        domain_ = writer_->intern("ember");
    }
    void TearDown() override {
        writer_.reset();
        std::filesystem::remove(path_);
    }

    // One step of 100 us at `start` on the main thread: a range, a launch, its kernel,
    // a loss sample. Returns the kernel's duration.
    TimeNs record_step(TimeNs start, trace::StringId kernel_name) {
        writer_->record_range(
            {writer_->next_range_id(), start, start + 100'000, main_thread_, domain_, step_name_, 1, 0, 0, 0, {}});
        writer_->record_api_call({start + 1'000, start + 6'000, main_thread_, correlation_, launch_name_, 0});
        trace::KernelEvent kernel;
        kernel.start_ns = start + 10'000;
        kernel.end_ns = start + 60'000;
        kernel.stream_id = stream_;
        kernel.correlation_id = correlation_++;
        kernel.name_id = kernel_name;
        writer_->record_kernel(kernel);
        writer_->record_counter({counter_, start + 100'000, 1.0 / static_cast<double>(start / 100'000 + 1)});
        events_ += 4;
        kernel_ns_ += 50'000;
        return 50'000;
    }

    std::string path_;
    std::unique_ptr<store::TraceWriter> writer_;
    trace::ThreadId main_thread_ = 0;
    trace::StreamId stream_ = 0;
    trace::CounterId counter_ = 0;
    trace::StringId step_name_ = 0, launch_name_ = 0, gemm_name_ = 0, domain_ = 0;
    trace::CorrelationId correlation_ = 1;
    std::int64_t events_ = 0;
    TimeNs kernel_ns_ = 0;
};

TEST_F(LiveRefreshTest, NewEventsAppearExactlyOnce) {
    for (int step = 0; step < 10; ++step) record_step(step * 100'000, gemm_name_);
    writer_->flush();

    TraceModel model({path_});
    model.load_all();
    ASSERT_TRUE(model.progress().error.empty()) << model.progress().error;
    EXPECT_EQ(events_in_lanes(model), events_);
    const int lanes_before = model.lane_count();

    // Nothing committed since: a refresh adds nothing.
    RefreshResult nothing = model.refresh();
    EXPECT_EQ(nothing.events, 0);
    EXPECT_EQ(events_in_lanes(model), events_);

    // More steps, a kernel name the model has never seen, a new thread with ranges and
    // a stack sample, a new stream, and a kernel that ends up earlier than the last
    // loaded one (a late buffer).
    const trace::StringId new_kernel = writer_->intern("flash_attention");
    for (int step = 10; step < 15; ++step) record_step(step * 100'000, new_kernel);
    const trace::ThreadId loader = writer_->register_thread({0, 5151, 5152, "loader"});
    writer_->record_range({writer_->next_range_id(),
                           50'000,
                           80'000,
                           loader,
                           domain_,
                           writer_->intern("dataloader/wait"),
                           3,
                           0,
                           0,
                           0,
                           {}});
    const trace::StreamId copy_stream = writer_->register_stream({0, 0, 1, 8, 0, "copy"});
    trace::MemcpyEvent copy;
    copy.start_ns = 20'000;
    copy.end_ns = 30'000;
    copy.stream_id = copy_stream;
    copy.correlation_id = 9999;
    copy.direction = trace::MemcpyDirection::host_to_device;
    copy.bytes = 4096;
    copy.source_kind = trace::MemoryKind::pinned;
    copy.destination_kind = trace::MemoryKind::device;
    writer_->record_memcpy(copy);
    trace::KernelEvent late;
    late.start_ns = 75'000;
    late.end_ns = 80'000;
    late.stream_id = stream_;
    late.correlation_id = 8888;
    late.name_id = gemm_name_;
    writer_->record_kernel(late);
    const trace::FrameId frame = writer_->intern_frame("decode_png", "live", 0x10);
    const trace::FrameId frames[] = {frame};
    writer_->record_stack_sample({55'000, loader, writer_->intern_stack(frames)});
    events_ += 3;  // range, copy, late kernel (stack samples are not lane events)
    kernel_ns_ += 5'000;
    writer_->flush();

    const std::unique_ptr<TraceDelta> delta = model.read_new_events();
    EXPECT_EQ(delta->event_count(), 5 * 4 + 3 + 1);
    const RefreshResult result = model.apply_new_events(*delta);
    EXPECT_EQ(result.events, 5 * 4 + 3 + 1);
    EXPECT_EQ(result.new_lanes, 2);
    EXPECT_TRUE(result.events_moved);  // the late kernel sorted in before loaded ones
    EXPECT_EQ(model.lane_count(), lanes_before + 2);
    EXPECT_EQ(events_in_lanes(model), events_);
    EXPECT_EQ(model.files()[0].stack_samples.size(), 1u);

    // Each kernel exactly once (correlation ids are unique), rows sorted by start.
    std::multiset<std::uint64_t> correlations;
    for (int index = 0; index < model.lane_count(); ++index) {
        const Lane& lane = model.lane(index);
        EXPECT_TRUE(lane.ready.load());
        for (const Row& row : lane.rows) {
            for (std::size_t event = 1; event < row.events.size(); ++event)
                EXPECT_LE(row.events[event - 1].start_ns, row.events[event].start_ns);
            for (const TimelineEvent& event : row.events)
                if (event.kind == EventKind::kernel) correlations.insert(event.link);
        }
    }
    EXPECT_EQ(correlations.size(), 16u);
    for (std::uint64_t id : correlations) EXPECT_EQ(correlations.count(id), 1u) << "correlation " << id;
    // Totals add up: the GPU flamegraph holds every kernel's time, the new name resolves.
    const FlameGraph kernels = build_flamegraph(model, FlameSource::gpu_kernels, FlameOrder::left_heavy);
    EXPECT_DOUBLE_EQ(kernels.total(), static_cast<double>(kernel_ns_));
    EXPECT_GE(model.find_name("flash_attention"), 0);
    EXPECT_GE(model.find_name("dataloader/wait"), 0);
    const FlameGraph samples = build_flamegraph(model, FlameSource::cpu_samples, FlameOrder::left_heavy);
    EXPECT_DOUBLE_EQ(samples.total(), 1.0);
    EXPECT_EQ(samples.nodes[samples.nodes[0].children.at(0)].name, "decode_png");

    // A second refresh finds nothing new.
    EXPECT_EQ(model.refresh().events, 0);
    EXPECT_EQ(events_in_lanes(model), events_);

    // The refreshed model holds what a full load of the same file holds.
    TraceModel reloaded({path_});
    reloaded.load_all();
    EXPECT_EQ(reloaded.lane_count(), model.lane_count());
    EXPECT_EQ(reloaded.total_events(), model.total_events());
    EXPECT_EQ(reloaded.begin_ns(), model.begin_ns());
    EXPECT_EQ(reloaded.end_ns(), model.end_ns());
    EXPECT_EQ(events_by_lane(reloaded), events_by_lane(model));
}

// Every box of every thread's stack charts: (lane, with idle, depth, start, end, frame,
// samples, idle).
using BoxKey = std::tuple<std::string, bool, int, TimeNs, TimeNs, std::string, unsigned, bool>;
std::vector<BoxKey> stack_boxes(const TraceModel& model) {
    std::vector<BoxKey> boxes;
    for (int index = 0; index < model.lane_count(); ++index) {
        const SampleStackLane* stacks = model.sample_stacks(index);
        if (stacks == nullptr) continue;
        const Lane& lane = model.lane(index);
        const std::vector<std::string>& names = model.files()[static_cast<std::size_t>(lane.file_index)].frame_names;
        for (bool with_idle : {false, true})
            for (int depth = 0; depth < stacks->depth(with_idle); ++depth)
                for (const StackBox& box : stacks->rows(with_idle)[static_cast<std::size_t>(depth)].boxes)
                    boxes.emplace_back(lane.title, with_idle, depth, box.start_ns, box.end_ns, names.at(box.frame),
                                       static_cast<unsigned>(box.samples), box.idle != 0);
    }
    return boxes;
}

TEST_F(LiveRefreshTest, StackChartsGrowWithTheirSamples) {
    record_step(0, gemm_name_);
    const trace::FrameId train = writer_->intern_frame("train", "train.py", 0, 3);
    const trace::FrameId forward = writer_->intern_frame("forward", "model.py", 0, 7);
    const trace::FrameId wait = writer_->intern_frame("get", "queue.py", 0, 171);
    const trace::FrameId forward_frames[] = {train, forward};
    const trace::FrameId wait_frames[] = {train, wait};
    const trace::StackId forward_stack = writer_->intern_stack(forward_frames);
    const trace::StackId wait_stack = writer_->intern_stack(wait_frames);
    for (int k = 0; k < 5; ++k) writer_->record_stack_sample({k * 10'000LL, main_thread_, forward_stack});
    writer_->flush();
    TraceModel model({path_});
    model.load_all();
    model.include_idle_stacks();
    ASSERT_NE(model.sample_stacks(0), nullptr);
    EXPECT_EQ(model.sample_stacks(0)->active[0].boxes.at(0).samples, 5u);

    // More samples: the same function goes on (its box grows), then idle waits; and a
    // new thread with samples only, which gets a lane.
    for (int k = 5; k < 12; ++k)
        writer_->record_stack_sample({k * 10'000LL, main_thread_, k < 8 ? forward_stack : wait_stack, k >= 8});
    const trace::ThreadId worker = writer_->register_thread({0, 5151, 5160, "worker"});
    writer_->record_stack_sample({200'000, worker, forward_stack});
    writer_->flush();
    const int lanes_before = model.lane_count();
    const RefreshResult result = model.refresh();
    EXPECT_EQ(result.events, 8);
    EXPECT_EQ(result.new_lanes, 1);
    ASSERT_EQ(model.lane_count(), lanes_before + 1);
    EXPECT_NE(model.lane(lanes_before).title.find("worker"), std::string::npos);
    ASSERT_NE(model.sample_stacks(lanes_before), nullptr);
    EXPECT_EQ(model.end_ns(), 200'000);
    const SampleStackLane* stacks = model.sample_stacks(0);
    ASSERT_NE(stacks, nullptr);
    EXPECT_EQ(stacks->active[0].boxes.size(), 1u);
    EXPECT_EQ(stacks->active[0].boxes[0].samples, 8u);
    EXPECT_EQ(stacks->idle_samples, 4);
    // As a full load of the same file builds them.
    TraceModel reloaded({path_});
    reloaded.load_all();
    reloaded.include_idle_stacks();
    EXPECT_EQ(stack_boxes(reloaded), stack_boxes(model));
}

TEST_F(LiveRefreshTest, RefreshesAddUpOverManyRounds) {
    record_step(0, gemm_name_);
    writer_->flush();
    TraceModel model({path_});
    model.load_all();
    for (int round = 1; round <= 5; ++round) {
        for (int step = 0; step < round; ++step) record_step((round * 10 + step) * 100'000, gemm_name_);
        writer_->flush();
        const RefreshResult result = model.refresh();
        EXPECT_EQ(result.events, round * 4);
        EXPECT_EQ(events_in_lanes(model), events_);
        EXPECT_EQ(model.total_events(), events_);
    }
    const FlameGraph kernels = build_flamegraph(model, FlameSource::gpu_kernels, FlameOrder::time_order);
    EXPECT_DOUBLE_EQ(kernels.total(), static_cast<double>(kernel_ns_));
}

// A thread that starts recording after the file was opened but before loading: its
// first rows are below the loader's marks yet have no lane. When the thread records
// again, the refresh creates its lane with all of its rows.
TEST_F(LiveRefreshTest, LateTrackGetsItsEarlierRowsToo) {
    record_step(0, gemm_name_);
    writer_->flush();
    TraceModel model({path_});  // lanes are made here
    const trace::ThreadId late_thread = writer_->register_thread({0, 5151, 5160, "late"});
    const trace::StringId wait = writer_->intern("wait");
    writer_->record_range({writer_->next_range_id(), 10'000, 20'000, late_thread, domain_, wait, 0, 0, 0, 0, {}});
    writer_->flush();
    model.load_all();  // the loader's snapshot has the range, but no lane takes it
    EXPECT_EQ(events_in_lanes(model), events_);
    writer_->record_range({writer_->next_range_id(), 30'000, 40'000, late_thread, domain_, wait, 0, 0, 0, 0, {}});
    writer_->flush();
    const RefreshResult result = model.refresh();
    EXPECT_EQ(result.new_lanes, 1);
    EXPECT_EQ(result.events, 2);
    const Lane& late = model.lane(model.lane_count() - 1);
    EXPECT_EQ(late.title, "thread 5160 late");
    EXPECT_EQ(late.group, "process 5151 live");
    ASSERT_EQ(late.rows.size(), 1u);
    ASSERT_EQ(late.rows[0].events.size(), 2u);
    EXPECT_EQ(late.rows[0].events[0].start_ns, 10'000);
    EXPECT_EQ(late.rows[0].events[1].start_ns, 30'000);
    EXPECT_EQ(model.name(late.rows[0].events[0].name_id), "wait");

    // The UI's lane list takes the new lane right after the other lane of its process.
    std::vector<LaneDisplay> order;
    for (int index = 0; index + 1 < model.lane_count(); ++index) order.push_back({index, false});
    extend_lane_order(order, model);
    ASSERT_EQ(static_cast<int>(order.size()), model.lane_count());
    int main_position = -1, late_position = -1;
    for (int index = 0; index < static_cast<int>(order.size()); ++index) {
        if (model.lane(order[static_cast<std::size_t>(index)].lane).title == "thread 5151 main") main_position = index;
        if (order[static_cast<std::size_t>(index)].lane == model.lane_count() - 1) late_position = index;
    }
    EXPECT_EQ(late_position, main_position + 1);
    extend_lane_order(order, model);  // nothing left to add
    EXPECT_EQ(static_cast<int>(order.size()), model.lane_count());
}

}  // namespace
}  // namespace ember::viewer
