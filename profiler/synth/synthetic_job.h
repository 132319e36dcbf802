// synthetic_job.h: a data-parallel job of R ranks whose answer is known by construction
// (`ember synth --ranks R --straggler S --straggler-ms X --clock-skew-ms Y`): the test
// bed of the job analysis (profiler/analysis/collectives.h).
//
// Every step starts at the same true time on every rank. Each rank runs a small CNN's
// forward and backward (NVTX ranges, launches, kernels on a compute stream) and
// all-reduces two gradient buckets on its nccl stream: the bucket's NCCL kernel starts
// when the rank's gradients are ready (its arrival) and ends, on every rank within 2 µs,
// a transfer time after the last rank arrived. The straggler's conv2 forward kernel runs
// `straggler_extra_ns` longer every step. Each rank records on its own clock, off the
// true time by up to `clock_skew_ns`, and its wall-clock offset is right only to within
// a millisecond (hosts' NTP). The truth (each rank's wait, how often it arrived last,
// its clock offset) is computed from the same plan and returned.
//
// With `tensor_parallel` T > 1 the job is two-dimensional, as PyTorch's DeviceMesh makes
// it: the first bucket is all-reduced within each tensor-parallel group of T consecutive
// ranks, the second within each data-parallel group (the ranks equal modulo T), and every
// NCCL kernel carries Kineto's collective metadata (process group name, description
// "mesh_tp"/"mesh_dp", ranks, sequence number). A straggler then delays its own
// tensor-parallel group, whose ranks arrive late at their data-parallel collectives.
#pragma once

#include "profiler/trace/events.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ember::synth {

struct SyntheticJobOptions {
    int ranks = 8;
    std::int64_t steps = 50;
    std::uint64_t seed = 1;
    int straggler = -1;                            // -1: no straggler
    trace::TimeNs straggler_extra_ns = 2'000'000;  // its extra compute per step
    trace::TimeNs clock_skew_ns = 0;               // each clock off the true time by up to this
    int tensor_parallel = 1;                       // T: ranks per tensor-parallel group (divides ranks)
};

// What the analysis should find for one rank.
struct SyntheticJobTruth {
    int rank = 0;
    trace::TimeNs clock_offset_ns = 0;      // recorded = true time + this
    trace::TimeNs wait_ns = 0;              // summed (last arrival - own arrival)
    std::int64_t arrived_last = 0;          // collectives it arrived strictly last to
    std::int64_t arrived_last_by_10us = 0;  // ... and more than 10 µs after every other rank
    std::int64_t collectives = 0;
    std::int64_t events = 0;
};

// The rank files (synthetic_rank_paths) and the truth per rank. Throws
// std::invalid_argument for bad options, store::TraceError for file problems.
std::vector<SyntheticJobTruth> write_synthetic_job(const std::string& output, const SyntheticJobOptions& options);

}  // namespace ember::synth
