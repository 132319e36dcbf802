// detect_format.cpp: which importer a file needs, from its content.
#include "profiler/import/import.h"

#include "profiler/import/json_stream.h"
#include "profiler/store/schema.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <set>

namespace ember::importing {

using store::TraceError;
using store::TraceErrorKind;

namespace {

constexpr char kSqliteMagic[16] = {'S', 'Q', 'L', 'i', 't', 'e', ' ', 'f', 'o', 'r', 'm', 'a', 't', ' ', '3', '\0'};

SourceFormat sqlite_format(const std::string& path) {
    std::optional<store::Connection> connection;
    try {
        connection.emplace(path, store::Connection::Mode::read_only, "cannot open as SQLite");
    } catch (const TraceError& error) {
        throw TraceError(TraceErrorKind::not_a_trace, path, std::string(error.what()).substr(path.size() + 2));
    }
    sqlite3* db = connection->get();
    int result = SQLITE_OK;
    std::set<std::string> tables;
    sqlite3_stmt* statement = nullptr;
    result = sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type = 'table'", -1, &statement, nullptr);
    if (result == SQLITE_OK) {
        while ((result = sqlite3_step(statement)) == SQLITE_ROW) {
            const unsigned char* name = sqlite3_column_text(statement, 0);
            if (name != nullptr) tables.insert(reinterpret_cast<const char*>(name));
        }
    }
    sqlite3_finalize(statement);
    if (result != SQLITE_DONE) {
        throw TraceError(
            result == SQLITE_CORRUPT || result == SQLITE_NOTADB ? TraceErrorKind::corrupt : TraceErrorKind::io, path,
            fmt::format("cannot list the tables of this SQLite file: {}", sqlite3_errmsg(db)));
    }
    if (tables.count("run_metadata")) {
        std::int64_t application_id = 0;
        if (sqlite3_prepare_v2(db, "PRAGMA application_id", -1, &statement, nullptr) == SQLITE_OK &&
            sqlite3_step(statement) == SQLITE_ROW) {
            application_id = sqlite3_column_int64(statement, 0);
        }
        sqlite3_finalize(statement);
        if (application_id == store::kApplicationId) return SourceFormat::ember;
    }
    // nvprof: names in StringTable, a Version table, CUPTI's activity tables.
    if (tables.count("StringTable") && (tables.count("Version") || tables.count("CUPTI_ACTIVITY_KIND_RUNTIME")))
        return SourceFormat::nvprof;
    for (const std::string& table : tables) {
        if (table == "StringIds" || table == "EXPORT_META_DATA" || table == "META_DATA_EXPORT" ||
            table == "NVTX_EVENTS" || table == "TARGET_INFO_SESSION_START_TIME" || table == "COMPOSITE_EVENTS" ||
            table == "OSRT_API" || table.rfind("CUPTI_ACTIVITY_KIND_", 0) == 0) {
            return SourceFormat::nsys;
        }
    }
    throw TraceError(TraceErrorKind::not_a_trace, path,
                     "an SQLite file that is neither an ember trace, an Nsight Systems export nor an nvprof database");
}

bool contains(std::string_view text, std::string_view needle) {
    return text.find(needle) != std::string_view::npos;
}

}  // namespace

SourceFormat detect_format(const std::string& path) {
    char head[16] = {};
    std::size_t got = 0;
    {
        std::FILE* file = std::fopen(path.c_str(), "rb");
        if (file == nullptr)
            throw TraceError(TraceErrorKind::not_found, path, fmt::format("cannot open: {}", std::strerror(errno)));
        got = std::fread(head, 1, sizeof head, file);
        std::fclose(file);
    }
    if (got == sizeof head && std::memcmp(head, kSqliteMagic, sizeof head) == 0) return sqlite_format(path);
    // A pickle: PROTO 2-5 (0x80 n), or protocol 0/1 opening a list or dict ("(l", "(d", "]", "}").
    // Whether it is a memory snapshot ({segments, device_traces} or a list of segments) the
    // importer checks once it has read it.
    if (got >= 2 && static_cast<unsigned char>(head[0]) == 0x80 && head[1] >= 2 && head[1] <= 5)
        return SourceFormat::memory_snapshot;
    if (got >= 2 && ((head[0] == '(' && (head[1] == 'l' || head[1] == 'd')) ||
                     ((head[0] == ']' || head[0] == '}') && (head[1] == 'q' || head[1] == '(' || head[1] == 'r'))))
        return SourceFormat::memory_snapshot;

    // JSON, possibly gzip: the first MiB tells Kineto from plain Chrome. It is read
    // (inflated) 64 KiB at a time and the reading stops once the prefix decides: an
    // ember export names itself in its first bytes, a Kineto file has its markers near
    // the top, so only a plain Chrome trace pays for the whole MiB.
    constexpr std::size_t kStep = 64u << 10;
    constexpr std::size_t kWindow = 1u << 20;
    InputStream input(path, kStep);
    std::string prefix;
    std::string_view piece = input.next_chunk();
    prefix.assign(piece);
    std::size_t start = 0;
    auto skip_leading = [&] {
        start = 0;
        if (prefix.size() >= 3 && prefix.compare(0, 3, "\xEF\xBB\xBF") == 0) start = 3;
        while (start < prefix.size() &&
               (prefix[start] == ' ' || prefix[start] == '\n' || prefix[start] == '\r' || prefix[start] == '\t'))
            ++start;
    };
    skip_leading();
    // A prefix of nothing but white space: read on until the document starts.
    while (start >= prefix.size() && prefix.size() < kWindow && !(piece = input.next_chunk()).empty()) {
        prefix.append(piece);
        skip_leading();
    }
    if (start >= prefix.size() || (prefix[start] != '{' && prefix[start] != '[')) {
        std::string hint;
        if (path.size() > 9 &&
            (path.compare(path.size() - 9, 9, ".nsys-rep") == 0 || path.compare(path.size() - 6, 6, ".qdrep") == 0)) {
            hint = "; export an Nsight Systems report first: nsys export --type sqlite FILE";
        }
        throw TraceError(TraceErrorKind::not_a_trace, path,
                         fmt::format("not a trace: neither SQLite (an ember trace, an Nsight Systems export, an nvprof "
                                     "database) nor JSON (Kineto, Chrome){}",
                                     hint));
    }
    static constexpr std::string_view kKinetoMarkers[] = {"\"schemaVersion\"",
                                                          "\"deviceProperties\"",
                                                          "\"distributedInfo\"",
                                                          "\"baseTimeNanoseconds\"",
                                                          "PyTorch Profiler",
                                                          "\"cuda_runtime\"",
                                                          "\"cpu_op\"",
                                                          "\"python_function\"",
                                                          "\"user_annotation\"",
                                                          "\"gpu_memcpy\"",
                                                          "\"ac2g\"",
                                                          "\"External id\"",
                                                          "\"external id\"",
                                                          "ProfilerStep#"};
    // Each step searches its new bytes and the 31 before them (a marker cut between
    // two steps is still found); a marker ends the reading, the window ends at 1 MiB.
    constexpr std::size_t kOverlap = 31;
    std::size_t searched = start;
    for (;;) {
        std::string_view text = std::string_view(prefix).substr(searched);
        if (contains(text, "\"exporter\":\"ember")) return SourceFormat::chrome;
        for (std::string_view marker : kKinetoMarkers) {
            if (contains(text, marker)) return SourceFormat::kineto;
        }
        if (prefix.size() >= kWindow) break;
        piece = input.next_chunk();
        if (piece.empty()) break;
        searched = std::max(start, prefix.size() - std::min(prefix.size(), kOverlap));
        prefix.append(piece.substr(0, kWindow - prefix.size()));
    }
    return SourceFormat::chrome;
}

}  // namespace ember::importing
