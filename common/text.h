// text.h: the one ASCII lowercase every room uses for case-blind matching (names,
// domains, search queries), and the one C++ demangling (a collector's symbols, an
// imported profile's mangled kernel names). Header-only, like os.h; ASCII only, so no
// locale can change what matches.
#pragma once

#include <cxxabi.h>

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
