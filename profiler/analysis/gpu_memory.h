// gpu_memory.h: where the GPU memory went (`ember stats --report gpu_memory`), from a
// trace's memory_events and memory_blocks (a PyTorch memory snapshot's allocator
// trace and state, profiler/import/memory_snapshot_importer.cpp).
//
// The replay, per device, in time order (events of one instant in the order they were
// recorded):
//   allocated += bytes at alloc and live_at_start, -= the block's bytes at its
//                free_completed (not free_requested: the block is reused only when its
//                stream's work is done);
//   reserved  += bytes at segment_alloc, segment_map and segment_live_at_start,
//                -= at segment_free and segment_unmap.
// Memory allocated before the trace began is in it from the start (live_at_start, as
// PyTorch's memory_viz counts "initially allocated" blocks). The peak is the first
// moment the most was allocated; what was live then is grouped by the allocating
// line (the innermost frame of the program's own Python code, python_gpu.h's
// python_user_frame; else the innermost Python frame; else the innermost ATen kernel
// or autograd function; else the innermost C++ frame outside the allocator), by stack,
// and by allocating op when the source names the allocating thread (a Kineto trace's
// "[memory]" events): the innermost range open on that thread when the block was
// allocated (allocating_range below).
#pragma once

#include "profiler/analysis/report_table.h"
#include "profiler/store/reader.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ember::analysis {

// Live blocks sharing a place: an allocating op, an allocating line or a whole stack.
struct GpuMemoryPlace {
    std::string place;
    std::int64_t blocks = 0;
    std::int64_t bytes = 0;
    std::int64_t largest_block_bytes = 0;  // the largest of those blocks
};

// Names of the places no op, line or stack names.
inline constexpr const char* kAllocatedBeforeTrace = "(allocated before the trace began)";
inline constexpr const char* kNoOpOpen = "(no op open on its thread)";
inline constexpr const char* kNoThreadRecorded = "(no thread recorded)";

// The allocating op of a block allocated by `thread` at `time`: the innermost range
// (push/pop, depth >= 0) open on that thread then (start <= time < end), passing over
// the allocator's own tensor-creation ops (aten::empty, aten::empty_strided,
// aten::empty_like, aten::new_empty, aten::new_empty_strided, aten::resize_: every
// allocation happens inside one) unless nothing else is open. None when no range is open.
std::optional<trace::RangeEvent> allocating_range(const store::TraceReader& reader, trace::ThreadId thread,
                                                  trace::TimeNs time);

struct GpuMemoryOom {
    trace::TimeNs time_ns = 0;
    std::int64_t request_bytes = 0;
    std::int64_t device_free_bytes = -1;  // -1: not recorded
    std::int64_t allocated_bytes = 0;     // live blocks then: none of them could be released
    std::int64_t reserved_bytes = 0;
    std::int64_t live_blocks = 0;
    std::vector<GpuMemoryPlace> live_by_line;  // largest first
};

// Allocation churn in one step (or in the whole trace when it has no steps).
struct GpuMemoryChurn {
    std::string step;  // "ProfilerStep#3" / "step 3", or "(whole trace)", "(outside steps)"
    std::int64_t allocs = 0;
    std::int64_t alloc_bytes = 0;
    std::int64_t frees = 0;
    std::int64_t freed_bytes = 0;
};

