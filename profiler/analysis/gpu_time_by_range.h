// gpu_time_by_range.h: which NVTX range the GPU time belongs to. A kernel is
// attributed to the innermost push/pop range that was open on the thread whose
// API call launched it (matched by correlation id), at the moment of the call:
// GPU work runs later than its launch, so the launch, not the kernel's own
// time, says which code asked for it.
#pragma once

#include "profiler/analysis/stack_tree.h"
#include "profiler/store/reader.h"

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace ember::analysis {

// Names of the top-level stacks that collect kernels with no range.
inline constexpr const char* kNoRangeName = "(no range)";                   // launched outside every range
inline constexpr const char* kNoLaunchingCallName = "(no launching call)";  // no API call with its correlation id

struct GpuTimeByRange {
    // Range-name paths with the kernel name as leaf; leaf weight = kernel GPU ns.
    StackTree stacks;
    struct RangeTotals {
        std::int64_t kernels = 0;
        std::int64_t gpu_ns = 0;
    };
    // Per range node of `stacks` (a path of range names): kernels attributed to it.
    std::unordered_map<std::uint32_t, RangeTotals> by_range;
    std::int64_t total_gpu_ns = 0;
};

GpuTimeByRange gpu_time_by_range(const store::TraceReader& reader);

struct GpuTimeByRangeRow {
    std::string range_path;  // outermost first, joined by " > "
    std::int64_t kernels = 0;
    std::int64_t gpu_ns = 0;
    double gpu_percent = 0.0;  // of all kernel time
};

// One row per range path holding kernels, largest GPU time first (ties by path).
std::vector<GpuTimeByRangeRow> gpu_time_by_range_rows(const GpuTimeByRange& result);

}  // namespace ember::analysis
