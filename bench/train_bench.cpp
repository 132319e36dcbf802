// train_bench.cpp: `ember bench train`, the optimization table. One model is
// trained with every optimization of the tuning canon on ("all on"), then with each
// one turned off alone, in the same invocation; images/s of the timed steps (after a
// warm-up) and the ratio to "all on" show what each optimization buys on this machine.
// Optimizations that cannot apply to a backend or model are listed as such, not timed.
// Beside the speed, each row has the peak allocated and reserved bytes of the training
// device's caching allocator (device_allocator() or host_allocator(): parameters,
// gradients, optimizer state, activations) over its training steps, emptied and reset
// before each variant.
// With --target-accuracy, each variant also trains whole epochs until the test
// accuracy reaches the target and reports the training time it took.
// Under mpirun/srun every rank runs the same table (data parallel, one GPU per rank);
// rank 0 prints it, with the data-parallel rows (overlap off, ZeRO-1) timed too.
#include "engine/core/allocator.h"
#include "engine/core/device.h"
#include "engine/distributed/launcher.h"
#include "engine/train/config.h"
#include "engine/train/run.h"
#include "bench/train_bench.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ember::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Times the steps after the warm-up and keeps the allocator's statistics as of the
// last step (the evaluation after it runs at its own, larger batch: not the row's).
class TimingObserver : public train::TrainObserver {
  public:
    TimingObserver(int64_t warmup, const CachingAllocator* memory = nullptr) : warmup_(warmup), memory_(memory) {}
    void step(const train::StepReport& r) override {
        if (memory_) training_memory_ = memory_->stats();
        if (r.step == warmup_) {
            start_ = Clock::now();
            images_ = 0;
        } else if (r.step > warmup_) {
            images_ += r.images;
            end_ = Clock::now();
        }
    }
    void epoch(const train::EpochReport& r) override { epochs_.push_back(r); }
    double images_per_second() const {
        double s = std::chrono::duration<double>(end_ - start_).count();
        return s > 0 ? images_ / s : 0;
    }
    const std::vector<train::EpochReport>& epochs() const { return epochs_; }
    const AllocatorStats& training_memory() const { return training_memory_; }

  private:
    int64_t warmup_;
    const CachingAllocator* memory_;
    AllocatorStats training_memory_;
    int64_t images_ = 0;
    Clock::time_point start_, end_;
    std::vector<train::EpochReport> epochs_;
};

struct Variant {
    std::string name;
    std::function<void(train::TrainConfig&)> turn_off;
    // Why the optimization does not apply here (empty: it does).
    std::function<std::string(const train::TrainConfig&, bool on_gpu)> not_applicable;
};

std::string gpu_only(const train::TrainConfig&, bool on_gpu) {
    return on_gpu ? "" : "needs a GPU";
}

std::string distributed_only(const train::TrainConfig&, bool) {
    return distributed::detect_launch_environment().distributed() ? "" : "needs 2+ ranks (mpirun/srun)";
}

