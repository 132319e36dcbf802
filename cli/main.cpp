// main.cpp: the `ember` command, git-style subcommands (CLI11).
#include "ember/version.h"
#include "cli/commands.h"

#include <CLI/CLI.hpp>

#include <cstdio>

int main(int argc, char** argv) {
    CLI::App app{
        "ember: train neural networks on NVIDIA GPUs and see where the time goes.\n"
        "Run `ember <command> --help` for the options of one command.",
        "ember"};
    app.set_version_flag("--version", std::string("ember ") + EMBER_VERSION_STRING);
    app.require_subcommand(0, 1);
    app.fallthrough(false);

    ember::cli::add_doctor_command(app);
    ember::cli::add_train_command(app);
    ember::cli::add_view_command(app);
    ember::cli::add_synth_command(app);
    ember::cli::add_data_command(app);
    ember::cli::add_stats_command(app);
    ember::cli::add_export_command(app);
    ember::cli::add_record_command(app);
    ember::cli::add_attach_command(app);
    ember::cli::add_import_command(app);
    ember::cli::add_merge_command(app);
    ember::cli::add_diff_command(app);

    ember::cli::add_bench_command(app);

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    if (app.get_subcommands().empty()) {
        std::fputs(app.help().c_str(), stdout);
        return 0;
    }
    return 0;
}
