// thread_split.cpp: the compute/loader split of the CPU backend (thread_split.h).
#include "engine/train/thread_split.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ember::train {

namespace {
constexpr double kMargin = 1.25;
constexpr double kSharedBelowCores = 0.1;
}  // namespace

int initial_compute_threads(int cores, int workers) {
    return std::max(1, cores - std::max(0, workers));
}

ThreadSplit measured_thread_split(int cores, int workers, int measured_threads, double fill_cpu_seconds_per_batch,
                                  double compute_seconds_per_step) {
    ThreadSplit split;
    cores = std::max(1, cores);
    const int most_reserved = std::max(0, std::min(workers, cores - 1));
    // Cores the loader needs when `threads` compute: the step shrinks as threads grow.
    auto needed_at = [&](int threads) {
        const double step = compute_seconds_per_step * double(std::max(1, measured_threads)) / double(threads);
        return step > 0 ? kMargin * fill_cpu_seconds_per_batch / step : double(cores);
    };
    int reserved = 0;
    for (; reserved <= most_reserved; ++reserved) {
        const double needed = needed_at(cores - reserved);
        if (reserved == 0 ? needed < kSharedBelowCores : needed <= double(reserved)) break;
    }
    reserved = std::min(reserved, most_reserved);
    split.compute_threads = cores - reserved;
    split.loader_cores_needed = needed_at(split.compute_threads);
    split.explanation = fmt::format(
        "the loader takes {:.3g} ms of CPU a batch against {:.3g} ms of compute a step ({:.1f}% of a core at {} "
        "compute thread{}): {}",
        fill_cpu_seconds_per_batch * 1e3, compute_seconds_per_step * 1e3, 100.0 * split.loader_cores_needed / kMargin,
        split.compute_threads, split.compute_threads == 1 ? "" : "s",
        reserved == 0 ? std::string("its workers can share the cores")
                      : fmt::format("{} core{} for its {} worker{}", reserved, reserved == 1 ? "" : "s", workers,
                                    workers == 1 ? "" : "s"));
    return split;
}

}  // namespace ember::train
