// bench_command.cpp: `ember bench store|dataloader|train|allreduce`. Each benchmark
// lives in bench/ and measures against a baseline or a peer in the same run; this file
// only turns its options into flags.
#include "bench/allreduce_bench.h"
#include "bench/dataloader_bench.h"
#include "bench/store_bench.h"
#include "bench/train_bench.h"
#include "cli/baseline.h"
#include "cli/command_errors.h"
#include "cli/commands.h"

#include <CLI/CLI.hpp>
#include <ember/collector.h>

#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

namespace ember::cli {

namespace {

// Runs one benchmark: a nonzero status (the harness's: 2 bad input, 1 a failure)
// becomes the command's exit status; an error it throws is a failure at run time.
void run_benchmark(const char* name, const std::function<int()>& benchmark) {
    int status = 0;
    try {
        status = benchmark();
    } catch (const CLI::Error&) {
        throw;  // fail_command and friends: already said
    } catch (const std::exception& error) {
        fail_at_run_time(std::string("bench ") + name, error.what());
    }
    if (status != 0) throw CLI::RuntimeError(status);
}

void add_store(CLI::App& bench) {
    auto options = std::make_shared<bench::StoreBenchOptions>();
    CLI::App* command = bench.add_subcommand(
        "store", "Trace writer throughput (events/s) against a plain one-INSERT-per-row loop, same synthetic rows");
    command->add_option("--events", options->events, "Synthetic events written by TraceWriter and the 250 ms baseline")
        ->capture_default_str()
        ->check(CLI::Range(std::int64_t{1000}, std::int64_t{1'000'000'000}));
    command
        ->add_option("--baseline-events", options->baseline_events,
                     "Events for the autocommit baseline (slow: every row is a transaction)")
        ->capture_default_str()
        ->check(CLI::Range(std::int64_t{1000}, std::int64_t{1'000'000'000}));
    command->add_option("--seed", options->seed, "Synthetic trace seed")->capture_default_str();
    command->add_option("--dir", options->directory, "Where to write the trace files (default: a temporary directory)");
    command->add_flag("--keep", options->keep, "Keep the trace files");
    command->callback([options] { run_benchmark("store", [&] { return bench::run_store_bench(*options); }); });
}

void add_dataloader(CLI::App& bench) {
    auto options = std::make_shared<bench::DataloaderBenchOptions>();
    CLI::App* command = bench.add_subcommand(
        "dataloader", "Data loader throughput and stall fraction: workers x pinned x source (IDX, PNG, GPU-resident)");
    command->add_option("--root", options->root, "Where the Fashion-MNIST IDX files live")->capture_default_str();
    command->add_option("--png-dir", options->png_dir,
                        "Image folder from `ember data prepare` (default: prepared once in the temp folder)");
    command->add_option("--source", options->sources, "Sources to run: idx, png, gpu")
        ->delimiter(',')
        ->check(CLI::IsMember({"idx", "png", "gpu"}))
        ->capture_default_str();
    command->add_option("--workers", options->workers, "Worker counts")->delimiter(',')->capture_default_str();
    command->add_option("--pinned", options->pinned, "Pinned staging: on, off")
        ->delimiter(',')
        ->check(CLI::IsMember({"on", "off"}))
        ->capture_default_str();
    command->add_option("--batch-size", options->batch_size, "Samples per batch")->capture_default_str();
    command->add_option("--batches", options->batches, "Batches per row")->capture_default_str();
    command->add_flag("--full-epoch", options->full_epoch,
                      "Run whole epochs (469 batches of 128) instead of --batches");
    command->add_option("--compute-ms", options->compute_ms, "Fixed compute load per batch (one training step), ms")
        ->capture_default_str();
    command
        ->add_option("--compute", options->compute,
                     "How the step spends its time: sleep (host blocked on a GPU) or spin (CPU-bound step)")
        ->check(CLI::IsMember({"sleep", "spin"}))
        ->capture_default_str();
    command->add_option("--prefetch-factor", options->prefetch_factor, "Batches in flight per worker")
        ->capture_default_str();
    command->add_option("--persistent", options->persistent, "Keep workers across epochs")->capture_default_str();
    command->add_option("--augment", options->augment, "Random crop (padding 2) and flip")->capture_default_str();
    command->add_option("--seed", options->seed, "Sampler and augmentation seed")->capture_default_str();
    command->add_option("--repeat", options->repeat, "Runs per row; the median by samples/s is reported")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    command
        ->add_option("--persistence-epochs", options->persistence_epochs,
                     "Epochs for the persistent vs per-epoch workers table (0 = skip)")
        ->capture_default_str();
    command->callback(
        [options] { run_benchmark("dataloader", [&] { return bench::run_dataloader_bench(*options); }); });
}

void add_train(CLI::App& bench) {
    auto options = std::make_shared<bench::TrainBenchOptions>();
    CLI::App* command = bench.add_subcommand(
        "train", "The optimization table: all optimizations on vs each one off alone (images/s, ratio)");
    command->add_option("--model", options->model, "mlp | cnn | resnet | transformer")->capture_default_str();
    command->add_option("--backend", options->backend, "auto | cpu | cuda")->capture_default_str();
    command->add_option("--batch-size", options->batch_size, "Batch size (or max)")->capture_default_str();
    command->add_option("--steps", options->steps, "Timed steps per variant")->capture_default_str();
    command->add_option("--warmup", options->warmup, "Untimed steps first (allocation, autotuning, graph capture)")
        ->capture_default_str();
    command->add_option("--workers", options->workers, "Loader workers in the all-on configuration")
        ->capture_default_str();
    command->add_option("--target-accuracy", options->target_accuracy,
                        "Also train whole epochs until this test accuracy and report the time (0 = skip)");
    command->add_option("--max-epochs", options->max_epochs, "Epoch limit for --target-accuracy")
        ->capture_default_str();
    command->add_option("--data-root", options->data_root, "Folder of the Fashion-MNIST IDX files")
        ->capture_default_str();
    auto profile = std::make_shared<std::string>();
    auto baseline = std::make_shared<std::string>();
    command->add_option("--profile", *profile, "Record the \"all on\" run into this trace file");
    command->add_option("--baseline", *baseline,
                        "Compare the \"all on\" run with this saved trace and print the diff (records it to "
                        "--profile, or beside the baseline as <baseline>.bench.db)");
    command->callback([options, profile, baseline] {
        run_benchmark("train", [&] {
            std::string trace = *profile;
            if (trace.empty() && !baseline->empty()) trace = *baseline + ".bench.db";
            Baseline saved;
            if (!baseline->empty()) {
                saved = load_baseline(*baseline, "bench train");
                if (!saved.profile) fail_command("bench train", saved.error);
            }
            bool recorded = false;
            if (!trace.empty()) {
                // The collector runs in this process around the one variant: the trace
                // holds the "all on" steps (warm-up included), as `ember train --profile` would.
                options->around_all_on = [&](bool starting) {
                    if (starting) {
                        ember_collector_options collector;
                        ember_collector_options_init(&collector);
                        if (ember_collector_start(trace.c_str(), &collector) != 0)
                            throw std::runtime_error("--profile " + trace + ": " + ember_collector_last_error());
                    } else if (ember_collector_stop() == 0) {
                        recorded = true;
                    }
                };
            }
            const int status = bench::run_train_bench(*options);
            if (status != 0 || trace.empty()) return status;
            if (!recorded)
                fail_at_run_time("bench train",
                                 std::string("the \"all on\" run was not recorded: ") + ember_collector_last_error());
            std::printf("trace of \"all on\": %s\n", trace.c_str());
            if (saved.profile) print_baseline_diff(*saved.profile, trace, "bench train");
            return 0;
        });
    });
}

void add_allreduce(CLI::App& bench) {
    auto options = std::make_shared<bench::AllreduceBenchOptions>();
    CLI::App* command =
        bench.add_subcommand("allreduce",
                             "All-reduce bandwidth from 1 KiB to 1 GiB (algbw, busbw): NCCL on GPUs, MPI otherwise. "
                             "Run under mpirun or srun.");
    command->add_option("--min-bytes", options->min_bytes_text, "smallest size (1K, 4M, 1G ...)")
        ->capture_default_str();
    command->add_option("--max-bytes", options->max_bytes_text, "largest size")->capture_default_str();
    command->add_option("--engine", options->engine, "auto | mpi | nccl")
        ->check(CLI::IsMember({"auto", "mpi", "nccl"}))
        ->capture_default_str();
    command->add_option("--iterations", options->iterations, "timed iterations per size (fewer above 256 MiB)")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    command->add_option("--warmup", options->warmup, "untimed iterations per size")->capture_default_str();
    command->callback([options] { run_benchmark("allreduce", [&] { return bench::run_allreduce_bench(*options); }); });
}

}  // namespace

void add_bench_command(CLI::App& app) {
    CLI::App* bench = app.add_subcommand("bench", kBenchDescription);
    bench->require_subcommand(1);
    add_train(*bench);
    add_store(*bench);
    add_dataloader(*bench);
    add_allreduce(*bench);
}

}  // namespace ember::cli
