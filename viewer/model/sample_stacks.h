// sample_stacks.h: each thread's sampled call stacks as a stack chart on its lane
// (speedscope's "time order" view, Nsight Systems' sampled backtraces, Tracy's sample
// call stacks): which Python or native function ran when, next to the CUDA calls and
// NVTX ranges of the same thread.
//
// A sample stands for the time until the thread's next sample, at most two sampling
// periods (the median interval between the thread's samples): a longer silence means
// the thread was not sampled, and the sample then lasts one period. Each sample is a
// column of boxes, one per frame from the outermost (depth 0) in; consecutive samples
// that share the frames from the root down to a depth share that depth's box, so a
// function that ran for 300 samples is one box, and its callees are boxes under it.
//
// Idle samples (stack_samples.idle: sleeping, blocked, waiting for the GIL) are left out
// by default, as `ember stats` counts active samples unless given --idle; the lane can
// keep a second chart with them, where a box holds samples of one state only and says
// which. The model builds the first when the trace loads and the second once it is
// asked for (it holds more boxes: a thread that alternates between running and waiting
// breaks its boxes at every change). A row is sorted and its boxes never overlap,
// so drawing finds the visible part by binary search and folds the runs of boxes
// narrower than a few pixels (fold_stack_row, lod.h).
#pragma once

#include "profiler/trace/events.h"

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace ember::store {
class TraceReader;
}  // namespace ember::store

namespace ember::viewer {

struct StackSampleRef;

// One frame held over consecutive samples, at one depth.
struct StackBox {
    trace::TimeNs start_ns = 0;  // the first sample's time (model time base)
    trace::TimeNs end_ns = 0;    // where the last sample's time ends
    std::uint32_t frame = 0;     // index into TraceFile::frame_names
    std::uint32_t samples : 31 = 0;
    std::uint32_t idle : 1 = 0;  // the samples were idle ones (charts with idle samples only)
    trace::TimeNs duration_ns() const { return end_ns - start_ns; }
};
static_assert(sizeof(StackBox) == 24, "StackBox must stay packed");

// The boxes of one depth, sorted by start, never overlapping.
struct StackRow {
    std::vector<StackBox> boxes;
};

struct SampleStackLane {
    std::vector<StackRow> active;     // rows by depth; idle samples left out
    std::vector<StackRow> with_idle;  // every sample (empty until built)
    std::int64_t samples = 0;         // all samples of the thread
    std::int64_t idle_samples = 0;
    trace::TimeNs period_ns = 0;  // the recorded period, else the median interval between samples
    const std::vector<StackRow>& rows(bool include_idle) const { return include_idle ? with_idle : active; }
    int depth(bool include_idle) const { return static_cast<int>(rows(include_idle).size()); }
    std::size_t memory_bytes() const;
};

// Without two samples on a thread to measure the period, a sample lasts this long
// (10 ms: the collectors' default rate is 100 Hz).
inline constexpr trace::TimeNs kDefaultSamplePeriodNs = 10'000'000;

// The chart of one thread from its samples in time order (times on the model's base);
// `stack_frames` gives each stack's frames, outermost first, as indexes into the file's
// frame names (TraceFile::stack_frames). A stack it does not list has no frames: the
// sample draws nothing but still ends the boxes before it. The chart with idle samples
// only `with_idle`.
SampleStackLane build_sample_stack_lane(
    const std::vector<StackSampleRef>& samples,
    const std::unordered_map<trace::StackId, std::vector<std::uint32_t>>& stack_frames,
    trace::TimeNs fallback_period_ns = kDefaultSamplePeriodNs, bool with_idle = true,
    trace::TimeNs recorded_period_ns = 0);

// The sample period the file's sampler recorded (run_metadata cpu_sample_period_ns),
// which build_sample_stack_lane() takes over the median interval; 0 when absent or not
// a positive number.
trace::TimeNs recorded_sample_period_ns(const store::TraceReader& reader);

// The boxes above `depth` that hold the box `index` of row `depth`: its stack from the
// outermost frame, the box itself last (as frame indexes).
std::vector<std::uint32_t> stack_of_box(const std::vector<StackRow>& rows, int depth, std::size_t index);

}  // namespace ember::viewer
