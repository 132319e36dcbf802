// run_beside.cpp: see run_beside.h.
#include "cli/run_beside.h"

#include "cli/command_errors.h"

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <unistd.h>

namespace ember::cli {

namespace {

std::string beside_this_program(const std::string& program) {
    std::error_code error;
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
    if (error) return "";
    const std::filesystem::path path = self.parent_path() / program;
    return std::filesystem::exists(path, error) ? path.string() : "";
}

}  // namespace

void run_beside(const std::string& program, const std::vector<std::string>& arguments, const char* command,
                const char* how_to_get) {
    std::string path = beside_this_program(program);
    const bool beside = !path.empty();
    if (!beside) path = program;
    std::vector<std::string> owned = arguments;
    std::vector<char*> argv;
    argv.push_back(path.data());
    for (std::string& argument : owned) argv.push_back(argument.data());
    argv.push_back(nullptr);
    std::fflush(stdout);
    if (beside)
        execv(path.c_str(), argv.data());
    else
        execvp(path.c_str(), argv.data());
    std::fprintf(stderr, "ember %s: cannot run %s: %s\n  %s\n", command, program.c_str(), std::strerror(errno),
                 how_to_get);
    std::exit(kRunTimeFailureExitCode);  // no throw: main.cpp runs ember-mpi before any command
}

void add_forwarded_command(CLI::App& app, const char* name, const char* description, const char* program,
                           const char* how_to_get) {
    CLI::App* cmd = app.add_subcommand(name, description);
    cmd->prefix_command();  // everything after the name belongs to the program
    cmd->set_help_flag();   // so does --help
    cmd->callback([cmd, name, program, how_to_get] {
        std::vector<std::string> arguments{name};
        for (const std::string& argument : cmd->remaining()) arguments.push_back(argument);
        run_beside(program, arguments, name, how_to_get);
    });
}

}  // namespace ember::cli
