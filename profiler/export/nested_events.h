// nested_events.h: turns interval events of one lane (a thread's ranges and API
// calls, a stream's kernels and copies) into properly nested open/close events
// with non-decreasing times — what speedscope's evented profiles and self-time
// stacks need. An event that outlives its enclosing one is clipped to the
// enclosing end, so the output nests even when the input does not.
#pragma once

#include "profiler/store/reader.h"
#include "profiler/store/sqlite_util.h"

#include <cstdint>
#include <functional>
#include <string>

namespace ember::exporting {

using OpenEvent = std::function<void(const std::string& name, std::int64_t at_ns)>;
using CloseEvent = std::function<void(const std::string& name, std::int64_t at_ns)>;

// `query` yields (start_ns, end_ns, ...) ordered by start ascending, end
// descending; `name_of` gives an event's name from the current row.
void for_each_nested_event(store::Statement& query, const std::function<std::string(store::Statement&)>& name_of,
                           const OpenEvent& open, const CloseEvent& close);

// A thread's lane, ready for for_each_nested_event: its nested ranges (depth >= 0) and
// its API calls as (start_ns, end_ns, name_id, 0 for a range or 1 for a call), a range
// before a call that starts and ends with it.
store::Statement thread_lane_query(const store::TraceReader& reader, trace::ThreadId thread);

}  // namespace ember::exporting
