// session_test.cpp: the collector's host-side parts inside the test process: the
// output-path rule for child processes and ranks, the control socket (commands,
// private directory checks, refusal of another uid) and the CPU sampler (a busy
// function shows up in the stack samples).
#include "collectors/control_socket.h"
#include "collectors/session.h"
#include "profiler/store/reader.h"
#include "tests/collectors/host_session.h"
#include "tests/collectors/subprocess.h"

#include <gtest/gtest.h>

#include <linux/securebits.h>
#include <sys/prctl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cmath>
#include <filesystem>

// Not static, not inlined, exported (ENABLE_EXPORTS): the sampler must find it by name.
// Runs for `seconds` of this thread's CPU time (the sampler's clock), at most 20 s
// of wall time on a crowded machine.
extern "C" __attribute__((noinline)) double collector_test_busy_loop(double seconds) {
    auto cpu_ns = [] {
        timespec now;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
        return std::int64_t(now.tv_sec) * 1000000000 + now.tv_nsec;
    };
    double sum = 0.0;
    std::int64_t cpu_end = cpu_ns() + static_cast<std::int64_t>(seconds * 1e9);
    std::int64_t wall_end = ember::test::monotonic_ns() + 20'000'000'000;
    while (cpu_ns() < cpu_end && ember::test::monotonic_ns() < wall_end)
        for (int index = 1; index < 1000; ++index) sum += std::sqrt(static_cast<double>(index));
    return sum;
}

namespace ember {
namespace {

using collector::ChildPolicy;
using collector::RecordEnvironment;

TEST(CollectorOutputPath, RootChildrenAndRanks) {
    RecordEnvironment environment;
    environment.output = "/data/run.db";
    environment.root_pid = 100;
    EXPECT_EQ(collector::resolve_output_path(environment, 100), "/data/run.db");
    EXPECT_EQ(collector::resolve_output_path(environment, 101), "/data/run.pid101.db");
    environment.children = ChildPolicy::skip;
    EXPECT_EQ(collector::resolve_output_path(environment, 101), std::nullopt);
    EXPECT_EQ(collector::resolve_output_path(environment, 100), "/data/run.db");
    environment.rank = 3;
    environment.world_size = 8;
    EXPECT_EQ(collector::resolve_output_path(environment, 101), "/data/run.rank3.db");
    environment.output = "trace";
    EXPECT_EQ(collector::resolve_output_path(environment, 100), "trace.rank3.db");
    environment.output.clear();
    EXPECT_EQ(collector::resolve_output_path(environment, 100), std::nullopt);
}

// The library reads what `ember record` writes through the same code
// (record_environment.h): every setting reaches the session's options, each switch
// (SessionSwitches, compared whole, so a new one is checked too) as it was written.
TEST(CollectorOutputPath, SessionOptionsAreWhatTheLauncherWrote) {
    collector::RecordSettings settings;
    settings.output = "/data/launched.db";
    settings.root_pid = ::getpid();
    settings.paused = true;
    settings.cpu_sample_hz = 7.5;
    settings.nvml_hz = 0.0;
    settings.control_socket = false;
    settings.trace_cuda = false;
    settings.trace_cuda_memory = true;
    settings.quiet = true;
    settings.python_call_sites = false;
    ASSERT_NE(static_cast<const collector::SessionSwitches&>(settings), collector::SessionSwitches{});
    const auto variables = settings.to_environment();
    for (const auto& [name, value] : variables) setenv(name.c_str(), value.c_str(), 1);
    const std::optional<collector::SessionOptions> options = collector::options_from_environment();
    for (const auto& [name, value] : variables) unsetenv(name.c_str());
    ASSERT_TRUE(options.has_value());
    EXPECT_EQ(options->path, "/data/launched.db");
    EXPECT_TRUE(options->injected);
    EXPECT_TRUE(options->paused);
    EXPECT_EQ(options->cpu_sample_hz, 7.5);
    EXPECT_EQ(options->nvml_hz, 0.0);
    EXPECT_FALSE(options->control_socket);
    EXPECT_FALSE(options->trace_cuda);
    EXPECT_TRUE(options->quiet);
    EXPECT_FALSE(options->python_call_sites);
    EXPECT_TRUE(options->trace_cuda_memory);
    EXPECT_EQ(static_cast<const collector::SessionSwitches&>(*options),
              static_cast<const collector::SessionSwitches&>(settings));
    // The C API's sessions listen for `ember attach` only when asked; the rest of their
    // switches are the contract's defaults.
    collector::SessionOptions api_defaults;
    EXPECT_FALSE(api_defaults.control_socket);
    api_defaults.control_socket = true;
    EXPECT_EQ(static_cast<const collector::SessionSwitches&>(api_defaults), collector::SessionSwitches{});
    // Nothing set: not recorded.
    EXPECT_FALSE(collector::options_from_environment().has_value());
}

// Connects straight to the socket (no client-side directory check, which would
// refuse first) and sends "start"; true when the server answers "error refused".
bool raw_request_is_refused(const std::string& socket_path) {
    int connection = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, socket_path.c_str(), sizeof address.sun_path - 1);
    if (connect(connection, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) _exit(11);
    const char request[] = "start\n";
    // The server may refuse and close before the request is written; the reply is
    // still there to read.
    (void)send(connection, request, sizeof request - 1, MSG_NOSIGNAL);
    char reply[128] = {};
    pollfd ready{connection, POLLIN, 0};
    if (poll(&ready, 1, 2000) <= 0) _exit(14);
    ssize_t got = read(connection, reply, sizeof reply - 1);
    close(connection);
    return got > 0 && std::string(reply).rfind("error refused", 0) == 0;
}

// Points the control directory at a fresh place for one test.
class ControlDirectory {
  public:
    ControlDirectory() {
        base_ = test::temp_path("runtime");
        std::filesystem::remove_all(base_);
        mkdir(base_.c_str(), 0700);
        setenv("XDG_RUNTIME_DIR", base_.c_str(), 1);
    }
    ~ControlDirectory() {
        unsetenv("XDG_RUNTIME_DIR");
        std::filesystem::remove_all(base_);
    }
    std::string directory() const { return base_ + "/ember"; }

