// folded_stacks.h: stacks for flamegraphs, and Brendan Gregg's folded format
// ("frame;frame;frame count" per line, outermost frame first).
//   gpu   NVTX range path of the launching thread, then the kernel name;
//         count = GPU nanoseconds (see analysis/gpu_time_by_range.h)
//   host  thread name, its push/pop NVTX ranges, then the CUDA API call;
//         count = self nanoseconds (time in a frame not covered by a child)
//   cpu   thread name, then the sampled call stack (analysis/cpu_profile.h);
//         count = CPU nanoseconds (one sampling period per sample)
#pragma once

#include "profiler/analysis/stack_tree.h"
#include "profiler/export/output_file.h"
#include "profiler/store/reader.h"

#include <optional>
#include <string_view>

namespace ember::exporting {

enum class StackSource { gpu, host, cpu };
std::optional<StackSource> parse_stack_source(std::string_view text);  // "gpu", "host", "cpu"

// include_idle: the cpu source also counts samples of threads that were not running.
analysis::StackTree build_stacks(const store::TraceReader& reader, StackSource source, bool include_idle = false);

// One line per node with self weight > 0, in node order. ';' inside a name
// becomes ':' and line breaks become spaces so every line parses back.
void write_folded(const analysis::StackTree& stacks, OutputFile& out);

}  // namespace ember::exporting
