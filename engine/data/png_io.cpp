// png_io.cpp: libpng simplified API; files are read whole into memory first so an open
// or read failure can report errno with the path.
#include "engine/data/png_io.h"

#include "engine/data/data_error.h"

#include <png.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace ember::data {

namespace {

std::vector<uint8_t> read_file(const std::string& path, int64_t sample_index) {
    std::FILE* file = std::fopen(path.c_str(), "rb");
    if (file == nullptr) throw DataError(path, sample_index, std::string("cannot open: ") + std::strerror(errno));
    std::vector<uint8_t> bytes;
    uint8_t chunk[16384];
    while (true) {
        size_t got = std::fread(chunk, 1, sizeof chunk, file);
        bytes.insert(bytes.end(), chunk, chunk + got);
        if (got < sizeof chunk) break;
    }
    bool failed = std::ferror(file) != 0;
    std::fclose(file);
    if (failed) throw DataError(path, sample_index, "read error");
    return bytes;
}

// Starts a png_image read from memory; on success the caller must finish or free it.
void begin_read(png_image& image, const std::vector<uint8_t>& bytes, const std::string& path, int64_t sample_index) {
    std::memset(&image, 0, sizeof image);
    image.version = PNG_IMAGE_VERSION;
    if (bytes.empty()) throw DataError(path, sample_index, "unreadable PNG: file is empty");
    if (!png_image_begin_read_from_memory(&image, bytes.data(), bytes.size())) {
        std::string message = image.message;
        png_image_free(&image);
        throw DataError(path, sample_index, "unreadable PNG: " + message);
    }
}

}  // namespace

void write_png(const std::string& path, const uint8_t* pixels, int width, int height, int channels) {
    png_image image;
    std::memset(&image, 0, sizeof image);
    image.version = PNG_IMAGE_VERSION;
    image.width = png_uint_32(width);
    image.height = png_uint_32(height);
    image.format = channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
    if (!png_image_write_to_file(&image, path.c_str(), 0, pixels, 0, nullptr))
        throw std::runtime_error(path + ": cannot write PNG: " + image.message);
}

PngHeader read_png_header(const std::string& path, int64_t sample_index) {
    std::vector<uint8_t> bytes = read_file(path, sample_index);
    png_image image;
    begin_read(image, bytes, path, sample_index);
    PngHeader header{int(image.width), int(image.height)};
    png_image_free(&image);
    return header;
}

void read_png(const std::string& path, int64_t sample_index, int expected_width, int expected_height, int channels,
              uint8_t* pixels) {
    std::vector<uint8_t> bytes = read_file(path, sample_index);
    png_image image;
    begin_read(image, bytes, path, sample_index);
    if (int(image.width) != expected_width || int(image.height) != expected_height) {
        std::string problem = "wrong image size " + std::to_string(image.width) + "x" + std::to_string(image.height) +
                              ", expected " + std::to_string(expected_width) + "x" + std::to_string(expected_height);
        png_image_free(&image);
        throw DataError(path, sample_index, problem);
    }
    image.format = channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
    if (!png_image_finish_read(&image, nullptr, pixels, 0, nullptr)) {
        std::string message = image.message;
        png_image_free(&image);
        throw DataError(path, sample_index, "unreadable PNG: " + message);
    }
}

}  // namespace ember::data
