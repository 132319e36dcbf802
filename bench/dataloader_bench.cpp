// dataloader_bench.cpp: `ember bench dataloader`, the data-loader experiment:
// samples/s and stall fraction of a fixed per-batch compute load, over workers x pinned
// staging x source (IDX in memory, PNG image folder, GPU-resident).
//
// The compute load stands for one training step: a fixed time per batch, either slept
// (a host thread blocked on the GPU, the usual case) or spun (a CPU-bound step). The
// stall fraction is the time next() kept the loop waiting (dataloader/wait) over the
// run's wall time; workers that keep up drive it to zero and samples/s to
// batch_size / step time.
#include "bench/dataloader_bench.h"
#include "common/os.h"
#include "engine/core/cuda_check.h"
#include "engine/data/fashion_mnist.h"
#include "engine/data/gpu_resident.h"
#include "engine/data/image_folder.h"
#include "engine/data/loader.h"
#include "engine/data/prepare.h"
#include "engine/data/staging_buffer.h"

#include <cuda_runtime_api.h>
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>

namespace ember::bench {

namespace {

using Clock = os::SteadyClock;

struct RowResult {
    std::string not_measured;  // why, when the row could not run here
    int64_t samples = 0;
    int64_t batches = 0;
    double seconds = 0.0;
    double wait_seconds = 0.0;
    double step_seconds = 0.0;  // measured; above the nominal step when workers crowd the cores
    int64_t worker_starts = 0;
};

// The fixed compute load of one training step.
void training_step(const DataloaderBenchOptions& options) {
    auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double, std::milli>(options.compute_ms));
    if (options.compute == "spin") {
        while (Clock::now() < until) {
        }
    } else {
        std::this_thread::sleep_until(until);
    }
}

data::AugmentOptions augment_options(const DataloaderBenchOptions& options) {
    data::AugmentOptions augment;
    augment.mean = data::kFashionMnistMean;
    augment.std = data::kFashionMnistStd;
    augment.seed = options.seed;
    if (options.augment) {
        augment.crop_padding = 2;
        augment.horizontal_flip = true;
    }
    return augment;
}

// Takes up to `batches` batches of the started epoch as a training loop would: waits for
// each (with a device, the step's stream would wait for its copy: that counts as
// waiting too), runs the fixed compute load, gives the batch back.
template <class Loader>
void take_batches(Loader& loader, int64_t batches, const DataloaderBenchOptions& options, RowResult& result) {
    for (int64_t b = 0; b < batches; ++b) {
        auto wait_start = Clock::now();
        const data::Batch* batch = loader.next();
        if (batch == nullptr) break;
        if (batch->ready != nullptr) EMBER_CUDA_CHECK(cudaEventSynchronize(batch->ready));
        result.wait_seconds += os::seconds_between(wait_start, Clock::now());
        result.samples += batch->size;
        ++result.batches;
        auto step_start = Clock::now();
        training_step(options);
        result.step_seconds += os::seconds_between(step_start, Clock::now());
        loader.release(batch);
    }
}

// Runs `epochs` epochs of up to options.batches batches (all with --full-epoch).
RowResult run_threaded(const std::shared_ptr<const data::Dataset>& dataset, int workers, bool pinned, bool persistent,
                       int epochs, const DataloaderBenchOptions& options) {
    RowResult result;
    if (pinned && !data::cuda_usable()) {
        result.not_measured = "n/a (no CUDA device)";
        return result;
    }
    data::LoaderOptions loader_options;
    loader_options.batch_size = options.batch_size;
    loader_options.workers = workers;
    loader_options.prefetch_factor = options.prefetch_factor;
    loader_options.persistent_workers = persistent;
    loader_options.pin_memory = pinned;
    loader_options.copy_to_device = true;
    loader_options.augment = augment_options(options);
    auto sampler = std::make_shared<data::RandomSampler>(dataset->size(), options.seed);
    data::DataLoader loader(dataset, sampler, loader_options);
    int64_t batches =
        options.full_epoch ? loader.batches_per_epoch() : std::min(options.batches, loader.batches_per_epoch());
    auto start = Clock::now();
    for (int epoch = 0; epoch < epochs; ++epoch) {
        loader.start_epoch(epoch);
        take_batches(loader, batches, options, result);
    }
    result.seconds = os::seconds_between(start, Clock::now());
    result.worker_starts = loader.stats().worker_starts;
    return result;
}

RowResult run_gpu_resident(const data::InMemoryDataset& dataset, const DataloaderBenchOptions& options) {
    RowResult result;
    if (!data::cuda_usable()) {
        result.not_measured = "n/a (no CUDA device)";
        return result;
    }
    auto sampler = std::make_shared<data::RandomSampler>(dataset.size(), options.seed);
    data::GpuResidentLoader loader(dataset, sampler, options.batch_size, false, augment_options(options));
    loader.start_epoch(0);
    int64_t batches =
        options.full_epoch ? loader.batches_per_epoch() : std::min(options.batches, loader.batches_per_epoch());
    auto start = Clock::now();
    take_batches(loader, batches, options, result);
    result.seconds = os::seconds_between(start, Clock::now());
    return result;
}

constexpr int64_t kTrainSamples = 60000;  // one Fashion-MNIST training epoch

void print_header() {
    fmt::print("| {:<13} | {:>7} | {:>6} | {:>9} | {:>6} | {:>11} | {:>10} | {:>9} |\n", "source", "workers", "pinned",
               "samples/s", "stall", "epoch (60k)", "wait/batch", "step");
    fmt::print("|{:-<15}|{:->9}|{:->8}|{:->11}|{:->8}|{:->13}|{:->12}|{:->11}|\n", "", "", "", "", "", "", "", "");
}

// step: the measured time of the fixed compute load; above --compute-ms when worker threads
// keep the training thread from the cores (a real cost the stall fraction does not show).
// Runs a row options.repeat times and keeps the median run by samples/s (a shared
// machine's noise moves single runs; the median of 3 or 5 is steadier).
template <typename Run>
RowResult median_of_runs(const DataloaderBenchOptions& options, Run run) {
    std::vector<RowResult> runs;
    for (int r = 0; r < std::max(1, options.repeat); ++r) {
        runs.push_back(run());
        if (!runs.back().not_measured.empty()) return runs.back();
    }
    std::sort(runs.begin(), runs.end(), [](const RowResult& a, const RowResult& b) {
        return double(a.samples) / a.seconds < double(b.samples) / b.seconds;
    });
    return runs[runs.size() / 2];
}

void print_row(const std::string& source, const std::string& workers, const std::string& pinned, const RowResult& row) {
    if (!row.not_measured.empty()) {
        fmt::print("| {:<13} | {:>7} | {:>6} | {:<54} |\n", source, workers, pinned, row.not_measured);
        return;
    }
    double samples_per_second = double(row.samples) / row.seconds;
    fmt::print("| {:<13} | {:>7} | {:>6} | {:>9.0f} | {:>5.1f}% | {:>9.2f} s | {:>7.2f} ms | {:>6.2f} ms |\n", source,
               workers, pinned, samples_per_second, 100.0 * row.wait_seconds / row.seconds,
               double(kTrainSamples) / samples_per_second, 1e3 * row.wait_seconds / double(row.batches),
               1e3 * row.step_seconds / double(row.batches));
    std::fflush(stdout);
}

// The PNG folder: --png-dir, or a prepared copy of the training images in the temp folder
// (written once, only as many files as the run needs).
std::shared_ptr<data::ImageFolderDataset> png_dataset(const DataloaderBenchOptions& options, int64_t needed) {
    std::filesystem::path dir = options.png_dir.empty()
                                    ? std::filesystem::temp_directory_path() / "ember-bench-fashion-mnist-png"
                                    : std::filesystem::path(options.png_dir);
    std::filesystem::path train = dir / "train";
    std::error_code error;
    if (std::filesystem::is_directory(train, error)) {
        auto existing = std::make_shared<data::ImageFolderDataset>(train.string());
        if (existing->size() >= needed || !options.png_dir.empty()) return existing;
    }
    fmt::print("preparing {} PNG files under {} (once; reused by later runs) ...\n", needed, dir.string());
    std::fflush(stdout);
    data::PrepareOptions prepare;
    prepare.root = options.root;
    prepare.out = dir.string();
    prepare.splits = {data::Split::train};
    prepare.limit = needed;
    data::prepare_fashion_mnist_png(prepare);
    return std::make_shared<data::ImageFolderDataset>(train.string());
}

}  // namespace

