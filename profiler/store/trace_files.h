// trace_files.h: a trace file and its SQLite companions (-wal, -shm, -journal) on disk:
// removed together, and a finished temporary moved onto its final name so that no stale
// companion of an older file beside it is replayed into the new one.
#pragma once

#include <string>
#include <string_view>

namespace ember::store {

// Removes `path` and its companions; what is not there is ignored.
void remove_trace_files(const std::string& path);

// Renames the finished trace `temporary` onto `output` (replaced), after removing any
// companion of an older `output`, and removes the companions `temporary` left. Throws
// TraceError (io, naming `output`): "cannot move <what> into place: <reason>".
void move_trace_into_place(const std::string& temporary, const std::string& output, std::string_view what);

}  // namespace ember::store
