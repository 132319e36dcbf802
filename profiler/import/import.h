// import.h: turn other tools' traces into ember traces. Three formats come in —
// PyTorch profiler / Kineto JSON (plain or gzip), Nsight Systems SQLite exports and
// generic Chrome Trace Event JSON (which includes `ember export --format chrome`) —
// and one goes out: an ember trace written through store::TraceWriter, so `stats`,
// `export`, `merge`, `view` and every later reader work on it unchanged.
// docs/import.md says what maps to what, what is dropped and why.
//
// Guarantees:
//   * the format is detected from the content, never from the file name;
//   * JSON is streamed: one traceEvents element at a time, memory bounded whatever
//     the file size (a 2.4 GB file imports in well under 1 GB);
//   * times are kept exactly: a Kineto "ts": 123.456 (µs) is 123456 ns, parsed
//     from the decimal text, never through a rounding double;
//   * bad input throws store::TraceError naming the file and the byte offset (JSON)
//     or table and row (SQLite) and what was wrong; the output is written to a
//     temporary beside it and renamed only on success, so a failed import never
//     leaves a file that looks complete.
//
// Typical use:
//   ember::importing::ImportReport report = ember::importing::import_trace({"rank0.pt.trace.json.gz"}, "rank0.db", {});
//   std::string db = ember::importing::open_as_ember_trace("profile.sqlite");  // imports once, then reuses the cache
#pragma once

#include "profiler/store/trace_error.h"
#include "profiler/trace/events.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::importing {

// ---------------------------------------------------------------------------
// [SECTION] Formats
// ---------------------------------------------------------------------------

enum class SourceFormat {
    auto_detect,      // look at the content
    kineto,           // PyTorch profiler / Kineto JSON (`*.pt.trace.json[.gz]`)
    nsys,             // Nsight Systems SQLite export (`nsys export --type sqlite`)
    nvprof,           // nvprof database (`nvprof -o FILE.nvvp`)
    chrome,           // Chrome Trace Event JSON (Perfetto / chrome://tracing, `ember export --format chrome`)
    memory_snapshot,  // PyTorch CUDA memory snapshot (`torch.cuda.memory._dump_snapshot`, a pickle)
    ember,            // already an ember trace
};

// "auto", "kineto", "nsys", "nvprof", "chrome", "memory_snapshot", "ember".
const char* source_format_name(SourceFormat format);
std::optional<SourceFormat> parse_source_format(std::string_view text);

// The format of `path`, from its first bytes: SQLite files are ember traces (their
// run_metadata table and application id) or Nsight Systems exports (StringIds,
// CUPTI_ACTIVITY_KIND_* / NVTX_EVENTS / EXPORT_META_DATA / META_DATA_EXPORT /
// COMPOSITE_EVENTS / OSRT_API tables); gzip is looked
// through; JSON with traceEvents is Kineto when it carries Kineto's markers
// (schemaVersion, deviceProperties, distributedInfo, baseTimeNanoseconds, Kineto
// categories) and Chrome otherwise; a pickle (0x80 and a protocol 2-5, or a protocol 0/1
// list or dict) is a PyTorch memory snapshot. Never returns auto_detect. Throws TraceError:
// not_found (cannot open), not_a_trace (none of these), truncated / corrupt (a gzip
// that cannot be read far enough to tell).
SourceFormat detect_format(const std::string& path);

// ---------------------------------------------------------------------------
// [SECTION] Options and report
// ---------------------------------------------------------------------------

// Which of Nsight Systems' kernel names becomes the kernel name.
enum class KernelNameStyle {
    demangled,   // "saxpy(double *, double *, double *, double, int)" (nsys stats' default)
    short_name,  // "saxpy"
    mangled,     // "_Z5saxpyPdS_S_di" (falls back to demangled when absent)
};

