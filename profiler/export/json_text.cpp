// json_text.cpp: JSON string escaping and exact microsecond formatting.
#include "profiler/export/json_text.h"

#include <fmt/format.h>

#include <iterator>

namespace ember::exporting {

void append_json_string(std::string& out, std::string_view text) {
    out.push_back('"');
    for (char c : text) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
                } else {
                    out.push_back(c);
                }
        }
    }
    out.push_back('"');
}

void append_microseconds(std::string& out, std::int64_t ns) {
    if (ns < 0) {
        out.push_back('-');
        // -(INT64_MIN) overflows; trace times never come near it, clamp for safety.
        ns = ns == INT64_MIN ? INT64_MAX : -ns;
    }
    fmt::format_to(std::back_inserter(out), "{}.{:03}", ns / 1000, ns % 1000);
}

}  // namespace ember::exporting
