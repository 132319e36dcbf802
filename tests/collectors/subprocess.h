// subprocess.h: run a program from a test with a time limit (tests must not hang),
// and locate the build's binaries.
#pragma once

#include "profiler/store/trace_files.h"
#include "tests/support/read_file.h"
#include "tests/support/temp_path.h"

#include <chrono>
#include <csignal>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace ember::test {

// The build tree (CMake passes it to these tests at compile time).
inline std::string binary_dir() {
    const char* dir = std::getenv("EMBER_BINARY_DIR");
    if (dir && *dir) return dir;
#ifdef EMBER_TEST_BINARY_DIR
    return EMBER_TEST_BINARY_DIR;
#else
    return ".";
#endif
}
inline std::string bin(const std::string& name) {
    return binary_dir() + "/bin/" + name;
}

inline std::int64_t monotonic_ns() {
    timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return std::int64_t(now.tv_sec) * 1000000000 + now.tv_nsec;
}

struct Child {
    pid_t pid = -1;
    std::string output_path;  // stdout and stderr of the child
};

// Starts argv with `environment` added; output goes to a file.
inline Child spawn(const std::vector<std::string>& argv, const std::vector<std::string>& environment = {}) {
    Child child;
    std::string pattern = (std::filesystem::temp_directory_path() / "ember_collector_test_output_XXXXXX").string();
    int fd = mkstemp(pattern.data());
    child.output_path = pattern;
    child.pid = fork();
    if (child.pid == 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        for (const std::string& variable : environment) putenv(strdup(variable.c_str()));
        std::vector<char*> arguments;
        for (const std::string& argument : argv) arguments.push_back(const_cast<char*>(argument.c_str()));
        arguments.push_back(nullptr);
        execvp(arguments[0], arguments.data());
        _exit(127);
    }
    close(fd);
    return child;
}

inline std::string read_output(const Child& child) {
    return test_support::read_file(child.output_path);
}

// Exit status (128 + signal when killed by one); -1 when it ran past the limit (then killed).
inline int wait_for(const Child& child, double timeout_seconds = 60.0) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
    int status = 0;
    while (std::chrono::steady_clock::now() < deadline) {
        pid_t done = waitpid(child.pid, &status, WNOHANG);
        if (done == child.pid) return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    kill(child.pid, SIGKILL);
    waitpid(child.pid, &status, 0);
    return -1;
}

// Waits until the child's output contains `text` (false after timeout_seconds).
inline bool wait_for_output(const Child& child, const std::string& text, double timeout_seconds = 30.0) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
    while (std::chrono::steady_clock::now() < deadline) {
        if (read_output(child).find(text) != std::string::npos) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
}

inline int run(const std::vector<std::string>& argv, std::string* output = nullptr,
               const std::vector<std::string>& environment = {}, double timeout_seconds = 60.0) {
    Child child = spawn(argv, environment);
    int code = wait_for(child, timeout_seconds);
    if (output) *output = read_output(child);
    unlink(child.output_path.c_str());
    return code;
}

// <temp dir>/ember_collector_test_<stem>_<pid><extension> for a `name` such as "trace.db".
inline std::string temp_path(const std::string& name) {
    const std::filesystem::path file(name);
    return test_support::unique_temp_path("ember_collector_test_" + file.stem().string(), file.extension().string())
        .string();
}

// Removes a trace file of the test and its SQLite companions (-wal, -shm, -journal)
// when it goes out of scope, whether the test passed or stopped at a failed ASSERT: a
// recording killed on purpose never closes its file, so its companions stay beside it.
class RemovedAtEnd {
  public:
    explicit RemovedAtEnd(std::string path) : path_(std::move(path)) {}
    ~RemovedAtEnd() { store::remove_trace_files(path_); }
    RemovedAtEnd(const RemovedAtEnd&) = delete;
    RemovedAtEnd& operator=(const RemovedAtEnd&) = delete;

  private:
    std::string path_;
};

}  // namespace ember::test
