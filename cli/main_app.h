// main_app.h: the root `ember` app both executables build (main.cpp: `ember`;
// engine_main.cpp: `ember-engine`, which `ember` runs for the engine's commands).
#pragma once

#include "cli/command_errors.h"
#include "ember/version.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

namespace ember::cli {

constexpr const char* kRootDescription =
    "ember: train neural networks on NVIDIA GPUs and see where the time goes.\n"
    "Run `ember <command> --help` for the options of one command.";

inline void configure_root_app(CLI::App& app) {
    app.set_version_flag("--version", std::string("ember ") + EMBER_VERSION_STRING);
    app.require_subcommand(0, 1);
    app.fallthrough(false);
}

inline int run_root_app(CLI::App& app, int argc, char** argv) {
    try {
        app.parse(argc, argv);
    } catch (const CLI::RuntimeError& e) {
        return e.get_exit_code();  // the command said why (command_errors.h)
    } catch (const CLI::ParseError& e) {
        // CLI11 prints the usage error (or the help, exit 0) and numbers its errors from
        // 100; to the user every one of them is bad input.
        return app.exit(e) == 0 ? 0 : kBadInputExitCode;
    } catch (const std::exception& e) {
        // What no command caught: one line naming the command, and the exit-code rule
        // (a trace file's error is bad input, anything else a failure at run time).
        const std::vector<CLI::App*> commands = app.get_subcommands();
        std::fprintf(stderr, "ember%s%s: %s\n", commands.empty() ? "" : " ",
                     commands.empty() ? "" : commands.front()->get_name().c_str(), e.what());
        return exit_code_of(e);
    }
    if (app.get_subcommands().empty()) std::fputs(app.help().c_str(), stdout);
    return 0;
}

}  // namespace ember::cli
