// trace_diff_name_tables.h: the tables of `ember diff` by name (kernels and copies,
// NVTX ranges, CUDA API calls, sampled CPU functions), read for profile_run.
#pragma once

#include "profiler/analysis/rank_map.h"
#include "profiler/analysis/trace_diff.h"
#include "profiler/store/reader.h"

#include <cstdint>
#include <optional>

namespace ember::analysis {

// Fills profile.kernels, .ranges, .api, .cpu_functions and .cpu_sampled with the totals
// of `rank` (every rank when none), by (domain, normalised name).
void read_name_tables(const store::TraceReader& reader, const RankMap& ranks, std::optional<std::int32_t> rank,
                      RunProfile& profile);

}  // namespace ember::analysis
