// train_bench.h: `ember bench train`, the optimization table — one model trained with
// every optimization of the tuning canon on, then with each one off alone, in one run.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace ember::bench {

struct TrainBenchOptions {
    std::string model = "cnn";
    std::string backend = "auto";
    std::string batch_size = "256";
    int64_t steps = 60;
    int64_t warmup = 10;
    int workers = 2;
    double target_accuracy = 0;  // > 0: also train whole epochs until this test accuracy
    int max_epochs = 10;
    std::string data_root = "/usr/share/datasets/fashion-mnist";
    // Called just before (true) and after (false) the first "all on" variant trains, in
    // this process: `ember bench train --profile/--baseline` records that run with it.
    std::function<void(bool starting)> around_all_on;
};

// Prints the table (rank 0 under mpirun); returns the exit status (2: bad option,
// 1: a variant failed).
int run_train_bench(const TrainBenchOptions& options);

}  // namespace ember::bench
