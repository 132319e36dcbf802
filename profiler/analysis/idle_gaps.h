// idle_gaps.h: why a GPU sat idle, one rule for the idle breakdown (gpu_breakdown.h)
// and `ember diff`. A gap [gap_start, gap_end) ends with GPU work; HTA's causes:
//   host_wait    that work was launched after the gap began: the GPU waited for the
//                host to launch it;
//   kernel_wait  else a gap shorter than the threshold (`--kernel-wait-us`): the
//                back-to-back overhead between launched kernels;
//   other        anything else (synchronisations, work whose launch is unknown).
#pragma once

#include "profiler/trace/events.h"

#include <cstdint>
#include <optional>

namespace ember::analysis {

enum class IdleCategory : std::uint8_t { host_wait = 0, kernel_wait = 1, other = 2 };
inline constexpr int kIdleCategoryCount = 3;  // idle_category_name (gpu_breakdown.h) names each

// `launch_start_ns`: when the work that ended the gap was launched (the earliest of its
// launching calls); nullopt when the file links no call to it.
constexpr IdleCategory idle_gap_cause(std::optional<trace::TimeNs> launch_start_ns, trace::TimeNs gap_start,
                                      trace::TimeNs gap_end, trace::TimeNs kernel_wait_threshold_ns) {
    if (launch_start_ns && *launch_start_ns > gap_start) return IdleCategory::host_wait;
    if (gap_end - gap_start < kernel_wait_threshold_ns) return IdleCategory::kernel_wait;
    return IdleCategory::other;
}

}  // namespace ember::analysis
