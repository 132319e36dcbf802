// statistics.h: the tables of the stats view (kernels, copies, ranges, steps) and the
// summary of a selected time range (top kernels, copies, ranges, stalls), computed
// from the model's ready lanes.
#pragma once

#include "viewer/model/trace_model.h"
#include "viewer/model/view_state.h"

#include <cstdint>
#include <vector>

namespace ember::viewer {

// One line of a table: every event with this name (kernel name, "Memcpy HtoD
// (pinned)", NVTX message).
struct NameTotal {
    std::uint32_t name_id = 0;
    EventKind kind = EventKind::kernel;
    std::int64_t count = 0;
    trace::TimeNs total_ns = 0;
    trace::TimeNs min_ns = 0;
    trace::TimeNs max_ns = 0;
    std::uint64_t bytes = 0;  // copies and memsets
    double average_ns() const { return count ? static_cast<double>(total_ns) / static_cast<double>(count) : 0.0; }
    // Bytes per second over the copies' own time (0 when none).
    double bandwidth() const {
        return total_ns > 0 ? static_cast<double>(bytes) * 1e9 / static_cast<double>(total_ns) : 0.0;
    }
};

struct StepRow {
    std::int64_t index = 0;  // 0-based, in start order
    EventRef ref;
    trace::TimeNs start_ns = 0;
    trace::TimeNs duration_ns = 0;
};

struct Statistics {
    std::vector<NameTotal> kernels;  // sorted by total time, largest first
    std::vector<NameTotal> copies;   // memcpys and memsets
    std::vector<NameTotal> ranges;
    std::vector<NameTotal> stalls;  // waits: NVTX ranges named *wait*/*stall*, host syncs
    std::vector<StepRow> steps;     // NVTX ranges of category "step" or named "step"
    trace::TimeNs kernel_time_ns = 0;
    trace::TimeNs copy_time_ns = 0;
    std::int64_t event_count = 0;
};

// Everything in the ready lanes; with `range`, only events overlapping it, their
// time clipped to it.
Statistics compute_statistics(const TraceModel& model);
Statistics summarize_range(const TraceModel& model, TimeRange range);

// True for the NVTX names ember (and common tools) use for waiting: "dataloader/wait",
// "allreduce_wait", "stall ...".
bool is_stall_name(std::string_view name);

}  // namespace ember::viewer
