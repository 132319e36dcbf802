// speedscope.h: the speedscope file format
// (https://www.speedscope.app/file-format-schema.json): one "evented" profile per
// host thread (push/pop NVTX ranges with the CUDA API calls inside them) and per
// GPU stream (kernels, copies, memsets), plus one "sampled" profile "GPU time by
// NVTX range" whose stacks are range paths ending in kernel names, weighted by
// GPU nanoseconds, and one "sampled" profile "CPU samples" of the sampled call stacks
// (native and Python frames, `function (file:line)` for Python), thread first,
// weighted by CPU nanoseconds. Times are nanoseconds from the run start. Events stream out;
// only the frame table (one entry per distinct name) is held in memory.
#pragma once

#include "profiler/export/output_file.h"
#include "profiler/store/reader.h"

namespace ember::exporting {

inline constexpr const char* kGpuTimeByRangeProfileName = "GPU time by NVTX range";
inline constexpr const char* kCpuSamplesProfileName = "CPU samples";

// include_idle: the "CPU samples" profile also counts samples of threads that were not running.
void export_speedscope(const store::TraceReader& reader, OutputFile& out, bool include_idle = false);

}  // namespace ember::exporting
