// chrome_trace.h: the Trace Event Format (JSON object form) that Perfetto and
// chrome://tracing open. Host threads are threads of the recorded process; each
// GPU is a process whose threads are its streams. Kernels, copies, memsets, API
// calls, push/pop NVTX ranges and collector overhead are complete ("X") events;
// start/end ranges are async ("b"/"e") events; marks are instants ("i");
// counters are "C" events; every API call is linked to its GPU work by a flow
// ("s" at the call, "f" with "bp":"e" at the GPU work). Times are microseconds
// from the run start. Streams the file: memory stays flat for any trace size.
#pragma once

//
// The layout (GPU pids, stream lanes, names, categories) is profiler/trace/chrome_layout.h,
// which the Chrome importer reads back.
#include "profiler/export/output_file.h"
#include "profiler/store/reader.h"

namespace ember::exporting {

void export_chrome_trace(const store::TraceReader& reader, OutputFile& out);

}  // namespace ember::exporting
