// gpu_breakdown.h: where the GPU time of each rank went — the breakdowns Holistic
// Trace Analysis and TraceLens compute, over gpu_work() of any convention.
//
// With U(X) the union of the intervals of class X on the rank (all streams):
//   temporal        span = last GPU end − first GPU start; idle = span − |U(all)|;
//                   compute = |U(COMPUTATION)|; non_compute = span − compute − idle
//   kernel_types    the time of every exclusive combination of the classes
//                   ("COMPUTATION", "COMPUTATION overlapping COMMUNICATION", ...)
//   overlap         |U(COMMUNICATION) ∩ U(COMPUTATION)| / |U(COMMUNICATION)| × 100
//                   (none when the rank has no communication)
//   idle_breakdown  per CUDA stream, the gap before each GPU event (after the one
//                   before it on the stream) is host_wait when its launching call
//                   started after the previous event ended (the host was late),
//                   kernel_wait when it is shorter than the threshold (launch
//                   overhead between back-to-back work), other otherwise
//   gpu_timeline    TraceLens: computation = |U(comp)|, exposed communication =
//                   |U(comm) − U(comp)|, exposed memcpy = |U(mem) − U(comp) − U(comm)|,
//                   busy = |U(all)|, idle = span − busy
// docs/stats.md states the definitions again, with each tool's conventions.
#pragma once

#include "profiler/analysis/gpu_work.h"
#include "profiler/analysis/idle_gaps.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ember::analysis {

struct TemporalRow {
    std::int32_t rank = 0;
    trace::TimeNs span_ns = 0;
    trace::TimeNs idle_ns = 0;
    trace::TimeNs compute_ns = 0;
    trace::TimeNs non_compute_ns = 0;
};
std::vector<TemporalRow> temporal_breakdown(const std::vector<RankGpuWork>& work);

struct KernelTypeRow {
    std::int32_t rank = 0;
    std::string kernel_type;  // HTA's spelling
    trace::TimeNs total_ns = 0;
};
// Per rank, combinations with time only, longest first.
std::vector<KernelTypeRow> kernel_type_breakdown(const std::vector<RankGpuWork>& work);

struct TopKernelRow {
    std::int32_t rank = 0;
    std::string kernel_type;
    std::string name;  // kernel name; "memcpy" / "memset" for copies
    trace::TimeNs total_ns = 0;
    std::int64_t instances = 0;
    trace::TimeNs min_ns = 0;
    trace::TimeNs max_ns = 0;
};
// The `per_type` longest-running names of each class on each rank.
std::vector<TopKernelRow> top_kernels_by_type(const store::TraceReader& reader, const std::vector<RankGpuWork>& work,
                                              std::size_t per_type);

struct OverlapRow {
    std::int32_t rank = 0;
    trace::TimeNs communication_ns = 0;  // |U(COMMUNICATION)|
    trace::TimeNs overlapped_ns = 0;     // of it, under computation
    std::optional<double> percent;       // none without communication
};
std::vector<OverlapRow> communication_overlap(const std::vector<RankGpuWork>& work);

const char* idle_category_name(IdleCategory category);  // "host_wait", "kernel_wait", "other"

struct IdleRow {
    std::int32_t rank = 0;
    std::uint64_t stream = 0;  // CUDA stream id as recorded
    IdleCategory category = IdleCategory::other;
    trace::TimeNs idle_ns = 0;
    std::int64_t gaps = 0;
    std::optional<double> ratio;  // of the stream's idle time; none when it has none
};
// Rows for the categories that occur on each stream (HTA's shape); streams in order of
// their first event.
std::vector<IdleRow> idle_breakdown(const std::vector<RankGpuWork>& work, trace::TimeNs kernel_wait_threshold_ns);
// The classified gaps themselves (for the viewer's coloured idle spans).
struct IdleGapSpan {
    std::int32_t rank = 0;
    std::uint64_t stream = 0;
    trace::TimeNs start_ns = 0;
    trace::TimeNs end_ns = 0;
    IdleCategory category = IdleCategory::other;
};
std::vector<IdleGapSpan> idle_gaps_by_category(const std::vector<RankGpuWork>& work,
                                               trace::TimeNs kernel_wait_threshold_ns);

struct GpuTimelineRow {
    std::int32_t rank = 0;
    std::string type;  // TraceLens' names: computation_time, exposed_comm_time, ...
    trace::TimeNs time_ns = 0;
    double percent = 0.0;  // of total_time
};
std::vector<GpuTimelineRow> gpu_timeline(const std::vector<RankGpuWork>& work);

}  // namespace ember::analysis
