// nsys_importer.cpp: Nsight Systems SQLite export (`nsys export --type sqlite`,
// schema 2.x - 3.x) -> ember trace.
//
// An export has one table per kind of activity, created only when there was such
// activity, and NVIDIA adds columns and ENUM_* tables between versions. So nothing
// is assumed: the tables present are listed, each table's columns are read with
// PRAGMA table_info (sqlite_table_scan.h), a missing required column is an error
// naming the table, and an optional one is simply not used. Timestamps are integer ns from the session
// start; TARGET_INFO_SESSION_START_TIME.utcEpochNs is that start's wall time
// (ranks of one job line up through it). globalTid packs pid and tid:
// pid = (globalTid >> 24) & 0xFFFFFF, tid = globalTid & 0xFFFFFF.
//
// Index:
//   [SECTION] Strings, enums, threads
//   [SECTION] Run, devices
//   [SECTION] CUDA: runtime, kernels, copies, memsets, synchronizations
//   [SECTION] NVTX
//   [SECTION] CPU side: samples with call chains, OS runtime calls, CUDA graph events
//   [SECTION] What is not imported
#include "profiler/import/importers.h"

#include "profiler/import/decimal_time.h"
#include "profiler/import/cupti_rows.h"
#include "profiler/store/sqlite_util.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace ember::importing {

using store::TraceError;
using store::TraceErrorKind;

namespace {

// The newest export schema seen (Nsight Systems 2026.2 writes 3.25): a newer one is
// read all the same, with a note saying so.
constexpr int kNewestSchemaMajor = 3;
constexpr int kNewestSchemaMinor = 25;

// The domain of the host ranges made of OSRT_API calls.
constexpr const char* kOsRuntimeDomain = "OS runtime";
// The domain of the host ranges made of CUDA_GRAPH_EVENTS and CUDA_GRAPH_NODE_EVENTS.
constexpr const char* kCudaGraphsDomain = "CUDA graphs";

// NVTX event types (NVIDIA's "NVTX Event Type Values").
constexpr std::int64_t kNvtxCategoryName = 33;
constexpr std::int64_t kNvtxMark = 34;
constexpr std::int64_t kNvtxThreadName = 39;
constexpr std::int64_t kNvtxPushPop = 59;
constexpr std::int64_t kNvtxStartEnd = 60;
constexpr std::int64_t kNvtxDomainCreate = 75;

std::int64_t pid_of(std::int64_t global_tid) {
    return (global_tid >> 24) & 0xFFFFFF;
}
std::int64_t tid_of(std::int64_t global_tid) {
    return global_tid & 0xFFFFFF;
}

// The number a version text starts with ("3" of "3.20.2"); nullopt when none fits an int.
std::optional<int> leading_number(std::string_view text) {
    int value = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end == text.data()) return std::nullopt;
    return value;
}

std::string upper(std::string_view text) {
    std::string out(text);
    for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return out;
}

// "cudaMemcpy_v3020" -> "cudaMemcpy", as nsys stats names API calls.
std::string_view without_version_suffix(std::string_view name) {
    std::size_t at = name.rfind("_v");
    if (at == std::string_view::npos || at + 2 == name.size()) return name;
    for (char c : name.substr(at + 2)) {
        if (c < '0' || c > '9') return name;
    }
    return name.substr(0, at);
}

class NsysImporter : private CuptiRows {
  public:
    explicit NsysImporter(ImportSink& sink) : CuptiRows(sink, "the Nsight Systems export", "the session start") {}
    ~NsysImporter() { strings_query_ = store::Statement(); }

    void run() {
        open_database();
        read_schema();
        read_enums();
        read_run();
        read_devices();
        read_thread_names();
        collect_memory_correlations();
        read_runtime("CUPTI_ACTIVITY_KIND_RUNTIME");
        read_runtime("CUPTI_ACTIVITY_KIND_DRIVER");
        read_kernels();
        read_memcpys();
        read_memsets();
        read_synchronizations();
        read_nvtx();
        read_overhead();
        read_cpu_samples();
        read_os_runtime();
        read_scheduling();
        read_gpu_memory_usage();
        read_graph_events("CUDA_GRAPH_EVENTS", "graphId");
        read_graph_events("CUDA_GRAPH_NODE_EVENTS", "graphNodeId");
        count_unimported_tables();
        finish();
    }

  private:
    // ---------------------------------------------------------------------------
    // [SECTION] Strings, enums, threads
    // ---------------------------------------------------------------------------

    // The schema version, from the metadata table of whichever name the export uses
    // (EXPORT_META_DATA up to 2023.2, META_DATA_EXPORT from 2023.3), or none (exports
    // before 2021 have neither). The version decides nothing: every table and column
    // is looked up by name. A schema newer than any seen says so in one line.
    void read_schema() {
        std::string version_text;
        std::optional<int> major, minor;
        for (const char* table : {"META_DATA_EXPORT", "EXPORT_META_DATA"}) {
            if (!has_table(table)) continue;
            TableScan scan(db_, path_, table, {}, {"name", "value"});
            if (!scan.has(0) || !scan.has(1)) continue;
            while (scan.next()) {
                std::optional<std::string> name = scan.maybe_text(0), value = scan.maybe_text(1);
                if (!name || !value) continue;
                if (*name == "EXPORT_SCHEMA_VERSION") version_text = *value;
                if (*name == "EXPORT_SCHEMA_VERSION_MAJOR") major = leading_number(*value);
                if (*name == "EXPORT_SCHEMA_VERSION_MINOR") minor = leading_number(*value);
            }
            break;
        }
        if (!major) major = leading_number(version_text);  // "3.20.2"
        if (!minor) {
            std::size_t dot = version_text.find('.');
            if (dot != std::string::npos) minor = leading_number(std::string_view(version_text).substr(dot + 1));
        }
        if (!major) return;
        std::string version = version_text.empty() ? fmt::format("{}.{}", *major, minor.value_or(0)) : version_text;
        if (*major > kNewestSchemaMajor || (*major == kNewestSchemaMajor && minor.value_or(0) > kNewestSchemaMinor)) {
            sink_.note(
                fmt::format("Nsight Systems export schema {} is newer than any this importer has seen ({}.{}): "
                            "read for the tables and columns it knows",
                            version, kNewestSchemaMajor, kNewestSchemaMinor));
        }
    }

    // The text of a StringIds id; throws (an id pointing nowhere) when absent.
    std::optional<std::string> lookup_string(std::int64_t id) {
        if (!strings_query_) {
            const char* table =
                has_table("StringIds") ? "StringIds" : (has_table("StringTable") ? "StringTable" : nullptr);
            if (table == nullptr) return std::nullopt;
            strings_query_ = store::Statement(db_, path_, fmt::format("SELECT value FROM \"{}\" WHERE id = ?", table));
        }
        strings_query_.reset();
        strings_query_.bind(1, id);
        std::optional<std::string> text;
        if (strings_query_.next_row()) text = strings_query_.column_text(0);
        strings_query_.reset();
        return text;
    }

    // An ember string for a StringIds id (cached); nullopt after a skipped bad row.
    std::optional<trace::StringId> name_of(const TableScan& scan, const char* column_label, std::int64_t id,
                                           bool api_name = false) {
        auto& cache = api_name ? api_names_ : names_;
        auto found = cache.find(id);
        if (found != cache.end()) return found->second;
        std::optional<std::string> text = lookup_string(id);
        if (!text) {
            reject(scan, "string id not in StringIds",
                   fmt::format("{} {} is not in StringIds (an id that points nowhere)", column_label, id));
            return std::nullopt;
        }
        trace::StringId interned = sink_.intern(api_name ? without_version_suffix(*text) : std::string_view(*text));
        cache.emplace(id, interned);
        return interned;
    }

