// idx_reader.cpp: IDX parsing through zlib's gz* functions, which read gzip and plain
// files alike. A gzip stream that ends early shows up as a short read; the message says
// which sample was incomplete and what zlib reported.
#include "engine/data/idx_reader.h"

#include "engine/data/data_error.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace ember::data {

namespace {

struct GzCloser {
    void operator()(gzFile_s* file) const { gzclose(file); }
};
using GzHandle = std::unique_ptr<gzFile_s, GzCloser>;

GzHandle open_gz(const std::string& path) {
    gzFile file = gzopen(path.c_str(), "rb");
    if (file == nullptr)
        throw DataError(path, DataError::kNoSample,
                        std::string("cannot open: ") + (errno != 0 ? std::strerror(errno) : "gzopen failed"));
    gzbuffer(file, 256 * 1024);
    return GzHandle(file);
}

// Reads up to `bytes`; returns how many arrived (short only at end of data or on error).
size_t read_some(gzFile file, const std::string& path, uint8_t* out, size_t bytes) {
    size_t total = 0;
    while (total < bytes) {
        unsigned chunk = unsigned(std::min<size_t>(bytes - total, 1u << 30));
        int got = gzread(file, out + total, chunk);
        if (got < 0) {
            int code = 0;
            const char* message = gzerror(file, &code);
            throw DataError(path, DataError::kNoSample,
                            std::string("corrupt or truncated gzip data: ") + (message ? message : "gzread failed"));
        }
        if (got == 0) break;
        total += size_t(got);
    }
    return total;
}

// Why a read came up short: a truncated gzip stream reports an error, a short plain file does not.
std::string short_read_reason(gzFile file) {
    int code = Z_OK;
    const char* message = gzerror(file, &code);
    if (code != Z_OK && message != nullptr && message[0] != '\0')
        return std::string(" (gzip stream truncated: ") + message + ")";
    return " (file ends early)";
}

uint32_t big_endian(const uint8_t* bytes) {
    return (uint32_t(bytes[0]) << 24) | (uint32_t(bytes[1]) << 16) | (uint32_t(bytes[2]) << 8) | uint32_t(bytes[3]);
}

std::string hex(uint32_t value) {
    char text[16];
    std::snprintf(text, sizeof text, "0x%08X", value);
    return text;
}

// Reads magic and dimensions; checks the magic against `expected_magic`.
std::vector<uint32_t> read_header(gzFile file, const std::string& path, uint32_t expected_magic, const char* kind) {
    uint8_t magic_bytes[4];
    if (read_some(file, path, magic_bytes, 4) != 4)
        throw DataError(path, DataError::kNoSample, "too short for an IDX header" + short_read_reason(file));
    uint32_t magic = big_endian(magic_bytes);
    if (magic != expected_magic)
        throw DataError(path, DataError::kNoSample,
                        "wrong magic number " + hex(magic) + ", expected " + hex(expected_magic) +
                            " (IDX unsigned-byte " + kind + "); is this the right file?");
    int dimensions = magic_bytes[3];
    std::vector<uint32_t> sizes(size_t(dimensions), 0);
    for (int d = 0; d < dimensions; ++d) {
        uint8_t size_bytes[4];
        if (read_some(file, path, size_bytes, 4) != 4)
            throw DataError(path, DataError::kNoSample,
                            "IDX header ends inside the dimension sizes" + short_read_reason(file));
        sizes[size_t(d)] = big_endian(size_bytes);
    }
    return sizes;
}

// Reads `count` records of `record_bytes`; names the first incomplete record on a short read.
void read_records(gzFile file, const std::string& path, uint8_t* out, int64_t count, int64_t record_bytes,
                  const char* kind) {
    size_t expected = size_t(count * record_bytes);
    size_t got = read_some(file, path, out, expected);
    if (got != expected) {
        int64_t first_incomplete = int64_t(got) / record_bytes;
        throw DataError(path, first_incomplete,
                        "data ends early: header promises " + std::to_string(count) + " " + kind + " of " +
                            std::to_string(record_bytes) + " bytes, got " + std::to_string(got) + " of " +
                            std::to_string(expected) + " bytes" + short_read_reason(file));
    }
    uint8_t extra = 0;
    if (read_some(file, path, &extra, 1) != 0)
        throw DataError(
            path, count,
            "trailing data after the " + std::to_string(count) + " " + kind + " the header promises (count mismatch?)");
}

}  // namespace

IdxImages read_idx_images(const std::string& path) {
    GzHandle file = open_gz(path);
    std::vector<uint32_t> sizes = read_header(file.get(), path, kIdxImagesMagic, "images, 3 dimensions");
    IdxImages images;
    images.count = sizes[0];
    images.rows = int(sizes[1]);
    images.columns = int(sizes[2]);
    if (images.rows <= 0 || images.columns <= 0 || images.rows > 65536 || images.columns > 65536)
        throw DataError(path, DataError::kNoSample,
                        "implausible image size " + std::to_string(sizes[1]) + " x " + std::to_string(sizes[2]));
    int64_t image_bytes = int64_t(images.rows) * images.columns;
    images.pixels.resize(size_t(images.count * image_bytes));
    read_records(file.get(), path, images.pixels.data(), images.count, image_bytes, "images");
    return images;
}

IdxLabels read_idx_labels(const std::string& path) {
    GzHandle file = open_gz(path);
    std::vector<uint32_t> sizes = read_header(file.get(), path, kIdxLabelsMagic, "labels, 1 dimension");
    IdxLabels labels;
    labels.count = sizes[0];
    labels.labels.resize(size_t(labels.count));
    read_records(file.get(), path, labels.labels.data(), labels.count, 1, "labels");
    return labels;
}

}  // namespace ember::data
