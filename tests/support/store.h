// store.h: helpers shared by the tests that write and read traces — a scratch
// directory per test and a small trace holding a few rows of every table, with
// the exact events written so tests can compare what the reader returns.
#pragma once

#include "profiler/store/reader.h"
#include "profiler/store/writer.h"
#include "tests/support/temp_path.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <string>
#include <vector>

namespace ember::store::testing {

// Runs `sql` on the file at `path` (a test's own change to a trace, e.g. damage or an
// older schema); fails the test on an SQLite error.
inline void run_sql(const std::string& path, const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    char* error = nullptr;
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
        << (error ? error : "") << " in " << sql;
    sqlite3_free(error);
    sqlite3_close(db);
}

// A reader visitor that appends every event to `out`.
template <typename Event>
Visitor<Event> collect_into(std::vector<Event>& out) {
    return [&out](const Event& e) {
        out.push_back(e);
        return true;
    };
}

// A fresh directory under the system temp dir, removed at destruction.
class ScratchDir {
  public:
    ScratchDir() {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        path_ = test_support::unique_temp_path(std::string("ember_store_") + (info ? info->test_suite_name() : "x") +
                                               "_" + (info ? info->name() : "y"));
        std::filesystem::remove_all(path_);
        std::filesystem::create_directories(path_);
    }
    ~ScratchDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    std::string file(const std::string& name) const { return (path_ / name).string(); }