    // ENUM_* tables (newer exports) name their values; without them, the values
    // of schema 2.x are used.
    std::map<std::int64_t, std::string> enum_labels(const std::string& table) {
        std::map<std::int64_t, std::string> labels;
        if (!has_table(table)) return labels;
        TableScan scan(db_, path_, table, {"id"}, {"name", "label"});
        int name = scan.index_of("name"), label = scan.index_of("label");
        while (scan.next()) {
            std::optional<std::int64_t> id = scan.maybe_integer(0);
            if (!id) continue;
            labels[*id] = upper(scan.maybe_text(name).value_or("") + " " + scan.maybe_text(label).value_or(""));
        }
        return labels;
    }

    void read_enums() {
        for (const auto& [id, text] : enum_labels("ENUM_CUDA_MEM_KIND")) {
            trace::MemoryKind kind = trace::MemoryKind::unknown;
            if (text.find("PAGEABLE") != std::string::npos)
                kind = trace::MemoryKind::pageable;
            else if (text.find("PINNED") != std::string::npos)
                kind = trace::MemoryKind::pinned;
            else if (text.find("MANAGED") != std::string::npos)
                kind = trace::MemoryKind::managed;
            else if (text.find("ARRAY") != std::string::npos)
                kind = trace::MemoryKind::array;
            else if (text.find("DEVICE") != std::string::npos)
                kind = trace::MemoryKind::device;
            memory_kinds_[id] = kind;
        }
        for (const auto& [id, text] : enum_labels("ENUM_CUDA_MEMCPY_OPER")) {
            trace::MemcpyDirection direction = trace::MemcpyDirection::unknown;
            auto has = [&](const char* word) { return text.find(word) != std::string::npos; };
            if (has("HTOD") || has("HOST-TO-DEVICE") || has("HTOA") || has("HOST-TO-ARRAY")) {
                direction = trace::MemcpyDirection::host_to_device;
            } else if (has("DTOH") || has("DEVICE-TO-HOST") || has("ATOH") || has("ARRAY-TO-HOST")) {
                direction = trace::MemcpyDirection::device_to_host;
            } else if (has("PTOP") || has("PEER")) {
                direction = trace::MemcpyDirection::peer_to_peer;
            } else if (has("HTOH") || has("HOST-TO-HOST")) {
                direction = trace::MemcpyDirection::host_to_host;
            } else if (has("DTOD") || has("ATOA") || has("DTOA") || has("ATOD") || has("DEVICE-TO-DEVICE") ||
                       has("ARRAY-TO")) {
                direction = trace::MemcpyDirection::device_to_device;
            }
            copy_directions_[id] = direction;
        }
    }

    trace::MemoryKind memory_kind(std::optional<std::int64_t> value) const {
        if (!value) return trace::MemoryKind::unknown;
        auto found = memory_kinds_.find(*value);
        if (found != memory_kinds_.end()) return found->second;
        if (!memory_kinds_.empty()) return trace::MemoryKind::unknown;
        // Schema 2.x (CUDA_MEMOPR_MEMORY_KIND): 0 pageable, 1 pinned, 2 device, 3 array,
        // 4 managed, 5 device static, 6 managed static, 7 unknown.
        switch (*value) {
            case 0:
                return trace::MemoryKind::pageable;
            case 1:
                return trace::MemoryKind::pinned;
            case 2:
                return trace::MemoryKind::device;
            case 3:
                return trace::MemoryKind::array;
            case 4:
                return trace::MemoryKind::managed;
            case 5:
                return trace::MemoryKind::device;
            case 6:
                return trace::MemoryKind::managed;
            default:
                return trace::MemoryKind::unknown;
        }
    }

    trace::MemcpyDirection copy_direction(std::int64_t value) const {
        auto found = copy_directions_.find(value);
        if (found != copy_directions_.end()) return found->second;
        if (!copy_directions_.empty()) return trace::MemcpyDirection::unknown;
        // Schema 2.x (CUDA_MEMCPY_OPER): CUPTI's order.
        return cupti_copy_direction(value);
    }

    void read_thread_names() {
        if (!has_table("ThreadNames")) return;
        TableScan scan(db_, path_, "ThreadNames", {"nameId", "globalTid"}, {});
        while (scan.next()) {
            std::optional<std::int64_t> name_id = scan.maybe_integer(0), global_tid = scan.maybe_integer(1);
            if (!name_id || !global_tid) continue;
            std::optional<std::string> name = lookup_string(*name_id);
            if (!name) {
                reject(scan, "string id not in StringIds",
                       fmt::format("nameId {} is not in StringIds (an id that points nowhere)", *name_id));
                continue;
            }
            sink_.name_thread(pid_of(*global_tid), tid_of(*global_tid), *name);
        }
    }

    trace::ThreadId thread_of(std::optional<std::int64_t> global_tid) {
        std::int64_t g = global_tid.value_or(0);
        std::int64_t pid = pid_of(g);
        used_pids_.insert(pid);
        if (main_pid_ == 0) main_pid_ = pid;
        return sink_.thread(pid, tid_of(g));
    }

    // ---------------------------------------------------------------------------
    // [SECTION] Run, devices
    // ---------------------------------------------------------------------------

    void read_run() {
        trace::RunInfo& run = sink_.run();
        run.clock_name = "nsys session clock";
        if (has_table("TARGET_INFO_SESSION_START_TIME")) {
            TableScan scan(db_, path_, "TARGET_INFO_SESSION_START_TIME", {}, {"utcEpochNs"});
            // nsys timestamps count from the session start, whose wall time this is.
            if (scan.next()) run.clock_offset_to_wall_ns = scan.maybe_integer(0).value_or(0);
        }
        if (has_table("ANALYSIS_DETAILS")) {
            TableScan scan(db_, path_, "ANALYSIS_DETAILS", {}, {"startTime", "stopTime"});
            if (scan.next()) {
                session_start_ = scan.maybe_integer(0);
                session_stop_ = scan.maybe_integer(1);
            }
        }
        read_launcher_rank();
        if (has_table("PROCESSES")) {
            TableScan scan(db_, path_, "PROCESSES", {}, {"pid", "name"});
            int pid = scan.index_of("pid"), name = scan.index_of("name");
            while (scan.next()) {
                std::optional<std::int64_t> id = scan.maybe_integer(pid);
                std::optional<std::string> text = scan.maybe_text(name);
                if (id && text) process_names_[*id] = *text;
            }
        }
    }

