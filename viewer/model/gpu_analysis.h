// gpu_analysis.h: where the GPU time went, as the viewer shows it. The numbers come
// from the trace library's analyses (profiler/analysis: gpu_breakdown.h, launches.h,
// step_breakdown.h), so the viewer and `ember stats --report temporal,kernel_types,
// overlap,idle_breakdown,queue,step_breakdown` agree to the nanosecond:
//   per rank of every file  the temporal breakdown (idle / compute / non-compute), the
//                           kernel-type combinations, communication hidden under
//                           computation, idle time per stream by category, the queue
//                           length per stream, and the per-step category breakdown;
//   per stream lane         what the timeline draws besides the events: the idle gaps
//                           between its GPU events with their category (host_wait,
//                           kernel_wait, other) and the queue-length series (operations
//                           launched on the stream and not started yet).
// Everything uses ember's convention (every kernel, copy and memset, exact ns). Times
// are on the model's time base (file time + TraceFile::shift_ns).
//
// TraceModel computes it on its loader thread once the lanes are loaded, inside the
// loader's read snapshot, and publishes it with TraceModel::gpu_analysis(); a grown
// live file is analysed again by compute_gpu_analysis() (any thread, own readers).
#pragma once

#include "profiler/analysis/gpu_breakdown.h"
#include "profiler/analysis/launches.h"
#include "profiler/analysis/step_breakdown.h"
#include "profiler/store/reader.h"
#include "viewer/model/timeline_event.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ember::viewer {

using analysis::IdleCategory;
using analysis::kIdleCategoryCount;

// What a gap's category means, in a phrase for tooltips and the legend.
const char* idle_category_meaning(IdleCategory category);

struct GpuAnalysisOptions {
    // Gaps shorter than this between work launched ahead of time are kernel_wait
    // (`ember stats --kernel-wait-us`, default 30 us, HTA's value).
    trace::TimeNs kernel_wait_threshold_ns = 30'000;
};

// A stretch of time in which one stream ran nothing, between two of its GPU events.
struct IdleGap {
    trace::TimeNs start_ns = 0;  // the previous event's end
    trace::TimeNs end_ns = 0;    // the next event's start
    trace::TimeNs duration_ns() const { return end_ns - start_ns; }
};

using IdleSplit = std::array<trace::TimeNs, kIdleCategoryCount>;  // ns per IdleCategory

// What a stream lane draws below its events. A stream has about one gap per GPU event,
// so a gap costs 17 bytes (times, and its category kept apart) plus 24 bytes of prefix
// sums per 64 gaps; the queue series two points per launched operation.
struct StreamOverlay {
    static constexpr std::size_t kBlock = 64;
    std::vector<IdleGap> gaps;             // by start, disjoint
    std::vector<IdleCategory> categories;  // categories[i]: the category of gaps[i]
    // idle_before_block[b]: idle time per category of gaps[0, b * kBlock), so a folded
    // run of millions of gaps knows its split from two lookups and two short scans.
    std::vector<IdleSplit> idle_before_block;
    std::vector<CounterPoint> queue;  // queue length; each value holds until the next point
    double queue_max = 0.0;

    bool empty() const { return gaps.empty() && queue.empty(); }
    // Appends a gap (after the last one), then finish() builds the prefix sums.
    void add_gap(trace::TimeNs start_ns, trace::TimeNs end_ns, IdleCategory category);
    void finish();
    // Idle time per category of gaps[first, last).
    IdleSplit idle_between(std::size_t first, std::size_t last) const;
    // The queue length at `time_ns` (0 before the first launch).
    double queue_at(trace::TimeNs time_ns) const;

  private:
    IdleSplit idle_before(std::size_t index) const;
};

// The per-step categories of step_breakdown.h, in its priority order.
using analysis::StepBreakdownCategory;
inline constexpr int kStepCategoryCount = analysis::kStepBreakdownCategoryCount;
const char* step_category_name(int category);  // step_breakdown_category_name: "Kernel", ..., "Other"

struct StepSplit {
    std::int64_t step = 0;       // the N of ProfilerStep#N, the training step, or its position
    trace::TimeNs start_ns = 0;  // the window: the step range stretched over the GPU work it launched
    trace::TimeNs end_ns = 0;
    std::array<trace::TimeNs, kStepCategoryCount> ns{};  // adds up to end_ns - start_ns
    trace::TimeNs duration_ns() const { return end_ns - start_ns; }
};

// Idle time of one stream of a rank (idle_breakdown of gpu_breakdown.h).
struct StreamIdleRow {
    std::uint64_t cuda_stream = 0;  // as recorded
    int lane = -1;                  // its timeline lane; -1 when none or several share the id
    std::string title;              // the lane's title ("stream 7 compute"), else "stream 7"
    IdleSplit idle_ns{};
    std::array<std::int64_t, kIdleCategoryCount> gaps{};
    trace::TimeNs total_ns() const { return idle_ns[0] + idle_ns[1] + idle_ns[2]; }
};

struct QueueSummaryRow {
    std::uint64_t cuda_stream = 0;
    std::string title;
    double mean = 0.0;  // over the change points (HTA's summary)
    double time_weighted_mean = 0.0;
    std::int64_t max = 0;
};

struct RankBreakdown {
    int file_index = 0;
    std::int32_t rank = 0;
    std::string title;                 // "rank 0"; "rank 0 · run.db" when two files share a rank
    std::int64_t gpu_events = 0;       // kernels, copies and memsets
    std::int64_t unlinked_events = 0;  // of them, without a launching call (never host_wait, not queued)
    trace::TimeNs gpu_begin_ns = 0;    // first GPU start and last GPU end (model time)
    trace::TimeNs gpu_end_ns = 0;
    analysis::TemporalRow temporal;
    std::vector<analysis::KernelTypeRow> kernel_types;  // combinations with time, longest first
    std::vector<analysis::TopKernelRow> top_kernels;    // the longest names of each class
    analysis::OverlapRow overlap;
    std::vector<StreamIdleRow> streams;  // in order of their first event
    std::vector<QueueSummaryRow> queues;
    std::vector<StepSplit> steps;  // in window order
    bool has_gpu_work() const { return gpu_events > 0; }
};

struct GpuAnalysis {
    GpuAnalysisOptions options;
    std::vector<RankBreakdown> ranks;  // by file, then rank
    std::vector<StreamOverlay> lanes;  // by lane index (empty for lanes without GPU work)
    std::int64_t model_events = 0;     // TraceModel::total_events() it saw (a live file grows)
    std::string error;                 // what could not be computed, if anything

    // nullptr for lanes it has nothing for (thread and counter lanes, lanes added since).
    const StreamOverlay* overlay(int lane) const;
    std::size_t memory_bytes() const;
};

// The inputs, so the analysis needs no TraceModel: the files through readers the
// caller does not use meanwhile, and the stream lanes to draw on.
struct AnalysisFile {
    store::TraceReader* reader = nullptr;
    trace::TimeNs shift_ns = 0;  // model time = file time + shift
    std::string name;            // the file's name, for titles
};
struct AnalysisLane {
    int lane = -1;
    int file_index = 0;
    trace::StreamId stream_id = 0;  // the lane's track
};

// Throws store::TraceError when a file cannot be read. `cancel` (may be null) stops it
// between steps; the result is then incomplete and should be dropped.
std::unique_ptr<GpuAnalysis> analyze_gpu(const std::vector<AnalysisFile>& files,
                                         const std::vector<AnalysisLane>& stream_lanes, int lane_count,
                                         const GpuAnalysisOptions& options = {},
                                         const std::atomic<bool>* cancel = nullptr);

}  // namespace ember::viewer
