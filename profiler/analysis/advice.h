// advice.h: factual suggestions drawn from the reports. Each rule names the
// measured number it rests on and a threshold documented in docs/stats.md.
#pragma once

#include "profiler/analysis/gpu_activity.h"
#include "profiler/analysis/memory_summary.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ember::analysis {

struct AdviceItem {
    std::string topic;    // "dataloader_wait", "allreduce_wait", "pageable_copies", "gpu_idle", "dropped_records"
    std::string finding;  // what was measured
    std::string advice;   // what usually helps
};

// Thresholds (percent of the summed step wall time, or of the run window).
inline constexpr double kDataloaderWaitThresholdPercent = 10.0;
inline constexpr double kAllreduceWaitThresholdPercent = 10.0;
inline constexpr double kGpuIdleThresholdPercent = 20.0;
inline constexpr double kLowBusyThresholdPercent = 50.0;  // runs without step ranges

std::vector<AdviceItem> advise(const GpuActivity& activity, const std::vector<MemoryOperationRow>& memory,
                               std::uint64_t dropped_records);

}  // namespace ember::analysis
