// train_command.cpp: `ember train`, the main job. Joins the engine's training loop
// (engine/train) with the in-process collector (`--profile FILE`): the collector is
// started before the first CUDA call so it sees everything, and stopped (flushed,
// indexed) after the last. Progress goes to stderr: a redrawn bar on a terminal,
// plain lines otherwise; the effective configuration and results go to stdout.
#include "engine/cpu/implementation.h"
#include "engine/distributed/launcher.h"
#include "engine/train/config.h"
#include "engine/train/run.h"
#include "cli/baseline.h"
#include "cli/command_errors.h"
#include "cli/commands.h"

#include <ember/collector.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <unistd.h>

namespace ember::cli {
namespace {

std::string clock_text(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0) return "--:--";
    long s = std::lround(seconds);
    if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
    return fmt::format("{:02}:{:02}", s / 60, s % 60);
}

class ConsoleObserver : public train::TrainObserver {
  public:
    ConsoleObserver(bool progress, int epochs) : bar_(progress && isatty(STDERR_FILENO)), epochs_(epochs) {}

    void info(const std::string& line) override {
        clear_bar();
        std::fprintf(stderr, "%s\n", line.c_str());
    }

    void step(const train::StepReport& r) override {
        if (r.loss_measured) last_loss_ = r.loss;  // on a GPU the loss is read every few steps
        if (bar_) {
            constexpr int kWidth = 28;
            double fraction = r.batches_per_epoch ? double(r.batch) / r.batches_per_epoch : 0;
            int filled = static_cast<int>(fraction * kWidth);
            std::string bar(filled, '#');
            bar.resize(kWidth, '.');
            std::fprintf(stderr, "\r\033[Kepoch %lld/%d [%s] %lld/%lld  loss %.4f  %.0f img/s  ETA %s%s",
                         (long long)r.epoch + 1, epochs_, bar.c_str(), (long long)r.batch,
                         (long long)r.batches_per_epoch, last_loss_, r.images_per_second,
                         clock_text(r.eta_seconds).c_str(), r.skipped ? "  (skipped: fp16 overflow)" : "");
            std::fflush(stderr);
            bar_shown_ = true;
            return;
        }
        // Plain lines: about ten per epoch, and the last step.
        int64_t every = std::max<int64_t>(1, r.batches_per_epoch / 10);
        if (r.batch % every == 0 || r.step == r.total_steps)
            std::fprintf(stderr,
                         "step %lld/%lld  epoch %lld  batch %lld/%lld  loss %.4f  lr %.3g  %.0f img/s  ETA %s\n",
                         (long long)r.step, (long long)r.total_steps, (long long)r.epoch + 1, (long long)r.batch,
                         (long long)r.batches_per_epoch, last_loss_, r.lr, r.images_per_second,
                         clock_text(r.eta_seconds).c_str());
    }

    void epoch(const train::EpochReport& r) override {
        clear_bar();
        std::printf(
            "epoch %lld: train loss %.4f | test loss %.4f, test accuracy %.4f | %.1f s, %.0f img/s, "
            "dataloader wait %.2f s\n",
            (long long)r.epoch + 1, r.train_loss, r.test_loss, r.test_accuracy, r.seconds, r.images_per_second,
            r.dataloader_wait_seconds);
        std::fflush(stdout);
    }

