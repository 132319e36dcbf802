// clock.h: the collector's one clock. NVTX ranges, CUDA API calls, CPU samples,
// NVML samples and (through CUPTI's timestamp callback) GPU activity all read
// now_ns(), so a kernel lies on the same time axis as the API call that launched it.
#pragma once

#include <cstdint>
#include <ctime>

namespace ember::collector {

// CLOCK_MONOTONIC: read through the vDSO (~20 ns), never jumps, and is the clock
// other tools (CUPTI's default, perf) use, which keeps files comparable.
inline constexpr const char* kClockName = "CLOCK_MONOTONIC";

inline std::int64_t now_ns() {
    timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return std::int64_t(now.tv_sec) * 1000000000 + now.tv_nsec;
}

// Wall time minus now_ns(), for RunInfo::clock_offset_to_wall_ns.
inline std::int64_t clock_offset_to_wall_ns() {
    timespec wall;
    std::int64_t before = now_ns();
    clock_gettime(CLOCK_REALTIME, &wall);
    std::int64_t after = now_ns();
    return std::int64_t(wall.tv_sec) * 1000000000 + wall.tv_nsec - (before + (after - before) / 2);
}

}  // namespace ember::collector
