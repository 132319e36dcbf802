// idx_reader.h: reads IDX files (the MNIST / Fashion-MNIST format), gzip-compressed
// or plain. Format (big-endian): magic = 0x00 0x00 <type> <number of dimensions>,
// then one uint32 per dimension, then the data. ember reads unsigned-byte (type 0x08)
// files only: images are 3-D (count x rows x columns, magic 0x00000803), labels 1-D
// (count, magic 0x00000801). Every failure is a DataError naming the file, and the
// sample index where the data ran out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::data {

constexpr uint32_t kIdxImagesMagic = 0x00000803;
constexpr uint32_t kIdxLabelsMagic = 0x00000801;

struct IdxImages {
    int64_t count = 0;
    int rows = 0;
    int columns = 0;
    std::vector<uint8_t> pixels;  // count * rows * columns, row-major per image
};

struct IdxLabels {
    int64_t count = 0;
    std::vector<uint8_t> labels;
};

IdxImages read_idx_images(const std::string& path);
IdxLabels read_idx_labels(const std::string& path);

}  // namespace ember::data
