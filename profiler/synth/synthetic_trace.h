// synthetic_trace.h: deterministic, training-shaped traces for tests and for the
// store and viewer benchmarks (`ember synth`). Each training step has the shape a
// real data-parallel CNN step has in an ember/Nsight trace:
//
//   main thread   step ─┬─ dataloader/wait (sometimes a long stall)
//                       ├─ forward ── conv1, bn1, relu1, pool1, conv2, ... (layer ranges)
//                       ├─ backward ── layer ranges, allreduce/bucket (payload: bytes)
//                       ├─ allreduce/wait
//                       └─ optimizer
//                 cudaMemcpyAsync / cudaMemcpy / cudaLaunchKernel / cudaMemsetAsync /
//                 cudaStreamWaitEvent / cudaStreamSynchronize API calls
//   workers       dataloader/load, dataloader/decode, dataloader/augment ranges
//   GPU streams   compute (kernels, memset), copy (HtoD pinned + pageable), nccl
//                 (ncclAllReduce kernels); every kernel lies after its launch call
//                 and shares its correlation id
//   counters      gpu utilization, loss, lr, samples/s; CPU stack samples;
//                 collector overhead; an "epoch" mark every 100 steps
//
// The same (seed, rank, events) always gives the same events, ids and row order.
#pragma once

#include "profiler/synth/event_sink.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ember::synth {

struct SyntheticTraceOptions {
    std::int64_t events = 100'000;  // per rank; the last step may overshoot by < one step
    int ranks = 1;
    std::uint64_t seed = 1;
};

// What one rank's generation produced.
struct SyntheticRankSummary {
    int rank = 0;
    std::int64_t events = 0;  // records sent to the sink
    std::int64_t steps = 0;
    trace::TimeNs start_ns = 0;
    trace::TimeNs end_ns = 0;
};

// The RunInfo of a synthetic rank (clock "synthetic", fixed host and pid).
trace::RunInfo synthetic_run_info(const SyntheticTraceOptions& options, int rank);

// Generates one rank's trace into `sink`.
SyntheticRankSummary generate_synthetic_rank(EventSink& sink, const SyntheticTraceOptions& options, int rank);

// The file of each rank: `output` itself for one rank; for R > 1 ranks
// "<output without .db>.rank<r>.db".
std::vector<std::string> synthetic_rank_paths(const std::string& output, int ranks);

// Writes every rank's file through a TraceWriter (bounded memory whatever `events`).
// Throws store::TraceError for file problems, std::invalid_argument for bad options.
std::vector<SyntheticRankSummary> write_synthetic_traces(const std::string& output,
                                                         const SyntheticTraceOptions& options);

}  // namespace ember::synth
