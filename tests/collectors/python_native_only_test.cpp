// python_native_only_test.cpp: `ember record --native` and `ember dump --native` on a
// program that is neither CPython nor a CUDA/NVTX user (native_spin.cpp): its native
// stacks alone, unwound from outside, as perf record would take them. The program's
// own function must be named with main below it, its sleeping thread's samples idle,
// its exit status passed on, and a process recorded by --pid must run on unharmed.
// Where ptrace is refused here (seccomp, ptrace_scope) the tests skip, naming the rule.
#include "collectors/python/native_stack.h"
#include "collectors/python/python_reader.h"
#include "profiler/store/reader.h"
#include "tests/collectors/subprocess.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>

namespace {

using namespace ember::collector::python;
namespace test = ember::test;

const std::string kSpin = EMBER_NATIVE_SPIN;  // the test program, built beside this test

// The running program; at the end of the test it is killed (unless a test reaped it
// and cleared the pid) and its output file removed.
struct Program {
    test::Child child;
    ~Program() { finish(); }
    void finish() {
        if (child.pid > 0 && kill(child.pid, SIGKILL) == 0) test::wait_for(child, 10);
        child.pid = -1;
        if (!child.output_path.empty()) unlink(child.output_path.c_str());
        child.output_path.clear();
    }
};

// Why ptrace may not stop a child of ours here, or "".
std::string ptrace_refusal() {
    Program probe{test::spawn({kSpin, "30"})};
    if (!test::wait_for_output(probe.child, "ready", 30)) return "";  // the test fails on its own start
    ThreadStop stop(probe.child.pid);
    return stop.stopped_count() > 0 ? "" : stop.error();
}

struct SpinCounts {
    std::int64_t main_active = 0;   // active samples of the spinning (main) thread
    std::int64_t main_in_spin = 0;  // ... whose stack has spin_in_known_function with main below it
    std::int64_t sleeper = 0;       // samples of the "sleeper" thread
    std::int64_t sleeper_active = 0;
    std::int64_t python_frames = 0;
};

// The samples of process PID in `trace`, counted as the tests check them.
SpinCounts count_samples(const std::string& trace, pid_t pid) {
    ember::store::TraceReader reader(trace);
    std::map<ember::trace::ThreadId, ember::trace::ThreadInfo> threads;
    for (const auto& thread : reader.threads()) threads[thread.thread_id] = thread;
    SpinCounts counts;
    reader.for_each_stack_sample({}, [&](const ember::trace::StackSample& sample) {
        const ember::trace::ThreadInfo& thread = threads[sample.thread_id];
        if (thread.pid != pid) return true;
        const auto frames = reader.stack_frames(sample.stack_id);  // outermost first
        long main_at = -1, spin_at = -1;
        for (std::size_t index = 0; index < frames.size(); ++index) {
            if (frames[index].is_python()) ++counts.python_frames;
            if (frames[index].function == "main" && main_at < 0) main_at = static_cast<long>(index);
            if (frames[index].function == "spin_in_known_function") spin_at = static_cast<long>(index);
        }
        if (thread.tid == pid && !sample.idle) {
            ++counts.main_active;
            if (main_at >= 0 && spin_at > main_at) ++counts.main_in_spin;
        }
        if (thread.name == "sleeper") {
            ++counts.sleeper;
            if (!sample.idle) ++counts.sleeper_active;
        }
        return true;
    });
    return counts;
}

// The spinning (main) thread of a 2 s recording: sampled (at 100 Hz ~200 snapshots; a
// loaded machine takes fewer, not none), and at least 70% of its active samples in
// spin_in_known_function with main below it. `output` is ember's, shown on failure.
void expect_main_spins(const SpinCounts& counts, const std::string& output) {
    ASSERT_GT(counts.main_active, 20) << output;
    EXPECT_GE(counts.main_in_spin * 100, counts.main_active * 70)
        << counts.main_in_spin << " of " << counts.main_active
        << " active samples in spin_in_known_function under main";
}

TEST(NativeOnly, RecordOfAnyProgramWritesItsNativeStacks) {
    if (const std::string why = ptrace_refusal(); !why.empty()) GTEST_SKIP() << why;
    const std::string trace = test::temp_path("native_only_cmd.db");
    std::string output;
    EXPECT_EQ(test::run({test::bin("ember"), "record", "--native", "-o", trace, "--", kSpin, "2"}, &output, {}, 90), 3)
        << output;
    EXPECT_EQ(output.find("no trace written"), std::string::npos) << output;
    ASSERT_TRUE(std::filesystem::exists(trace)) << output;
    ember::store::TraceReader reader(trace);
    const pid_t pid = static_cast<pid_t>(reader.run().pid);
    const SpinCounts counts = count_samples(trace, pid);
    ASSERT_NO_FATAL_FAILURE(expect_main_spins(counts, output));
    // The sleeping thread, by its OS name: sampled, and idle.
    ASSERT_GT(counts.sleeper, 10) << output;
    EXPECT_LE(counts.sleeper_active, 2) << counts.sleeper_active << " of " << counts.sleeper
                                        << " sleeper samples active";
    EXPECT_EQ(counts.python_frames, 0);
    // The CPU report reads the trace as any other.
    std::string report;
    ASSERT_EQ(test::run({test::bin("ember"), "stats", trace, "--report", "cpu"}, &report, {}, 60), 0) << report;
    EXPECT_NE(report.find("spin_in_known_function"), std::string::npos) << report;
    std::printf(
        "%lld of %lld active samples of the spinning thread in spin_in_known_function under main; "
        "sleeper %lld samples, %lld active\n",
        static_cast<long long>(counts.main_in_spin), static_cast<long long>(counts.main_active),
        static_cast<long long>(counts.sleeper), static_cast<long long>(counts.sleeper_active));
    std::filesystem::remove(trace);
}

// --subprocesses: a shell is sampled itself and so are the commands it starts, short
// ones among them. A command that exits while its threads are held must still be
// reaped by the shell (ember takes the tracer's report of the exit), or the shell
// would wait forever: the recording ends with the shell's status within the limit.
TEST(NativeOnly, SubprocessesOfAShellAreSampledAndReaped) {
    if (const std::string why = ptrace_refusal(); !why.empty()) GTEST_SKIP() << why;
    const std::string trace = test::temp_path("native_only_shell.db");
    // Sleeps of 20 ms live long enough to be found and sampled, and end at any moment;
    // without that report taken, about one run in three hung here.
    const std::string script = "for i in $(seq 1 60); do sleep 0.02; done; " + kSpin + " 1; exit 4";
    std::string output;
    ASSERT_EQ(
        test::run({test::bin("ember"), "record", "--native", "--subprocesses", "-o", trace, "--", "sh", "-c", script},
                  &output, {}, 120),
        4)
        << output;
    ember::store::TraceReader reader(trace);
    std::int64_t shell_samples = 0, spin_samples = 0;
    std::map<ember::trace::ThreadId, std::int64_t> pid_of;
    for (const auto& thread : reader.threads()) pid_of[thread.thread_id] = thread.pid;
    reader.for_each_stack_sample({}, [&](const ember::trace::StackSample& sample) {
        if (pid_of[sample.thread_id] == reader.run().pid) ++shell_samples;
        for (const auto& frame : reader.stack_frames(sample.stack_id))
            if (frame.function == "spin_in_known_function") {
                ++spin_samples;
                break;
            }
        return true;
    });
    EXPECT_GT(shell_samples, 10) << output;  // the shell, waiting: idle samples of its own
    EXPECT_GT(spin_samples, 20) << output;   // the command it started
    std::filesystem::remove(trace);
}

TEST(NativeOnly, RecordByPidLeavesTheProgramRunning) {
    if (const std::string why = ptrace_refusal(); !why.empty()) GTEST_SKIP() << why;
    Program program{test::spawn({kSpin, "30"})};
    ASSERT_TRUE(test::wait_for_output(program.child, "ready", 30)) << test::read_output(program.child);
    const pid_t pid = program.child.pid;
    const std::string trace = test::temp_path("native_only_pid.db");
    std::string output;
    ASSERT_EQ(test::run({test::bin("ember"), "record", "--pid", std::to_string(pid), "--native", "--duration", "2s",
                         "-o", trace},
                        &output, {}, 60),
              0)
        << output;
    const SpinCounts counts = count_samples(trace, pid);
    ASSERT_NO_FATAL_FAILURE(expect_main_spins(counts, output));
    EXPECT_GT(counts.sleeper, 10) << output;
    // The program goes on: no thread left stopped, and SIGTERM ends it the usual way.
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, WNOHANG), 0) << "the program ended during the recording";
    for (pid_t tid : process_threads(pid)) {
        const char state = thread_state(pid, tid);
        EXPECT_TRUE(state != 't' && state != 'T') << "thread " << tid << " left stopped (" << state << ")";
    }
    ASSERT_EQ(kill(pid, SIGTERM), 0);
    EXPECT_EQ(test::wait_for(program.child, 30), 3);
    EXPECT_NE(test::read_output(program.child).find("terminated"), std::string::npos)
        << test::read_output(program.child);
    program.child.pid = -1;
    std::filesystem::remove(trace);
}

