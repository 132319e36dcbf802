// python_gpu_test.cpp: the Python call sites of GPU work and the host's waits on it
// (python_gpu.h) and how the CPU profile shows those waits (cpu_profile.h), on
// hand-built traces whose every answer is worked out by hand below: kernels charged
// to the innermost frame of the program's own code on their launching call's stack,
// samples inside a cudaStreamSynchronize charged to the kernel that ran meanwhile
// (split by overlap when two did, limited to the stream the call waited on), and
// threads matched by OS thread across the two writers' thread rows.
#include "profiler/analysis/cpu_profile.h"
#include "profiler/analysis/python_gpu.h"
#include "profiler/analysis/stats_report.h"
#include "profiler/store/reader.h"
#include "tests/support/trace_builder.h"
#include "tests/support/temp_path.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace {

using namespace ember;
using trace::TimeNs;

constexpr TimeNs kOrigin = 1'000'000'000;
constexpr TimeNs us(double micros) {
    return kOrigin + static_cast<TimeNs>(micros * 1000);
}
constexpr TimeNs kPeriod = 100'000;  // one sample per 100 us

constexpr const char* kScript = "/home/user/train.py";
constexpr const char* kTorchLinear = "/usr/lib/python3/dist-packages/torch/nn/modules/linear.py";

class PythonGpuTest : public ::testing::Test {
  protected:
    void SetUp() override {
        path_ = test_support::unique_temp_path("python_gpu", ".db").string();
        builder_ =
            std::make_unique<ember::testing::TraceBuilder>(path_, ember::testing::TraceBuilder::run_info(kOrigin));
        builder_->writer().set_metadata("cpu_sample_period_ns", std::to_string(kPeriod));
    }
    void TearDown() override { std::filesystem::remove(path_); }

    store::TraceWriter& writer() { return builder_->writer(); }
    // A Python stack, outermost first: (function, file, line) per frame.
    trace::StackId python_stack(const std::vector<std::tuple<const char*, const char*, int>>& frames) {
        std::vector<trace::FrameId> ids;
        for (const auto& [function, file, line] : frames) ids.push_back(writer().intern_frame(function, file, 0, line));
        return writer().intern_stack(ids);
    }
    void sample(trace::ThreadId thread, TimeNs at, trace::StackId stack, bool idle = false) {
        writer().record_stack_sample({at, thread, stack, idle});
    }
    store::TraceReader& close_and_read() {
        builder_->close();
        reader_ = std::make_unique<store::TraceReader>(path_);
        return *reader_;
    }

    std::string path_;
    std::unique_ptr<ember::testing::TraceBuilder> builder_;
    std::unique_ptr<store::TraceReader> reader_;
};