std::vector<Variant> variants() {
    auto needs = [](const char* what, std::vector<std::string> models) {
        return [what, models](const train::TrainConfig& c, bool) -> std::string {
            for (const auto& m : models)
                if (c.model == m) return "";
            return std::string("the model has no ") + what;
        };
    };
    return {
        {"all on", [](train::TrainConfig&) {}, [](const train::TrainConfig&, bool) { return std::string(); }},
        {"GPU-resident data off (IDX loader)", [](train::TrainConfig& c) { c.data_source = "idx"; }, gpu_only},
        {"loader workers 0",
         [](train::TrainConfig& c) {
             c.data_source = "idx";
             c.workers = 0;
         },
         [](const train::TrainConfig&, bool) { return std::string(); }},
        {"pinned memory off",
         [](train::TrainConfig& c) {
             c.data_source = "idx";
             c.pin_memory = false;
         },
         gpu_only},
        {"cudnn_benchmark off", [](train::TrainConfig& c) { c.cudnn_benchmark = false; },
         [needs](const train::TrainConfig& c, bool on_gpu) {
             return on_gpu ? needs("convolutions", {"cnn", "resnet"})(c, on_gpu) : std::string("needs a GPU");
         }},
        {"channels-last off (NCHW)", [](train::TrainConfig& c) { c.channels_last = false; },
         // On the CPU too: the fast paths compute convolutions in nhwc, so an nchw model
         // pays reorders around each (docs/performance.md, "Channels-last on the CPU backend").
         needs("convolutions", {"cnn", "resnet", "transformer"})},
        {"AMP off (fp32)", [](train::TrainConfig& c) { c.precision = "fp32"; }, gpu_only},
        {"TF32 off", [](train::TrainConfig& c) { c.tf32 = false; }, gpu_only},
        {"conv bias before BN", [](train::TrainConfig& c) { c.conv_bias_before_bn = true; },
         needs("conv before BatchNorm", {"cnn", "resnet"})},
        {"grads set to none off", [](train::TrainConfig& c) { c.grads_to_none = false; },
         [](const train::TrainConfig&, bool) { return std::string(); }},
        // Off in "all on" (it trades compute for memory): this row turns it on.
        {"activation checkpointing on", [](train::TrainConfig& c) { c.activation_checkpointing = true; },
         needs("residual or transformer blocks", {"resnet", "transformer"})},
        {"batch size halved",
         [](train::TrainConfig& c) { c.batch_size = std::to_string(std::stoll(c.batch_size) / 2); },
         [](const train::TrainConfig& c, bool) -> std::string {
             if (c.batch_size == "max" || std::stoll(c.batch_size) < 2)
                 return "needs a numeric batch size of 2 or more";
             return "";
         }},
        {"fused GELU off", [](train::TrainConfig& c) { c.fused_gelu = false; }, needs("GELU", {"transformer"})},
        {"fused LayerNorm off", [](train::TrainConfig& c) { c.fused_layernorm = false; },
         needs("LayerNorm", {"transformer"})},
        {"prefetch factor 1",
         [](train::TrainConfig& c) {
             c.data_source = "idx";
             c.prefetch_factor = 1;
         },
         [](const train::TrainConfig&, bool) { return std::string(); }},
        {"fused optimizer off", [](train::TrainConfig& c) { c.fused_optimizer = false; }, gpu_only},
        {"CUDA Graph off", [](train::TrainConfig& c) { c.cuda_graph = false; }, gpu_only},
        {"DDP overlap off", [](train::TrainConfig& c) { c.overlap = false; }, distributed_only},
        {"ZeRO-1 on (sharded optimizer)", [](train::TrainConfig& c) { c.zero = 1; },
         [](const train::TrainConfig& c, bool on_gpu) {
             const std::string why = distributed_only(c, on_gpu);
             if (!why.empty() || c.precision != "fp16") return why;
             return std::string("ZeRO-1 does not take fp16's per-rank loss scaling (all on is fp16)");
         }},
        // "all on" once more at the end: its ratio shows the run-to-run drift (warm-up,
        // machine load) that every other row carries too.
        {"all on (repeated last)", [](train::TrainConfig&) {},
         [](const train::TrainConfig&, bool) { return std::string(); }},
    };
}

train::TrainConfig all_on(const TrainBenchOptions& o, bool on_gpu) {
    train::TrainConfig c;
    c.model = o.model;
    c.backend = o.backend;
    c.batch_size = o.batch_size;
    c.data_root = o.data_root;
    c.workers = o.workers;
    c.pin_memory = true;
    c.persistent_workers = true;
    c.data_source = on_gpu ? "gpu" : "idx";
    c.precision = on_gpu ? "bf16" : "fp32";
    c.cudnn_benchmark = true;
    c.channels_last = o.model != "mlp";  // the models with convolutions
    c.tf32 = true;
    c.conv_bias_before_bn = false;
    c.grads_to_none = true;
    c.fused_gelu = true;
    c.fused_layernorm = true;
    c.fused_optimizer = true;
    c.cuda_graph = on_gpu;
    c.test_limit = 1000;  // evaluation is not timed; keep it short
    c.progress = false;
    return c;
}

