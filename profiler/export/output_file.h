// output_file.h: a buffered output file (or stdout for "-") for exports that may
// write gigabytes: text is appended to a 1 MiB buffer and written in large
// chunks; every write failure throws TraceError (kind io) naming the path.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace ember::exporting {

class OutputFile {
  public:
    // "-" writes to stdout. Throws TraceError when the file cannot be created.
    explicit OutputFile(const std::string& path);
    ~OutputFile();  // closes without throwing; call close() to see errors
    OutputFile(const OutputFile&) = delete;
    OutputFile& operator=(const OutputFile&) = delete;

    void write(std::string_view text) {
        buffer_.append(text);
        if (buffer_.size() >= kFlushBytes) flush();
    }
    void write(char c) {
        buffer_.push_back(c);
        if (buffer_.size() >= kFlushBytes) flush();
    }
    // The buffer, for fmt::format_to(std::back_inserter(out.buffer()), ...); call
    // maybe_flush() after.
    std::string& buffer() { return buffer_; }
    void maybe_flush() {
        if (buffer_.size() >= kFlushBytes) flush();
    }
    void flush();
    void close();
    const std::string& path() const { return path_; }

  private:
    static constexpr std::size_t kFlushBytes = 1 << 20;
    std::string path_;
    std::FILE* file_ = nullptr;
    bool owns_file_ = false;
    std::string buffer_;
};

}  // namespace ember::exporting