struct ImportOptions {
    SourceFormat format = SourceFormat::auto_detect;
    // Override what the input says (or does not say: an nsys export has no rank).
    std::optional<std::int32_t> rank;
    std::optional<std::int32_t> world_size;
    KernelNameStyle kernel_names = KernelNameStyle::demangled;
    // Kept for old callers; no effect: an Nsight Systems export of any schema version
    // (or none) is read for the tables and columns the importer knows, and a schema
    // newer than any seen adds a line to ImportCounts::notes.
    bool accept_unknown_nsys_schema = false;
    // Events the importer cannot place (a GPU event without a stream, a negative
    // duration, an "E" with no open "B", a row with a time out of range) are skipped by
    // default, counted by reason with where the first was (ImportCounts::invalid); with
    // `strict` the first is an error naming the file and its offset.
    bool strict = false;
    // Memory for sorting host ranges into their nesting before they spill to
    // temporary files (bounded memory for any input size).
    std::size_t range_sort_memory_bytes = 64u << 20;
    // Where spill files and the temporary output go; empty: beside the output.
    std::string temporary_directory;
};

// What one input turned into. Counts are of events written to the output.
struct ImportCounts {
    std::int64_t kernels = 0;
    std::int64_t memcpys = 0;
    std::int64_t memsets = 0;
    std::int64_t synchronizations = 0;
    std::int64_t api_calls = 0;  // CUDA runtime and driver calls
    std::int64_t ranges = 0;     // host ranges (NVTX, CPU ops, annotations, Python functions)
    std::int64_t marks = 0;
    std::int64_t counter_samples = 0;
    std::int64_t overheads = 0;
    std::int64_t stack_samples = 0;  // sampled CPU call stacks
    // GPU events (kernels, memcpys, memsets) whose correlation id matches an API call:
    // the launch flows readers draw. The rest are kept and counted as unlinked.
    std::int64_t flows = 0;
    std::int64_t unlinked_gpu_events = 0;
    // Ranges that start inside another range but end after it (kept, nested under
    // the nearest range that contains them whole; push/pop NVTX never has any).
    std::int64_t ranges_not_nested = 0;
    std::int64_t nccl_kernels = 0;
    // Synchronizations made from synchronizing runtime calls (a Kineto trace with no
    // cuda_sync events): run_metadata trace::kSynchronizationsFromCallsKey.
    std::int64_t synchronizations_from_calls = 0;
    // Kernels and host ranges with Kineto's collective metadata (process group, Seq).
    std::int64_t collective_calls = 0;
    // GPU memory: allocator events (memory_events) and blocks of its state (memory_blocks).
    std::int64_t memory_events = 0;
    std::int64_t memory_blocks = 0;
    // Events read but not stored, by reason ("flow event (links come from correlation ids)", ...).
    std::map<std::string, std::int64_t, std::less<>> skipped;
    // Events that break the format's rules, skipped (ImportOptions::strict refuses them):
    // per reason, how many and where the first was ("traceEvents element #702 at byte
    // 181167: ...", "table CUPTI_ACTIVITY_KIND_KERNEL row 12: ...").
    struct Invalid {
        std::int64_t count = 0;
        std::string first;
    };
    std::map<std::string, Invalid, std::less<>> invalid;
    std::int64_t invalid_total() const;
    // One line for the user: "skipped 3 events that break the format's rules: 2 x REASON
    // (first: WHERE); ... (--strict refuses them)"; empty when none.
    std::string invalid_summary() const;
    // Lines worth telling the user about the input as a whole ("Nsight Systems export
    // schema 3.30.0 is newer than any this importer has seen (...)").
    std::vector<std::string> notes;

    std::int64_t written() const {
        return kernels + memcpys + memsets + synchronizations + api_calls + ranges + marks + counter_samples +
               overheads + stack_samples + memory_events;
    }
    std::int64_t skipped_total() const;
};

struct ImportedFile {
    std::string input;
    std::string output;  // the ember trace written (a temporary one for a job file)
    SourceFormat format = SourceFormat::auto_detect;
    std::int32_t rank = 0;
    std::int32_t world_size = 1;
    std::uint64_t input_bytes = 0;  // size of the input file as stored (compressed)
    double seconds = 0.0;
    ImportCounts counts;
};

struct ImportReport {
    std::vector<ImportedFile> files;   // one per input, in input order
    std::vector<std::string> outputs;  // the files written: one job file, or one per input
    bool merged = false;               // several inputs went into one job file
};

// ---------------------------------------------------------------------------
// [SECTION] Importing
// ---------------------------------------------------------------------------

// One input (one process) into one ember trace at `output` (replaced). An input that
// is already an ember trace is refused (nothing to import). Throws TraceError.
ImportedFile import_file(const std::string& input, const std::string& output, const ImportOptions& options = {});

