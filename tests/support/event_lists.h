// event_lists.h: every event of one kind in a trace, in the reader's order, for tests
// that compare whole tables or look events up by name.
#pragma once

#include "profiler/store/reader.h"

#include <cstdint>
#include <vector>

namespace ember::test_support {

// all_events(reader, &store::TraceReader::for_each_kernel): every kernel, and likewise
// for any other for_each_* of the reader.
template <typename Event>
std::vector<Event> all_events(const store::TraceReader& reader,
                              std::int64_t (store::TraceReader::*for_each)(const store::EventQuery&,
                                                                           const store::Visitor<Event>&) const) {
    std::vector<Event> events;
    (reader.*for_each)({}, [&](const Event& event) {
        events.push_back(event);
        return true;
    });
    return events;
}

// Every memory event of the trace (all devices), in the reader's order.
inline std::vector<trace::MemoryEvent> all_memory_events(const store::TraceReader& reader) {
    std::vector<trace::MemoryEvent> events;
    reader.for_each_memory_event([&](const trace::MemoryEvent& event) {
        events.push_back(event);
        return true;
    });
    return events;
}

}  // namespace ember::test_support
