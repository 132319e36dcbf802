// decimal_time.cpp: decimal text -> exact scaled integer, in 128-bit arithmetic.
#include "profiler/import/decimal_time.h"

#include <cstdint>
#include <limits>

namespace ember::importing {

namespace {

__extension__ typedef unsigned __int128 Wide;  // GCC/Clang; exact for 38 digits

// 38 decimal digits always fit 128 bits. Digits past them cannot change an int64
// result: at most they turn a tie into "just above half", and ties already round up.
constexpr int kMaxSignificantDigits = 38;

Wide power_of_ten(int exponent) {
    Wide value = 1;
    for (int i = 0; i < exponent; ++i) value *= 10;
    return value;
}

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

constexpr std::uint64_t kPowersOfTen[] = {1ull,
                                          10ull,
                                          100ull,
                                          1000ull,
                                          10000ull,
                                          100000ull,
                                          1000000ull,
                                          10000000ull,
                                          100000000ull,
                                          1000000000ull,
                                          10000000000ull,
                                          100000000000ull,
                                          1000000000000ull,
                                          10000000000000ull,
                                          100000000000000ull,
                                          1000000000000000ull,
                                          10000000000000000ull,
                                          100000000000000000ull,
                                          1000000000000000000ull};

// The shape nearly every trace time has: [-]digits[.digits], at most 19 digits in
// all (below 10^19 < 2^64: Kineto's nanosecond times, "1712195495519703.772", have
// 19), no exponent, a shift of 0 to 18. Exact in 64 bits (the result is bounded by
// INT64_MAX below). Returns false when `text` has another shape; the general parser
// then decides (it gives the same value for this shape).
bool parse_plain_decimal(std::string_view text, int decimal_shift, std::int64_t& value) {
    if (decimal_shift < 0 || decimal_shift > 18) return false;
    const char* p = text.data();
    const char* end = p + text.size();
    bool negative = false;
    if (p < end && *p == '-') {
        negative = true;
        ++p;
    }
    std::uint64_t mantissa = 0;
    int digits = 0;
    int fraction_digits = 0;
    const char* integer_start = p;
    while (p < end && static_cast<unsigned>(*p - '0') < 10) {
        mantissa = mantissa * 10 + static_cast<unsigned>(*p - '0');
        ++p;
        if (++digits > 19) return false;
    }
    if (p == integer_start) return false;
    if (p < end && *p == '.') {
        ++p;
        const char* fraction_start = p;
        while (p < end && static_cast<unsigned>(*p - '0') < 10) {
            mantissa = mantissa * 10 + static_cast<unsigned>(*p - '0');
            ++p;
            ++fraction_digits;
            if (++digits > 19) return false;
        }
        if (p == fraction_start) return false;
    }
    if (p != end) return false;
    std::uint64_t magnitude = 0;
    if (fraction_digits <= decimal_shift) {
        const std::uint64_t scale = kPowersOfTen[decimal_shift - fraction_digits];
        if (mantissa > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / scale) return false;
        magnitude = mantissa * scale;
    } else {
        const std::uint64_t scale = kPowersOfTen[fraction_digits - decimal_shift];
        magnitude = mantissa / scale;
        if ((mantissa % scale) * 2 >= scale) ++magnitude;  // halves away from zero
    }
    value = negative ? -static_cast<std::int64_t>(magnitude) : static_cast<std::int64_t>(magnitude);
    return true;
}

}  // namespace

bool parse_decimal_scaled(std::string_view text, int decimal_shift, std::int64_t& value) {
    if (parse_plain_decimal(text, decimal_shift, value)) return true;
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
    if (text.size() >= 2 && text.front() == '"' && text.back() == '"') text = text.substr(1, text.size() - 2);
    std::size_t i = 0;
    const std::size_t n = text.size();
    bool negative = false;
    if (i < n && (text[i] == '-' || text[i] == '+')) {
        negative = text[i] == '-';
        ++i;
    }
    Wide mantissa = 0;
    int digits = 0;       // significant digits held in mantissa
    long exponent10 = 0;  // value = mantissa * 10^exponent10
    bool any_digit = false;
    auto take_digit = [&](int d, bool fraction) {
        any_digit = true;
        if (digits == 0 && d == 0) {
            if (fraction) --exponent10;
            return;
        }
        if (digits < kMaxSignificantDigits) {
            mantissa = mantissa * 10 + static_cast<unsigned>(d);
            ++digits;
            if (fraction) --exponent10;
        } else if (!fraction) {
            ++exponent10;
        }
    };
    while (i < n && text[i] >= '0' && text[i] <= '9') take_digit(text[i++] - '0', false);
    if (i < n && text[i] == '.') {
        ++i;
        bool fraction_digit = false;
        while (i < n && text[i] >= '0' && text[i] <= '9') {
            take_digit(text[i++] - '0', true);
            fraction_digit = true;
        }
        if (!fraction_digit) return false;
    }
    if (!any_digit) return false;
    if (i < n && (text[i] == 'e' || text[i] == 'E')) {
        ++i;
        bool exponent_negative = false;
        if (i < n && (text[i] == '-' || text[i] == '+')) {
            exponent_negative = text[i] == '-';
            ++i;
        }
        if (i >= n || text[i] < '0' || text[i] > '9') return false;
        long written = 0;
        while (i < n && text[i] >= '0' && text[i] <= '9') {
            if (written < 100000) written = written * 10 + (text[i] - '0');
            ++i;
        }
        exponent10 += exponent_negative ? -written : written;
    }
    if (i != n) return false;

    exponent10 += decimal_shift;
    Wide magnitude = 0;
    if (mantissa == 0) {
        magnitude = 0;
    } else if (exponent10 >= 0) {
        // 10^19 > INT64_MAX: any larger scale of a nonzero mantissa overflows.
        if (exponent10 > 19) return false;
        Wide scale = power_of_ten(static_cast<int>(exponent10));
        // mantissa < 10^38 and scale <= 10^19: check before multiplying past 128 bits.
        if (mantissa > (static_cast<Wide>(1) << 64) / scale + 1) return false;
        magnitude = mantissa * scale;
    } else if (exponent10 < -kMaxSignificantDigits) {
        magnitude = 0;  // below half a unit: rounds to zero
    } else {
        Wide scale = power_of_ten(static_cast<int>(-exponent10));
        magnitude = mantissa / scale;
        Wide remainder = mantissa % scale;
        if (remainder * 2 >= scale) ++magnitude;  // halves away from zero
    }
    const Wide limit = negative ? static_cast<Wide>(std::numeric_limits<std::int64_t>::max()) + 1
                                : static_cast<Wide>(std::numeric_limits<std::int64_t>::max());
    if (magnitude > limit) return false;
    if (negative) {
        value = magnitude == limit ? std::numeric_limits<std::int64_t>::min() : -static_cast<std::int64_t>(magnitude);
    } else {
        value = static_cast<std::int64_t>(magnitude);
    }
    return true;
}

bool parse_microseconds_as_ns(std::string_view text, std::int64_t& ns) {
    return parse_decimal_scaled(text, 3, ns);
}

}  // namespace ember::importing