std::string mebibytes(int64_t bytes) {
    return fmt::format("{:.2f} MiB", double(bytes) / (1 << 20));
}

// Prints on rank 0 only: every rank runs the table, one prints it.
bool printing_rank() {
    return distributed::detect_launch_environment().rank == 0;
}

}  // namespace

int run_train_bench(const TrainBenchOptions& o) {
    bool on_gpu = o.backend != "cpu" && cuda_device_available();
    if (!printing_rank() && std::freopen("/dev/null", "w", stdout) == nullptr) return 1;
    if (o.backend == "cuda" && !on_gpu) {
        std::fprintf(stderr, "ember bench train: --backend cuda but no CUDA device\n");
        return 2;
    }
    std::printf("ember bench train: model %s, batch %s, %lld timed steps after %lld warm-up, backend %s\n",
                o.model.c_str(), o.batch_size.c_str(), (long long)o.steps, (long long)o.warmup,
                on_gpu ? "cuda" : "cpu (no CUDA device: GPU-only optimizations are listed, not timed)");
    std::printf("%-36s %12s %8s %13s %13s %s\n", "variant", "images/s", "ratio", "peak alloc", "peak reserved",
                o.target_accuracy > 0 ? fmt::format("  time to {:.3f}", o.target_accuracy).c_str() : "");
    CachingAllocator& memory = on_gpu ? device_allocator() : host_allocator();
    double baseline = 0;
    for (const Variant& v : variants()) {
        train::TrainConfig c = all_on(o, on_gpu);
        v.turn_off(c);
        std::string why = v.not_applicable(c, on_gpu);
        if (!why.empty()) {
            std::printf("%-36s %12s %8s %13s %13s  (%s)\n", v.name.c_str(), "-", "-", "-", "-", why.c_str());
            continue;
        }
        TimingObserver timing(o.warmup, &memory);
        c.max_steps = o.warmup + o.steps;
        c.epochs = 1000;                                         // max_steps ends the run
        const bool recorded = baseline == 0 && o.around_all_on;  // the first row is "all on"
        // Each row's peaks are its own: the previous row's cached blocks go back first.
        memory.empty_cache();
        memory.reset_peak();
        try {
            if (recorded) o.around_all_on(true);
            train::run_training(c, timing);
            if (recorded) o.around_all_on(false);
        } catch (const std::exception& e) {
            if (recorded) o.around_all_on(false);
            std::fprintf(stderr, "ember bench train: %s: %s\n", v.name.c_str(), e.what());
            return 1;
        }
        double ips = timing.images_per_second();
        if (baseline == 0) baseline = ips;
        std::string accuracy_column;
        if (o.target_accuracy > 0) {
            train::TrainConfig full = c;
            full.max_steps = 0;
            full.epochs = o.max_epochs;
            full.test_limit = 0;
            TimingObserver epochs(0);
            train::run_training(full, epochs);
            double seconds = 0;
            accuracy_column = fmt::format("  not reached in {} epochs", o.max_epochs);
            for (const auto& e : epochs.epochs()) {
                seconds += e.seconds;
                if (e.test_accuracy >= o.target_accuracy) {
                    accuracy_column = fmt::format("  {:.1f} s (epoch {})", seconds, e.epoch + 1);
                    break;
                }
            }
        }
        std::printf("%-36s %12.0f %7.2fx %13s %13s%s\n", v.name.c_str(), ips, baseline > 0 ? ips / baseline : 0.0,
                    mebibytes(timing.training_memory().peak_allocated_bytes).c_str(),
                    mebibytes(timing.training_memory().peak_reserved_bytes).c_str(), accuracy_column.c_str());
        std::fflush(stdout);
    }
    std::printf("ratio: images/s of the variant over \"all on\" (below 1: the optimization helps)\n");
    std::printf(
        "peak alloc / peak reserved: the %s allocator's peaks over the variant's training steps (MiB;\n"
        "evaluation, at its own batch of max(batch, 500), excluded)\n",
        on_gpu ? "device" : "host (cpu backend)");
    return 0;
}

}  // namespace ember::bench
