// import.cpp: the entry points — one input into one file, several inputs into one file
// each (a job file of several inputs is profiler/job's import_job_file).
#include "profiler/import/import.h"

#include "common/os.h"
#include "profiler/import/import_sink.h"
#include "profiler/import/importers.h"
#include "profiler/store/trace_files.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace ember::importing {

using store::TraceError;
using store::TraceErrorKind;

const char* source_format_name(SourceFormat format) {
    switch (format) {
        case SourceFormat::auto_detect:
            return "auto";
        case SourceFormat::kineto:
            return "kineto";
        case SourceFormat::nsys:
            return "nsys";
        case SourceFormat::nvprof:
            return "nvprof";
        case SourceFormat::chrome:
            return "chrome";
        case SourceFormat::memory_snapshot:
            return "memory_snapshot";
        case SourceFormat::ember:
            return "ember";
    }
    return "auto";
}

std::optional<SourceFormat> parse_source_format(std::string_view text) {
    for (SourceFormat format :
         {SourceFormat::auto_detect, SourceFormat::kineto, SourceFormat::nsys, SourceFormat::nvprof,
          SourceFormat::chrome, SourceFormat::memory_snapshot, SourceFormat::ember}) {
        if (text == source_format_name(format)) return format;
    }
    return std::nullopt;
}

std::int64_t ImportCounts::skipped_total() const {
    std::int64_t total = 0;
    for (const auto& [reason, count] : skipped) total += count;
    return total;
}

std::int64_t ImportCounts::invalid_total() const {
    std::int64_t total = 0;
    for (const auto& [reason, entry] : invalid) total += entry.count;
    return total;
}

std::string ImportCounts::invalid_summary() const {
    if (invalid.empty()) return {};
    const std::int64_t total = invalid_total();
    std::string line = fmt::format("skipped {} event{} that break{} the format's rules:", total, total == 1 ? "" : "s",
                                   total == 1 ? "s" : "");
    bool first = true;
    for (const auto& [reason, entry] : invalid) {
        line += fmt::format("{} {} x {} (first: {})", first ? "" : ";", entry.count, reason, entry.first);
        first = false;
    }
    return line + " (--strict refuses them)";
}

namespace {
std::atomic<std::uint64_t> g_temporary_serial{0};
}  // namespace

std::string temporary_path(const std::string& target, const std::string& directory, const char* what) {
    std::filesystem::path path(target);
    std::filesystem::path folder = directory.empty() ? path.parent_path() : std::filesystem::path(directory);
    std::string name =
        fmt::format(".{}.{}-{}-{}.tmp", path.filename().string(), what, ::getpid(), g_temporary_serial.fetch_add(1));
    return (folder / name).string();
}

std::uint64_t file_size(const std::string& path) {
    struct stat info {};
    return ::stat(path.c_str(), &info) == 0 ? static_cast<std::uint64_t>(info.st_size) : 0;
}

namespace {

bool same_file(const std::string& a, const std::string& b) {
    std::error_code error;
    return std::filesystem::exists(b, error) && std::filesystem::equivalent(a, b, error);
}

}  // namespace

ImportedFile import_file(const std::string& input, const std::string& output, const ImportOptions& options) {
    const os::SteadyClock::time_point started = os::SteadyClock::now();
    SourceFormat format = options.format == SourceFormat::auto_detect ? detect_format(input) : options.format;
    if (format == SourceFormat::ember) {
        throw TraceError(TraceErrorKind::bad_value, input, "already an ember trace: there is nothing to import");
    }
    if (same_file(input, output)) {
        throw TraceError(TraceErrorKind::io, output, "the output would replace the input being imported");
    }
    ImportedFile result;
    result.input = input;
    result.output = output;
    result.format = format;
    result.input_bytes = file_size(input);
    std::string temporary = temporary_path(output, options.temporary_directory, "importing");
    try {
        ImportSink sink(input, temporary, format, options);
        switch (format) {
            case SourceFormat::kineto:
                import_kineto_json(sink);
                break;
            case SourceFormat::chrome:
                import_chrome_json(sink);
                break;
            case SourceFormat::nsys:
                import_nsys_sqlite(sink);
                break;
            case SourceFormat::nvprof:
                import_nvprof_sqlite(sink);
                break;
            case SourceFormat::memory_snapshot:
                import_memory_snapshot(sink);
                break;
            default:
                throw TraceError(TraceErrorKind::not_a_trace, input, "no importer for this format");
        }
        result.counts = sink.finish(output);
        result.rank = sink.run().rank;
        result.world_size = sink.run().world_size;
    } catch (const TraceError&) {
        store::remove_trace_files(temporary);
        throw;
    } catch (const std::exception& error) {
        // Anything else (out of memory, a system error) still names the file.
        store::remove_trace_files(temporary);
        throw TraceError(TraceErrorKind::io, input, fmt::format("import failed: {}", error.what()));
    }
    result.seconds = os::seconds_since(started);
    return result;
}

ImportReport import_trace(const std::vector<std::string>& inputs, const std::string& output,
                          const ImportOptions& options) {
    if (inputs.empty()) throw TraceError(TraceErrorKind::io, output, "import: no input files");
    ImportReport report;
    if (inputs.size() == 1) {
        report.files.push_back(import_file(inputs.front(), output, options));
        report.outputs.push_back(output);
        return report;
    }
    std::string stem = output;
    if (stem.size() > 3 && stem.compare(stem.size() - 3, 3, ".db") == 0) stem.resize(stem.size() - 3);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        std::string path = fmt::format("{}.rank{}.db", stem, i);
        report.files.push_back(import_file(inputs[i], path, options));
        report.outputs.push_back(path);
    }
    return report;
}

std::string default_output_path(const std::string& input) {
    std::string stem = input;
    auto strip = [&](std::string_view suffix) {
        if (stem.size() > suffix.size() && stem.compare(stem.size() - suffix.size(), suffix.size(), suffix) == 0) {
            stem.resize(stem.size() - suffix.size());
            return true;
        }
        return false;
    };
    bool stripped = strip(".gz");
    if (strip(".json")) {
        strip(".pt.trace");
        stripped = true;
    }
    stripped = strip(".sqlite") || strip(".sqlite3") || strip(".nvvp") || strip(".prof") || strip(".pickle") ||
               strip(".pkl") || stripped;
    // An input already named .db keeps its name apart from the output's.
    if (!stripped && strip(".db")) return stem + ".ember.db";
    std::string output = stem + ".db";
    if (output == input) output = stem + ".ember.db";
    return output;
}

}  // namespace ember::importing
