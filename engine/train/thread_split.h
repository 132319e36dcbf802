// thread_split.h: how the CPU backend shares the cores between its compute team
// (oneDNN, OpenBLAS and the threaded loops) and the data loader's workers.
//
// The compute team's threads spin while they wait for each other, so a worker that
// takes a core from them stalls the whole team (CNN on 2 cores, 2 workers decoding
// PNGs: 366 img/s with one GEMM thread, 110 with two). But a loader that reads IDX
// images from memory needs a fraction of a percent of a core, and keeping a core for it
// halves the compute. So the run starts with a core per worker (the safe side), measures
// the loader's CPU time per batch and the compute time per step over the first steps,
// and then tries keeping for the workers only the cores they need to deliver one batch
// per step, and keeps whichever split ran faster (engine/train/run.cpp).
#pragma once

#include <string>

namespace ember::train {

// Before anything is measured: a core per worker, at least one compute thread.
int initial_compute_threads(int cores, int workers);

struct ThreadSplit {
    int compute_threads = 1;
    double loader_cores_needed = 0;  // at that many compute threads, with the margin
    std::string explanation;         // why, for the run's log
};

// The split for the rest of the run. The loader must fill one batch (costing
// `fill_cpu_seconds_per_batch` of CPU) in the time a step computes; steps are taken to
// speed up in proportion to the compute threads (measured `compute_seconds_per_step` at
// `measured_threads`), and a margin of 25% covers the loader's unevenness. A loader that
// needs under a tenth of a core shares the cores and keeps none of its own.
ThreadSplit measured_thread_split(int cores, int workers, int measured_threads, double fill_cpu_seconds_per_batch,
                                  double compute_seconds_per_step);

}  // namespace ember::train
