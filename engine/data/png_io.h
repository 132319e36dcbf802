// png_io.h: PNG files through libpng's simplified API (png_image), which reports errors
// in a message instead of longjmp (safe with C++ destructors). 8-bit gray or RGB only:
// the two forms the image-folder data set uses.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::data {

struct PngHeader {
    int width = 0;
    int height = 0;
};

// Writes channels (1 = gray, 3 = RGB, interleaved) 8-bit pixels, rows top to bottom.
// Throws std::runtime_error naming the path on failure.
void write_png(const std::string& path, const uint8_t* pixels, int width, int height, int channels);

// Reads only the header. Throws DataError(path, sample_index, ...) when unreadable.
PngHeader read_png_header(const std::string& path, int64_t sample_index);

// Decodes into `pixels` (width*height*channels bytes, interleaved), converting any PNG
// color type to gray (channels 1) or RGB (channels 3). Throws DataError naming path and
// sample when the file is unreadable or its size is not expected_width x expected_height.
void read_png(const std::string& path, int64_t sample_index, int expected_width, int expected_height, int channels,
              uint8_t* pixels);

}  // namespace ember::data
