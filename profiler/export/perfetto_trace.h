// perfetto_trace.h: Perfetto's own trace format (protobuf TracePackets of TrackEvents,
// schema in proto/perfetto_trace.proto), which ui.perfetto.dev and trace_processor open
// without the JSON importer's limits: about a third of the Chrome JSON's size, no
// 2 GB browser ceiling on the JSON text, and slices drawn exactly as nested.
//
// Tracks: one per process (ProcessDescriptor) with one per thread (ThreadDescriptor)
// holding its API calls, push/pop ranges and collector overhead as nested slices and
// its marks as instants; start/end ranges, which may overlap anything, on lanes of
// their process ("ranges", "ranges 2", ...). One track per GPU holding one per stream
// (kernels, copies, memsets) and lanes of synchronizations per stream. One counter
// track per counter, under its GPU or the process. A slice that outlives the one it
// starts in is cut at that one's end, so every track nests.
//
// Categories: kernel, memcpy, memset, sync, cuda_api, ember_overhead, and nvtx with the
// range's domain (Kineto's cpu_op, python_function, user_annotation, ...). Event names,
// categories and argument names are interned on one packet sequence.
// Arguments are debug annotations: correlation id and result of API calls; grid,
// block, registers and shared memory of kernels, with Kineto's collective metadata;
// bytes and memory kinds of copies; NVTX category and payload of ranges. Each API call
// and the GPU work it launched share a flow id (the correlation id), so the UI draws
// an arrow from the launch to the kernel. Timestamps are the trace's nanoseconds.
// Streams the file: memory holds the interned names and one lane's open slices.
#pragma once

#include "profiler/export/output_file.h"
#include "profiler/store/reader.h"

#include <cstdint>

namespace ember::exporting {

// What an export wrote.
struct PerfettoCounts {
    std::int64_t tracks = 0;
    std::int64_t slices = 0;  // TYPE_SLICE_BEGIN events (each has its end)
    std::int64_t instants = 0;
    std::int64_t counter_values = 0;
    std::int64_t flow_events = 0;  // slices carrying a flow id
};

PerfettoCounts export_perfetto_trace(const store::TraceReader& reader, OutputFile& out);

}  // namespace ember::exporting
