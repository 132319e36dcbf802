// view_command.cpp: `ember view FILE [FILE...] [options]` runs the desktop viewer,
// `ember-view`, found beside the `ember` executable (or on PATH), passing every
// argument through. The viewer is its own executable so that `ember` never links
// the GUI stack (ImGui, GLFW, OpenGL) and builds with EMBER_BUILD_VIEWER=OFF.
#include "cli/commands.h"
#include "cli/run_beside.h"

#include <CLI/CLI.hpp>

namespace ember::cli {

void add_view_command(CLI::App& app) {
    CLI::App* cmd =
        app.add_subcommand("view",
                           "Open trace files in the desktop viewer (timeline, flamegraphs, tables); "
                           "`ember view --help` lists its options (--screenshot, --bench, --attach PID, ...)");
    cmd->prefix_command();  // everything after `view` belongs to ember-view
    cmd->set_help_flag();   // so does --help
    cmd->callback([cmd] {
        run_beside("ember-view", cmd->remaining(), "view",
                   "the viewer is built with the CMake option EMBER_BUILD_VIEWER=ON (the default) "
                   "and installed beside `ember`");
    });
}

}  // namespace ember::cli
