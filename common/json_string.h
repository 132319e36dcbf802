// json_string.h: the one JSON string escaper. Every JSON ember writes by hand (the
// streaming exports, the importers' run metadata) quotes text through it; whole small
// documents (reports, `ember diff --format json`) are nlohmann::json values, which
// escape for themselves. Header-only, like os.h: the exports, the importers and the
// collectors may all call it.
#pragma once

#include <string>
#include <string_view>

namespace ember::text {

// Appends `text` as a JSON string literal, quotes included. `"` and `\` are escaped,
// \n \r \t by name, the other control characters as \u00XX; bytes >= 0x80 pass
// through (traces store UTF-8).
inline void append_json_string(std::string& out, std::string_view text) {
    static constexpr char kHex[] = "0123456789abcdef";
    out.push_back('"');
    for (char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                if (byte < 0x20) {
                    out += "\\u00";
                    out.push_back(kHex[byte >> 4]);
                    out.push_back(kHex[byte & 0xf]);
                } else {
                    out.push_back(c);
                }
        }
    }
    out.push_back('"');
}

// `text` as a JSON string literal, quotes included.
inline std::string json_string(std::string_view text) {
    std::string out;
    out.reserve(text.size() + 2);
    append_json_string(out, text);
    return out;
}

}  // namespace ember::text
