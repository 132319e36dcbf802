// view_command.cpp: `ember view FILE [FILE...] [options]` runs the desktop viewer,
// `ember-view`, found beside the `ember` executable (or on PATH), passing every
// argument through. The viewer is its own executable so that `ember` never links
// the GUI stack (ImGui, GLFW, OpenGL) and builds with EMBER_BUILD_VIEWER=OFF.
#include "cli/commands.h"

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

namespace ember::cli {

namespace {

std::string viewer_beside_this_program() {
    std::error_code error;
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
    if (error) return "";
    const std::filesystem::path viewer = self.parent_path() / "ember-view";
    return std::filesystem::exists(viewer, error) ? viewer.string() : "";
}

}  // namespace

void add_view_command(CLI::App& app) {
    CLI::App* cmd = app.add_subcommand(
        "view", "Open trace files in the desktop viewer (timeline, flamegraphs, tables); "
                "`ember view --help` lists its options (--screenshot, --bench, --attach PID, ...)");
    cmd->prefix_command();  // everything after `view` belongs to ember-view
    cmd->set_help_flag();   // so does --help
    cmd->callback([cmd] {
        std::vector<std::string> arguments = cmd->remaining();
        std::string program = viewer_beside_this_program();
        const bool beside = !program.empty();
        if (!beside) program = "ember-view";
        std::vector<char*> argv;
        argv.push_back(program.data());
        for (std::string& argument : arguments) argv.push_back(argument.data());
        argv.push_back(nullptr);
        if (beside) execv(program.c_str(), argv.data());
        else execvp(program.c_str(), argv.data());
        std::fprintf(stderr,
                     "ember view: cannot run %s: %s\n"
                     "  the viewer is built with the CMake option EMBER_BUILD_VIEWER=ON (the default) and installed "
                     "beside `ember`\n",
                     program.c_str(), std::strerror(errno));
        std::exit(1);
    });
}

}  // namespace ember::cli
