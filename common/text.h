// text.h: the one ASCII lowercase every room uses for case-blind matching (names,
// domains, search queries). Header-only, like os.h; ASCII only, so no locale can
// change what matches.
#pragma once

#include <string>
#include <string_view>

namespace ember::text {

inline std::string ascii_lowercase(std::string_view text) {
    std::string out(text);
    for (char& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
}

}  // namespace ember::text
