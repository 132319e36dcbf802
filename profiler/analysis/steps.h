// steps.h: what a training step is, for every report, `ember diff` and the viewer.
//
// A step is a range named "step" (ember's NVTX step; an imported ProfilerStep#N, which
// the Kineto importer renames) or "ProfilerStep#N" (PyTorch's own name, where an
// importer keeps it), in any domain. Its number is the N of ProfilerStep#N, else the
// range's integer payload (ember's training step, the importer's N), else none. Its
// rank is its thread's (rank_map.h).
#pragma once

#include "profiler/analysis/rank_map.h"
#include "profiler/store/reader.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

namespace ember::analysis {

// Is this range name a training step?
bool is_step_range_name(std::string_view name);

struct StepRange {
    trace::TimeNs start_ns = 0;
    trace::TimeNs end_ns = 0;
    trace::ThreadId thread_id = 0;
    trace::StringId domain_id = trace::kNoString;
    trace::RangeId range_id = 0;
    std::optional<std::int64_t> number;
};

// Every step range of the file by rank, each rank's in (start, range id) order.
// Throws TraceError on a read failure.
std::map<std::int32_t, std::vector<StepRange>> step_ranges(const store::TraceReader& reader, const RankMap& ranks);

}  // namespace ember::analysis
