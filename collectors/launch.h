// launch.h: running a program to record it, the machinery behind `ember record -- CMD`.
// fork/exec with the collector injected (record_environment.h), the signals a user
// sends to ember passed on to the program, and its exit status read back the way a
// shell reports it. No CUDA: `ember` links it and never loads CUDA itself.
//
// At most one LaunchedProgram waits at a time in a process: the signal handlers that
// forward SIGINT/SIGTERM/SIGHUP are process-wide.
#pragma once

#include "collectors/record_environment.h"

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/types.h>

namespace ember::collector {

// A program could not be started (pipe, fork); the message names the call.
class LaunchError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// libember_collector.so: where EMBER_COLLECTOR_LIBRARY says, else beside the running
// executable's bin/ (../lib, the same folder, ../lib64: build tree and install tree
// alike). Empty when none is found.
std::string find_collector_library();

struct LaunchOptions {
    std::vector<std::string> command;  // the program (looked up in PATH) and its arguments
    // Added to the program's environment (replacing a variable of the same name).
    std::vector<EnvironmentVariable> environment;
    // Set: the program is recorded: CUDA_INJECTION64_PATH and NVTX_INJECTION64_PATH name
    // `collector_library`, and record->to_environment() is added with root_pid the
    // program's own pid (whatever record->root_pid says).
    std::optional<RecordSettings> record;
    std::string collector_library;
    // The constructor returns only once the program has replaced the forked copy of this
    // process (exec), or failed to: a sampler started then never reads the launcher's copy.
    bool wait_for_exec = false;
    // Prefix of the line the child prints when exec fails ("NAME: cannot run CMD: why").
    std::string name = "ember";
};

// A started program. SIGINT, SIGTERM and SIGHUP that reach this process are sent on to
// it from the start until wait() returns (the previous handlers are then restored).
// A program that cannot be executed exits 127, as in a shell.
class LaunchedProgram {
  public:
    // Throws LaunchError; std::invalid_argument for an empty command.
    explicit LaunchedProgram(const LaunchOptions& options);
    // Restores the signal handlers; a program not waited for goes on running.
    ~LaunchedProgram();
    LaunchedProgram(const LaunchedProgram&) = delete;
    LaunchedProgram& operator=(const LaunchedProgram&) = delete;

    pid_t pid() const { return pid_; }

    // Waits for the program to end and returns its exit status, or 128 + the signal that
    // killed it. `traced_by_another_thread`: a thread of this process ptrace-stops the
    // program now and then (the --native sampler); a plain wait would be told of (and
    // take) those stops, so the exit is awaited without taking any report (waitid
    // WNOWAIT), then reaped. Throws LaunchError when waiting fails; a second call
    // returns the same status.
    int wait(bool traced_by_another_thread = false);

  private:
    void forward_signals();
    void restore_signals();

    pid_t pid_ = -1;
    bool forwarding_ = false;
    bool waited_ = false;
    int exit_code_ = 0;
};

// The exit code a shell reports for a wait status: the exit status, 128 + signal, else 1.
int exit_code_of_wait_status(int status);

}  // namespace ember::collector
