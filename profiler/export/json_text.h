// json_text.h: the two pieces of JSON the streaming exports write by hand —
// escaped strings and nanosecond times as decimal microseconds — so millions of
// events need no JSON DOM. The strings are common/json_string.h's, the one escaper.
#pragma once

#include "common/json_string.h"

#include <cstdint>
#include <string>

namespace ember::exporting {

using text::append_json_string;

// Appends `ns` as microseconds with three decimals ("1234.567"), exact.
void append_microseconds(std::string& out, std::int64_t ns);

}  // namespace ember::exporting
