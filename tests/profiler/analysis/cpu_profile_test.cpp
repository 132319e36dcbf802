// cpu_profile_test.cpp: the sampled CPU profile (cpu_profile.h) on a hand-built trace
// whose every answer is counted by hand: self and total samples per function (a
// recursive function counted once per sample), unresolved addresses grouped by module,
// JIT code (no module) as its own bucket, names without parameter lists, samples
// charged to the innermost range open on their thread, threads never sampled listed
// last, and the period turning samples into CPU time.
#include "profiler/analysis/cpu_profile.h"
#include "profiler/analysis/stats_report.h"
#include "profiler/store/writer.h"
#include "tests/support/store.h"
#include "tests/support/temp_path.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace {

using namespace ember;
using trace::TimeNs;

// An "ember" push/pop range on `thread`.
trace::RangeId record_range(store::TraceWriter& writer, trace::ThreadId thread, const char* name, TimeNs start,
                            TimeNs end, std::int32_t depth, trace::RangeId parent = 0) {
    trace::RangeEvent r;
    r.range_id = writer.next_range_id();
    r.start_ns = start;
    r.end_ns = end;
    r.thread_id = thread;
    r.domain_id = writer.intern("ember");
    r.name_id = writer.intern(name);
    r.depth = depth;
    r.parent_range_id = parent;
    writer.record_range(r);
    return r.range_id;
}

// A CPU sample of `thread` at `at` with `frames`, outermost first.
void record_sample(store::TraceWriter& writer, trace::ThreadId thread, TimeNs at,
                   const std::vector<trace::FrameId>& frames) {
    trace::StackSample s;
    s.time_ns = at;
    s.thread_id = thread;
    s.stack_id = writer.intern_stack(frames);
    writer.record_stack_sample(s);
}

// A CPU profile's samples per range path ("step > forward", "(no range)", ...).
std::map<std::string, std::int64_t> samples_by_range(const analysis::CpuProfile& profile) {
    std::map<std::string, std::int64_t> by_range;
    for (const auto& row : profile.by_range) by_range[row.range_path] = row.samples;
    return by_range;
}

class CpuProfileTest : public ::testing::Test {
  protected:
    void SetUp() override {
        path_ = test_support::unique_temp_path("cpu_profile", ".db").string();
        trace::RunInfo run;
        run.pid = 7;
        run.start_ns = 0;
        store::WriterOptions options = store::testing::quiet_options();
        store::TraceWriter writer(path_, run, options);
        writer.register_process({7, "train"});
        const trace::ThreadId main = writer.register_thread({0, 7, 100, "main"});
        const trace::ThreadId loader = writer.register_thread({0, 7, 101, "loader"});
        writer.register_thread({0, 7, 102, "idle thread"});
        writer.set_metadata("cpu_sample_period_ns", "5000000");

        const trace::FrameId run_frame =
            writer.intern_frame("ember::train::run(ember::Config const&)", "/bin/ember", 0x10);
        const trace::FrameId gemm = writer.intern_frame(
            "ember::ops::gemm_cpu(ember::Tensor const&, ember::Tensor const&)::{lambda(long, long)#1}::operator()(long, long) const",
            "/bin/ember", 0x20);
        const trace::FrameId recurse = writer.intern_frame("walk(Node*)", "/bin/ember", 0x30);
        const trace::FrameId blas = writer.intern_frame("0x7f0000001000", "/usr/lib/libopenblas.so.0", 0x7f0000001000);
        const trace::FrameId blas2 = writer.intern_frame("0x7f0000002000", "/usr/lib/libopenblas.so.0", 0x7f0000002000);
        const trace::FrameId jit = writer.intern_frame("0x7e0000000000", "", 0x7e0000000000);
        const trace::FrameId decode = writer.intern_frame("decode_png(unsigned char const*)", "/bin/ember", 0x40);

        // Ranges on main: step [0, 100 ms) > forward [10, 50 ms).
        const trace::RangeId step = record_range(writer, main, "step", 0, 100'000'000, 0);
        record_range(writer, main, "forward", 10'000'000, 50'000'000, 1, step);
        auto sample = [&](trace::ThreadId thread, TimeNs at, std::vector<trace::FrameId> frames) {
            record_sample(writer, thread, at, frames);
        };
        // main: 3 samples in forward (gemm lambda x2, blas x1), 2 in step only (recursion, jit),
        // 1 after the step (blas2, same module as blas).
        sample(main, 20'000'000, {run_frame, gemm});
        sample(main, 30'000'000, {run_frame, gemm});
        sample(main, 40'000'000, {run_frame, gemm, blas});
        sample(main, 60'000'000, {run_frame, recurse, recurse, recurse});
        sample(main, 70'000'000, {jit});
        sample(main, 150'000'000, {run_frame, blas2});
        // loader: 2 samples, no range.
        sample(loader, 20'000'000, {decode});
        sample(loader, 25'000'000, {decode});
        writer.close();
    }
    void TearDown() override { std::filesystem::remove(path_); }
    std::string path_;
};

