// dataloader_bench.h: `ember bench dataloader`, samples/s and stall fraction of a
// fixed per-batch compute load over workers x pinned staging x source (IDX in memory,
// PNG image folder, GPU-resident).
#pragma once

#include "engine/data/fashion_mnist.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ember::bench {

struct DataloaderBenchOptions {
    std::string root = data::kFashionMnistDefaultRoot;
    std::string png_dir;  // empty: a prepared copy in the temp folder
    std::vector<std::string> sources = {"idx", "png", "gpu"};
    std::vector<int> workers = {0, 1, 2, 4, 8};
    std::vector<std::string> pinned = {"off", "on"};
    int64_t batch_size = 128;
    int64_t batches = 100;
    bool full_epoch = false;
    double compute_ms = 4.0;
    std::string compute = "sleep";  // sleep (host blocked on a GPU) or spin (CPU-bound step)
    int prefetch_factor = 2;
    bool persistent = true;
    bool augment = true;
    uint64_t seed = 0;
    int persistence_epochs = 5;
    int repeat = 1;  // runs per row; the median by samples/s is reported
};

// Prints the tables; returns the exit status (1: the data set is missing). Data and
// CUDA errors are thrown.
int run_dataloader_bench(const DataloaderBenchOptions& options);

}  // namespace ember::bench