// step() calls torch's Linear.forward at line 12 (gemm 100 us + bias_add 30 us: two
// launches) and relu at line 15 (50 us); one kernel has no Python stack (40 us).
TEST_F(PythonGpuTest, KernelsAreChargedToTheirCallSitesInnermostUserFrame) {
    const trace::ThreadId main = builder_->thread("python3");
    const trace::StreamId stream = builder_->stream(7);
    const trace::StackId at_12 =
        python_stack({{"<module>", kScript, 30}, {"step", kScript, 12}, {"Linear.forward", kTorchLinear, 116}});
    const trace::StackId at_15 = python_stack({{"<module>", kScript, 30}, {"step", kScript, 15}});
    builder_->kernel(stream, "gemm", us(0), us(100), builder_->call(main, "cudaLaunchKernel", us(-20), us(-15), at_12));
    builder_->kernel(stream, "bias_add", us(100), us(130),
                     builder_->call(main, "cudaLaunchKernel", us(-14), us(-10), at_12));
    builder_->kernel(stream, "relu", us(130), us(180), builder_->call(main, "cudaLaunchKernel", us(-9), us(-5), at_15));
    builder_->kernel(stream, "nccl", us(180), us(220), builder_->call(main, "cudaLaunchKernel", us(-4), us(-2), 0));

    const analysis::PythonGpuReport report = analysis::python_gpu(close_and_read());
    EXPECT_TRUE(report.has_call_stacks);
    EXPECT_EQ(report.gpu_ns, 220'000);
    ASSERT_EQ(report.sites.size(), 3u);
    EXPECT_EQ(report.sites[0].site.location, std::string(kScript) + ":12");
    EXPECT_EQ(report.sites[0].site.function, "step");
    EXPECT_EQ(report.sites[0].gpu_ns, 130'000);
    EXPECT_EQ(report.sites[0].operations, 2);
    EXPECT_EQ(report.sites[0].calls, 2);
    ASSERT_EQ(report.sites[0].top_work.size(), 2u);
    EXPECT_EQ(report.sites[0].top_work[0], (std::pair<std::string, TimeNs>{"gemm", 100'000}));
    EXPECT_EQ(report.sites[0].top_work[1], (std::pair<std::string, TimeNs>{"bias_add", 30'000}));
    EXPECT_EQ(report.sites[1].site.location, std::string(kScript) + ":15");
    EXPECT_EQ(report.sites[1].gpu_ns, 50'000);
    EXPECT_EQ(report.sites[2].site.location, analysis::kNoPythonStack);
    EXPECT_EQ(report.sites[2].gpu_ns, 40'000);
    EXPECT_TRUE(report.waits.empty());

    // The same in `ember stats --report python_gpu`.
    analysis::StatsOptions options;
    options.reports = {"python_gpu"};
    const std::vector<analysis::Table> tables = analysis::build_stats_tables(*reader_, options);
    ASSERT_GE(tables.size(), 2u);
    EXPECT_EQ(tables[0].key, "python_gpu_sites");
    ASSERT_EQ(tables[0].rows.size(), 3u);
    EXPECT_EQ(std::get<std::string>(tables[0].rows[0][4]), std::string(kScript) + ":12");
    EXPECT_EQ(std::get<std::string>(tables[0].rows[0][6]), "gemm (77%), bias_add (23%)");
}

// Ten samples inside a cudaStreamSynchronize at line 20 (`loss.item()`) while kernel
// `backward_gemm` runs, five samples running line 12: the ten are waiting on
// backward_gemm, not time of line 20.
TEST_F(PythonGpuTest, SamplesInsideASynchronizeWaitOnTheKernelThatRan) {
    const trace::ThreadId main = builder_->thread("python3");
    const trace::StreamId stream = builder_->stream(7);
    const trace::StackId at_12 = python_stack({{"<module>", kScript, 30}, {"step", kScript, 12}});
    const trace::StackId at_20 = python_stack({{"<module>", kScript, 30}, {"step", kScript, 20}});
    builder_->kernel(stream, "backward_gemm", us(900), us(2000),
                     builder_->call(main, "cudaLaunchKernel", us(890), us(895), at_12));
    builder_->call(main, "cudaStreamSynchronize", us(1000), us(2000), at_20);
    for (int i = 0; i < 5; ++i) sample(main, us(400 + 100 * i), at_12);
    for (int i = 0; i < 10; ++i) sample(main, us(1050 + 100 * i), at_20);

    const store::TraceReader& reader = close_and_read();
    const analysis::CpuProfile profile = analysis::cpu_profile(reader);
    EXPECT_EQ(profile.samples, 15);
    EXPECT_EQ(profile.gpu_wait_samples, 10);
    ASSERT_EQ(profile.gpu_waits.size(), 1u);
    EXPECT_EQ(profile.gpu_waits[0].location, std::string(kScript) + ":20");
    EXPECT_EQ(profile.gpu_waits[0].waited_for, "backward_gemm");
    EXPECT_DOUBLE_EQ(profile.gpu_waits[0].samples, 10.0);
    std::map<std::string, std::pair<std::int64_t, std::int64_t>> functions;  // self, total
    for (const auto& row : profile.functions) functions[row.function] = {row.self_samples, row.total_samples};
    EXPECT_EQ(functions[analysis::kWaitingOnGpuFrame], (std::pair<std::int64_t, std::int64_t>{10, 10}));
    EXPECT_EQ(functions[std::string("step (") + kScript + ":20)"], (std::pair<std::int64_t, std::int64_t>{0, 10}));
    EXPECT_EQ(functions[std::string("step (") + kScript + ":12)"], (std::pair<std::int64_t, std::int64_t>{5, 5}));
    std::map<std::string, std::pair<std::int64_t, std::int64_t>> lines;
    for (const auto& row : profile.lines) lines[row.location] = {row.self_samples, row.total_samples};
    EXPECT_EQ(lines[std::string(kScript) + ":20"], (std::pair<std::int64_t, std::int64_t>{0, 10}));
    EXPECT_EQ(lines[std::string(kScript) + ":12"], (std::pair<std::int64_t, std::int64_t>{5, 5}));

    // The flamegraph ends the waiting stacks in the kernel.
    const analysis::StackTree tree = analysis::cpu_stack_tree(reader);
    std::int64_t waiting = 0;
    for (std::uint32_t node = 0; node < tree.size(); ++node)
        if (tree.node(node).name == analysis::waiting_on_gpu_frame("backward_gemm"))
            waiting += tree.node(node).self_weight;
    EXPECT_EQ(waiting, 10 * kPeriod);

    // The call site's wait: 1000 us, all of it on backward_gemm.
    const analysis::PythonGpuReport report = analysis::python_gpu(reader);
    ASSERT_EQ(report.waits.size(), 1u);
    EXPECT_EQ(report.waits[0].site.location, std::string(kScript) + ":20");
    EXPECT_EQ(report.waits[0].api, "cudaStreamSynchronize");
    EXPECT_EQ(report.waits[0].waited_for, "backward_gemm");
    EXPECT_DOUBLE_EQ(report.waits[0].wait_ns, 1'000'000.0);
    EXPECT_EQ(report.waits[0].waits, 1);

    analysis::StatsOptions options;
    options.reports = {"cpu"};
    bool shown = false;
    for (const analysis::Table& table : analysis::build_stats_tables(reader, options))
        if (table.key == "cpu_gpu_waits") {
            shown = true;
            ASSERT_EQ(table.rows.size(), 1u);
            EXPECT_EQ(std::get<std::string>(table.rows[0].back()), "backward_gemm");
        }
    EXPECT_TRUE(shown);
}

// A 100 us wait on stream 7 while k1 (75 us) then k2 (25 us) run there and k_other
// runs on stream 13: four samples split 3 : 1, nothing to k_other. The sync record
// names the stream waited on.
TEST_F(PythonGpuTest, AWaitIsSplitByOverlapOverTheStreamItWaitedOn) {
    const trace::ThreadId main = builder_->thread("python3");
    const trace::StreamId s7 = builder_->stream(7);
    const trace::StreamId s13 = builder_->stream(13);
    const trace::StackId at_20 = python_stack({{"step", kScript, 20}});
    builder_->kernel(s7, "k1", us(0), us(75), builder_->call(main, "cudaLaunchKernel", us(-10), us(-9), 0));
    builder_->kernel(s7, "k2", us(75), us(100), builder_->call(main, "cudaLaunchKernel", us(-8), us(-7), 0));
    builder_->kernel(s13, "k_other", us(0), us(100), builder_->call(main, "cudaLaunchKernel", us(-6), us(-5), 0));
    const trace::CorrelationId sync_call = builder_->call(main, "cudaStreamSynchronize_ptsz", us(0), us(100), at_20);
    trace::SyncEvent sync;
    sync.start_ns = us(0);
    sync.end_ns = us(100);
    sync.stream_id = s7;
    sync.correlation_id = sync_call;
    sync.kind = trace::SyncKind::stream_synchronize;
    writer().record_sync(sync);
    for (int i = 0; i < 4; ++i) sample(main, us(10 + 25 * i), at_20);

    const analysis::CpuProfile profile = analysis::cpu_profile(close_and_read());
    std::map<std::string, double> waited;
    for (const auto& row : profile.gpu_waits) waited[row.waited_for] += row.samples;
    EXPECT_EQ(waited.size(), 2u);
    EXPECT_DOUBLE_EQ(waited["k1"], 3.0);
    EXPECT_DOUBLE_EQ(waited["k2"], 1.0);
}

// The Python sampler and the collector write their own thread rows; the same OS
// thread (pid, tid) is one thread for the waits. A wait with no GPU work recorded
// during it says so.
TEST_F(PythonGpuTest, ThreadsAreMatchedByOsThreadAndAnEmptyWaitSaysSo) {
    const trace::ThreadId collector_row = builder_->thread("python3", 42, 7001);
    const trace::ThreadId sampler_row = builder_->thread("MainThread", 42, 7001);
    const trace::ThreadId other = builder_->thread("worker", 42, 7002);
    const trace::StackId at_20 = python_stack({{"step", kScript, 20}});
    builder_->call(collector_row, "cuCtxSynchronize", us(0), us(100), at_20);
    sample(sampler_row, us(50), at_20);
    sample(other, us(50), at_20);  // another thread, running meanwhile

    const analysis::CpuProfile profile = analysis::cpu_profile(close_and_read());
    EXPECT_EQ(profile.gpu_wait_samples, 1);
    ASSERT_EQ(profile.gpu_waits.size(), 1u);
    EXPECT_EQ(profile.gpu_waits[0].waited_for, analysis::kNoGpuWorkRecorded);
}

// After `ember merge` of the collector's file and the Python sampler's, the sampler's
// copy of the process has its pid moved by 10^9: its samples still meet the calls of
// the one thread with the same tid that waited. When two copies waited (the same pid
// and tid on two hosts), a third copy's samples match neither.
TEST_F(PythonGpuTest, AMergedCopyOfTheThreadMeetsTheOneThatWaited) {
    const trace::ThreadId collector_row = builder_->thread("rank 0: python3", 42, 7001);
    const trace::ThreadId sampler_row = builder_->thread("rank 1: MainThread", 1'000'000'042, 7001);
    const trace::StackId at_20 = python_stack({{"step", kScript, 20}});
    builder_->call(collector_row, "cudaDeviceSynchronize", us(0), us(100), at_20);
    sample(sampler_row, us(50), at_20);
    sample(sampler_row, us(150), at_20);  // after the wait: running

    const analysis::CpuProfile profile = analysis::cpu_profile(close_and_read());
    EXPECT_EQ(profile.samples, 2);
    EXPECT_EQ(profile.gpu_wait_samples, 1);
}

TEST_F(PythonGpuTest, TwoWaitingCopiesOfATidAreNotGuessedBetween) {
    const trace::ThreadId host_a = builder_->thread("rank 0: python3", 42, 7001);
    const trace::ThreadId host_b = builder_->thread("rank 1: python3", 1'000'000'042, 7001);
    const trace::ThreadId sampler_row = builder_->thread("rank 2: MainThread", 2'000'000'042, 7001);
    const trace::StackId at_20 = python_stack({{"step", kScript, 20}});
    builder_->call(host_a, "cudaDeviceSynchronize", us(0), us(100), at_20);
    builder_->call(host_b, "cudaDeviceSynchronize", us(0), us(100), at_20);
    sample(sampler_row, us(50), at_20);
    sample(host_a, us(60), at_20);  // a thread's own samples still meet its own waits

    const analysis::CpuProfile profile = analysis::cpu_profile(close_and_read());
    EXPECT_EQ(profile.samples, 2);
    EXPECT_EQ(profile.gpu_wait_samples, 1);
}

TEST(WaitsForGpu, TheSynchronizingCallsAndAnAsyncCopyIntoPageableMemory) {
    for (const char* name :
         {"cudaStreamSynchronize", "cudaStreamSynchronize_ptsz", "cudaDeviceSynchronize", "cudaEventSynchronize",
          "cudaMemcpy", "cudaMemcpy_ptds", "cuMemcpyDtoH_v2", "cuCtxSynchronize", "cuStreamSynchronize"})
        EXPECT_TRUE(analysis::waits_for_gpu(name)) << name;
    for (const char* name :
         {"cudaLaunchKernel", "cudaMemcpyAsync", "cuMemcpyDtoHAsync_v2", "cudaMalloc", "cudaEventRecord"})
        EXPECT_FALSE(analysis::waits_for_gpu(name)) << name;
    trace::MemcpyEvent copy;
    copy.direction = trace::MemcpyDirection::device_to_host;
    copy.destination_kind = trace::MemoryKind::pageable;
    EXPECT_TRUE(analysis::waits_for_gpu("cudaMemcpyAsync", &copy));
    EXPECT_TRUE(analysis::waits_for_gpu("cuMemcpyDtoHAsync_v2", &copy));
    copy.destination_kind = trace::MemoryKind::pinned;
    EXPECT_FALSE(analysis::waits_for_gpu("cudaMemcpyAsync", &copy));
}

TEST(PythonUserFrame, TheProgramsOwnFilesNotPythonsOrPackages) {
    auto frame = [](const char* file) { return trace::FrameInfo{0, "f", file, 0, 3}; };
    EXPECT_TRUE(analysis::python_user_frame(frame("/home/user/train.py")));
    EXPECT_TRUE(analysis::python_user_frame(frame("train.py")));
    EXPECT_FALSE(analysis::python_user_frame(frame("/usr/lib/python3/dist-packages/torch/nn/modules/module.py")));
    EXPECT_FALSE(analysis::python_user_frame(frame("/venv/lib/python3.11/site-packages/torch/_tensor.py")));
    EXPECT_FALSE(analysis::python_user_frame(frame("/usr/lib/python3.11/threading.py")));
    EXPECT_FALSE(analysis::python_user_frame(frame("<frozen runpy>")));
    trace::FrameInfo native{0, "cudaLaunchKernel", "/usr/lib/libcudart.so", 0x1234, -1};
    EXPECT_FALSE(analysis::python_user_frame(native));
    // Only library frames: the innermost Python frame is the call site.
    const analysis::CallSite site = analysis::call_site_of(
        {frame("/usr/lib/python3.11/runpy.py"), frame("/venv/lib/python3.11/site-packages/torch/_tensor.py"), native});
    EXPECT_EQ(site.location, "/venv/lib/python3.11/site-packages/torch/_tensor.py:3");
}

}  // namespace