  private:
    std::string base_;
};

TEST(CollectorControlSocket, RefusesAWorldWritableDirectory) {
    ControlDirectory control;
    ASSERT_EQ(mkdir(control.directory().c_str(), 0700), 0);
    ASSERT_EQ(chmod(control.directory().c_str(), 0777), 0);
    std::string error;
    EXPECT_EQ(collector::control_directory(&error), "");
    EXPECT_NE(error.find("mode 0777"), std::string::npos) << error;
    std::string reply;
    EXPECT_FALSE(collector::control_request(getpid(), "status", &reply, &error, 500));
}

TEST(CollectorControlSocket, RefusesASymlinkedDirectory) {
    ControlDirectory control;
    std::string target = test::temp_path("elsewhere");
    mkdir(target.c_str(), 0700);
    ASSERT_EQ(symlink(target.c_str(), control.directory().c_str()), 0);
    std::string error;
    EXPECT_EQ(collector::control_directory(&error), "");
    EXPECT_NE(error.find("not a directory"), std::string::npos) << error;
    rmdir(target.c_str());
}

TEST(CollectorControlSocket, CommandsFromTheSameUserAndRefusalOfAnother) {
    ControlDirectory control;
    collector::SessionOptions options;
    options.path = test::temp_path("socket.db");
    options.trace_cuda = false;
    options.nvml_hz = 0;
    options.control_socket = true;
    options.paused = true;
    collector::Session& session = collector::start_session(options);

    std::string error;
    std::string directory = collector::control_directory(&error);
    ASSERT_FALSE(directory.empty()) << error;
    struct stat info {};
    ASSERT_EQ(stat(directory.c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 0777, 0700u);
    std::string socket_path = collector::control_socket_path(directory, getpid());
    ASSERT_EQ(stat(socket_path.c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 0777, 0600u);

    std::string reply;
    ASSERT_TRUE(collector::control_request(getpid(), "status", &reply, &error)) << error;
    EXPECT_EQ(reply.rfind("ok paused", 0), 0u) << reply;
    ASSERT_TRUE(collector::control_request(getpid(), "start", &reply, &error)) << error;
    EXPECT_TRUE(session.capturing());
    ASSERT_TRUE(collector::control_request(getpid(), "flush", &reply, &error)) << error;
    EXPECT_EQ(reply, "ok flushed");
    ASSERT_TRUE(collector::control_request(getpid(), "stop", &reply, &error)) << error;
    EXPECT_FALSE(session.capturing());
    ASSERT_TRUE(collector::control_request(getpid(), "bogus", &reply, &error)) << error;
    EXPECT_EQ(reply.rfind("error unknown command", 0), 0u);

    if (getuid() == 0) {
        // Another user: a child that becomes uid 65534 but keeps root's file access
        // (SECBIT_NO_SETUID_FIXUP keeps CAP_DAC_OVERRIDE), so only SO_PEERCRED stops it.
        pid_t child = fork();
        if (child == 0) {
            if (prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED) != 0) _exit(20);
            if (setuid(65534) != 0) _exit(10);
            _exit(raw_request_is_refused(socket_path) ? 0 : 12);
        }
        test::Child waiter;
        waiter.pid = child;
        int code = test::wait_for(waiter, 10.0);
        if (code == 20)
            GTEST_LOG_(INFO) << "cannot keep capabilities across setuid here; peer-uid refusal not exercised";
        else
            EXPECT_EQ(code, 0) << "the server did not refuse uid 65534 (11: no answer, 12: not refused)";
        // Without the kept capability the 0700 directory itself keeps it out.
        child = fork();
        if (child == 0) {
            if (setuid(65534) != 0) _exit(10);
            std::string child_reply, child_error;
            _exit(collector::control_request(getppid(), "stop", &child_reply, &child_error, 2000) ? 12 : 0);
        }
        waiter.pid = child;
        EXPECT_EQ(test::wait_for(waiter, 10.0), 0);
        EXPECT_FALSE(session.capturing());  // still as the owner left it
    } else {
        GTEST_LOG_(INFO) << "not root: the other-uid refusal is tested as root only";
    }
    std::string stop_error;
    EXPECT_TRUE(collector::stop_session(&stop_error)) << stop_error;
    EXPECT_NE(stat(socket_path.c_str(), &info), 0);  // removed at stop
    std::remove(options.path.c_str());
}

TEST(CollectorCpuSampler, ABusyFunctionShowsUpInTheSamples) {
    collector::SessionOptions options = test::host_session_options(test::temp_path("cpu.db"));
    options.cpu_sample_hz = 1000;
    collector::start_session(options);
    volatile double sink = collector_test_busy_loop(1.0);
    (void)sink;
    std::string error;
    ASSERT_TRUE(collector::stop_session(&error)) << error;

    store::TraceReader reader(options.path);
    std::int64_t samples = 0, in_busy_loop = 0;
    reader.for_each_stack_sample({}, [&](const trace::StackSample& sample) {
        ++samples;
        for (const trace::FrameInfo& frame : reader.stack_frames(sample.stack_id))
            if (frame.function.find("collector_test_busy_loop") != std::string::npos) {
                ++in_busy_loop;
                break;
            }
        return true;
    });
    // 1 s of CPU at 1000 Hz; process CPU timers expire on scheduler ticks, which
    // coarsens that to 60-250 Hz depending on the kernel.
    EXPECT_GE(samples, 40);
    EXPECT_GE(in_busy_loop, samples * 8 / 10) << in_busy_loop << " of " << samples;
    std::remove(options.path.c_str());
}

}  // namespace
}  // namespace ember
