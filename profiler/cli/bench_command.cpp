#include "profiler/cli/bench_command.h"

#include <CLI/CLI.hpp>

namespace ember::cli {

CLI::App* add_bench_command(CLI::App& app) {
    CLI::App* bench = app.add_subcommand(
        "bench", "Benchmarks, each measured against a baseline run in the same invocation");
    bench->require_subcommand(1);
    return bench;
}

}  // namespace ember::cli
