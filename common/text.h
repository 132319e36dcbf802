// text.h: the one ASCII lowercase every room uses for case-blind matching (names,
// domains, search queries), the one UTF-8 encoder of a code point (NVTX's wide strings,
// CPython's UCS-1/2/4 strings), and the one C++ demangling (a collector's symbols, an
// imported profile's mangled kernel names). Header-only, like os.h; ASCII only, so no
// locale can change what matches.
#pragma once

#include <cxxabi.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace ember::text {

inline std::string ascii_lowercase(std::string_view text) {
    std::string out(text);
    for (char& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
}

// Appends code point `code` to `out` as UTF-8 (1 to 4 bytes). Code points past
// U+10FFFF and surrogates are not refused: they are encoded by the same rule.
inline void append_utf8(std::string& out, std::uint32_t code) {
    if (code < 0x80) {
        out += static_cast<char>(code);
    } else if (code < 0x800) {
        out += static_cast<char>(0xC0 | (code >> 6));
        out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
        out += static_cast<char>(0xE0 | (code >> 12));
        out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (code >> 18));
        out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (code & 0x3F));
    }
}

// A C++ symbol's readable name (abi::__cxa_demangle); `name` itself when it is not one.
inline std::string demangled(const char* name) {
    if (!name) return "";
    int status = 0;
    char* readable = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    if (status != 0 || !readable) return name;
    std::string result(readable);
    std::free(readable);
    return result;
}

}  // namespace ember::text
