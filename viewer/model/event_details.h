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

// API call -> the GPU work it launched; GPU work -> the API call that launched it.
std::optional<EventRef> find_flow_partner(const TraceModel& model, const EventRef& ref);

}  // namespace ember::viewer