TEST(NativeOnly, DumpPrintsTheNativeStacksOfAnyProgram) {
    if (const std::string why = ptrace_refusal(); !why.empty()) GTEST_SKIP() << why;
    Program program{test::spawn({kSpin, "30"})};
    ASSERT_TRUE(test::wait_for_output(program.child, "ready", 30)) << test::read_output(program.child);
    const std::string pid = std::to_string(program.child.pid);
    std::string dump;
    ASSERT_EQ(test::run({test::bin("ember"), "dump", "--pid", pid, "--native"}, &dump, {}, 60), 0) << dump;
    EXPECT_NE(dump.find("Native stacks only (not a CPython process)"), std::string::npos) << dump;
    EXPECT_NE(dump.find("    spin_in_known_function ("), std::string::npos) << dump;
    EXPECT_NE(dump.find("\"sleeper\""), std::string::npos) << dump;
    EXPECT_NE(dump.find("(idle): \"sleeper\""), std::string::npos) << dump;
    // Without --native such a program is refused, as before.
    ASSERT_EQ(test::run({test::bin("ember"), "dump", "--pid", pid}, &dump, {}, 60), 2) << dump;
    EXPECT_NE(dump.find("is not a CPython process"), std::string::npos) << dump;
}

// Without --native nothing changes: no file, the exit status, and the message says
// what --native would do.
TEST(NativeOnly, WithoutNativeNothingIsWrittenAndTheMessageNamesNative) {
    const std::string trace = test::temp_path("native_only_off.db");
    std::string output;
    EXPECT_EQ(test::run({test::bin("ember"), "record", "-o", trace, "--", kSpin, "0.2"}, &output, {}, 60), 3) << output;
    EXPECT_NE(output.find("no trace written"), std::string::npos) << output;
    EXPECT_NE(output.find("--native samples any program's native stacks"), std::string::npos) << output;
    EXPECT_FALSE(std::filesystem::exists(trace));
    // --pid with --python-hz 0: a clear refusal (exit 2) naming why 0 is no choice there.
    EXPECT_EQ(
        test::run({test::bin("ember"), "record", "--pid", std::to_string(getpid()), "--python-hz", "0", "-o", trace},
                  &output, {}, 60),
        2);
    EXPECT_NE(output.find("--python-hz must be above 0 (with --pid, sampling is all there is to record)"),
              std::string::npos)
        << output;
}

}  // namespace
