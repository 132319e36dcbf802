// gunzip.h: what a gzip (or zlib) stream inflates to, for the tests that read compressed
// output (the pprof export) and the import fuzzer's compressed seeds, and the text of a
// file that may be gzipped (the real Kineto traces, *.json.gz). The linking target needs
// ZLIB::ZLIB.
#pragma once

#include <zlib.h>

#include <stdexcept>
#include <string>

namespace ember::test_support {

struct Inflated {
    std::string bytes;      // damaged or cut data: what inflated before the damage
    bool complete = false;  // the stream ended as it should
};

inline Inflated gunzip(const std::string& compressed) {
    Inflated inflated;
    z_stream stream{};
    if (inflateInit2(&stream, 15 + 32) != Z_OK) return inflated;  // 15 + 32: gzip or zlib header
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
    stream.avail_in = static_cast<uInt>(compressed.size());
    char buffer[1 << 15];
    int status = Z_OK;
    while (status == Z_OK) {
        stream.next_out = reinterpret_cast<Bytef*>(buffer);
        stream.avail_out = sizeof buffer;
        status = inflate(&stream, Z_NO_FLUSH);
        inflated.bytes.append(buffer, sizeof buffer - stream.avail_out);
    }
    inflateEnd(&stream);
    inflated.complete = status == Z_STREAM_END;
    return inflated;
}

// The text of the file at `path`, inflated if it is gzipped (as it is if not); throws
// std::runtime_error naming the file when it cannot be opened.
inline std::string gunzip_file(const std::string& path) {
    gzFile file = gzopen(path.c_str(), "rb");
    if (file == nullptr) throw std::runtime_error("cannot open " + path);
    std::string text;
    char buffer[1 << 16];
    int got = 0;
    while ((got = gzread(file, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<std::size_t>(got));
    gzclose(file);
    return text;
}

}  // namespace ember::test_support