const analysis::CpuFunctionRow* find(const analysis::CpuProfile& profile, const std::string& name) {
    for (const auto& row : profile.functions)
        if (row.function == name) return &row;
    return nullptr;
}

TEST_F(CpuProfileTest, SelfAndTotalPerFunction) {
    store::TraceReader reader(path_);
    const analysis::CpuProfile profile = analysis::cpu_profile(reader);
    EXPECT_EQ(profile.samples, 8);
    EXPECT_EQ(profile.period_ns, 5'000'000);
    EXPECT_EQ(profile.cpu_ns(8), 40'000'000);

    const auto* lambda = find(profile, "ember::ops::gemm_cpu::{lambda#1}::operator()");
    ASSERT_NE(lambda, nullptr) << "lambda name not simplified";
    EXPECT_EQ(lambda->self_samples, 2);
    EXPECT_EQ(lambda->total_samples, 3);
    const auto* run = find(profile, "ember::train::run");
    ASSERT_NE(run, nullptr);
    EXPECT_EQ(run->self_samples, 0);
    EXPECT_EQ(run->total_samples, 5);
    const auto* walk = find(profile, "walk");
    ASSERT_NE(walk, nullptr);
    EXPECT_EQ(walk->self_samples, 1);
    EXPECT_EQ(walk->total_samples, 1) << "a recursive function counts once per sample";
    const auto* openblas = find(profile, "[libopenblas.so.0]");
    ASSERT_NE(openblas, nullptr) << "unresolved addresses of one module are one row";
    EXPECT_EQ(openblas->self_samples, 2);
    const auto* jit = find(profile, "[JIT-generated code (no module; e.g. oneDNN kernels)]");
    ASSERT_NE(jit, nullptr);
    EXPECT_EQ(jit->self_samples, 1);
    const auto* decode = find(profile, "decode_png");
    ASSERT_NE(decode, nullptr);
    EXPECT_EQ(decode->self_samples, 2);
    // Most self samples first.
    for (std::size_t i = 1; i < profile.functions.size(); ++i)
        EXPECT_GE(profile.functions[i - 1].self_samples, profile.functions[i].self_samples);
}

TEST_F(CpuProfileTest, SamplesChargedToTheInnermostOpenRange) {
    store::TraceReader reader(path_);
    std::map<std::string, std::int64_t> by_range = samples_by_range(analysis::cpu_profile(reader));
    EXPECT_EQ(by_range["step > forward"], 3);
    EXPECT_EQ(by_range["step"], 2);
    EXPECT_EQ(by_range["(no range)"], 3);  // main after the step, and the loader's two
    EXPECT_EQ(by_range.size(), 3u);
}

