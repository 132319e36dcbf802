// operation_names.cpp: see operation_names.h.
#include "profiler/analysis/operation_names.h"

namespace ember::analysis {

std::string memcpy_operation_name(trace::MemcpyDirection direction) {
    switch (direction) {
        case trace::MemcpyDirection::host_to_device:
        case trace::MemcpyDirection::device_to_host:
        case trace::MemcpyDirection::device_to_device:
        case trace::MemcpyDirection::host_to_host:
        case trace::MemcpyDirection::peer_to_peer:
            return std::string("[CUDA memcpy ") + trace::direction_name(direction) + "]";
        default: return "[CUDA memcpy Unknown]";
    }
}

std::optional<trace::MemcpyDirection> parse_direction_name(std::string_view text) {
    for (trace::MemcpyDirection direction :
         {trace::MemcpyDirection::unknown, trace::MemcpyDirection::host_to_device, trace::MemcpyDirection::device_to_host,
          trace::MemcpyDirection::device_to_device, trace::MemcpyDirection::host_to_host,
          trace::MemcpyDirection::peer_to_peer})
        if (text == trace::direction_name(direction)) return direction;
    return std::nullopt;
}

}  // namespace ember::analysis
