// gunzip.h: what a gzip (or zlib) stream inflates to, for the tests that read compressed
// output (the pprof export) and the import fuzzer's compressed seeds. The linking target
// needs ZLIB::ZLIB.
#pragma once

#include <zlib.h>

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

}  // namespace ember::test_support
