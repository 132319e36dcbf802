// output_file.cpp: OutputFile, checked buffered writes.
#include "profiler/export/output_file.h"

#include "profiler/store/trace_error.h"

#include <cerrno>
#include <cstring>

namespace ember::exporting {

namespace {

[[noreturn]] void throw_io(const std::string& path, const std::string& what) {
    throw store::TraceError(store::TraceErrorKind::io, path, what + ": " + std::strerror(errno));
}

}  // namespace

OutputFile::OutputFile(const std::string& path) : path_(path) {
    if (path == "-") {
        file_ = stdout;
        path_ = "<stdout>";
    } else {
        file_ = std::fopen(path.c_str(), "wb");
        if (file_ == nullptr) throw_io(path, "cannot create the output file");
        owns_file_ = true;
    }
    buffer_.reserve(kFlushBytes + 4096);
}

OutputFile::~OutputFile() {
    try {
        close();
    } catch (const std::exception&) {
        // Destructors do not throw; close() reports errors to callers that ask.
    }
}

void OutputFile::flush() {
    if (file_ == nullptr || buffer_.empty()) return;
    if (std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size()) throw_io(path_, "writing");
    buffer_.clear();
}

void OutputFile::close() {
    if (file_ == nullptr) return;
    std::FILE* file = file_;
    flush();
    file_ = nullptr;
    if (owns_file_) {
        if (std::fclose(file) != 0) throw_io(path_, "closing");
    } else if (std::fflush(file) != 0) {
        throw_io(path_, "flushing");
    }
}

}  // namespace ember::exporting
