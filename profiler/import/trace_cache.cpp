// trace_cache.cpp: any trace file as an ember trace, importing once.
//
// The cached import lives beside the input ("<input>.ember-cache.db") when that
// folder is writable, else under $XDG_CACHE_HOME/ember (~/.cache/ember) with the
// input's absolute path hashed into its name. It is reused only when its
// run_metadata says it was imported from this absolute path, at this size and
// modification time, by a writer of this schema version, and its writer closed cleanly.
#include "profiler/import/import.h"

#include "profiler/store/reader.h"
#include "profiler/store/schema.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>

namespace ember::importing {

using store::TraceError;
using store::TraceErrorKind;

namespace {

struct SourceStamp {
    std::string absolute_path;
    std::int64_t bytes = 0;
    std::int64_t mtime_ns = 0;
};

SourceStamp stamp_of(const std::string& input) {
    SourceStamp stamp;
    std::error_code ignored;
    stamp.absolute_path = std::filesystem::absolute(input, ignored).string();
    struct stat info {};
    if (::stat(input.c_str(), &info) != 0) {
        throw TraceError(TraceErrorKind::not_found, input, fmt::format("cannot open: {}", std::strerror(errno)));
    }
    stamp.bytes = static_cast<std::int64_t>(info.st_size);
    stamp.mtime_ns = static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec;
    return stamp;
}

// FNV-1a: a stable file name for an absolute path.
std::uint64_t path_hash(std::string_view text) {
    std::uint64_t hash = 0xcbf29ce484222325ull;
    for (char c : text) {
        hash ^= static_cast<unsigned char>(c);
        hash *= 0x100000001b3ull;
    }
    return hash;
}

bool folder_writable(const std::string& input) {
    std::filesystem::path folder = std::filesystem::path(input).parent_path();
    if (folder.empty()) folder = ".";
    return ::access(folder.c_str(), W_OK) == 0;
}

// The cached file is a finished import of exactly this input.
// `strict`: only an import that skipped no invalid event will do. `invalid_summary`
// receives the import's line about what it skipped.
bool cache_matches(const std::string& cache, const SourceStamp& stamp, bool strict, std::string& invalid_summary) {
    std::error_code error;
    if (!std::filesystem::exists(cache, error)) return false;
    try {
        store::TraceReader reader(cache);
        if (!reader.complete()) return false;
        auto values = [&](std::string_view key) { return reader.metadata(key).value_or(std::string()); };
        invalid_summary = values(import_metadata_key::invalid_summary);
        const std::string invalid = values(import_metadata_key::invalid_events);
        if (strict && !invalid.empty() && invalid != "0") return false;
        // An import by an older ember lacks what newer schemas hold (collective_calls), or
        // what newer importers write: redo it.
        return values(store::metadata_key::schema_version) == std::to_string(store::kSchemaVersion) &&
               values(import_metadata_key::import_version) == std::to_string(kImportVersion) &&
               values(import_metadata_key::source_path) == stamp.absolute_path &&
               values(import_metadata_key::source_bytes) == std::to_string(stamp.bytes) &&
               values(import_metadata_key::source_mtime_ns) == std::to_string(stamp.mtime_ns);
    } catch (const TraceError&) {
        return false;  // unreadable or foreign: import again over it
    }
}

}  // namespace

std::string user_cache_directory() {
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    if (xdg != nullptr && xdg[0] == '/') return (std::filesystem::path(xdg) / "ember").string();
    const char* home = std::getenv("HOME");
    if (home != nullptr && home[0] != '\0') return (std::filesystem::path(home) / ".cache" / "ember").string();
    return (std::filesystem::temp_directory_path() / "ember-cache").string();
}

std::string cache_path_for(const std::string& input, CachePlace place) {
    if (place == CachePlace::automatic)
        place = folder_writable(input) ? CachePlace::beside_input : CachePlace::user_cache;
    if (place == CachePlace::beside_input) return input + ".ember-cache.db";
    std::error_code ignored;
    std::string absolute = std::filesystem::absolute(input, ignored).string();
    std::string name =
        fmt::format("{}.{:016x}.db", std::filesystem::path(input).filename().string(), path_hash(absolute));
    return (std::filesystem::path(user_cache_directory()) / name).string();
}

OpenedTrace open_trace(const std::string& path, const OpenTraceOptions& options) {
    OpenedTrace opened;
    opened.format = options.import.format == SourceFormat::auto_detect ? detect_format(path) : options.import.format;
    if (opened.format == SourceFormat::ember) {
        opened.path = path;
        return opened;
    }
    SourceStamp stamp = stamp_of(path);
    std::vector<CachePlace> places;
    if (options.cache == CachePlace::automatic) {
        if (folder_writable(path)) places.push_back(CachePlace::beside_input);
        places.push_back(CachePlace::user_cache);
    } else {
        places.push_back(options.cache);
    }
    // A valid cache anywhere it may be is reused.
    for (CachePlace place : places) {
        std::string cache = cache_path_for(path, place);
        if (cache_matches(cache, stamp, options.import.strict, opened.invalid_summary)) {
            opened.path = cache;
            opened.reused = true;
            if (options.on_import) options.on_import(opened);
            return opened;
        }
    }
    ImportOptions import = options.import;
    import.format = opened.format;
    for (std::size_t i = 0; i < places.size(); ++i) {
        std::string cache = cache_path_for(path, places[i]);
        try {
            if (places[i] == CachePlace::user_cache)
                std::filesystem::create_directories(std::filesystem::path(cache).parent_path());
            opened.import = import_file(path, cache, import);
        } catch (const TraceError& error) {
            // Beside the input failed for want of a writable place: try the user cache.
            bool place_problem = error.path() != path &&
                                 (error.kind() == TraceErrorKind::io || error.kind() == TraceErrorKind::not_found);
            if (place_problem && i + 1 < places.size()) continue;
            throw;
        } catch (const std::filesystem::filesystem_error& error) {
            if (i + 1 < places.size()) continue;
            throw TraceError(TraceErrorKind::io, cache,
                             fmt::format("cannot create the cache folder: {}", error.what()));
        }
        opened.path = cache;
        opened.imported = true;
        opened.invalid_summary = opened.import->counts.invalid_summary();
        if (options.on_import) options.on_import(opened);
        return opened;
    }
    throw TraceError(TraceErrorKind::io, path, "no writable place for the imported trace");
}

std::string open_as_ember_trace(const std::string& path, const OpenTraceOptions& options) {
    return open_trace(path, options).path;
}

std::string describe_opened(const std::string& input, const OpenedTrace& opened) {
    if (opened.imported && opened.import) {
        const ImportedFile& file = *opened.import;
        std::string line =
            fmt::format("imported {} trace {} ({} events in {:.2f} s) -> {}", source_format_name(opened.format), input,
                        file.counts.written(), file.seconds, opened.path);
        if (file.counts.unlinked_gpu_events > 0)
            line += fmt::format("; {} GPU events have no launching call in the file (kept)",
                                file.counts.unlinked_gpu_events);
        for (const std::string& note : file.counts.notes) line += "; " + note;
        if (!opened.invalid_summary.empty()) line += "; " + opened.invalid_summary;
        return line;
    }
    std::string line = fmt::format("reading {} through its import {} ({}; imported again when the file changes)", input,
                                   opened.path, source_format_name(opened.format));
    if (!opened.invalid_summary.empty()) line += "; " + opened.invalid_summary;
    return line;
}

}  // namespace ember::importing
