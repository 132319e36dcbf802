// command_errors.cpp: see command_errors.h.
#include "cli/command_errors.h"

#include <CLI/CLI.hpp>
#include <fmt/core.h>

namespace ember::cli {

namespace {

[[noreturn]] void fail_with(std::string_view command, std::string_view message, int exit_code) {
    fmt::print(stderr, "ember {}: {}\n", command, message);
    throw CLI::RuntimeError(exit_code);
}

}  // namespace

void fail_command(std::string_view command, std::string_view message) {
    fail_with(command, message, kBadInputExitCode);
}

void fail_at_run_time(std::string_view command, std::string_view message) {
    fail_with(command, message, kRunTimeFailureExitCode);
}

void fail_diff_gate(std::string_view command, std::string_view message) {
    fail_with(command, message, kDiffGateExitCode);
}

}  // namespace ember::cli
