// rank_summary.h: per-rank time of a distributed run — the picture of one slow rank
// making the others wait. Where the ranks' collectives are matched (collectives.h),
// the straggler is the job analysis's (the rank that most often arrived last) and each
// rank's collective wait is its; the NVTX rule below serves files without collectives.
//
// The ranks are rank_map.h's: a job trace from `ember merge` holds one process per rank,
// named "rank R"; any other file is one rank, RunInfo::rank. For each rank, over its
// NVTX ranges:
//   compute         sum of outermost compute ranges: "ember"-domain ranges of category
//                   compute (forward, backward, optimizer, injected imbalance) that
//                   have no compute range above them, so layers inside forward are
//                   not counted twice; a rank without any (a PyTorch or Nsight trace):
//                   the union of its kernels that are not communication;
//   all-reduce wait sum of "allreduce/wait" ranges (any domain);
//   dataloader wait sum of "dataloader/wait" ranges;
//   steps, step time the step ranges (steps.h): count and summed length.
// The straggler is the rank the others wait for. In a synchronous data-parallel job
// every rank leaves each all-reduce at about the same time, so the slow rank is the
// one that arrives last and waits least: the rank with the smallest all-reduce wait —
// named only when that wait is the unique least and the others' mean wait exceeds it
// by at least 1% of its step time (ranks that wait alike have no straggler).
// Its compute is usually the largest but need not be (communication progressed
// inside the other ranks' backward passes counts as their compute).
#pragma once

#include "profiler/analysis/collectives.h"
#include "profiler/store/reader.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::analysis {

struct RankTimes {
    std::int32_t rank = 0;
    std::int64_t pid = 0;
    std::string process_name;
    std::int64_t steps = 0;
    trace::TimeNs step_ns = 0;
    trace::TimeNs compute_ns = 0;
    bool compute_from_gpu = false;  // no ember compute ranges: the union of its compute kernels
    trace::TimeNs allreduce_wait_ns = 0;
    trace::TimeNs dataloader_wait_ns = 0;
    // From the job's matched collectives (collectives.h), when it has any.
    std::int64_t collectives = 0;
    trace::TimeNs collective_wait_ns = 0;
    std::int64_t arrived_last = 0;
};

struct RankSummary {
    std::vector<RankTimes> ranks;          // by rank
    std::optional<std::size_t> straggler;  // index into ranks; see above for when it is set
    // Summed all-reduce wait of every rank but the straggler (with collectives: the
    // others' waits at the collectives it arrived last to).
    trace::TimeNs others_wait_ns = 0;
    // The straggler and the waits come from the matched collectives.
    bool from_collectives = false;
    std::string straggler_evidence;
};

// "rank 3" -> 3 (how `ember merge` names processes); nullopt for any other name.
std::optional<std::int32_t> rank_of_process_name(std::string_view name);
// "rank 3: NVIDIA H100" -> 3 (how `ember merge` names devices); nullopt otherwise.
std::optional<std::int32_t> rank_of_device_name(std::string_view name);

// Ranks are ordered by rank number; a file without processes has none. With `job`
// holding matched collectives, the collective waits and the straggler are the job's
// (the collectives report's numbers); else the NVTX rule above names the straggler.
RankSummary rank_summary(const store::TraceReader& reader, const JobCollectives* job = nullptr);

}  // namespace ember::analysis
