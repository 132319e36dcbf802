// timeline_event.h: the packed event the viewer keeps in memory for every interval
// it draws (kernels, copies, memsets, syncs, API calls, NVTX ranges, marks, collector
// overhead), and the counter point of counter lanes.
//
// 40 bytes per event keeps a 10M-event trace under the 64 bytes/event budget with
// room for row arrays and strings; everything else the file knows about an event
// (launch shape, payload, memory kinds of a memset, ...) is looked up lazily through
// the trace reader when the event is hovered or selected (event_details.h).
#pragma once

#include "profiler/trace/events.h"

#include <cstdint>

namespace ember::viewer {

enum class EventKind : std::uint8_t {
    kernel = 0,
    memcpy = 1,
    memset = 2,
    sync = 3,
    api_call = 4,
    range = 5,
    mark = 6,
    overhead = 7,
};
constexpr int kEventKindCount = 8;

const char* event_kind_name(EventKind kind);

struct TimelineEvent {
    trace::TimeNs start_ns = 0;  // on the model's common time base (file time + shift)
    trace::TimeNs end_ns = 0;
    // Correlation id for API calls and GPU work (the flow key); range id for ranges.
    std::uint64_t link = 0;
    // Bytes for copies and memsets; payload bits for ranges and marks
    // (see payload_value()); 0 otherwise.
    std::uint64_t value = 0;
    // Model string id (trace string ids plus names the model adds, model.h).
    std::uint32_t name_id = 0;
    EventKind kind = EventKind::kernel;
    // Copies: MemcpyDirection. Syncs: SyncKind. Ranges/marks: PayloadKind.
    std::uint8_t detail = 0;
    // Copies: source kind | destination kind << 8 (MemoryKind). Ranges/marks: NVTX category
    // (clamped to 16 bits). API calls: 1 when the call failed.
    std::uint16_t extra = 0;

    trace::TimeNs duration_ns() const { return end_ns - start_ns; }
};
static_assert(sizeof(TimelineEvent) == 40, "TimelineEvent must stay packed");

struct CounterPoint {
    trace::TimeNs time_ns = 0;
    double value = 0.0;
};

}  // namespace ember::viewer
