// read_file.h: the whole of a file, byte for byte, for tests that check what a program
// wrote (an export, a log, a recording's output) or change a copy of it.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace ember::test_support {

// The bytes of the file at `path`; "" when it cannot be opened.
inline std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    return bytes.str();
}

}  // namespace ember::test_support
