// operation_names.h: the names copies and memsets go by in every table of `ember stats`,
// `ember diff` and the viewer's diff: Nsight Systems' "[CUDA memcpy HtoD]", ...,
// "[CUDA memcpy Unknown]" and "[CUDA memset]"; the names they are shown by on timelines;
// and normalise_name, the name `ember diff` and the viewer match two runs' operations by.
#pragma once

#include "profiler/trace/events.h"

#include <optional>
#include <string>
#include <string_view>

namespace ember::analysis {

inline constexpr std::string_view kMemsetOperationName = "[CUDA memset]";

// "[CUDA memcpy HtoD]", "[CUDA memcpy DtoH]", ...; "[CUDA memcpy Unknown]" for any
// direction the file does not know.
std::string memcpy_operation_name(trace::MemcpyDirection direction);

// What timelines and flame graphs show for a copy or a memset (the viewer, the Chrome and
// speedscope exports): Kineto's "Memcpy HtoD (pinned -> device)" with the memory kinds,
// "Memcpy HtoD" without them, "Memset (device)". Display text only: the tables match
// operations by memcpy_operation_name / kMemsetOperationName, never by parsing these.
std::string memcpy_display_name(trace::MemcpyDirection direction, trace::MemoryKind source,
                                trace::MemoryKind destination);
std::string memcpy_display_name(trace::MemcpyDirection direction);
std::string memset_display_name(trace::MemoryKind kind);

// The name two runs are matched by: every template argument list collapsed to "<...>"
// ("gemm<float, 128>(float*)" -> "gemm<...>(float*)") and one trailing per-launch number
// dropped ("ProfilerStep#12" -> "ProfilerStep", "triton_poi_fused_add_3" ->
// "triton_poi_fused_add", "nn.Module: ResNet_0" -> "nn.Module: ResNet"). A "<" with no
// matching ">" (operator<) and a ">" with no "<" ("Pageable -> Device") are kept.
std::string normalise_name(std::string_view name);

// A Python frame (trace::FrameInfo::is_python) as py-spy names it: "function (file:line)",
// so two functions of one name in different files stay apart.
std::string python_frame_name(const trace::FrameInfo& frame);

}  // namespace ember::analysis