// The threads of an OpenMP team work for the thread that opened the parallel region:
// their samples go to the range open then on the thread with the process's ranges. A
// thread without ranges that is not an OpenMP worker stays "(no range)", and so does a
// team thread's sample when the leader has no range open.
TEST(CpuProfileTeams, OpenMpTeamThreadsAreChargedToTheRangeOfTheThreadLeadingThem) {
    const std::string path = test_support::unique_temp_path("cpu_profile_teams", ".db").string();
    {
        trace::RunInfo run;
        run.pid = 7;
        store::TraceWriter writer(path, run, store::testing::quiet_options());
        writer.register_process({7, "train"});
        const trace::ThreadId main = writer.register_thread({0, 7, 100, "main"});
        const trace::ThreadId team = writer.register_thread({0, 7, 101, "cpu compute 1"});
        const trace::ThreadId other = writer.register_thread({0, 7, 102, "helper"});
        const trace::ThreadId loader = writer.register_thread({0, 7, 103, "loader"});
        record_range(writer, main, "step", 0, 100, 0);
        record_range(writer, main, "forward", 0, 40, 1);
        record_range(writer, main, "backward", 40, 90, 1);
        record_range(writer, loader, "dataloader/load", 0, 100, 0);  // fewer ranges than main: not the leader
        const trace::FrameId start = writer.intern_frame("start_thread", "/lib/x86_64-linux-gnu/libc.so.6", 0x100);
        const trace::FrameId gomp =
            writer.intern_frame("0x7f0000003000", "/usr/lib/x86_64-linux-gnu/libgomp.so.1", 0x7f0000003000);
        const trace::FrameId kernel = writer.intern_frame("jit_brgemm_kernel_t", "", 0x7e0000001000);
        const trace::FrameId work = writer.intern_frame("do_work()", "/bin/app", 0x200);
        auto sample = [&](trace::ThreadId thread, TimeNs at, std::vector<trace::FrameId> frames) {
            record_sample(writer, thread, at, frames);
        };
        sample(team, 10, {start, gomp, kernel});   // main in step > forward
        sample(team, 50, {start, gomp, kernel});   // main in step > backward
        sample(team, 60, {start, gomp});           // main in step > backward
        sample(team, 95, {start, gomp, kernel});   // main in step only
        sample(team, 150, {start, gomp, kernel});  // main in no range
        sample(other, 20, {start, work});          // not an OpenMP thread: no range
        writer.close();
    }
    store::TraceReader reader(path);
    const analysis::CpuProfile profile = analysis::cpu_profile(reader);
    std::map<std::string, std::int64_t> by_range = samples_by_range(profile);
    EXPECT_EQ(by_range["step > forward"], 1);
    EXPECT_EQ(by_range["step > backward"], 2);
    EXPECT_EQ(by_range["step"], 1);
    EXPECT_EQ(by_range["(no range)"], 2);
    EXPECT_EQ(by_range.size(), 4u);
    // The per-thread table still says which thread burned the CPU.
    ASSERT_FALSE(profile.threads.empty());
    EXPECT_EQ(profile.threads[0].name, "cpu compute 1");
    EXPECT_EQ(profile.threads[0].samples, 5);
    std::filesystem::remove(path);
}

TEST_F(CpuProfileTest, ThreadsIncludingOnesNeverSampled) {
    store::TraceReader reader(path_);
    const analysis::CpuProfile profile = analysis::cpu_profile(reader);
    ASSERT_EQ(profile.threads.size(), 3u);
    EXPECT_EQ(profile.threads[0].tid, 100);
    EXPECT_EQ(profile.threads[0].samples, 6);
    EXPECT_EQ(profile.threads[1].tid, 101);
    EXPECT_EQ(profile.threads[1].samples, 2);
    EXPECT_EQ(profile.threads[2].name, "idle thread");
    EXPECT_EQ(profile.threads[2].samples, 0);
}

TEST_F(CpuProfileTest, StatsTablesShowCpuTime) {
    store::TraceReader reader(path_);
    analysis::StatsOptions options;
    options.reports = {"cpu"};
    const std::vector<analysis::Table> tables = analysis::build_stats_tables(reader, options);
    ASSERT_EQ(tables.size(), 3u);
    EXPECT_EQ(tables[0].key, "cpu_functions");
    EXPECT_EQ(tables[1].key, "cpu_by_range");
    EXPECT_EQ(tables[2].key, "cpu_threads");
    // The thread table leaves out the thread never sampled; its first row is main: 6 x 5 ms.
    ASSERT_EQ(tables[2].rows.size(), 2u);
    bool found = false;
    for (std::size_t c = 0; c < tables[2].columns.size(); ++c)
        if (tables[2].columns[c].key == "cpu_ns") {
            EXPECT_EQ(std::get<std::int64_t>(tables[2].rows[0][c]), 30'000'000);
            found = true;
        }
    EXPECT_TRUE(found) << "no cpu_ns column although the period is known";
}

}  // namespace
