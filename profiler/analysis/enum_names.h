// enum_names.h: an enum's names written once, as one table read both ways (the
// name of a value for output, the value of a name for a flag or a column).
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace ember::analysis {

template <typename Enum>
struct EnumName {
    Enum value;
    const char* name;
};

// The name of `value`; `fallback` for a value the table lacks (a cast from a bad number).
template <typename Enum, std::size_t N>
constexpr const char* name_in(const EnumName<Enum> (&table)[N], Enum value, const char* fallback) {
    for (const EnumName<Enum>& entry : table) {
        if (entry.value == value) return entry.name;
    }
    return fallback;
}

// The value named exactly `text`; nothing for any other text.
template <typename Enum, std::size_t N>
constexpr std::optional<Enum> value_in(const EnumName<Enum> (&table)[N], std::string_view text) {
    for (const EnumName<Enum>& entry : table) {
        if (text == entry.name) return entry.value;
    }
    return std::nullopt;
}

}  // namespace ember::analysis
