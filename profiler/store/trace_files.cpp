// trace_files.cpp: see trace_files.h.
#include "profiler/store/trace_files.h"

#include "profiler/store/trace_error.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace ember::store {

namespace {
constexpr const char* kCompanions[] = {"-wal", "-shm", "-journal"};
}  // namespace

void remove_trace_files(const std::string& path) {
    std::remove(path.c_str());
    for (const char* suffix : kCompanions) std::remove((path + suffix).c_str());
}

void move_trace_into_place(const std::string& temporary, const std::string& output, std::string_view what) {
    // A stale -wal beside the output would be replayed into the new file: remove it first.
    for (const char* suffix : kCompanions) std::remove((output + suffix).c_str());
    if (std::rename(temporary.c_str(), output.c_str()) != 0)
        throw TraceError(TraceErrorKind::io, output,
                         "cannot move " + std::string(what) + " into place: " + std::strerror(errno));
    for (const char* suffix : kCompanions) std::remove((temporary + suffix).c_str());
}

}  // namespace ember::store
