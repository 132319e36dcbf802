// data_test_support.h: helpers for the data tests: a temporary folder that removes
// itself (tests/support/temp_dir.h), writing (gzip) IDX files byte by byte, CRC32 of a
// byte range, and the real Fashion-MNIST root (tests that need it skip with the install hint when it is missing).
#pragma once

#include "engine/data/data_error.h"
#include "engine/data/fashion_mnist.h"
#include "tests/support/temp_dir.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace ember::data::testing {

using test_support::TempDir;

// Returns the DataError a call throws (fails the test when none is thrown).
template <typename Call>
inline DataError error_of(Call call) {
    try {
        call();
    } catch (const DataError& error) {
        return error;
    }
    ADD_FAILURE() << "no DataError thrown";
    return DataError("", DataError::kNoSample, "");
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + path);
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_gzip(const std::string& path, const std::vector<uint8_t>& bytes) {
    gzFile file = gzopen(path.c_str(), "wb");
    if (file == nullptr) throw std::runtime_error("gzopen failed for " + path);
    if (!bytes.empty()) gzwrite(file, bytes.data(), unsigned(bytes.size()));
    gzclose(file);
}

inline void append_big_endian(std::vector<uint8_t>& bytes, uint32_t value) {
    bytes.push_back(uint8_t(value >> 24));
    bytes.push_back(uint8_t(value >> 16));
    bytes.push_back(uint8_t(value >> 8));
    bytes.push_back(uint8_t(value));
}

// An IDX image file body: magic 0x803, count x rows x columns, pixel i = (i * 7 + seed) & 255.
inline std::vector<uint8_t> idx_images(uint32_t count, uint32_t rows, uint32_t columns, int seed = 0,
                                       uint32_t magic = 0x00000803) {
    std::vector<uint8_t> bytes;
    append_big_endian(bytes, magic);
    append_big_endian(bytes, count);
    append_big_endian(bytes, rows);
    append_big_endian(bytes, columns);
    for (uint32_t i = 0; i < count * rows * columns; ++i) bytes.push_back(uint8_t((i * 7 + uint32_t(seed)) & 255u));
    return bytes;
}

inline std::vector<uint8_t> idx_labels(const std::vector<uint8_t>& labels, uint32_t magic = 0x00000801) {
    std::vector<uint8_t> bytes;
    append_big_endian(bytes, magic);
    append_big_endian(bytes, uint32_t(labels.size()));
    bytes.insert(bytes.end(), labels.begin(), labels.end());
    return bytes;
}

inline uint32_t crc32_of(const uint8_t* data, size_t bytes) {
    return uint32_t(crc32(0L, data, uInt(bytes)));
}

inline std::string fashion_mnist_root() {
    const char* env = std::getenv("EMBER_FASHION_MNIST_ROOT");
    return env != nullptr ? env : kFashionMnistDefaultRoot;
}

}  // namespace ember::data::testing

// Skips the test (with how to install) when the real Fashion-MNIST files are missing.
#define EMBER_REQUIRE_FASHION_MNIST(split)                                                             \
    do {                                                                                               \
        std::string missing_ =                                                                         \
            ::ember::data::fashion_mnist_missing(::ember::data::testing::fashion_mnist_root(), split); \
        if (!missing_.empty()) GTEST_SKIP() << missing_;                                               \
    } while (0)
