// launch.cpp: see launch.h.
#include "collectors/launch.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <system_error>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace ember::collector {

namespace {

// ---------------------------------------------------------------------------
// [SECTION] Signal forwarding
// ---------------------------------------------------------------------------

constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP};
constexpr int kForwardedCount = sizeof kForwardedSignals / sizeof kForwardedSignals[0];

volatile sig_atomic_t g_forward_to = 0;
struct sigaction g_previous[kForwardedCount];

void forward_signal(int signal_number) {
    if (g_forward_to > 0) kill(static_cast<pid_t>(g_forward_to), signal_number);
}

[[noreturn]] void fail(const char* call) {
    throw LaunchError(std::string(call) + ": " + std::strerror(errno));
}

// ---------------------------------------------------------------------------
// [SECTION] The forked child, up to exec
// ---------------------------------------------------------------------------

// Runs in the child: sets the environment and execs. Never returns.
[[noreturn]] void exec_child(const LaunchOptions& options, const std::vector<EnvironmentVariable>& environment,
                             int exec_pipe_read) {
    if (exec_pipe_read >= 0) close(exec_pipe_read);
    for (const auto& [name, value] : environment) setenv(name.c_str(), value.c_str(), 1);
    if (options.record) {
        char pid_text[32];
        std::snprintf(pid_text, sizeof pid_text, "%lld", static_cast<long long>(getpid()));
        setenv(kRecordRootPidVariable, pid_text, 1);
    }
    std::vector<char*> arguments;
    for (const std::string& argument : options.command) arguments.push_back(const_cast<char*>(argument.c_str()));
    arguments.push_back(nullptr);
    execvp(arguments[0], arguments.data());
    std::fprintf(stderr, "%s: cannot run %s: %s\n", options.name.c_str(), arguments[0], std::strerror(errno));
    _exit(127);
}

// Every variable the child gets, worked out before fork (the child only copies them in).
std::vector<EnvironmentVariable> child_environment(const LaunchOptions& options) {
    std::vector<EnvironmentVariable> environment;
    if (options.record) {
        environment.emplace_back(kCudaInjectionVariable, options.collector_library);
        environment.emplace_back(kNvtxInjectionVariable, options.collector_library);
        for (EnvironmentVariable& variable : options.record->to_environment())
            environment.push_back(std::move(variable));
    }
    environment.insert(environment.end(), options.environment.begin(), options.environment.end());
    return environment;
}

}  // namespace

std::string find_collector_library() {
    if (const char* explicit_path = std::getenv(kCollectorLibraryVariable); explicit_path && *explicit_path)
        return explicit_path;
    std::error_code error;
    std::filesystem::path executable = std::filesystem::read_symlink("/proc/self/exe", error);
    if (error) return "";
    std::filesystem::path directory = executable.parent_path();
    for (const std::filesystem::path& candidate :
         {directory / "../lib/libember_collector.so", directory / "libember_collector.so",
          directory / "../lib64/libember_collector.so"}) {
        if (std::filesystem::exists(candidate, error))
            return std::filesystem::weakly_canonical(candidate, error).string();
    }
    return "";
}

int exit_code_of_wait_status(int status) {
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// ---------------------------------------------------------------------------
// [SECTION] LaunchedProgram
// ---------------------------------------------------------------------------

LaunchedProgram::LaunchedProgram(const LaunchOptions& options) {
    if (options.command.empty()) throw std::invalid_argument("no program to launch");
    const std::vector<EnvironmentVariable> environment = child_environment(options);
    // The pipe's write end closes on exec (O_CLOEXEC): end of file says the program runs.
    int exec_pipe[2] = {-1, -1};
    if (options.wait_for_exec && pipe2(exec_pipe, O_CLOEXEC) != 0) fail("pipe");
    std::fflush(nullptr);  // else buffered output would be written twice
    pid_ = fork();
    if (pid_ < 0) {
        const int fork_errno = errno;
        if (exec_pipe[0] >= 0) {
            close(exec_pipe[0]);
            close(exec_pipe[1]);
        }
        errno = fork_errno;
        fail("fork");
    }
    if (pid_ == 0) exec_child(options, environment, exec_pipe[0]);
    forward_signals();
    if (exec_pipe[0] >= 0) {
        close(exec_pipe[1]);
        char ignored = 0;
        while (read(exec_pipe[0], &ignored, 1) < 0 && errno == EINTR) {
        }
        close(exec_pipe[0]);
    }
}

LaunchedProgram::~LaunchedProgram() {
    restore_signals();
}

void LaunchedProgram::forward_signals() {
    g_forward_to = pid_;
    struct sigaction forward {};
    forward.sa_handler = forward_signal;
    sigemptyset(&forward.sa_mask);
    for (int index = 0; index < kForwardedCount; ++index)
        sigaction(kForwardedSignals[index], &forward, &g_previous[index]);
    forwarding_ = true;
}

void LaunchedProgram::restore_signals() {
    if (!forwarding_) return;
    for (int index = 0; index < kForwardedCount; ++index)
        sigaction(kForwardedSignals[index], &g_previous[index], nullptr);
    g_forward_to = 0;
    forwarding_ = false;
}

int LaunchedProgram::wait(bool traced_by_another_thread) {
    if (waited_) return exit_code_;
    if (traced_by_another_thread) {
        for (;;) {
            siginfo_t info{};
            if (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT) < 0) {
                if (errno == EINTR) continue;
                fail("waitid");
            }
            if (info.si_code == CLD_EXITED || info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED) break;
            timespec pause{0, 1'000'000};  // a ptrace stop of the sampler's: it ends within a tick
            nanosleep(&pause, nullptr);
        }
    }
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0) {
        if (errno != EINTR) fail("waitpid");
    }
    restore_signals();
    waited_ = true;
    exit_code_ = exit_code_of_wait_status(status);
    return exit_code_;
}

}  // namespace ember::collector
