// json_text.cpp: exact microsecond formatting.
#include "profiler/export/json_text.h"

#include <fmt/format.h>

#include <iterator>

namespace ember::exporting {

void append_microseconds(std::string& out, std::int64_t ns) {
    if (ns < 0) {
        out.push_back('-');
        // -(INT64_MIN) overflows; trace times never come near it, clamp for safety.
        ns = ns == INT64_MIN ? INT64_MAX : -ns;
    }
    fmt::format_to(std::back_inserter(out), "{}.{:03}", ns / 1000, ns % 1000);
}

}  // namespace ember::exporting
