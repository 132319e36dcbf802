// step_breakdown.h: where each training step's time went, instant by instant — the
// overview of the TensorBoard profiler plugin (torch-tb-profiler), for ember's own
// traces and imported ones.
//
// Every instant of a step window is given to exactly one category, the first of
//   Kernel > Memcpy > Memset > Communication > Runtime > DataLoader > CPU Exec > Other
// that is active at that instant on the step's rank (any of its devices; the threads
// the convention reads), so the eight columns of a row add up to its window. A step's
// window is its step range ("step", "ProfilerStep#N") stretched to the end of the GPU
// work its CUDA calls launched; the next step begins where the stretched one ends, so
// windows do not overlap (tb keeps the host steps as they are when no step launched
// any GPU work, as the plugin does).
//
// Two conventions (docs/stats.md, section "step_breakdown", states every rule):
//   ember  exact nanoseconds; a call belongs to the step whose host window holds its
//          start; every step and every API call counts (driver calls too);
//          communication is NCCL-named kernels and host ranges of the communication
//          category; host ranges count on the threads that drive the GPU (that hold a
//          step or make CUDA calls), Python functions included, except ranges that hold
//          a whole step (a thread's main function, an epoch); a trace without step
//          ranges has no rows.
//   tb     the plugin's rules: a call belongs to a step only when it lies wholly
//          inside the host step; the first step starts after earlier GPU work that
//          no step launched; trailing steps whose launches the profiler may have cut
//          off are dropped; CUDA driver calls (cu*) are neither Runtime nor launchers;
//          every thread's ranges count but Python functions; communication is the
//          nccl:/gloo: ops and the kernels launched inside them; without steps the
//          whole host span is one step "0"; on traces imported from Kineto JSON every
//          time is first rounded the way the plugin's float microseconds round it.
#pragma once

#include "profiler/analysis/gpu_work.h"
#include "profiler/analysis/range_roles.h"
#include "profiler/store/reader.h"

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace ember::analysis {

enum class StepConvention : std::uint8_t { ember, tb };

// `ember stats --like NAME`: tb selects the plugin's rules; ember, hta and tracelens
// (tools without a step breakdown of their own) use ember's.
StepConvention step_convention_for(Convention convention);
const char* step_convention_name(StepConvention convention);  // "ember", "tb"

// The eight categories, in priority order; step_breakdown_category_name gives the
// plugin's column names ("Kernel", ..., "CPU Exec", "Other") every table and the viewer use.
enum class StepBreakdownCategory : std::uint8_t {
    kernel = 0,
    memcpy,
    memset,
    communication,
    runtime,
    dataloader,
    cpu_exec,
    other
};
inline constexpr int kStepBreakdownCategoryCount = 8;
const char* step_breakdown_category_name(StepBreakdownCategory category);

// One step of one rank. Times in ns; the eight categories add up to end_ns - start_ns.
struct StepBreakdownRow {
    // The step's number: the N of ProfilerStep#N / the integer payload of ember's "step"
    // range (the training step), else the step's position on its rank (0, 1, ...).
    std::int64_t step = 0;
    std::int32_t rank = 0;       // RunInfo::rank, or R of a job trace's "rank R"
    trace::TimeNs start_ns = 0;  // the stretched window
    trace::TimeNs end_ns = 0;
    trace::TimeNs kernel_ns = 0;
    trace::TimeNs memcpy_ns = 0;
    trace::TimeNs memset_ns = 0;
    trace::TimeNs communication_ns = 0;
    trace::TimeNs runtime_ns = 0;
    trace::TimeNs dataloader_ns = 0;
    trace::TimeNs cpu_exec_ns = 0;
    trace::TimeNs other_ns = 0;
    // The categories' times in StepBreakdownCategory order.
    std::array<trace::TimeNs, kStepBreakdownCategoryCount> by_category() const {
        return {kernel_ns, memcpy_ns, memset_ns, communication_ns, runtime_ns, dataloader_ns, cpu_exec_ns, other_ns};
    }
};

// What the convention did beyond the rows, so a report can say it.
struct StepBreakdownNotes {
    std::int64_t tail_steps_dropped = 0;   // tb: trailing steps left out (all ranks)
    bool whole_trace_as_one_step = false;  // tb: no step ranges, one step "0" per rank
};

// Rows by rank, then window start. Throws TraceError on a read failure.
std::vector<StepBreakdownRow> step_breakdown(const store::TraceReader& reader, StepConvention convention,
                                             StepBreakdownNotes* notes = nullptr);

}  // namespace ember::analysis
