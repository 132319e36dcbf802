// decimal_time.h: exact JSON-number parsing for trace timestamps.
//
// Kineto writes "ts": 1712195495519695.8 (microseconds with a fraction). Through a
// double, that value is off by up to 0.125 µs (53-bit mantissa at 1.7e15), so the
// importers parse the decimal text itself: "123.456" µs is 123456 ns exactly.
#pragma once

#include <cstdint>
#include <string_view>

namespace ember::importing {

// The largest magnitude of a time the importers accept (2^62 - 1 ns, 146 years): any
// two such times add and subtract without overflowing an int64.
constexpr std::int64_t kLargestTimeNs = (std::int64_t{1} << 62) - 1;

// Parses a JSON number (optionally inside quotes, surrounding spaces allowed) that
// counts microseconds and stores it as nanoseconds: digits past the third decimal
// round to the nearest nanosecond (halves away from zero). Accepts exponents
// ("1.5e3"). False for anything that is not a number or does not fit an int64 of ns.
bool parse_microseconds_as_ns(std::string_view text, std::int64_t& ns);

// The same number scaled by 10^`decimal_shift` (0: the value itself; 3: µs -> ns),
// rounded to the nearest integer. False for non-numbers and overflow.
bool parse_decimal_scaled(std::string_view text, int decimal_shift, std::int64_t& value);

}  // namespace ember::importing
