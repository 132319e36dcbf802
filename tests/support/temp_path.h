// temp_path.h: a path under the system temp directory that belongs to this test
// process alone (its pid in the name), so tests running side by side under CTest never
// share a file.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace ember::test_support {

// <temp dir>/<stem>_<pid><extension>, e.g. unique_temp_path("ember_viewer_lod", ".db").
inline std::filesystem::path unique_temp_path(const std::string& stem, const std::string& extension = "") {
    return std::filesystem::temp_directory_path() / (stem + "_" + std::to_string(::getpid()) + extension);
}

}  // namespace ember::test_support
