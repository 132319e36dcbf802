// event_details.h: everything the file knows about one event (for the tooltip and
// the details panel), and its flow partner (API call <-> GPU work by correlation id).
//
// The model keeps 40 bytes per event; launch shapes, memory kinds, payloads and
// range parents are read here, on demand, through the file's TraceReader (UI thread
// only), by the event's track and start time.
#pragma once

#include "viewer/model/trace_model.h"

#include <optional>
#include <string>
#include <vector>

namespace ember::viewer {

struct DetailLine {
    std::string key;
    std::string value;
};

// Throws nothing: a reader failure becomes a line saying what failed.
std::vector<DetailLine> describe_event(TraceModel& model, const EventRef& ref);

// A GPU memory lane clicked at model time `time`: the allocated and reserved bytes then
// and the live blocks by allocating line, largest first (at most `top`).
std::vector<DetailLine> describe_memory_at(TraceModel& model, int lane, trace::TimeNs time, std::size_t top = 12);

// A live block at a clicked time on a GPU memory lane, and where it leads: its
// allocating op on the timeline (the range open on its thread when it was allocated,
// analysis::allocating_range) and its stack.
struct LiveBlockLink {
    std::uint64_t address = 0;
    std::int64_t bytes = 0;
    trace::TimeNs alloc_ns = 0;        // model time
    std::string op;                    // the allocating op, or "(no thread recorded)" and the like
    std::string line;                  // the allocating line (as describe_memory_at's)
    std::vector<std::string> stack;    // its frames, outermost first; empty without a stack
    std::optional<EventRef> op_event;  // the op's range on the timeline, when a lane holds it
};

// The `top` largest blocks live on memory lane `lane` at model time `time`, largest first.
// Empty for a lane that is not a memory lane; throws nothing (a reader failure gives none).
std::vector<LiveBlockLink> live_blocks_at(TraceModel& model, int lane, trace::TimeNs time, std::size_t top = 12);

// The timeline event of `range`, a range of file `file_index` (its thread lane, the row of
// its depth, by start and range id); none when no loaded lane holds it.
std::optional<EventRef> find_range_event(const TraceModel& model, int file_index, const trace::RangeEvent& range);

// API call -> the GPU work it launched; GPU work -> the API call that launched it.
std::optional<EventRef> find_flow_partner(const TraceModel& model, const EventRef& ref);

}  // namespace ember::viewer
