// png_writer.cpp: PNG output through libpng (png_writer.h).
#include "viewer/ui/png_writer.h"

#include <png.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace ember::viewer {

bool write_png(const std::string& path, int width, int height, const std::vector<std::uint8_t>& rgba,
               std::string* error) {
    FILE* file = std::fopen(path.c_str(), "wb");
    if (file == nullptr) {
        if (error) *error = path + ": cannot create: " + std::strerror(errno);
        return false;
    }
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
    png_infop info = png ? png_create_info_struct(png) : nullptr;
    if (png == nullptr || info == nullptr) {
        if (png) png_destroy_write_struct(&png, nullptr);
        std::fclose(file);
        if (error) *error = path + ": png_create_write_struct failed";
        return false;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        std::fclose(file);
        if (error) *error = path + ": libpng failed while writing";
        return false;
    }
    png_init_io(png, file);
    png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8, PNG_COLOR_TYPE_RGBA,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int row = 0; row < height; ++row)
        png_write_row(png, const_cast<png_bytep>(rgba.data() + static_cast<std::size_t>(row) * width * 4));
    png_write_end(png, nullptr);
    png_destroy_write_struct(&png, &info);
    if (std::fclose(file) != 0) {
        if (error) *error = path + ": cannot close: " + std::strerror(errno);
        return false;
    }
    return true;
}

}  // namespace ember::viewer
