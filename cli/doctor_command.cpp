// doctor_command.cpp: `ember doctor`, the environment report. Always exits 0:
// a machine without a GPU is a fact to report, not a failure.
#include "cli/commands.h"
#include "cli/environment.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>

namespace ember::cli {

void add_doctor_command(CLI::App& app) {
    struct Options {
        bool json = false;
        std::string data_root = "/usr/share/datasets/fashion-mnist";
    };
    auto opts = std::make_shared<Options>();
    CLI::App* cmd = app.add_subcommand("doctor", kDoctorDescription);
    cmd->add_flag("--json", opts->json, "Print the report as JSON");
    cmd->add_option("--data-root", opts->data_root, "Where the Fashion-MNIST IDX files live")->capture_default_str();
    cmd->callback([opts] {
        Environment env = probe_environment(opts->data_root);
        std::string out = opts->json ? environment_json(env) : environment_text(env);
        std::fputs(out.c_str(), stdout);
    });
}

}  // namespace ember::cli
