// trace_ranges.h: NVTX-style ranges for the traces tests write by hand with
// store::TraceWriter: an outermost range on a thread, and a range nested in another
// (a copy of its parent one level deeper), each recorded and returned for its id.
#pragma once

#include "profiler/store/writer.h"
#include "profiler/trace/events.h"

#include <cstdint>
#include <string_view>

namespace ember::test_support {

// An outermost range (depth 0, no parent) named `name` on `thread`, in `domain`.
inline trace::RangeEvent record_range(store::TraceWriter& writer, trace::ThreadId thread, std::string_view name,
                                      trace::TimeNs start_ns, trace::TimeNs end_ns,
                                      trace::StringId domain = trace::kNoString, std::uint32_t category = 0) {
    // Members in order, so the id is taken before the name is interned.
    const trace::RangeEvent range{.range_id = writer.next_range_id(),
                                  .start_ns = start_ns,
                                  .end_ns = end_ns,
                                  .thread_id = thread,
                                  .domain_id = domain,
                                  .name_id = writer.intern(name),
                                  .category = category,
                                  .payload = {}};
    writer.record_range(range);
    return range;
}

// A range inside `parent`: its thread, domain, color and payload, one level deeper.
inline trace::RangeEvent record_child_range(store::TraceWriter& writer, const trace::RangeEvent& parent,
                                            std::string_view name, trace::TimeNs start_ns, trace::TimeNs end_ns,
                                            std::uint32_t category) {
    trace::RangeEvent child = parent;
    child.range_id = writer.next_range_id();
    child.parent_range_id = parent.range_id;
    child.depth = parent.depth + 1;
    child.start_ns = start_ns;
    child.end_ns = end_ns;
    child.name_id = writer.intern(name);
    child.category = category;
    writer.record_range(child);
    return child;
}

}  // namespace ember::test_support
