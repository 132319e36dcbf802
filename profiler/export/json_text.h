// json_text.h: the two pieces of JSON the streaming exports write by hand —
// escaped strings and nanosecond times as decimal microseconds — so millions of
// events need no JSON DOM.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ember::exporting {

// Appends `text` as a JSON string literal (quotes included). Bytes >= 0x80 pass
// through (the trace stores UTF-8); control characters become \uXXXX.
void append_json_string(std::string& out, std::string_view text);

// Appends `ns` as microseconds with three decimals ("1234.567"), exact.
void append_microseconds(std::string& out, std::int64_t ns);

}  // namespace ember::exporting