  private:
    void clear_bar() {
        if (bar_shown_) std::fputs("\r\033[K", stderr);
        bar_shown_ = false;
    }
    bool bar_;
    bool bar_shown_ = false;
    int epochs_;
    double last_loss_ = 0.0;
};

struct Options {
    std::string config_file;
    std::vector<std::string> overrides;
    std::string model, optimizer, backend, precision, batch_size, profile, metrics, tensorboard, checkpoint_dir, resume,
        data_root, data_source, png_dir;
    double lr = 0, imbalance = -1;
    int epochs = 0, workers = -1;
    int64_t max_steps = -1, train_limit = -1, test_limit = -1, checkpoint_every = -1;
    int64_t seed = -1;
    bool augment = false, no_progress = false, print_config_only = false;
    double nvml_hz = 20;
    // CPU stacks sampled while profiling: one per ~5 ms of process CPU time, which costs
    // about 1-2% of step time (bench/cpu_sampling_overhead.sh; docs/performance.md).
    double cpu_sample_hz = 199;
    std::string baseline;
};

// Named flags become overrides, applied after --config and before --set.
void apply_flags(const Options& o, train::TrainConfig& c) {
    // Errors name the flag the user typed, not the override it becomes.
    auto set = [&](const std::string& key, const std::string& value) {
        try {
            train::apply_override(key + "=" + value, c);
        } catch (const train::ConfigError& e) {
            std::string message = e.what();
            std::string prefix = "--set " + key + "=" + value + ": ";
            if (message.rfind(prefix, 0) == 0) message = message.substr(prefix.size());
            throw train::ConfigError("flag for " + key + " (" + value + "): " + message);
        }
    };
    if (!o.model.empty()) set("model.name", o.model);
    if (!o.optimizer.empty()) set("optimizer.name", o.optimizer);
    if (o.lr > 0) c.optimizer_params["lr"] = o.lr;
    if (!o.backend.empty()) set("train.backend", o.backend);
    if (!o.precision.empty()) set("train.precision", o.precision);
    if (!o.batch_size.empty()) set("data.batch_size", "\"" + o.batch_size + "\"");
    if (o.epochs > 0) set("train.epochs", std::to_string(o.epochs));
    if (o.workers >= 0) set("data.workers", std::to_string(o.workers));
    if (o.max_steps >= 0) set("train.max_steps", std::to_string(o.max_steps));
    if (o.train_limit >= 0) set("data.train_limit", std::to_string(o.train_limit));
    if (o.test_limit >= 0) set("data.test_limit", std::to_string(o.test_limit));
    if (o.seed >= 0) set("train.seed", std::to_string(o.seed));
    if (o.augment) c.augment = true;
    if (o.imbalance >= 0) set("train.imbalance", std::to_string(o.imbalance));
    if (!o.data_root.empty()) c.data_root = o.data_root;
    if (!o.data_source.empty()) set("data.source", o.data_source);
    if (!o.png_dir.empty()) c.png_dir = o.png_dir;
    if (!o.profile.empty()) c.profile_path = o.profile;
    if (!o.metrics.empty()) c.metrics_path = o.metrics;
    if (!o.tensorboard.empty()) c.tensorboard_dir = o.tensorboard;
    if (!o.checkpoint_dir.empty()) c.checkpoint_dir = o.checkpoint_dir;
    if (o.checkpoint_every >= 0) set("output.checkpoint_every", std::to_string(o.checkpoint_every));
    if (!o.resume.empty()) c.resume = o.resume;
    if (o.no_progress) c.progress = false;
}

void run(const Options& o) {
    train::TrainConfig config;
    try {
        if (!o.config_file.empty()) train::load_toml_file(o.config_file, config);
        apply_flags(o, config);
        for (const auto& assignment : o.overrides) train::apply_override(assignment, config);
        train::validate(config);
    } catch (const train::ConfigError& e) {
        fail_command("train", e.what());
    }
    // Under mpirun/srun every rank runs this; rank 0 speaks for the job and each rank
    // records its own trace (FILE.rank<r>.db, for `ember merge`).
    distributed::LaunchEnvironment launch;
    try {
        launch = distributed::detect_launch_environment();
    } catch (const std::exception& e) {
        fail_command("train", e.what());
    }
    const bool root = launch.rank == 0;
    if (o.print_config_only) {
        // Every setting, as TOML that `--config` reads back to the same run.
        if (root) std::printf("# ember train: effective configuration\n%s", train::to_toml(config).c_str());
        return;
    }
    if (root) {
        std::printf("settings: %s (--print-config shows every setting)\n", train::settings_line(config).c_str());
        std::fflush(stdout);
    }
    if (launch.distributed() && !config.profile_path.empty()) {
        std::string stem = config.profile_path;
        if (stem.size() > 3 && stem.compare(stem.size() - 3, 3, ".db") == 0) stem.resize(stem.size() - 3);
        config.profile_path = stem + ".rank" + std::to_string(launch.rank) + ".db";
    }

    Baseline baseline;
    if (!o.baseline.empty()) {
        if (config.profile_path.empty())
            fail_command("train", "--baseline needs --profile FILE (the run to compare with it)");
        if (launch.distributed())
            fail_command("train",
                         "--baseline compares one process's run; under mpirun use ember merge and ember "
                         "diff on the rank files");
        baseline = load_baseline(o.baseline, "train");
        if (!baseline.profile) fail_command("train", baseline.error);
    }
    bool profiling = !config.profile_path.empty();
    std::string jit_names_map;  // removed when the profile is written
    if (profiling) {
        std::error_code ec;
        auto parent = std::filesystem::path(config.profile_path).parent_path();
        if (!parent.empty()) std::filesystem::create_directories(parent, ec);
        ember_collector_options options;
        ember_collector_options_init(&options);
        options.nvml_hz = o.nvml_hz;
        options.cpu_sample_hz = o.cpu_sample_hz;
        if (ember_collector_start(config.profile_path.c_str(), &options) != 0)
            fail_command("train", "--profile " + config.profile_path + ": " + ember_collector_last_error());
        // The run's settings, as TOML: what `ember stats` advice checks before suggesting
        // a remedy the run already applies.
        ember_collector_set_metadata("train_config", train::to_toml(config).c_str());
        // The CPU samples in oneDNN's JIT kernels get the kernels' names (a perf map,
        // removed again once the trace is written, unless it was there before).
        if (o.cpu_sample_hz > 0) {
            std::error_code ec;
            const std::string map = cpu::name_jit_kernels_for_profilers();
            if (!map.empty() && !std::filesystem::exists(map, ec)) jit_names_map = map;
        }
    }
    auto stop_profiling = [&] {
        if (!profiling) return;
        ember_collector_status status{};
        ember_collector_get_status(&status);
        if (ember_collector_stop() != 0)
            std::fprintf(stderr, "ember train: closing the trace %s: %s\n", config.profile_path.c_str(),
                         ember_collector_last_error());
        else if (root || launch.distributed())
            std::printf("trace: %s (%llu events, %llu dropped)\n", config.profile_path.c_str(),
                        (unsigned long long)status.events_recorded,
                        (unsigned long long)(status.events_dropped + status.cupti_dropped));
        profiling = false;
        if (!jit_names_map.empty()) {
            std::error_code ec;
            std::filesystem::remove(jit_names_map, ec);
        }
    };

    ConsoleObserver observer(config.progress, config.epochs);
    train::TrainSummary s;
    try {
        s = train::run_training(config, observer);
    } catch (const train::ConfigError& e) {
        stop_profiling();
        fail_command("train", e.what());
    } catch (const std::exception& e) {
        stop_profiling();
        fail_at_run_time("train", e.what());
    }
    if (!root) {
        stop_profiling();
        return;
    }
    std::printf(
        "trained %s (%lld parameters) on %s: %lld steps, %lld images in %.1f s (%.0f img/s); "
        "test accuracy %.4f, test loss %.4f%s\n",
        s.model.c_str(), (long long)s.parameters, s.device.c_str(), (long long)s.steps, (long long)s.images, s.seconds,
        s.images_per_second, s.final_test_accuracy, s.final_test_loss,
        s.skipped_steps ? fmt::format(", {} fp16 steps skipped", s.skipped_steps).c_str() : "");
    std::printf("memory: peak allocated %lld bytes, peak reserved %lld bytes (the %s allocator)\n",
                (long long)s.peak_allocated_bytes, (long long)s.peak_reserved_bytes,
                s.backend == "cuda" ? "device" : "host");
    if (!s.last_checkpoint.empty()) std::printf("checkpoint: %s\n", s.last_checkpoint.c_str());
    stop_profiling();
    if (baseline.profile) print_baseline_diff(*baseline.profile, config.profile_path, "train");
}

}  // namespace

