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
        default:
            return "[CUDA memcpy Unknown]";
    }
}

std::string memcpy_display_name(trace::MemcpyDirection direction, trace::MemoryKind source,
                                trace::MemoryKind destination) {
    return memcpy_display_name(direction) + " (" + trace::memory_kind_name(source) + " -> " +
           trace::memory_kind_name(destination) + ")";
}

std::string memcpy_display_name(trace::MemcpyDirection direction) {
    return std::string("Memcpy ") + trace::direction_name(direction);
}

std::string memset_display_name(trace::MemoryKind kind) {
    return std::string("Memset (") + trace::memory_kind_name(kind) + ")";
}

namespace {

bool is_identifier_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == ':';
}
bool is_digit(char c) {
    return c >= '0' && c <= '9';
}
bool is_hex_digit(char c) {
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// The '>' closing the template argument list opened at `open`, or npos.
std::size_t closing_angle(std::string_view name, std::size_t open) {
    int depth = 0;
    for (std::size_t i = open; i < name.size(); ++i) {
        if (name[i] == '<')
            ++depth;
        else if (name[i] == '>' && --depth == 0)
            return i;
    }
    return std::string_view::npos;
}

}  // namespace

std::string normalise_name(std::string_view name) {
    std::string out;
    out.reserve(name.size());
    for (std::size_t i = 0; i < name.size();) {
        const char c = name[i];
        // A template argument list follows its template's name ("gemm<"); "operator<",
        // a leading "<built-in method ...>" and "a < b" are no such list.
        if (c == '<' && !out.empty() && is_identifier_char(out.back()) && !out.ends_with("operator")) {
            const std::size_t close = closing_angle(name, i);
            if (close != std::string_view::npos) {
                out += "<...>";
                i = close + 1;
                continue;
            }
        }
        // Object addresses in Python names ("<method of X object at 0x7f3a...>") change
        // from run to run.
        if (c == '0' && i + 2 < name.size() && name[i + 1] == 'x' && is_hex_digit(name[i + 2]) &&
            (out.empty() || !is_identifier_char(out.back()))) {
            std::size_t end = i + 2;
            while (end < name.size() && is_hex_digit(name[end])) ++end;
            if (end - i - 2 >= 6) {
                out += "0x...";
                i = end;
                continue;
            }
        }
        out += c;
        ++i;
    }
    // One trailing per-launch number: "#12" or "_12" after at least one other character.
    std::size_t digits = out.size();
    while (digits > 0 && is_digit(out[digits - 1])) --digits;
    if (digits < out.size() && digits >= 2 && (out[digits - 1] == '#' || out[digits - 1] == '_'))
        out.resize(digits - 1);
    return out;
}

std::string python_frame_name(const trace::FrameInfo& frame) {
    return frame.function + " (" + frame.module + ":" + std::to_string(frame.line) + ")";
}

}  // namespace ember::analysis