    // The rank the launcher gave the profiled process, where the export kept its
    // environment: TARGET_INFO_SYSTEM_ENV's DeviceEnvironment lists variables as
    // NAME=VALUE (Open MPI's OMPI_COMM_WORLD_RANK, Slurm's SLURM_PROCID, torchrun's RANK,
    // MPICH's PMI_RANK, PMIx's PMIX_RANK or PMIX_ID "namespace.rank").
    void read_launcher_rank() {
        if (!has_table("TARGET_INFO_SYSTEM_ENV")) return;
        TableScan scan(db_, path_, "TARGET_INFO_SYSTEM_ENV", {}, {"name", "value"});
        std::map<std::string, std::string> variables;
        while (scan.next()) {
            if (scan.maybe_text(0).value_or("") != "DeviceEnvironment") continue;
            const std::string value = scan.maybe_text(1).value_or("");
            // Entries end at white space, ';' or NUL (an environment block; nsys keeps
            // the terminating NUL in the column).
            static const std::string separators(" \t\r\n;\0", 6);
            std::size_t at = 0;
            while (at < value.size()) {
                std::size_t end = value.find_first_of(separators, at);
                if (end == std::string::npos) end = value.size();
                const std::string item = value.substr(at, end - at);
                const std::size_t equals = item.find('=');
                if (equals != std::string::npos) variables[item.substr(0, equals)] = item.substr(equals + 1);
                at = end + 1;
            }
        }
        auto number = [](const std::string& text) -> std::optional<std::int32_t> {
            if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 9)
                return std::nullopt;
            return static_cast<std::int32_t>(std::stol(text));
        };
        for (const char* name : {"OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "RANK", "PMI_RANK", "PMIX_RANK", "PMIX_ID"}) {
            auto found = variables.find(name);
            if (found == variables.end()) continue;
            std::string text = found->second;
            if (std::string(name) == "PMIX_ID") text = text.substr(text.rfind('.') + 1);  // "namespace.rank"
            if (std::optional<std::int32_t> rank = number(text)) {
                launcher_rank_ = rank;
                launcher_rank_source_ = std::string(name) + " in the export's DeviceEnvironment";
                break;
            }
        }
        for (const char* name : {"OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
            auto found = variables.find(name);
            if (found == variables.end()) continue;
            if (std::optional<std::int32_t> size = number(found->second)) {
                launcher_world_size_ = size;
                break;
            }
        }
    }

    // TARGET_INFO_GPU names the device `id` (`deviceId` before 2021, when the facts
    // were in TARGET_INFO_CUDA_GPU instead); a device without an id is left out.
    void read_devices() {
        if (has_table("TARGET_INFO_GPU")) {
            TableScan scan(db_, path_, "TARGET_INFO_GPU", {},
                           {"id", "deviceId", "name", "uuid", "totalMemory", "memoryBandwidth", "smCount",
                            "computeMajor", "computeMinor"});
            while (scan.next()) {
                std::optional<std::int64_t> id = scan.maybe_integer(0);
                if (!id) id = scan.maybe_integer(1);
                std::optional<trace::DeviceId> device_id = device_ordinal(scan, id);
                if (!device_id) continue;
                trace::DeviceInfo device;
                device.device_id = *device_id;
                device.name = scan.maybe_text(2).value_or("");
                std::string uuid = scan.maybe_text(3).value_or("");
                device.uuid = uuid.empty() || uuid.rfind("GPU-", 0) == 0 ? uuid : "GPU-" + uuid;
                device.memory_bytes = scan.maybe_integer(4).value_or(0);
                device.memory_bandwidth_bytes_per_second = scan.maybe_real(5).value_or(0.0);
                device.multiprocessor_count = static_cast<std::int32_t>(scan.maybe_integer(6).value_or(0));
                device.compute_capability_major = static_cast<std::int32_t>(scan.maybe_integer(7).value_or(0));
                device.compute_capability_minor = static_cast<std::int32_t>(scan.maybe_integer(8).value_or(0));
                devices_[*device_id] = device;
            }
        }
        // Exports before 2021: memory in bytes, bandwidth in kB/s (760080000 for an RTX 3080's 760 GB/s).
        if (has_table("TARGET_INFO_CUDA_GPU")) {
            TableScan scan(db_, path_, "TARGET_INFO_CUDA_GPU", {},
                           {"deviceId", "name", "globalMemorySize", "globalMemoryBandwidth", "numMultiprocessors",
                            "computeCapabilityMajor", "computeCapabilityMinor"});
            while (scan.next()) {
                std::optional<trace::DeviceId> device_id = device_ordinal(scan, scan.maybe_integer(0));
                if (!device_id) continue;
                trace::DeviceInfo& device = devices_[*device_id];
                device.device_id = *device_id;
                if (device.name.empty()) device.name = scan.maybe_text(1).value_or("");
                if (device.memory_bytes == 0) device.memory_bytes = scan.maybe_integer(2).value_or(0);
                if (device.memory_bandwidth_bytes_per_second == 0.0)
                    device.memory_bandwidth_bytes_per_second = scan.maybe_real(3).value_or(0.0) * 1000.0;
                if (device.multiprocessor_count == 0)
                    device.multiprocessor_count = static_cast<std::int32_t>(scan.maybe_integer(4).value_or(0));
                if (device.compute_capability_major == 0) {
                    device.compute_capability_major = static_cast<std::int32_t>(scan.maybe_integer(5).value_or(0));
                    device.compute_capability_minor = static_cast<std::int32_t>(scan.maybe_integer(6).value_or(0));
                }
            }
        }
        for (const auto& [id, device] : devices_) sink_.describe_device(device);
        if (has_table("TARGET_INFO_CUDA_NULL_STREAM")) {
            TableScan scan(db_, path_, "TARGET_INFO_CUDA_NULL_STREAM", {}, {"streamId", "deviceId"});
            while (scan.next()) {
                std::optional<std::int64_t> stream = scan.maybe_integer(0), device = scan.maybe_integer(1);
                if (stream && device) null_streams_.insert({*device, *stream});
            }
        }
        if (has_table("TARGET_INFO_CUDA_STREAM")) {
            TableScan scan(db_, path_, "TARGET_INFO_CUDA_STREAM", {}, {"streamId", "priority"});
            while (scan.next()) {
                std::optional<std::int64_t> stream = scan.maybe_integer(0), priority = scan.maybe_integer(1);
                // Stored unsigned by some versions (4294967291 is -5).
                if (stream && priority)
                    stream_priorities_[{kAnyContext, *stream}] =
                        static_cast<std::int32_t>(static_cast<std::uint32_t>(*priority));
            }
        }
    }

    // A device ordinal from a row (nullopt: none, or an impossible one rejected).
    std::optional<trace::DeviceId> device_ordinal(const TableScan& scan, std::optional<std::int64_t> id) {
        if (!id) return std::nullopt;
        if (*id < 0 || *id > 1'000'000) {
            reject(scan, "impossible device id", fmt::format("device id {} is not a CUDA device ordinal", *id));
            return std::nullopt;
        }
        return static_cast<trace::DeviceId>(*id);
    }

    // ---------------------------------------------------------------------------
    // [SECTION] CUDA: runtime, kernels, copies, memsets, synchronizations
    // ---------------------------------------------------------------------------

    void read_runtime(const char* table) {
        if (!has_table(table)) return;
        TableScan scan(db_, path_, table, {"start", "end", "nameId"}, {"globalTid", "correlationId", "returnValue"});
        while (scan.next()) {
            std::int64_t start = scan.integer(0), end = scan.integer(1);
            if (!valid_interval(scan, start, end)) continue;
            std::optional<trace::StringId> name = name_of(scan, "nameId", scan.integer(2), true);
            if (!name) continue;
            trace::ApiEvent call;
            call.start_ns = start;
            call.end_ns = end;
            call.thread_id = thread_of(scan.maybe_integer(3));
            call.correlation_id = correlation_of(scan, 4);
            call.name_id = *name;
            if (!memory_call_threads_.empty()) {
                auto memory_call = memory_call_threads_.find(call.correlation_id);
                if (memory_call != memory_call_threads_.end() && memory_call->second == 0)
                    memory_call->second = call.thread_id;
            }
            call.result = static_cast<std::int32_t>(scan.maybe_integer(5).value_or(0));
            sink_.api_call(call);
        }
    }

    void read_kernels() {
        const char* table = "CUPTI_ACTIVITY_KIND_KERNEL";
        if (!has_table(table)) return;
        TableScan scan(db_, path_, table, {"start", "end", "deviceId", "streamId"},
                       {"contextId", "correlationId", "demangledName", "shortName", "mangledName", "gridX", "gridY",
                        "gridZ", "blockX", "blockY", "blockZ", "registersPerThread", "staticSharedMemory",
                        "dynamicSharedMemory", "globalPid", "graphId", "graphNodeId"});
        int demangled = scan.index_of("demangledName"), short_name = scan.index_of("shortName"),
            mangled = scan.index_of("mangledName");
        int name_column = -1;
        switch (sink_.options().kernel_names) {
            case KernelNameStyle::demangled:
                name_column = demangled;
                break;
            case KernelNameStyle::short_name:
                name_column = short_name;
                break;
            case KernelNameStyle::mangled:
                name_column = mangled;
                break;
        }
        if (!scan.has(demangled) && !scan.has(short_name) && !scan.has(mangled)) {
            throw TraceError(
                TraceErrorKind::missing_table, path_,
                fmt::format("table {} has no kernel name column (demangledName, shortName or mangledName)", table));
        }
        while (scan.next()) {
            std::optional<trace::KernelEvent> row = gpu_row<trace::KernelEvent>(scan, 4, 5);
            if (!row) continue;
            // The chosen name, else the demangled one, else any.
            int column =
                !scan.is_null(name_column)
                    ? name_column
                    : (!scan.is_null(demangled) ? demangled : (!scan.is_null(short_name) ? short_name : mangled));
            if (scan.is_null(column)) {
                reject(scan, "kernel without a name", "the kernel has no name (all name columns are NULL)");
                continue;
            }
            std::optional<trace::StringId> name = name_of(scan, "kernel name id", scan.integer(column));
            if (!name) continue;
            trace::KernelEvent& kernel = *row;
            kernel.name_id = *name;
            kernel.launch = launch_of(scan, 9);
            note_gpu_pid(scan.maybe_integer(18));
            read_graph_ids(scan, 19, kernel);
            sink_.kernel(kernel);
        }
    }

    void note_gpu_pid(std::optional<std::int64_t> global_pid) {
        if (global_pid && gpu_pid_ == 0) gpu_pid_ = pid_of(*global_pid);
    }

    void read_memcpys() {
        const char* table = "CUPTI_ACTIVITY_KIND_MEMCPY";
        if (!has_table(table)) return;
        TableScan scan(
            db_, path_, table, {"start", "end", "deviceId", "streamId", "bytes", "copyKind"},
            {"contextId", "correlationId", "srcKind", "dstKind", "dstDeviceId", "globalPid", "graphId", "graphNodeId"});
        while (scan.next()) {
            std::optional<trace::MemcpyEvent> row = sized_activity<trace::MemcpyEvent>(scan, 6, 4, 7);
            if (!row) continue;
            trace::MemcpyEvent& copy = *row;
            copy.direction = copy_direction(scan.integer(5));
            copy.source_kind = memory_kind(scan.maybe_integer(8));
            copy.destination_kind = memory_kind(scan.maybe_integer(9));
            if (copy.direction == trace::MemcpyDirection::peer_to_peer) {
                std::optional<std::int64_t> peer = scan.maybe_integer(10);
                if (peer && *peer >= 0 && *peer <= 1'000'000) copy.peer_device_id = static_cast<trace::DeviceId>(*peer);
            }
            note_gpu_pid(scan.maybe_integer(11));
            read_graph_ids(scan, 12, copy);
            sink_.memcpy(copy);
        }
    }

    void read_memsets() {
        const char* table = "CUPTI_ACTIVITY_KIND_MEMSET";
        if (!has_table(table)) return;
        TableScan scan(db_, path_, table, {"start", "end", "deviceId", "streamId", "bytes"},
                       {"contextId", "correlationId", "value", "memKind", "globalPid", "graphId", "graphNodeId"});
        while (scan.next()) {
            std::optional<trace::MemsetEvent> row = sized_activity<trace::MemsetEvent>(scan, 5, 4, 6);
            if (!row) continue;
            trace::MemsetEvent& set = *row;
            set.value = static_cast<std::uint32_t>(scan.maybe_integer(7).value_or(0));
            trace::MemoryKind kind = memory_kind(scan.maybe_integer(8));
            set.memory_kind = kind == trace::MemoryKind::unknown ? trace::MemoryKind::device : kind;
            note_gpu_pid(scan.maybe_integer(9));
            read_graph_ids(scan, 10, set);
            sink_.memset(set);
        }
    }

    void read_synchronizations() {
        const char* table = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION";
        if (!has_table(table)) return;
        TableScan scan(db_, path_, table, {"start", "end"},
                       {"deviceId", "streamId", "contextId", "correlationId", "syncType", "eventId"});
        while (scan.next()) {
            std::int64_t start = scan.integer(0), end = scan.integer(1);
            if (!valid_interval(scan, start, end)) continue;
            trace::SyncEvent wait;
            wait.start_ns = start;
            wait.end_ns = end;
            std::int64_t device = scan.maybe_integer(2).value_or(0);
            std::optional<std::int64_t> stream = scan.maybe_integer(3);
            // CUPTI gives stream id -1 (all ones) for a context-wide wait: ember's stream 0.
            if (stream && *stream >= 0 && *stream <= 0xfffffffell && !scan.is_null(2)) {
                auto track = gpu_track(scan, 2, 3, 4);
                if (!track) continue;
                wait.device_id = track->first;
                wait.stream_id = track->second;
            } else {
                wait.device_id = static_cast<trace::DeviceId>(std::clamp<std::int64_t>(device, 0, 1'000'000));
                wait.stream_id = 0;
            }
            wait.correlation_id = correlation_of(scan, 5);
            std::int64_t type = scan.maybe_integer(6).value_or(0);
            wait.kind = type >= 1 && type <= 4 ? static_cast<trace::SyncKind>(type) : trace::SyncKind::unknown;
            std::optional<std::int64_t> event = scan.maybe_integer(7);
            wait.cuda_event_id = event && *event > 0 ? static_cast<std::uint64_t>(*event) : 0;
            sink_.sync(wait);
        }
    }

    // ---------------------------------------------------------------------------
    // [SECTION] NVTX
    // ---------------------------------------------------------------------------

    void read_nvtx() {
        const char* table = "NVTX_EVENTS";
        if (!has_table(table)) return;
        std::initializer_list<const char*> optional = {
            "end",        "category",    "color",      "text",        "globalTid",   "textId",    "domainId",
            "int64Value", "uint64Value", "int32Value", "uint32Value", "doubleValue", "floatValue"};
        // Pass 1: the names the events refer to (domains, categories, threads).
        std::map<std::int64_t, trace::StringId> domains;
        {
            TableScan scan(db_, path_, table, {"start", "eventType"}, optional);
            while (scan.next()) {
                std::int64_t type = scan.integer(1);
                if (type != kNvtxDomainCreate && type != kNvtxCategoryName && type != kNvtxThreadName) continue;
                std::optional<std::string> text = nvtx_text(scan);
                if (!text) continue;
                std::int64_t domain = scan.maybe_integer(8).value_or(0);
                if (type == kNvtxDomainCreate) {
                    domains[domain] = sink_.intern(*text);
                } else if (type == kNvtxThreadName) {
                    std::optional<std::int64_t> global_tid = scan.maybe_integer(6);
                    if (global_tid) sink_.name_thread(pid_of(*global_tid), tid_of(*global_tid), *text);
                } else {
                    category_names_.push_back({domain, scan.maybe_integer(3).value_or(0), *text});
                }
            }
        }
        for (const CategoryName& category : category_names_) {
            auto domain = domains.find(category.domain);
            if (category.domain != 0 && domain == domains.end()) continue;
            sink_.name_nvtx_category(category.domain == 0 ? trace::kNoString : domain->second,
                                     static_cast<std::uint32_t>(category.category), category.name);
        }
        // Pass 2: ranges and marks.
        TableScan scan(db_, path_, table, {"start", "eventType"}, optional);
        while (scan.next()) {
            std::int64_t type = scan.integer(1);
            if (type != kNvtxPushPop && type != kNvtxStartEnd && type != kNvtxMark) {
                if (type != kNvtxDomainCreate && type != kNvtxCategoryName && type != kNvtxThreadName) {
                    sink_.skip(fmt::format("NVTX event type {} (not imported)", type));
                }
                continue;
            }
            std::int64_t start = scan.integer(0);
            if (!valid_interval(scan, start, start)) continue;
            std::int64_t domain = scan.maybe_integer(8).value_or(0);
            trace::StringId domain_id = trace::kNoString;
            if (domain != 0) {
                auto found = domains.find(domain);
                if (found == domains.end()) {
                    reject(
                        scan, "NVTX domain id without a domain",
                        fmt::format("domainId {} names no domain (no domain-create event; an id that points nowhere)",
                                    domain));
                    continue;
                }
                domain_id = found->second;
            }
            std::optional<std::string> text = nvtx_text(scan);
            if (!text) continue;
            trace::StringId name = sink_.intern(*text);
            trace::ThreadId thread = thread_of(scan.maybe_integer(6));
            std::uint32_t category = static_cast<std::uint32_t>(scan.maybe_integer(3).value_or(0));
            std::uint32_t color = static_cast<std::uint32_t>(scan.maybe_integer(4).value_or(0));
            trace::Payload payload = nvtx_payload(scan);
            if (type == kNvtxMark) {
                sink_.mark({start, thread, domain_id, name, category, color, payload});
                continue;
            }
            std::optional<std::int64_t> end = scan.maybe_integer(2);
            if (!end) {
                sink_.skip("NVTX range never ended (end is NULL)");
                continue;
            }
            if (!valid_interval(scan, start, *end)) continue;
            if (type == kNvtxStartEnd) {
                trace::RangeEvent range;
                range.start_ns = start;
                range.end_ns = *end;
                range.thread_id = thread;
                range.domain_id = domain_id;
                range.name_id = name;
                range.category = category;
                range.color = color;
                range.payload = payload;
                sink_.start_end_range(range);
                continue;
            }
            PendingRange range;
            range.start_ns = start;
            range.end_ns = *end;
            range.thread_id = thread;
            range.domain_id = domain_id;
            range.name_id = name;
            range.category = category;
            range.color = color;
            range.payload_kind = payload.kind;
            range.payload_integer = payload.integer;
            range.payload_real = payload.real;
            sink_.nested_range(range);
        }
    }

    // The message: the text column, or a registered string (textId).
    std::optional<std::string> nvtx_text(const TableScan& scan) {
        if (std::optional<std::string> text = scan.maybe_text(5)) return text;
        if (std::optional<std::int64_t> id = scan.maybe_integer(7)) {
            std::optional<std::string> text = lookup_string(*id);
            if (!text) {
                reject(scan, "string id not in StringIds",
                       fmt::format("textId {} is not in StringIds (an id that points nowhere)", *id));
            }
            return text;
        }
        return std::string();
    }

    static trace::Payload nvtx_payload(const TableScan& scan) {
        for (int column : {9, 10, 11, 12}) {
            if (std::optional<std::int64_t> value = scan.maybe_integer(column))
                return trace::Payload::of_integer(*value);
        }
        for (int column : {13, 14}) {
            if (std::optional<double> value = scan.maybe_real(column)) return trace::Payload::of_real(*value);
        }
        return {};
    }

    void read_overhead() {
        const char* table = "PROFILER_OVERHEAD";
        if (!has_table(table)) return;
        TableScan scan(db_, path_, table, {"start", "end"}, {"globalTid", "nameId"});
        while (scan.next()) {
            std::int64_t start = scan.integer(0), end = scan.integer(1);
            if (!valid_interval(scan, start, end)) continue;
            std::optional<trace::StringId> name;
            if (std::optional<std::int64_t> id = scan.maybe_integer(3)) name = name_of(scan, "nameId", *id);
            if (!name) name = sink_.intern("nsys overhead");
            std::optional<std::int64_t> global_tid = scan.maybe_integer(2);
            sink_.overhead(
                {start, end, sink_.thread(pid_of(global_tid.value_or(0)), tid_of(global_tid.value_or(0))), *name});
        }
    }

    // ---------------------------------------------------------------------------
    // [SECTION] CPU side: samples with call chains, OS runtime calls, CUDA graph events
    // ---------------------------------------------------------------------------

    // The first of `columns` that `table` lacks; nullopt when it has them all.
    std::optional<std::string> missing_column(const std::string& table, std::initializer_list<const char*> columns) {
        std::set<std::string> present;
        store::Statement info(db_, path_, fmt::format("PRAGMA table_info(\"{}\")", table));
        while (info.next_row()) present.insert(info.column_text(1));
        for (const char* column : columns) {
            if (!present.count(column)) return std::string(column);
        }
        return std::nullopt;
    }

    std::int64_t row_count(const std::string& table) {
        store::Statement count(db_, path_, fmt::format("SELECT COUNT(*) FROM \"{}\"", table));
        return count.next_row() ? count.column_int64(0) : 0;
    }

    // A table of the CPU side that lacks a column it needs is not read (the CUDA half
    // still is): its rows are counted as not imported, naming the column.
    bool readable(const std::string& table, std::initializer_list<const char*> columns) {
        std::optional<std::string> missing = missing_column(table, columns);
        if (!missing) return true;
        if (std::int64_t rows = row_count(table); rows > 0)
            sink_.skip(fmt::format("{} rows (not imported: the table has no column {})", table, *missing), rows);
        unread_tables_.insert(table);
        return false;
    }

    // COMPOSITE_EVENTS (one row per sample: id, start, globalTid) and SAMPLING_CALLCHAINS
    // (its frames: id, stackDepth 0 = the innermost, symbol and module as StringIds) ->
    // stack_samples on the thread, each frame interned once per (symbol, module). Both
    // are read in id order side by side, so memory holds one call chain at a time.
    void read_cpu_samples() {
        const char* samples_table = "COMPOSITE_EVENTS";
        const char* chains_table = "SAMPLING_CALLCHAINS";
        if (!has_table(samples_table)) return;
        if (!readable(samples_table, {"id", "start"})) return;
        if (!has_table(chains_table)) {
            if (std::int64_t rows = row_count(samples_table); rows > 0)
                sink_.skip("COMPOSITE_EVENTS rows (not imported: no SAMPLING_CALLCHAINS table)", rows);
            unread_tables_.insert(samples_table);
            return;
        }
        if (!readable(chains_table, {"id", "symbol", "stackDepth"})) {
            if (std::int64_t rows = row_count(samples_table); rows > 0)
                sink_.skip("COMPOSITE_EVENTS rows (not imported)", rows);
            unread_tables_.insert(samples_table);
            return;
        }
        TableScan samples(db_, path_, samples_table, {"id", "start"}, {"globalTid"}, "id");
        TableScan chains(db_, path_, chains_table, {"id", "symbol", "stackDepth"}, {"module", "originalIP"},
                         "id,stackDepth");
        std::map<std::pair<std::int64_t, std::int64_t>, trace::FrameId> frames;
        std::vector<trace::FrameId> chain;  // innermost first, as stored
        bool chain_row = chains.next();
        std::int64_t orphan_frames = 0;
        while (samples.next()) {
            const std::int64_t id = samples.integer(0);
            const std::int64_t time = samples.integer(1);
            chain.clear();
            bool bad = false;
            while (chain_row && chains.integer(0) < id) {
                ++orphan_frames;
                chain_row = chains.next();
            }
            while (chain_row && chains.integer(0) == id) {
                if (!bad) {
                    std::optional<trace::FrameId> frame = frame_of(chains, frames);
                    if (frame)
                        chain.push_back(*frame);
                    else
                        bad = true;
                }
                chain_row = chains.next();
            }
            if (bad) continue;
            if (!valid_interval(samples, time, time)) continue;
            if (chain.empty()) {
                sink_.skip("CPU sample without a call chain (no SAMPLING_CALLCHAINS rows)");
                continue;
            }
            std::reverse(chain.begin(), chain.end());
            trace::StackSample sample;
            sample.time_ns = time;
            sample.thread_id = thread_of(samples.maybe_integer(2));
            sample.stack_id = sink_.stack(chain);
            sink_.stack_sample(sample);
        }
        while (chain_row) {
            ++orphan_frames;
            chain_row = chains.next();
        }
        if (orphan_frames > 0) sink_.skip("SAMPLING_CALLCHAINS rows of no sample in COMPOSITE_EVENTS", orphan_frames);
    }

    // One frame of a call chain, interned once per (symbol, module); nullopt after a
    // skipped bad row.
    std::optional<trace::FrameId> frame_of(const TableScan& chains,
                                           std::map<std::pair<std::int64_t, std::int64_t>, trace::FrameId>& frames) {
        const std::int64_t symbol = chains.integer(1);
        const std::int64_t module = chains.maybe_integer(3).value_or(-1);
        auto found = frames.find({symbol, module});
        if (found != frames.end()) return found->second;
        std::optional<std::string> function = lookup_string(symbol);
        if (!function) {
            reject(chains, "string id not in StringIds",
                   fmt::format("symbol {} is not in StringIds (an id that points nowhere)", symbol));
            return std::nullopt;
        }
        std::string module_name;
        if (module >= 0) {
            std::optional<std::string> text = lookup_string(module);
            if (!text) {
                reject(chains, "string id not in StringIds",
                       fmt::format("module {} is not in StringIds (an id that points nowhere)", module));
                return std::nullopt;
            }
            module_name = *text;
        }
        const std::uint64_t address = static_cast<std::uint64_t>(chains.maybe_integer(4).value_or(0));
        trace::FrameId frame = sink_.frame(*function, module_name, address);
        frames.emplace(std::make_pair(symbol, module), frame);
        return frame;
    }

    // OSRT_API: the OS runtime calls nsys traces (pthread locks, poll, sleep, read,
    // ioctl, ...) -> host ranges of the domain "OS runtime", nested by time on their
    // thread with the NVTX ranges; the return value is the payload.
    void read_os_runtime() { read_host_ranges("OSRT_API", kOsRuntimeDomain, "returnValue", false); }

    // A table of host calls (start, end, nameId, globalTid) -> ranges of `domain_name`
    // nested by time on their thread, the integer `payload_column` (when the table has
    // it and the row holds one) as payload; `api_names` drops nsys' _v suffix.
    void read_host_ranges(const char* table, const char* domain_name, const char* payload_column, bool api_names) {
        if (!has_table(table)) return;
        if (!readable(table, {"start", "end", "nameId"})) return;
        TableScan scan(db_, path_, table, {"start", "end", "nameId"}, {"globalTid", payload_column});
        const trace::StringId domain = sink_.intern(domain_name);
        while (scan.next()) {
            std::int64_t start = scan.integer(0), end = scan.integer(1);
            if (!valid_interval(scan, start, end)) continue;
            std::optional<trace::StringId> name = name_of(scan, "nameId", scan.integer(2), api_names);
            if (!name) continue;
            PendingRange range;
            range.start_ns = start;
            range.end_ns = end;
            range.thread_id = thread_of(scan.maybe_integer(3));
            range.domain_id = domain;
            range.name_id = *name;
            if (std::optional<std::int64_t> payload = scan.maybe_integer(4)) {
                range.payload_kind = trace::PayloadKind::integer;
                range.payload_integer = *payload;
            }
            sink_.nested_range(range);
        }
    }

    // SCHED_EVENTS: a thread put on (isSchedIn 1) or taken off (0) a CPU -> one counter
    // per thread, "on CPU (tid N)", 1 from a schedule-in to the next schedule-out and 0
    // after; the CPU number is not kept. Rows are read in time order.
    void read_scheduling() {
        const char* table = "SCHED_EVENTS";
        if (!has_table(table)) return;
        if (!readable(table, {"start", "isSchedIn"})) return;
        TableScan scan(db_, path_, table, {"start", "isSchedIn"}, {"globalTid"}, "start");
        std::unordered_map<std::int64_t, trace::CounterId> counters;  // by globalTid
        while (scan.next()) {
            const std::int64_t time = scan.integer(0);
            if (!valid_interval(scan, time, time)) continue;
            const std::int64_t global_tid = scan.maybe_integer(2).value_or(0);
            auto found = counters.find(global_tid);
            if (found == counters.end()) {
                thread_of(global_tid);  // the thread is registered like any other of the file
                trace::CounterId id =
                    sink_.counter(fmt::format("on CPU (tid {})", tid_of(global_tid)), "running", trace::kNoDevice);
                found = counters.emplace(global_tid, id).first;
            }
            sink_.counter_sample({found->second, time, scan.integer(1) != 0 ? 1.0 : 0.0});
        }
    }

    // CUDA_GPU_MEMORY_USAGE_EVENTS (nsys --cuda-memory-usage=true): one row per allocation
    // or free, and CUDA_GPU_MEMORY_POOL_EVENTS (a stream-ordered pool created, trimmed or
    // destroyed) -> memory_events of device memory (memKind device or device static;
    // host, managed and array memory are counted as skipped; the gpu_memory report and
    // the viewer's memory lane replay them, so no counter is made of them):
    //  - memoryOperationType (through ENUM_CUDA_DEV_MEM_EVENT_OPER where the file has it:
    //    a name with DEALLOC or FREE is a free; else 0 = allocation, 1 = free): an
    //    allocation -> alloc, a free -> free_completed, of `bytes` at `address`;
    //  - memory not taken from a pool (localMemoryPoolAddress and importedMemoryPoolAddress
    //    NULL or 0: cudaMalloc, cuMemAlloc) is reserved from the driver as it is
    //    allocated: each such alloc also gives a segment_alloc, and its free a
    //    segment_free, of the same block, so reserved = allocated for it;
    //  - a pool's reserved memory is its localMemoryPoolSize, on rows of either table:
    //    each change of it is a segment_alloc / segment_free at the pool's address, and
    //    a pool destroyed releases what it held; memory of a pool imported from another
    //    process is allocated here but reserved there;
    //  - the thread is that of the runtime (else driver) call whose correlationId the row
    //    names (0 when none matches), the stream `streamId` where the export has it;
    //  - a free of a block the capture never allocated was allocated before it began:
    //    live_at_start 1 ns before the device's first event (as Kineto's).
    struct PoolEvent {
        std::int64_t time = 0;
        std::int64_t pid = 0;
        trace::DeviceId device = 0;
        std::uint64_t address = 0;
        bool destroyed = false;
        std::optional<std::int64_t> size;  // localMemoryPoolSize
        trace::CorrelationId correlation = 0;
    };

    struct DeviceMemory {
        std::int64_t first_ns = std::numeric_limits<std::int64_t>::max();
        std::map<std::pair<std::int64_t, std::uint64_t>, std::int64_t> live;  // (pid, address) -> bytes
        struct LiveAtStart {
            std::uint64_t address = 0;
            std::int64_t bytes = 0;
            bool reserved_by_driver = false;  // not a pool's block: its segment was live too
        };
        std::vector<LiveAtStart> live_at_start;
    };

    static constexpr const char* kMemoryUsageTable = "CUDA_GPU_MEMORY_USAGE_EVENTS";
    static constexpr const char* kMemoryPoolTable = "CUDA_GPU_MEMORY_POOL_EVENTS";

    // The correlation ids the memory tables name, so read_runtime keeps the thread of
    // those calls only (memory in proportion to the memory rows, not to the API calls).
    void collect_memory_correlations() {
        for (const char* table : {kMemoryUsageTable, kMemoryPoolTable}) {
            if (!has_table(table)) continue;
            TableScan scan(db_, path_, table, {}, {"correlationId"});
            if (!scan.has(0)) continue;
            while (scan.next()) {
                trace::CorrelationId id = correlation_of(scan, 0);
                if (id != 0) memory_call_threads_.emplace(id, trace::ThreadId{0});
            }
        }
    }

    trace::ThreadId memory_call_thread(trace::CorrelationId id) const {
        auto found = memory_call_threads_.find(id);
        return found == memory_call_threads_.end() ? 0 : found->second;
    }

    // A row's device memory kind: memKind through ENUM_CUDA_MEM_KIND (device and device
    // static are device memory); a table without the column holds device memory only.
    bool device_memory(const TableScan& scan, int column) const {
        if (!scan.has(column)) return true;
        return memory_kind(scan.maybe_integer(column)) == trace::MemoryKind::device;
    }

    std::vector<PoolEvent> read_pool_events() {
        std::vector<PoolEvent> events;
        if (!has_table(kMemoryPoolTable)) return events;
        if (!readable(kMemoryPoolTable, {"start", "deviceId", "address", "operationType"})) return events;
        std::map<std::int64_t, bool> destroys = {{2, true}};  // ENUM_CUDA_MEMPOOL_OPER as nsys writes it
        if (has_table("ENUM_CUDA_MEMPOOL_OPER")) {
            destroys.clear();
            for (const auto& [id, text] : enum_labels("ENUM_CUDA_MEMPOOL_OPER"))
                destroys[id] = text.find("DESTROY") != std::string::npos;
        }
        TableScan scan(db_, path_, kMemoryPoolTable, {"start", "globalPid", "deviceId", "address", "operationType"},
                       {"localMemoryPoolSize", "correlationId"}, "start");
        while (scan.next()) {
            PoolEvent event;
            event.time = scan.integer(0);
            if (!valid_interval(scan, event.time, event.time)) continue;
            std::optional<trace::DeviceId> device = device_ordinal(scan, scan.maybe_integer(2));
            if (!device) continue;
            event.pid = pid_of(scan.maybe_integer(1).value_or(0));
            event.device = *device;
            event.address = static_cast<std::uint64_t>(scan.maybe_integer(3).value_or(0));
            auto destroy = destroys.find(scan.integer(4));
            event.destroyed = destroy != destroys.end() && destroy->second;
            event.size = scan.maybe_integer(5);
            if (event.size && *event.size < 0) event.size.reset();
            event.correlation = correlation_of(scan, 6);
            events.push_back(event);
        }
        return events;
    }

    // A pool's reserved size is now `size` (nullopt: unknown, nothing changes; a
    // destroyed pool holds nothing).
    void pool_size(std::int64_t time, trace::DeviceId device, std::int64_t pid, std::uint64_t address,
                   std::optional<std::int64_t> size, trace::ThreadId thread) {
        if (!size) return;
        std::int64_t& held = pool_sizes_[{pid, device, address}];
        if (*size == held) return;
        trace::MemoryEvent segment;
        segment.time_ns = time;
        segment.device_id = device;
        segment.address = address;
        segment.action = *size > held ? trace::MemoryAction::segment_alloc : trace::MemoryAction::segment_free;
        segment.bytes = *size > held ? *size - held : held - *size;
        segment.thread_id = thread;
        sink_.memory_event(segment);
        held = *size;
    }

    void pool_event(const PoolEvent& event, std::map<trace::DeviceId, DeviceMemory>& devices) {
        DeviceMemory& memory = devices[event.device];
        memory.first_ns = std::min(memory.first_ns, event.time);
        const trace::ThreadId thread = memory_call_thread(event.correlation);
        pool_size(event.time, event.device, event.pid, event.address,
                  event.destroyed ? std::optional<std::int64_t>(0) : event.size, thread);
    }

    void read_gpu_memory_usage() {
        std::vector<PoolEvent> pool_events = read_pool_events();
        std::size_t next_pool_event = 0;
        std::map<trace::DeviceId, DeviceMemory> devices;
        auto pool_events_until = [&](std::int64_t time) {
            for (; next_pool_event < pool_events.size() && pool_events[next_pool_event].time <= time; ++next_pool_event)
                pool_event(pool_events[next_pool_event], devices);
        };
        if (has_table(kMemoryUsageTable) &&
            readable(kMemoryUsageTable, {"start", "deviceId", "bytes", "memoryOperationType"})) {
            std::map<std::int64_t, bool> frees = {{0, false}, {1, true}};
            if (has_table("ENUM_CUDA_DEV_MEM_EVENT_OPER")) {
                frees.clear();
                for (const auto& [id, text] : enum_labels("ENUM_CUDA_DEV_MEM_EVENT_OPER"))
                    frees[id] = text.find("DEALLOC") != std::string::npos || text.find("FREE") != std::string::npos;
            }
            enum Column {
                start,
                device_id,
                bytes,
                operation,
                global_pid,
                address,
                mem_kind,
                correlation,
                stream,
                pool_address,
                pool_size_column,
                imported_pool
            };
            TableScan scan(db_, path_, kMemoryUsageTable, {"start", "deviceId", "bytes", "memoryOperationType"},
                           {"globalPid", "address", "memKind", "correlationId", "streamId", "localMemoryPoolAddress",
                            "localMemoryPoolSize", "importedMemoryPoolAddress"},
                           "start");
            while (scan.next()) {
                const std::int64_t time = scan.integer(start);
                if (!valid_interval(scan, time, time)) continue;
                std::optional<std::uint64_t> size = byte_count(scan, bytes);
                if (!size) continue;
                auto kind = frees.find(scan.integer(operation));
                if (kind == frees.end()) {
                    reject(scan, "unknown memory operation",
                           fmt::format("memoryOperationType {} is neither an allocation nor a free",
                                       scan.integer(operation)));
                    continue;
                }
                if (!device_memory(scan, mem_kind)) {
                    sink_.skip("CUDA_GPU_MEMORY_USAGE_EVENTS rows of host or managed memory");
                    continue;
                }
                std::optional<trace::DeviceId> device = device_ordinal(scan, scan.maybe_integer(device_id));
                if (!device) continue;
                pool_events_until(time);
                const bool free = kind->second;
                const std::int64_t pid = pid_of(scan.maybe_integer(global_pid).value_or(0));
                const auto block_address = static_cast<std::uint64_t>(scan.maybe_integer(address).value_or(0));
                const auto change = static_cast<std::int64_t>(std::min<std::uint64_t>(*size, kLargestTimeNs));
                DeviceMemory& memory = devices[*device];
                memory.first_ns = std::min(memory.first_ns, time);

                trace::MemoryEvent event;
                event.time_ns = time;
                event.device_id = *device;
                event.action = free ? trace::MemoryAction::free_completed : trace::MemoryAction::alloc;
                event.address = block_address;
                event.bytes = change;
                event.cuda_stream =
                    static_cast<std::uint64_t>(std::max<std::int64_t>(0, scan.maybe_integer(stream).value_or(0)));
                event.thread_id = memory_call_thread(correlation_of(scan, correlation));
                sink_.memory_event(event);
                const std::int64_t pool = scan.maybe_integer(pool_address).value_or(0);
                const std::int64_t imported = scan.maybe_integer(imported_pool).value_or(0);
                if (free) {
                    if (memory.live.erase({pid, block_address}) == 0)
                        memory.live_at_start.push_back({block_address, change, pool == 0 && imported == 0});
                } else {
                    memory.live.insert_or_assign({pid, block_address}, change);
                }
                if (pool != 0) {
                    pool_size(time, *device, pid, static_cast<std::uint64_t>(pool),
                              scan.maybe_integer(pool_size_column), event.thread_id);
                } else if (imported == 0) {
                    trace::MemoryEvent segment = event;
                    segment.action = free ? trace::MemoryAction::segment_free : trace::MemoryAction::segment_alloc;
                    sink_.memory_event(segment);
                }
            }
        }
        pool_events_until(std::numeric_limits<std::int64_t>::max());
        // Blocks freed but never allocated in the capture were live when it began: at
        // their addresses, 1 ns before the device's first event, with the segment a
        // driver allocation reserved (a pool block's pool was sized by its own rows).
        for (const auto& [device, memory] : devices) {
            for (const DeviceMemory::LiveAtStart& block : memory.live_at_start) {
                trace::MemoryEvent event;
                event.time_ns = memory.first_ns - 1;
                event.device_id = device;
                event.action = trace::MemoryAction::live_at_start;
                event.address = block.address;
                event.bytes = block.bytes;
                sink_.memory_event(event);
                if (!block.reserved_by_driver) continue;
                event.action = trace::MemoryAction::segment_live_at_start;
                sink_.memory_event(event);
            }
        }
    }

    // CUDA_GRAPH_EVENTS (a graph created, cloned, instantiated, destroyed: graphId,
    // originalGraphId, graphExecId) and CUDA_GRAPH_NODE_EVENTS (a node created or cloned:
    // graphNodeId, originalGraphNodeId), both written with --cuda-graph-trace: host-side
    // work on the thread that did it -> host ranges of the domain "CUDA graphs", named
    // by nameId (an API name without its _v suffix), nested with the NVTX and OS
    // runtime ranges; the payload is the graph's or node's id, the one the kernels'
    // graph_id / graph_node_id hold.
    void read_graph_events(const char* table, const char* id_column) {
        read_host_ranges(table, kCudaGraphsDomain, id_column, true);
    }

    // ---------------------------------------------------------------------------
    // [SECTION] What is not imported
    // ---------------------------------------------------------------------------

    void count_unimported_tables() {
        static const std::set<std::string> kImported = {"CUPTI_ACTIVITY_KIND_RUNTIME",
                                                        "CUPTI_ACTIVITY_KIND_DRIVER",
                                                        "CUPTI_ACTIVITY_KIND_KERNEL",
                                                        "CUPTI_ACTIVITY_KIND_MEMCPY",
                                                        "CUPTI_ACTIVITY_KIND_MEMSET",
                                                        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
                                                        "COMPOSITE_EVENTS",
                                                        "OSRT_API",
                                                        "SCHED_EVENTS",
                                                        "CUDA_GPU_MEMORY_USAGE_EVENTS",
                                                        "CUDA_GPU_MEMORY_POOL_EVENTS",
                                                        "CUDA_GRAPH_EVENTS",
                                                        "CUDA_GRAPH_NODE_EVENTS"};
        // OSRT_CALLCHAINS: the call stack of each OS runtime call (OSRT_API.callchainId);
        // ember keeps stacks only as CPU samples, so these are counted, not read.
        static const std::set<std::string> kActivityTables = {"COMPOSITE_EVENTS",
                                                              "SCHED_EVENTS",
                                                              "OSRT_API",
                                                              "OSRT_CALLCHAINS",
                                                              "CUDA_GPU_MEMORY_USAGE_EVENTS",
                                                              "CUDA_GPU_MEMORY_POOL_EVENTS",
                                                              "GPU_METRICS",
                                                              "CUDA_GRAPH_EVENTS",
                                                              "CUDA_GRAPH_NODE_EVENTS",
                                                              "MPI_P2P_EVENTS",
                                                              "MPI_COLLECTIVES_EVENTS",
                                                              "NVTX_PAYLOAD_SCHEMAS",
                                                              "UNIFIED_MEMORY_PAGE_FAULTS"};
        for (const std::string& table : tables_) {
            if (unread_tables_.count(table)) continue;  // counted already, with the reason
            bool activity = (table.rfind("CUPTI_ACTIVITY_KIND_", 0) == 0 || kActivityTables.count(table) != 0) &&
                            !kImported.count(table);
            if (!activity) continue;
            store::Statement count(db_, path_, fmt::format("SELECT COUNT(*) FROM \"{}\"", table));
            if (count.next_row() && count.column_int64(0) > 0) {
                sink_.skip(fmt::format("{} rows (not imported)", table), count.column_int64(0));
            }
        }
    }

    void finish() {
        trace::RunInfo& run = sink_.run();
        const ImportOptions& options = sink_.options();
        run.rank = options.rank.value_or(launcher_rank_.value_or(0));
        run.world_size = options.world_size.value_or(launcher_world_size_.value_or(1));
        if (options.rank)
            run.rank_source = "--rank";
        else if (launcher_rank_)
            run.rank_source = launcher_rank_source_;
        run.pid = gpu_pid_ != 0 ? gpu_pid_ : main_pid_;
        if (session_start_) run.start_ns = *session_start_;
        if (session_stop_)
            run.end_ns = std::max(*session_stop_, sink_.any_event() ? sink_.latest_ns() : *session_stop_);
        for (std::int64_t pid : used_pids_) {
            auto name = process_names_.find(pid);
            if (name != process_names_.end()) sink_.name_process(pid, name->second);
        }
        auto name = process_names_.find(run.pid);
        if (name != process_names_.end()) run.command_line = name->second;
    }

    struct CategoryName {
        std::int64_t domain = 0;
        std::int64_t category = 0;
        std::string name;
    };

    std::set<std::string> unread_tables_;  // known tables left unread, counted with the reason
    store::Statement strings_query_;
    std::unordered_map<std::int64_t, trace::StringId> names_;
    std::unordered_map<std::int64_t, trace::StringId> api_names_;
    std::map<trace::DeviceId, trace::DeviceInfo> devices_;
    std::map<std::int64_t, trace::MemoryKind> memory_kinds_;
    std::map<std::int64_t, trace::MemcpyDirection> copy_directions_;
    std::map<std::int64_t, std::string> process_names_;
    std::set<std::int64_t> used_pids_;
    std::unordered_map<trace::CorrelationId, trace::ThreadId> memory_call_threads_;  // correlation -> thread
    std::map<std::tuple<std::int64_t, trace::DeviceId, std::uint64_t>, std::int64_t>
        pool_sizes_;  // (pid, device, pool)
    std::vector<CategoryName> category_names_;
    std::optional<std::int32_t> launcher_rank_, launcher_world_size_;
    std::string launcher_rank_source_;
    std::optional<std::int64_t> session_start_;
    std::optional<std::int64_t> session_stop_;
    std::int64_t main_pid_ = 0;
    std::int64_t gpu_pid_ = 0;
};

}  // namespace

void import_nsys_sqlite(ImportSink& sink) {
    NsysImporter importer(sink);
    importer.run();
}

}  // namespace ember::importing
