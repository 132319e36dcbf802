// commands.h: every `ember` subcommand registers itself on the root CLI11 app
// through one add_*_command function, one file per subcommand, each a thin layer
// over a library (the engine, the collectors, the trace library, bench/). main.cpp
// calls them in the order they are listed in `ember --help`.
#pragma once

namespace CLI {
class App;
}

namespace ember::cli {

// The engine's commands are registered in ember-engine and forwarded by `ember`
// (main.cpp); both show these descriptions in their help.
inline constexpr const char* kDoctorDescription =
    "Report the environment: CUDA, driver, GPUs, cuDNN, NCCL, CUPTI, NVTX, MPI, the Fashion-MNIST data set and the "
    "display";
inline constexpr const char* kTrainDescription =
    "Train on Fashion-MNIST (CUDA when a device is present, else the CPU backend); --profile FILE records the run";
inline constexpr const char* kDataDescription = "Data sets: convert Fashion-MNIST into an image folder";
inline constexpr const char* kBenchDescription =
    "Benchmarks, each measured against a baseline run in the same invocation";

void add_doctor_command(CLI::App& app);
// `ember train` (train_command.cpp).
void add_train_command(CLI::App& app);
// `ember view FILE...` runs the ember-view viewer (view_command.cpp).
void add_view_command(CLI::App& app);
// `ember synth -o FILE --events N` (synth_command.cpp).
void add_synth_command(CLI::App& app);
// `ember data prepare ...` (data_command.cpp).
void add_data_command(CLI::App& app);
// `ember stats FILE` (stats_command.cpp).
void add_stats_command(CLI::App& app);
// `ember export FILE --format ...` (export_command.cpp).
void add_export_command(CLI::App& app);
// `ember record -o FILE -- CMD ARGS` (record_command.cpp).
void add_record_command(CLI::App& app);
// `ember dump --pid PID`: every Python thread's stack, once (dump_command.cpp).
void add_dump_command(CLI::App& app);
// `ember attach PID start|stop|flush|status` (attach_command.cpp).
void add_attach_command(CLI::App& app);
// `ember import FILE... [-o OUT]` (import_command.cpp).
void add_import_command(CLI::App& app);
// `ember merge -o JOB FILE...` (merge_command.cpp).
void add_merge_command(CLI::App& app);
// `ember diff A B` (diff_command.cpp).
void add_diff_command(CLI::App& app);
// `ember bench store|dataloader|train|allreduce` (bench_command.cpp; the benchmarks live in bench/).
void add_bench_command(CLI::App& app);

}  // namespace ember::cli
