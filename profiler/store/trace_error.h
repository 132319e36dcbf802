// trace_error.h: the one exception type of the trace store. Its message always
// names the file ("trace.db: schema version 3 is newer than ..."); `kind` lets a
// caller react without parsing text. Commands print what() and exit with code 2
// (kTraceErrorExitCode).
#pragma once

#include <stdexcept>
#include <string>

namespace ember::store {

enum class TraceErrorKind {
    not_found,        // no such file / cannot open it
    not_a_trace,      // not SQLite, or SQLite but not an ember trace
    truncated,        // shorter than its own header says
    corrupt,          // SQLite reports corruption while reading
    version_too_new,  // written by a newer ember whose files this one cannot read
    version_too_old,  // written by an ember older than this reader supports
    missing_table,    // a table the schema version requires is absent
    bad_value,        // a column holds something the schema forbids
    io,               // SQLite/file error while writing or reading (disk full, locked, ...)
    closed,           // the writer was used after close() or after a fatal error
};

class TraceError : public std::runtime_error {
  public:
    TraceError(TraceErrorKind kind, std::string path, const std::string& message)
        : std::runtime_error(path + ": " + message), kind_(kind), path_(std::move(path)) {}

    TraceErrorKind kind() const { return kind_; }
    const std::string& path() const { return path_; }

  private:
    TraceErrorKind kind_;
    std::string path_;
};

// Exit code of an `ember` command that fails because of a trace file.
constexpr int kTraceErrorExitCode = 2;

}  // namespace ember::store