void add_train_command(CLI::App& app) {
    auto o = std::make_shared<Options>();
    CLI::App* cmd = app.add_subcommand("train", kTrainDescription);
    cmd->add_option("-c,--config", o->config_file, "TOML configuration file (see samples/configs/)")
        ->check(CLI::ExistingFile);
    cmd->add_option("--set", o->overrides, "Override one field: section.key=value (repeatable)");
    cmd->add_option("--model", o->model, "mlp | cnn | resnet | transformer");
    cmd->add_option("--optimizer", o->optimizer, "sgd, adam, adamw, lamb, ... (docs/optimizers.md)");
    cmd->add_option("--lr", o->lr, "Learning rate");
    cmd->add_option("--epochs", o->epochs, "Epochs");
    cmd->add_option("--batch-size", o->batch_size, "Batch size, or max");
    cmd->add_option("--backend", o->backend, "auto | cpu | cuda");
    cmd->add_option("--precision", o->precision, "fp32 | fp16 | bf16");
    cmd->add_option("--workers", o->workers, "Data loader worker threads");
    cmd->add_option("--max-steps", o->max_steps, "Stop after this many optimizer steps");
    cmd->add_option("--train-limit", o->train_limit, "Train on the first N images only");
    cmd->add_option("--test-limit", o->test_limit, "Evaluate on the first N test images only");
    cmd->add_option("--seed", o->seed, "Random seed");
    cmd->add_flag("--augment", o->augment, "Random crop + horizontal flip");
    cmd->add_option("--imbalance", o->imbalance,
                    "Under mpirun: rank r repeats imbalance*r/(world-1) of each step as busy work (straggler demo)");
    cmd->add_option("--data-root", o->data_root, "Folder of the Fashion-MNIST IDX files");
    cmd->add_option("--data-source", o->data_source, "idx | png | gpu");
    cmd->add_option("--png-dir", o->png_dir, "Image folder written by `ember data prepare`");
    cmd->add_option("--profile", o->profile, "Record the run into this trace file (SQLite)");
    cmd->add_option("--baseline", o->baseline,
                    "With --profile: compare the run with this saved trace and print the diff (as ember diff)");
    cmd->add_option("--nvml-hz", o->nvml_hz, "GPU counter sampling rate while profiling (0 = off)")
        ->capture_default_str();
    cmd->add_option("--cpu-sample-hz", o->cpu_sample_hz, "CPU stack sampling rate while profiling (0 = off)")
        ->capture_default_str();
    cmd->add_option("--metrics", o->metrics, "Write metrics as JSON lines to this file");
    cmd->add_option("--tensorboard", o->tensorboard,
                    "Write TensorBoard event files to this directory (tensorboard --logdir DIR): loss, learning "
                    "rate, loss scale, throughput, dataloader and all-reduce wait per step; test accuracy and loss "
                    "per epoch");
    cmd->add_option("--checkpoint-dir", o->checkpoint_dir, "Write checkpoints (last.ckpt) here");
    cmd->add_option("--checkpoint-every", o->checkpoint_every, "Steps between checkpoints (0 = at the end)");
    cmd->add_option("--resume", o->resume, "Resume from this checkpoint");
    cmd->add_flag("--no-progress", o->no_progress, "Plain progress lines even on a terminal");
    cmd->add_flag("--print-config", o->print_config_only,
                  "Print every setting as TOML (readable back with --config) and exit");
    cmd->callback([o] { run(*o); });
}

}  // namespace ember::cli
