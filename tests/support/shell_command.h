// shell_command.h: a command line run through the shell as a user runs it, with its
// exit code and what it printed, for the tests of the `ember` program.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace ember::test_support {

struct CommandResult {
    int exit_code = -1;  // -1: the shell did not start, or the command ended by a signal
    std::string output;  // its stdout (stderr too where the command line sends it there)
};

// Runs `command` through /bin/sh (popen) and reads its stdout to the end.
inline CommandResult run_shell(const std::string& command) {
    CommandResult result;
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) return result;
    char buffer[4096];
    std::size_t n;
    while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
    const int status = pclose(pipe);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return result;
}

}  // namespace ember::test_support