struct GpuMemoryDevice {
    trace::DeviceId device = 0;
    std::int64_t events = 0;
    std::int64_t peak_allocated_bytes = 0;
    trace::TimeNs peak_allocated_ns = 0;
    std::int64_t reserved_at_peak_bytes = 0;  // reserved when allocated peaked
    std::int64_t peak_reserved_bytes = 0;
    trace::TimeNs peak_reserved_ns = 0;
    std::int64_t allocated_before_trace_bytes = 0;  // live_at_start
    std::int64_t live_blocks_at_peak = 0;
    std::string peak_step;   // the step holding the peak, "" when none
    std::string peak_range;  // the innermost range holding it, "" when none
    // The largest free (inactive) block of the allocator's state (memory_blocks); -1
    // when the trace holds no state for this device.
    std::int64_t largest_free_block_bytes = -1;
    std::int64_t free_blocks_bytes = -1;  // all inactive blocks of that state
    // By allocating op: empty when no block live at the peak names its thread (a PyTorch
    // memory snapshot); blocks without one are "(no thread recorded)".
    std::vector<GpuMemoryPlace> at_peak_by_op;     // largest first
    std::vector<GpuMemoryPlace> at_peak_by_line;   // largest first
    std::vector<GpuMemoryPlace> at_peak_by_stack;  // largest first
    std::vector<GpuMemoryChurn> churn;
    std::vector<GpuMemoryOom> ooms;
};

struct GpuMemoryReport {
    std::vector<GpuMemoryDevice> devices;  // by device; devices with memory events only
    bool has_steps = false;                // the trace has step ranges (steps.h)
};

// How a report names a device's memory: "GPU 0", or "the host" for device -1 (the CPU
// backend's caching allocator).
std::string memory_device_text(trace::DeviceId device);

// Throws TraceError on a read failure.
GpuMemoryReport gpu_memory(const store::TraceReader& reader);

// One live block, and who allocated it.
struct GpuMemoryBlock {
    std::uint64_t address = 0;
    std::int64_t bytes = 0;
    trace::TimeNs alloc_ns = 0;     // when it was allocated (live_at_start: the trace's record of it)
    trace::ThreadId thread_id = 0;  // 0: not recorded
    trace::StackId stack_id = 0;    // 0: no stack
    bool before_trace = false;
    std::string line;                           // its allocating line (as by_line)
    std::string op;                             // its allocating op (as by_op)
    std::optional<trace::RangeEvent> op_range;  // the range naming that op, when one was open
};

// What was live on `device` at `time`: the replay of its events up to and including
// that instant (memory_viz's "active memory timeline" at a clicked time), with the
// `block_limit` largest live blocks themselves (largest first, then by address).
struct GpuMemoryAt {
    std::int64_t allocated_bytes = 0;
    std::int64_t reserved_bytes = 0;
    std::int64_t live_blocks = 0;
    std::vector<GpuMemoryPlace> by_op;     // largest first; empty when no live block names its thread
    std::vector<GpuMemoryPlace> by_line;   // largest first
    std::vector<GpuMemoryPlace> by_stack;  // largest first
    std::vector<GpuMemoryBlock> blocks;    // at most block_limit, largest first
};
GpuMemoryAt gpu_memory_at(const store::TraceReader& reader, trace::DeviceId device, trace::TimeNs time,
                          std::size_t block_limit = 0);

// The replay above as a timeline, for memory lanes: the allocated and reserved bytes of
// each device after each instant that has memory events (by device, then time), with the
// number of events at that instant. The visitor returns false to stop.
using MemoryTotalVisitor = std::function<bool(trace::DeviceId device, trace::TimeNs time, std::int64_t allocated,
                                              std::int64_t reserved, std::int64_t events)>;
void for_each_memory_total(const store::TraceReader& reader, const MemoryTotalVisitor& visit,
                           std::optional<trace::DeviceId> device = std::nullopt);

// The report's tables: "gpu_memory" (one row per device: peak_allocated_bytes,
// peak_reserved_bytes, ...), then "gpu_memory_at_peak_by_op", "gpu_memory_at_peak_by_line",
// "gpu_memory_at_peak_by_stack", "gpu_memory_churn" and "gpu_memory_oom"; `top` rows of
// each place table per device (0: 10). Times are from the trace's start.
std::vector<Table> gpu_memory_tables(const GpuMemoryReport& report, const trace::RunInfo& run, std::size_t top);

}  // namespace ember::analysis
