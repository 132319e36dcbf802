// launches.h: how the host feeds the GPU — per kernel name the CPU time of its
// launching call and the delay until it starts running, the kernels too short to be
// worth their launch, and how many launched operations wait on each stream.
//
// Definitions (docs/stats.md):
//   launch duration  end − start of the launching API call (cudaLaunchKernel, ...)
//   launch delay     GPU start − launch end: how long the work queued after the call
//                    returned; negative when the GPU started the work before the call
//                    returned. Under --like hta a negative delay is 0, as in HTA's
//                    cuda_kernel_launch_stats (checked on real traces, real_traces_test).
//   short kernel     GPU duration < its launch duration, with the launch itself no
//                    longer than the runtime cutoff: the host spends longer launching
//                    it than the GPU spends running it (HTA's "short GPU kernels")
//   outliers         launches longer than the runtime cutoff (default 50 µs); delays
//                    longer than the delay cutoff (default 100 µs)
//   queue length     per CUDA stream, +1 when a call launches work on it and −1 when
//                    that work starts on the GPU (HTA's definition); summarized over its
//                    change points and weighted by time. A launch and a start at the same
//                    instant count the launch first (HTA's unstable sort leaves that order
//                    to chance, so its mean can differ where such instants occur)
// Only GPU work with a launching call counts.
#pragma once

#include "profiler/analysis/gpu_work.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ember::analysis {

struct LaunchOptions {
    trace::TimeNs runtime_cutoff_ns = 50'000;
    trace::TimeNs launch_delay_cutoff_ns = 100'000;
    // HTA's launch delay: a GPU start before the end of its launching call is no delay
    // (0) rather than a negative one.
    bool negative_delay_is_zero = false;
};
// The options a convention implies (hta: negative_delay_is_zero).
LaunchOptions launch_options_for(Convention convention);

struct LaunchRow {
    std::int32_t rank = 0;
    std::string name;  // kernel name; "memcpy" / "memset" for copies
    std::int64_t launches = 0;
    trace::TimeNs launch_total_ns = 0;  // summed CPU duration of the launching calls
    trace::TimeNs launch_max_ns = 0;
    trace::TimeNs delay_total_ns = 0;  // summed launch delay
    trace::TimeNs delay_max_ns = 0;
    trace::TimeNs gpu_total_ns = 0;
    std::int64_t short_kernels = 0;    // runs shorter than their launch
    std::int64_t launch_outliers = 0;  // launch longer than the runtime cutoff
    std::int64_t delay_outliers = 0;   // delay longer than the delay cutoff
};
// Per rank and name, by summed launch time, longest first.
std::vector<LaunchRow> launch_statistics(const store::TraceReader& reader, const std::vector<RankGpuWork>& work,
                                         const LaunchOptions& options = {});

struct QueueRow {
    std::int32_t rank = 0;
    std::uint64_t stream = 0;
    std::int64_t samples = 0;         // change points of the series
    double mean = 0.0;                // over the change points (HTA's summary)
    double time_weighted_mean = 0.0;  // over time, first launch to last start
    double median = 0.0;              // over the change points (the mean of the middle two for an even count)
    std::int64_t max = 0;
};
std::vector<QueueRow> queue_length_summary(const std::vector<RankGpuWork>& work);

struct QueuePoint {
    trace::TimeNs time_ns = 0;
    std::int64_t length = 0;
};
// The step function itself, per (rank, stream): the counter track of the viewer.
struct QueueSeries {
    std::int32_t rank = 0;
    std::uint64_t stream = 0;
    std::vector<QueuePoint> points;  // by time; the value holds until the next point
};
std::vector<QueueSeries> queue_length_series(const std::vector<RankGpuWork>& work);

}  // namespace ember::analysis