int run_dataloader_bench(const DataloaderBenchOptions& options) {
    std::string missing = data::fashion_mnist_missing(options.root, data::Split::train);
    if (!missing.empty()) {
        fmt::print(stderr, "ember bench dataloader: {}\n", missing);
        return 1;
    }
    auto train = std::make_shared<data::InMemoryDataset>(data::load_fashion_mnist(options.root, data::Split::train));
    int64_t needed = options.full_epoch ? train->size() : std::min(train->size(), options.batches * options.batch_size);
    bool want_png = std::find(options.sources.begin(), options.sources.end(), "png") != options.sources.end();
    std::shared_ptr<data::ImageFolderDataset> png = want_png ? png_dataset(options, needed) : nullptr;

    fmt::print(
        "ember bench dataloader: batch {}, {} batches per row, step = {} {:.1f} ms, prefetch {}, "
        "{} workers, augmentation {}\n",
        options.batch_size, options.full_epoch ? std::string("all") : std::to_string(options.batches), options.compute,
        options.compute_ms, options.prefetch_factor, options.persistent ? "persistent" : "per-epoch",
        options.augment ? "crop 2 + flip + normalize" : "normalize");
    fmt::print("median of {} run(s) per row; hardware threads: {}; CUDA device: {}\n", options.repeat,
               std::thread::hardware_concurrency(),
               data::cuda_usable() ? "yes" : "none (pinned and GPU-resident rows are n/a)");
    double floor_ms = options.compute_ms;
    fmt::print("ceiling: {:.0f} samples/s (batch / step time, a loader that never stalls)\n\n",
               double(options.batch_size) / (floor_ms / 1e3));
    print_header();
    for (const std::string& source : options.sources) {
        if (source == "gpu") {
            print_row("GPU-resident", "-", "-",
                      median_of_runs(options, [&] { return run_gpu_resident(*train, options); }));
            continue;
        }
        std::shared_ptr<const data::Dataset> dataset =
            source == "png" ? std::shared_ptr<const data::Dataset>(png) : std::shared_ptr<const data::Dataset>(train);
        std::string label = source == "png" ? "PNG folder" : "IDX in memory";
        for (int workers : options.workers)
            for (const std::string& pinned : options.pinned)
                print_row(label, std::to_string(workers), pinned, median_of_runs(options, [&] {
                              return run_threaded(dataset, workers, pinned == "on", options.persistent, 1, options);
                          }));
    }

    if (options.persistence_epochs > 0 && want_png) {
        int workers = std::max(1, *std::max_element(options.workers.begin(), options.workers.end()));
        workers = std::min(workers, 4);
        fmt::print("\npersistent vs per-epoch workers: PNG folder, {} workers, {} epochs of up to {} batches\n",
                   workers, options.persistence_epochs, options.batches);
        fmt::print("| {:<10} | {:>13} | {:>9} | {:>6} |\n", "workers", "threads made", "samples/s", "stall");
        fmt::print("|{:-<12}|{:->15}|{:->11}|{:->8}|\n", "", "", "", "");
        for (bool persistent : {true, false}) {
            RowResult row = median_of_runs(options, [&] {
                return run_threaded(png, workers, false, persistent, options.persistence_epochs, options);
            });
            fmt::print("| {:<10} | {:>13} | {:>9.0f} | {:>5.1f}% |\n", persistent ? "persistent" : "per-epoch",
                       row.worker_starts, double(row.samples) / row.seconds, 100.0 * row.wait_seconds / row.seconds);
        }
    }
    return 0;
}

}  // namespace ember::bench