// Inputs of one job (or one input): one input → import_file; several → one ember file
// per input, "<output without .db>.rank<i>.db". (One job file of several inputs:
// job::import_job_file, profiler/job/import_job.h.) Throws TraceError.
ImportReport import_trace(const std::vector<std::string>& inputs, const std::string& output,
                          const ImportOptions& options = {});

// A name beside `target` (or in `directory`) that no other import uses now, and that no
// reader mistakes for a finished trace ("what" tells the temporaries of a run apart).
std::string temporary_path(const std::string& target, const std::string& directory, const char* what);
// The size of a file in bytes; 0 when it cannot be read.
std::uint64_t file_size(const std::string& path);

// The output a command line would pick for `input`: the input's name without
// .gz/.json/.sqlite/.nsys-rep (and a Kineto ".pt.trace"), then ".db" beside it.
std::string default_output_path(const std::string& input);

// ---------------------------------------------------------------------------
// [SECTION] Opening any trace as an ember trace (the reading commands)
// ---------------------------------------------------------------------------

enum class CachePlace {
    automatic,     // beside the input when its folder is writable, else the user cache
    beside_input,  // "<input>.ember-cache.db"
    user_cache,    // "$XDG_CACHE_HOME/ember/" (or "~/.cache/ember/")
};

struct OpenedTrace {
    std::string path;  // an ember trace to open with store::TraceReader
    SourceFormat format = SourceFormat::ember;
    bool imported = false;               // imported now
    bool reused = false;                 // a valid cached import was found
    std::optional<ImportedFile> import;  // set when imported
    std::string invalid_summary;  // what the import skipped (ImportCounts::invalid_summary), imported now or reused
};

struct OpenTraceOptions {
    ImportOptions import;
    CachePlace cache = CachePlace::automatic;
    // Called once when a non-ember input is imported or its cache reused, so a
    // command line can say so once ("imported kineto trace x.json.gz -> ...").
    std::function<void(const OpenedTrace&)> on_import;
};

// `path` itself for an ember trace; otherwise an import of it, cached and keyed by
// the input's absolute path, size and modification time (stored in the cached
// file's run_metadata and checked before reuse). Throws TraceError.
OpenedTrace open_trace(const std::string& path, const OpenTraceOptions& options = {});
std::string open_as_ember_trace(const std::string& path, const OpenTraceOptions& options = {});

// One line for a command to print when open_trace() imported or reused an import:
// "imported kineto trace r0.json.gz (41,312 events in 0.42 s) -> r0.json.gz.ember-cache.db"
// or "reading r0.json.gz through its import r0.json.gz.ember-cache.db (kineto)".
std::string describe_opened(const std::string& input, const OpenedTrace& opened);

// The user's cache folder: $XDG_CACHE_HOME/ember, else ~/.cache/ember.
std::string user_cache_directory();

// Where open_trace() keeps the import of `input` for `place` (automatic resolves
// to beside_input or user_cache the way open_trace does).
std::string cache_path_for(const std::string& input, CachePlace place);

// The version of what the importers write, beyond the schema: raised whenever an import
// of the same input would store something else, so a cached import by an older ember is
// made again (trace_cache.cpp).
inline constexpr int kImportVersion = 4;

// Keys the importers add to run_metadata (docs/import.md).
namespace import_metadata_key {
inline constexpr const char* import_version = "import_version";  // kImportVersion
inline constexpr const char* source_format = "import_source_format";
inline constexpr const char* source_path = "import_source_path";  // absolute path
inline constexpr const char* source_bytes = "import_source_bytes";
inline constexpr const char* source_mtime_ns = "import_source_mtime_ns";
inline constexpr const char* unlinked_gpu_events = "import_unlinked_gpu_events";
inline constexpr const char* linked_gpu_events = "import_linked_gpu_events";
inline constexpr const char* skipped_events = "import_skipped_events";  // JSON object: reason -> count
inline constexpr const char* ranges_not_nested = "import_ranges_not_nested";
inline constexpr const char* notes = "import_notes";                      // ImportCounts::notes, one per line
inline constexpr const char* invalid_events = "import_invalid_events";    // ImportCounts::invalid_total()
inline constexpr const char* invalid_summary = "import_invalid_summary";  // ImportCounts::invalid_summary()
}  // namespace import_metadata_key

}  // namespace ember::importing
