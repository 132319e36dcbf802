// store_bench.h: `ember bench store`, trace writer throughput against a plain
// one-INSERT-per-row loop on the same synthetic rows, each contender in its own
// forked process (so peak RSS is its own).
#pragma once

#include <cstdint>
#include <string>

namespace ember::bench {

struct StoreBenchOptions {
    std::int64_t events = 2'000'000;         // written by TraceWriter and the 250 ms baseline
    std::int64_t baseline_events = 200'000;  // the autocommit baseline (every row a transaction)
    std::uint64_t seed = 1;
    std::string directory;  // empty: a temporary directory
    bool keep = false;      // keep the trace files
};

// Prints the table; returns the exit status (2: a file could not be written or read
// back whole).
int run_store_bench(const StoreBenchOptions& options);

}  // namespace ember::bench
