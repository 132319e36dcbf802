// png_writer.h: writes an RGBA image to a PNG file with libpng (screenshots).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::viewer {

// `rgba` holds height rows of width * 4 bytes, top row first. Returns false and sets
// `error` (naming the path) on failure.
bool write_png(const std::string& path, int width, int height, const std::vector<std::uint8_t>& rgba,
               std::string* error);

}  // namespace ember::viewer
