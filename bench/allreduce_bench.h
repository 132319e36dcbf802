// allreduce_bench.h: `ember bench allreduce`, the nccl-tests style sweep of all-reduce
// sizes under the launcher: NCCL on device buffers with GPUs, MPI on host buffers
// otherwise; algbw and busbw per size, every size checked once.
#pragma once

#include <string>

namespace ember::bench {

struct AllreduceBenchOptions {
    std::string min_bytes_text = "1K";  // sizes as 1K, 4M, 1G ...
    std::string max_bytes_text = "1G";
    std::string engine = "auto";  // auto | mpi | nccl
    int iterations = 20;
    int warmup = 5;
};

// Prints the table on rank 0; returns the exit status (1: a size gave wrong sums).
int run_allreduce_bench(const AllreduceBenchOptions& options);

}  // namespace ember::bench
