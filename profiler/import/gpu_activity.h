// gpu_activity.h: what every importer fills the same way in a kernel, copy, memset or
// synchronization: the stream it ran on, its interval and the correlation of the call
// that launched it. Each importer adds the fields of its kind.
#pragma once

#include "profiler/trace/events.h"

namespace ember::importing {

template <typename Event>
Event gpu_activity(trace::TimeNs start, trace::TimeNs end, trace::StreamId stream, trace::DeviceId device,
                   trace::CorrelationId correlation) {
    Event activity;
    activity.stream_id = stream;
    activity.device_id = device;
    activity.start_ns = start;
    activity.end_ns = end;
    activity.correlation_id = correlation;
    return activity;
}

}  // namespace ember::importing