  private:
    std::filesystem::path path_;
};

// Everything written into a sample trace, as the writer was given it (ids filled in).
struct SampleTrace {
    trace::RunInfo run;
    trace::ThreadInfo main_thread;
    trace::ThreadInfo worker_thread;
    trace::DeviceInfo device;
    trace::StreamInfo compute_stream;
    trace::StreamInfo copy_stream;
    trace::CounterInfo utilization;
    trace::StackId stack = 0;
    std::vector<trace::KernelEvent> kernels;
    std::vector<trace::MemcpyEvent> memcpys;
    std::vector<trace::MemsetEvent> memsets;
    std::vector<trace::SyncEvent> syncs;
    std::vector<trace::ApiEvent> api_calls;
    std::vector<trace::RangeEvent> ranges;
    std::vector<trace::MarkEvent> marks;
    std::vector<trace::CounterSample> counter_samples;
    std::vector<trace::StackSample> stack_samples;
    std::vector<trace::OverheadEvent> overheads;
    std::vector<trace::DroppedRecords> dropped;
};

inline WriterOptions quiet_options() {
    WriterOptions options;
    options.install_signal_handlers = false;
    options.close_at_exit = false;
    options.overflow = OverflowPolicy::block;
    return options;
}

// Writes a trace with `repeat` copies of a small step (a few rows of every table).
inline SampleTrace write_sample_trace(const std::string& path, int repeat = 3,
                                      WriterOptions options = quiet_options()) {
    using namespace ember::trace;
    SampleTrace sample;
    sample.run.command_line = "train --model cnn";
    sample.run.host = "testhost";
    sample.run.pid = 4242;
    sample.run.rank = 1;
    sample.run.world_size = 2;
    sample.run.clock_name = "CLOCK_MONOTONIC";
    sample.run.clock_offset_to_wall_ns = 1'700'000'000'000'000'000;
    sample.run.start_ns = 1000;
    TraceWriter writer(path, sample.run, options);
    writer.register_process({4242, "train"});
    sample.main_thread = {0, 4242, 4242, "main"};
    sample.main_thread.thread_id = writer.register_thread(sample.main_thread);
    sample.worker_thread = {0, 4242, 4250, "dataloader worker 0"};
    sample.worker_thread.thread_id = writer.register_thread(sample.worker_thread);
    sample.device = {0, "NVIDIA H100 80GB HBM3", "GPU-1234", 9, 0, 132, 80ll << 30, 3.35e12};
    writer.register_device(sample.device);
    sample.compute_stream = {0, 0, 1, 7, 0, "compute"};
    sample.compute_stream.stream_id = writer.register_stream(sample.compute_stream);
    sample.copy_stream = {0, 0, 1, 13, -1, "copy"};
    sample.copy_stream.stream_id = writer.register_stream(sample.copy_stream);
    sample.utilization = {0, "gpu utilization", "%", 0};
    sample.utilization.counter_id = writer.register_counter(sample.utilization);
    FrameId main_frame = writer.intern_frame("main", "/usr/bin/train", 0x401000);
    FrameId step_frame = writer.intern_frame("train_step(Model&)", "/usr/bin/train", 0x402000);
    std::vector<FrameId> frames = {main_frame, step_frame};
    sample.stack = writer.intern_stack(frames);

    StringId domain = writer.intern("ember");
    StringId launch = writer.intern("cudaLaunchKernel");
    StringId copy = writer.intern("cudaMemcpyAsync");
    StringId gemm = writer.intern("void gemm_kernel<float>(float const*, float*)");
    StringId step = writer.intern("step");
    StringId forward = writer.intern("forward");
    StringId overhead_name = writer.intern("cupti buffer");
    StringId cupti = writer.intern("cupti");
    ThreadId main = sample.main_thread.thread_id;
    StreamId compute = sample.compute_stream.stream_id;
    StreamId copy_stream = sample.copy_stream.stream_id;
    CorrelationId correlation = 1;
    for (int i = 0; i < repeat; ++i) {
        TimeNs t = 10'000 + i * 100'000;
        RangeEvent step_range{writer.next_range_id(), t, t + 90'000, main, domain, step, 1, 0xff00ff00u, 0, 0,
                              Payload::of_integer(i)};
        RangeEvent forward_range{
            writer.next_range_id(),   t + 1000, t + 40'000, main, domain, forward, 2, 0, 1, step_range.range_id,
            Payload::of_real(0.5 * i)};
        RangeEvent plain_range{writer.next_range_id(), t + 50'000, t + 60'000, main, kNoString, forward, 0, 0, 1,
                               step_range.range_id,    Payload{}};
        sample.ranges.insert(sample.ranges.end(), {forward_range, plain_range, step_range});
        ApiEvent launch_call{t + 2000, t + 5000, main, correlation, launch, 0};
        KernelEvent kernel;
        kernel.start_ns = t + 6000;
        kernel.end_ns = t + 30'000;
        kernel.device_id = 0;
        kernel.stream_id = compute;
        kernel.correlation_id = correlation;
        kernel.name_id = gemm;
        kernel.launch = {64, 2, 1, 256, 1, 1, 96, 4096, static_cast<std::uint32_t>(1024 * (i % 2))};
        ++correlation;
        ApiEvent copy_call{t + 31'000, t + 33'000, main, correlation, copy, 0};
        MemcpyEvent memcpy_event{t + 34'000,  t + 36'000,         0,
                                 copy_stream, correlation,        MemcpyDirection::host_to_device,
                                 1u << 20,    MemoryKind::pinned, MemoryKind::device,
                                 kNoDevice};
        ++correlation;
        MemsetEvent memset_event{t + 37'000, t + 37'500, 0, compute, correlation, 4096, 0, MemoryKind::device};
        ++correlation;
        SyncEvent sync{t + 38'000, t + 39'000, 0, compute, correlation, SyncKind::stream_synchronize, 0};
        ++correlation;
        MarkEvent mark{
            t + 41'000, main, domain, writer.intern("epoch " + std::to_string(i)), 1, 0, Payload::of_real(2.25)};
        CounterSample sample_value{sample.utilization.counter_id, t + 45'000, 87.5 + i};
        StackSample stack_sample{t + 46'000, sample.worker_thread.thread_id, sample.stack};
        OverheadEvent overhead{t + 47'000, t + 48'000, sample.worker_thread.thread_id, overhead_name};
        DroppedRecords dropped{t + 49'000, cupti, 0, 3};

        sample.api_calls.insert(sample.api_calls.end(), {launch_call, copy_call});
        sample.kernels.push_back(kernel);
        sample.memcpys.push_back(memcpy_event);
        sample.memsets.push_back(memset_event);
        sample.syncs.push_back(sync);
        sample.marks.push_back(mark);
        sample.counter_samples.push_back(sample_value);
        sample.stack_samples.push_back(stack_sample);
        sample.overheads.push_back(overhead);
        sample.dropped.push_back(dropped);

        EXPECT_TRUE(writer.record_api_call(launch_call));
        EXPECT_TRUE(writer.record_kernel(kernel));
        EXPECT_TRUE(writer.record_api_call(copy_call));
        EXPECT_TRUE(writer.record_memcpy(memcpy_event));
        EXPECT_TRUE(writer.record_memset(memset_event));
        EXPECT_TRUE(writer.record_sync(sync));
        EXPECT_TRUE(writer.record_range(forward_range));
        EXPECT_TRUE(writer.record_range(plain_range));
        EXPECT_TRUE(writer.record_range(step_range));
        EXPECT_TRUE(writer.record_mark(mark));
        EXPECT_TRUE(writer.record_counter(sample_value));
        EXPECT_TRUE(writer.record_stack_sample(stack_sample));
        EXPECT_TRUE(writer.record_overhead(overhead));
        EXPECT_TRUE(writer.record_dropped(dropped));
    }
    writer.close();
    return sample;
}

}  // namespace ember::store::testing
