// command_errors.h: how every `ember` command fails. One line on stderr, "ember
// COMMAND: MESSAGE", and one exit-code rule (the README's "Exit codes"):
//
//   2  bad input: a flag, a file or a field of one that cannot be used
//      (store::kTraceErrorExitCode, which the trace library's errors carry)
//   1  a failure at run time: the input was fine, the work failed (fork, a device,
//      the control socket, a benchmark, training)
//   4  `ember diff --fail-if-slower`: the regression gate tripped
//
// A recorded program's own exit status passes through `ember record` unchanged.
// Both helpers throw CLI::RuntimeError, which CLI11 turns into the exit code without
// printing anything more: call them from a command's callback, never inside a
// `catch (const std::exception&)` block's try (CLI's errors are std::exceptions).
#pragma once

#include "profiler/store/trace_error.h"

#include <exception>
#include <string_view>

namespace ember::cli {

inline constexpr int kBadInputExitCode = 2;
inline constexpr int kRunTimeFailureExitCode = 1;
inline constexpr int kDiffGateExitCode = 4;
static_assert(kBadInputExitCode == store::kTraceErrorExitCode, "a bad trace is bad input");

// The exit code of an exception that reached a program's main rather than a command's
// own catch: a trace file's error (store::TraceError) is bad input, 2; anything else
// (an MPI call that failed, memory) a failure at run time, 1.
inline int exit_code_of(const std::exception& error) {
    return dynamic_cast<const store::TraceError*>(&error) != nullptr ? kBadInputExitCode : kRunTimeFailureExitCode;
}

// Bad input: "ember COMMAND: MESSAGE", exit 2.
[[noreturn]] void fail_command(std::string_view command, std::string_view message);
// A failure at run time: "ember COMMAND: MESSAGE", exit 1.
[[noreturn]] void fail_at_run_time(std::string_view command, std::string_view message);
// `ember diff --fail-if-slower` tripped: "ember COMMAND: MESSAGE", exit 4.
[[noreturn]] void fail_diff_gate(std::string_view command, std::string_view message);

}  // namespace ember::cli
