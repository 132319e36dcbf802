// launch_test.cpp: the launcher behind `ember record -- CMD` (collectors/launch.h), called
// directly: a program's exit status and the signal that killed it come back as a shell
// reports them, the environment it is given is the one it sees (the recording
// variables with its own pid as the root), SIGTERM sent to the launcher reaches it, and
// the wait leaves the ptrace stops of another thread (the --native sampler) to that
// thread. Also the recording environment's round trip and defaults
// (collectors/record_environment.h).
#include "collectors/launch.h"
#include "collectors/record_environment.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

namespace ember::collector {
namespace {

int run_to_end(LaunchOptions options) {
    LaunchedProgram program(options);
    return program.wait();
}

LaunchOptions shell(const std::string& script) {
    LaunchOptions options;
    options.command = {"/bin/sh", "-c", script};
    options.name = "launch_test";
    return options;
}

// ---------------------------------------------------------------------------
// [SECTION] The recording environment
// ---------------------------------------------------------------------------

EnvironmentLookup lookup_in(const std::map<std::string, std::string>& variables) {
    return [&variables](const char* name) -> const char* {
        auto found = variables.find(name);
        return found != variables.end() ? found->second.c_str() : nullptr;
    };
}

TEST(RecordEnvironment, EverySettingSurvivesTheRoundTrip) {
    RecordSettings settings;
    settings.output = "/data/run with spaces.db";
    settings.root_pid = 4242;
    settings.children = ChildPolicy::skip;
    settings.paused = true;
    settings.cpu_sample_hz = 0.1;  // not a short decimal in binary: written exactly
    settings.nvml_hz = 1.0 / 3.0;
    settings.control_socket = false;
    settings.trace_cuda = false;
    settings.trace_cuda_memory = true;
    settings.quiet = true;
    settings.python_call_sites = false;
    std::map<std::string, std::string> variables;
    for (const auto& [name, value] : settings.to_environment()) variables[name] = value;
    EXPECT_EQ(variables.size(), 11u);  // every variable, each once
    EXPECT_EQ(variables[kRecordChildrenVariable], "skip");
    EXPECT_EQ(variables[kRecordNoCudaVariable], "1");
    EXPECT_EQ(variables[kRecordCudaMemoryVariable], "1");
    EXPECT_EQ(RecordSettings::from_environment(lookup_in(variables)), settings);
    // The defaults survive too.
    variables.clear();
    for (const auto& [name, value] : RecordSettings{}.to_environment()) variables[name] = value;
    EXPECT_EQ(RecordSettings::from_environment(lookup_in(variables)), RecordSettings{});
}

TEST(RecordEnvironment, AbsentOrEmptyVariablesReadAsTheDefaults) {
    const std::map<std::string, std::string> none;
    const RecordSettings read = RecordSettings::from_environment(lookup_in(none));
    EXPECT_EQ(read, RecordSettings{});
    // What `ember record` documents (docs/collectors.md): not recording, 20 GPU counter
    // samples a second, no CPU sampling, the control socket on, CUDA traced.
    EXPECT_TRUE(read.output.empty());
    EXPECT_EQ(read.nvml_hz, 20.0);
    EXPECT_EQ(read.cpu_sample_hz, 0.0);
    EXPECT_TRUE(read.control_socket);
    EXPECT_TRUE(read.trace_cuda);
    EXPECT_FALSE(read.trace_cuda_memory);  // CUDA memory records only on request (--cuda-memory)
    EXPECT_EQ(read.children, ChildPolicy::suffix);
    const std::map<std::string, std::string> empty = {{kRecordNvmlHzVariable, ""}, {kRecordSocketVariable, ""}};
    EXPECT_EQ(RecordSettings::from_environment(lookup_in(empty)), RecordSettings{});
    // A flag is on unless "0"; an unknown child policy keeps the default.
    const std::map<std::string, std::string> odd = {{kRecordQuietVariable, "yes"}, {kRecordChildrenVariable, "all"}};
    EXPECT_TRUE(RecordSettings::from_environment(lookup_in(odd)).quiet);
    EXPECT_EQ(RecordSettings::from_environment(lookup_in(odd)).children, ChildPolicy::suffix);
}

TEST(RecordEnvironment, ChildPolicyNamesParseBack) {
    for (ChildPolicy policy : {ChildPolicy::suffix, ChildPolicy::skip})
        EXPECT_EQ(parse_child_policy(child_policy_name(policy)), policy);
    EXPECT_EQ(parse_child_policy("Skip"), std::nullopt);
}

// ---------------------------------------------------------------------------
// [SECTION] Launching
// ---------------------------------------------------------------------------

TEST(Launch, ExitStatusComesBack) {
    EXPECT_EQ(run_to_end(shell("exit 3")), 3);
    EXPECT_EQ(run_to_end(shell("exit 0")), 0);
    EXPECT_EQ(run_to_end(shell("kill -KILL $$")), 128 + SIGKILL);
}

TEST(Launch, AProgramThatCannotRunExits127AsInAShell) {
    LaunchOptions options;
    options.command = {"/no/such/program"};
    options.name = "launch_test";
    EXPECT_EQ(run_to_end(options), 127);
    EXPECT_THROW(LaunchedProgram(LaunchOptions{}), std::invalid_argument);
}

TEST(Launch, TheProgramSeesTheEnvironmentItIsGiven) {
    LaunchOptions options = shell("exit $EMBER_LAUNCH_TEST_CODE");
    options.environment = {{"EMBER_LAUNCH_TEST_CODE", "5"}};
    EXPECT_EQ(run_to_end(options), 5);
}

TEST(Launch, ARecordedProgramGetsTheCollectorAndItsOwnPidAsTheRoot) {
    RecordSettings settings;
    settings.output = "/tmp/launch_test.db";
    settings.root_pid = 1;  // replaced by the program's own pid
    settings.nvml_hz = 0;
    // Exit 7 when every variable holds what the library will read, else say which did not.
    const std::string script = std::string("[ \"$") + kRecordRootPidVariable + "\" = \"$$\" ] || exit 11; " + "[ \"$" +
                               kCudaInjectionVariable + "\" = /opt/libember_collector.so ] || exit 12; " + "[ \"$" +
                               kNvtxInjectionVariable + "\" = /opt/libember_collector.so ] || exit 13; " + "[ \"$" +
                               kRecordOutputVariable + "\" = /tmp/launch_test.db ] || exit 14; " + "[ \"$" +
                               kRecordNvmlHzVariable + "\" = 0 ] || exit 15; exit 7";
    LaunchOptions options = shell(script);
    options.record = settings;
    options.collector_library = "/opt/libember_collector.so";
    EXPECT_EQ(run_to_end(options), 7);
}

TEST(Launch, SigtermToTheLauncherReachesTheProgram) {
    LaunchOptions options;
    options.command = {"sleep", "30"};
    options.wait_for_exec = true;  // sleep itself, not the forked copy of this test, gets it
    LaunchedProgram program(options);
    ASSERT_EQ(kill(getpid(), SIGTERM), 0);  // forwarded, not taken by this process
    EXPECT_EQ(program.wait(), 128 + SIGTERM);
    // Handlers are restored after the wait: SIGTERM is this process's own again.
    struct sigaction now {};
    sigaction(SIGTERM, nullptr, &now);
    EXPECT_EQ(now.sa_handler, SIG_DFL);
}

// The scheduling state letter of /proc/PID/stat ('t': a tracing stop); '?' when gone.
char process_state(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return '?';
    const std::size_t close = line.rfind(')');
    return close != std::string::npos && close + 2 < line.size() ? line[close + 2] : '?';
}

// The --native sampler's way of stopping a thread (collectors/python/native_stack.cpp),
// over and over, from another thread, while the main thread waits for the program's exit.
TEST(Launch, WaitLeavesAnotherThreadsPtraceStopsToIt) {
    LaunchOptions options = shell("i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; exit 3");
    options.wait_for_exec = true;
    LaunchedProgram program(options);
    const pid_t pid = program.pid();
    std::atomic<bool> done{false};
    std::atomic<int> refusal{0};
    std::atomic<int> stops{0};
    std::thread tracer([&] {
        while (!done.load()) {
            if (ptrace(PTRACE_SEIZE, pid, nullptr, nullptr) != 0) {
                if (errno != ESRCH) refusal = errno;
                return;
            }
            ptrace(PTRACE_INTERRUPT, pid, nullptr, nullptr);
            int signal = 0;
            bool stopped = false, gone = false;
            while (!stopped && !gone) {
                siginfo_t info{};
                if (waitid(P_PID, static_cast<id_t>(pid), &info, WSTOPPED | WNOHANG | __WALL) == 0 &&
                    info.si_pid == pid && (info.si_code == CLD_TRAPPED || info.si_code == CLD_STOPPED)) {
                    if ((info.si_status >> 8) != PTRACE_EVENT_STOP) signal = info.si_status & 0x7f;
                    stopped = true;
                    break;
                }
                const char state = process_state(pid);
                stopped = state == 't';
                gone = state == '?' || state == 'Z' || state == 'X';
                if (!stopped && !gone) usleep(100);
            }
            if (gone) return;
            ++stops;
            ptrace(PTRACE_DETACH, pid, nullptr, reinterpret_cast<void*>(static_cast<long>(signal)));
            usleep(1000);
        }
    });
    const int code = program.wait(true);
    done = true;
    tracer.join();
    if (refusal != 0 && stops == 0) GTEST_SKIP() << "ptrace refused here: " << std::strerror(refusal);
    EXPECT_GT(stops.load(), 0);
    EXPECT_EQ(code, 3) << "the wait took a stop report of the tracer's for the exit";
}

}  // namespace
}  // namespace ember::collector
