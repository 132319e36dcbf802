// nvprof_importer.cpp: nvprof database (`nvprof -o FILE.nvvp`, also `.prof`; the
// `Version` table says 18 to 22 in the files seen) -> ember trace.
//
// nvprof writes CUPTI's activity records as they are, one table per kind
// (CUPTI_ACTIVITY_KIND_*), with names as ids into StringTable (kernel names mangled)
// and API calls as CUPTI callback ids (named from the toolkit's CUPTI headers:
// cupti_cbid_names.inc). Timestamps are ns; the host's are Unix time.
//
// Clocks. A device's timestamps are not always on the host's clock: in public files the
// kernels start days after the calls that launched them, and two GPUs of one process
// disagree by seconds. A kernel never starts before its launch, and starts within
// microseconds of it when the queue is empty, so a device whose earliest start relative
// to its launching call (over every kernel, copy and memset linked by correlation id)
// is negative, or over a second, is put on the host's clock: its GPU records move by
// that amount, so the earliest starts exactly at its launch. The import's notes say
// what was applied.
//
// Index:
//   [SECTION] Names and CUPTI's enumerations
//   [SECTION] The importer: strings, devices, threads
//   [SECTION] CUDA: API calls, kernels, copies, memsets, synchronizations
//   [SECTION] NVTX markers
//   [SECTION] Overhead, what is not imported, the run
#include "profiler/import/importers.h"

#include "common/text.h"
#include "profiler/import/decimal_time.h"
#include "profiler/import/range_nesting.h"
#include "profiler/import/cupti_rows.h"

#include "cupti_cbid_names.inc"

#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

namespace ember::importing {

using store::TraceError;
using store::TraceErrorKind;

namespace {

// ---------------------------------------------------------------------------
// [SECTION] Names and CUPTI's enumerations
// ---------------------------------------------------------------------------

// The newest `Version` seen (CUDA 11.x nvprof); a newer one is read all the same, with a note.
constexpr std::int64_t kNewestVersion = 22;
constexpr const char* kUnknownSchema = "an nvprof database schema this importer does not know";
// GPU records further than this from their launch are on another clock.
constexpr trace::TimeNs kClockDisagreement = 1'000'000'000;

// An API call's name by its CUPTI callback id, from one of the generated tables.
template <std::size_t N>
std::string api_name(const CbidName (&table)[N], std::int64_t cbid, const char* what) {
    for (const CbidName& entry : table)
        if (entry.id == cbid && entry.name[0] != '\0') return entry.name;
    return fmt::format("{} API call (CUPTI callback id {})", what, cbid);
}

// A kernel's name as ImportOptions::kernel_names asks: nvprof keeps it mangled
// ("_Z16dslashKernelFuncPvS_S_iiiiiiiiid"); demangled it reads
// "dslashKernelFunc(void*, void*, void*, int, ...)", short "dslashKernelFunc".
std::string kernel_name(const std::string& mangled, KernelNameStyle style) {
    if (style == KernelNameStyle::mangled) return mangled;
    std::string name = text::demangled(mangled.c_str());
    if (style != KernelNameStyle::short_name) return name;
    // The function's own name: before its parameters, without a return type, template
    // arguments or namespaces.
    int depth = 0;
    std::size_t end = name.size();
    for (std::size_t i = 0; i < name.size(); ++i) {
        if (name[i] == '<')
            ++depth;
        else if (name[i] == '>')
            --depth;
        else if (name[i] == '(' && depth == 0) {
            end = i;
            break;
        }
    }
    std::string head = name.substr(0, end);
    if (!head.empty() && head.back() == '>') {
        depth = 0;
        for (std::size_t i = head.size(); i-- > 0;) {
            if (head[i] == '>')
                ++depth;
            else if (head[i] == '<' && --depth == 0) {
                head.resize(i);
                break;
            }
        }
    }
    const std::size_t space = head.rfind(' ');
    if (space != std::string::npos) head = head.substr(space + 1);
    const std::size_t scope = head.rfind("::");
    if (scope != std::string::npos) head = head.substr(scope + 2);
    return head.empty() ? name : head;
}

// CUpti_ActivityMemoryKind: 1 pageable, 2 pinned, 3 device, 4 array, 5 managed,
// 6 device static, 7 managed static.
trace::MemoryKind memory_kind(std::optional<std::int64_t> kind) {
    switch (kind.value_or(0)) {
        case 1:
            return trace::MemoryKind::pageable;
        case 2:
            return trace::MemoryKind::pinned;
        case 3:
        case 6:
            return trace::MemoryKind::device;
        case 4:
            return trace::MemoryKind::array;
        case 5:
        case 7:
            return trace::MemoryKind::managed;
        default:
            return trace::MemoryKind::unknown;
    }
}

// CUpti_ActivityOverheadKind.
std::string overhead_name(std::int64_t kind) {
    switch (kind) {
        case 1:
            return "CUPTI overhead: driver compiler";
        case 1 << 16:
            return "CUPTI overhead: buffer flush";
        case 2 << 16:
            return "CUPTI overhead: instrumentation";
        case 3 << 16:
            return "CUPTI overhead: resource";
        default:
            return fmt::format("CUPTI overhead (kind {})", kind);
    }
}

constexpr std::int64_t kObjectProcess = 1;         // CUPTI_ACTIVITY_OBJECT_PROCESS
constexpr std::int64_t kObjectThread = 2;          // CUPTI_ACTIVITY_OBJECT_THREAD
constexpr std::int64_t kMarkerInstant = 1;         // CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS
constexpr std::int64_t kMarkerStart = 2;           // CUPTI_ACTIVITY_FLAG_MARKER_START
constexpr std::int64_t kMarkerEnd = 4;             // CUPTI_ACTIVITY_FLAG_MARKER_END
constexpr std::uint32_t kInvalidId = 0xFFFFFFFFu;  // CUPTI_SYNCHRONIZATION_INVALID_VALUE

// The (process, thread) an objectId blob names: CUpti_ActivityObjectKindId, whose
// first two 32-bit words are the process id and the thread id.
std::optional<std::pair<std::uint32_t, std::uint32_t>> process_and_thread(const std::string& blob) {
    if (blob.size() < 8) return std::nullopt;
    std::uint32_t words[2];
    std::memcpy(words, blob.data(), sizeof words);
    return std::make_pair(words[0], words[1]);
}

// ---------------------------------------------------------------------------
// [SECTION] The importer: strings, devices, threads
// ---------------------------------------------------------------------------

class NvprofImporter : private CuptiRows {
  public:
    explicit NvprofImporter(ImportSink& sink) : CuptiRows(sink, "the nvprof database", "1970") {}

    void run() {
        open();
        read_version();
        read_strings();
        read_devices();
        read_names();
        clock_shifts();
        read_api("CUPTI_ACTIVITY_KIND_RUNTIME", kRuntimeCbidNames, "runtime");
        read_api("CUPTI_ACTIVITY_KIND_DRIVER", kDriverCbidNames, "driver");
        read_kernels("CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL");
        read_kernels("CUPTI_ACTIVITY_KIND_KERNEL");
        read_memcpys("CUPTI_ACTIVITY_KIND_MEMCPY");
        read_memcpys("CUPTI_ACTIVITY_KIND_MEMCPY2");
        read_memsets();
        read_synchronizations();
        read_markers();
        read_overhead();
        count_unimported_tables();
        finish();
    }

  private:
    // Whether `table` has every one of `columns` (a file that lacks one is read without it).
    bool has_columns(const std::string& table, std::initializer_list<const char*> columns) const {
        std::set<std::string> present;
        store::Statement info(db_, path_, fmt::format("PRAGMA table_info(\"{}\")", table));
        while (info.next_row()) present.insert(info.column_text(1));
        return std::all_of(columns.begin(), columns.end(),
                           [&](const char* column) { return present.count(column) > 0; });
    }
    bool has_rows(const std::string& name) const {
        if (!has_table(name)) return false;
        store::Statement any(db_, path_, fmt::format("SELECT 1 FROM \"{}\" LIMIT 1", name));
        return any.next_row();
    }

    void open() {
        open_database();
        if (!has_table("StringTable")) {
            throw TraceError(TraceErrorKind::missing_table, path_, "has no StringTable: not an nvprof database");
        }
    }

    void read_version() {
        if (!has_table("Version")) {
            sink_.note("no Version table: read as the nvprof schema it resembles");
            return;
        }
        store::Statement version(db_, path_, "SELECT * FROM Version LIMIT 1");
        if (version.next_row() && version.column_type(0) == SQLITE_INTEGER) {
            version_ = version.column_int64(0);
            if (version_ > kNewestVersion)
                sink_.note(
                    fmt::format("nvprof database version {} is newer than any this importer has seen ({}): read "
                                "for the tables and columns it knows",
                                version_, kNewestVersion));
        }
    }

    void read_strings() {
        TableScan scan(db_, path_, "StringTable", {"_id_", "value"}, {}, {}, kUnknownSchema);
        while (scan.next()) {
            const std::optional<std::int64_t> id = scan.maybe_integer(0);
            if (!id) continue;
            strings_[*id] = scan.maybe_text(1).value_or("");
        }
    }

    // A string id of a row: its text, or nullopt (rejected) when it points nowhere.
    std::optional<std::string> string_of(const TableScan& scan, const char* column, std::int64_t id) {
        auto found = strings_.find(id);
        if (found != strings_.end()) return found->second;
        reject(scan, "string id not in StringTable",
               fmt::format("{} {} is not in StringTable (an id that points nowhere)", column, id));
        return std::nullopt;
    }

    void read_devices() {
        if (has_table("CUPTI_ACTIVITY_KIND_CONTEXT")) {
            TableScan scan(db_, path_, "CUPTI_ACTIVITY_KIND_CONTEXT", {"contextId", "deviceId"}, {"nullStreamId"}, {},
                           kUnknownSchema);
            while (scan.next()) {
                const std::int64_t context = scan.integer(0), device = scan.integer(1);
                context_device_[context] = device;
                if (std::optional<std::int64_t> null_stream = scan.maybe_integer(2))
                    null_streams_.insert({device, *null_stream});
            }
        }
        if (has_table("CUPTI_ACTIVITY_KIND_DEVICE")) {
            TableScan scan(db_, path_, "CUPTI_ACTIVITY_KIND_DEVICE", {"id"},
                           {"name", "globalMemorySize", "globalMemoryBandwidth", "numMultiprocessors",
                            "computeCapabilityMajor", "computeCapabilityMinor"},
                           {}, kUnknownSchema);
            while (scan.next()) {
                const std::int64_t id = scan.integer(0);
                if (id < 0 || id > 1'000'000) {
                    reject(scan, "impossible device id", fmt::format("id {} is not a CUDA device ordinal", id));
                    continue;
                }
                trace::DeviceInfo device;
                device.device_id = static_cast<trace::DeviceId>(id);
                if (std::optional<std::int64_t> name = scan.maybe_integer(1)) {
                    if (std::optional<std::string> text = string_of(scan, "name", *name)) device.name = *text;
                }
                device.memory_bytes = scan.maybe_integer(2).value_or(0);
                // CUPTI gives the bandwidth in kB/s (732160000 for a P100's 732 GB/s).
                device.memory_bandwidth_bytes_per_second =
                    static_cast<double>(scan.maybe_integer(3).value_or(0)) * 1000.0;
                device.multiprocessor_count = static_cast<std::int32_t>(scan.maybe_integer(4).value_or(0));
                device.compute_capability_major = static_cast<std::int32_t>(scan.maybe_integer(5).value_or(0));
                device.compute_capability_minor = static_cast<std::int32_t>(scan.maybe_integer(6).value_or(0));
                sink_.describe_device(device);
            }
        }
        if (has_table("CUPTI_ACTIVITY_KIND_STREAM")) {
            TableScan scan(db_, path_, "CUPTI_ACTIVITY_KIND_STREAM", {"contextId", "streamId"}, {"priority"}, {},
                           kUnknownSchema);
            while (scan.next()) {
                if (std::optional<std::int64_t> priority = scan.maybe_integer(2))
                    stream_priorities_[{scan.integer(0), scan.integer(1)}] = static_cast<std::int32_t>(*priority);
            }
        }
    }

    // Process and thread names (CUPTI_ACTIVITY_KIND_NAME).
    void read_names() {
        if (!has_table("CUPTI_ACTIVITY_KIND_NAME")) return;
        TableScan scan(db_, path_, "CUPTI_ACTIVITY_KIND_NAME", {"objectKind", "objectId", "name"}, {}, {},
                       kUnknownSchema);
        while (scan.next()) {
            const std::optional<std::int64_t> kind = scan.maybe_integer(0), name_id = scan.maybe_integer(2);
            const std::optional<std::pair<std::uint32_t, std::uint32_t>> object = process_and_thread(blob(scan, 1));
            if (!kind || !name_id || !object) continue;
            std::optional<std::string> name = string_of(scan, "name", *name_id);
            if (!name) continue;
            if (*kind == kObjectProcess) {
                sink_.name_process(object->first, *name);
                process_names_[object->first] = *name;
            } else if (*kind == kObjectThread) {
                sink_.name_thread(object->first, object->second, *name);
            }
        }
    }

    std::string blob(const TableScan& scan, int index) const { return scan.maybe_blob(index).value_or(""); }

    trace::ThreadId thread(std::int64_t pid, std::int64_t tid) {
        // nvprof stores the 32-bit thread id signed (-189278656): the unsigned value is the OS's.
        const auto process = static_cast<std::uint32_t>(pid);
        const auto thread = static_cast<std::uint32_t>(tid);
        if (run_pid_ == 0) run_pid_ = process;
        return sink_.thread(process, thread);
    }

    // ---------------------------------------------------------------------------
    // [SECTION] CUDA: API calls, kernels, copies, memsets, synchronizations
    // ---------------------------------------------------------------------------

    // Per device: how far its clock is from the host's (see the file's comment); 0 when
    // they agree. From the GPU records linked to an API call, in SQL over the file.
    void clock_shifts() {
        std::vector<std::string> calls;
        for (const char* table : {"CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"})
            if (has_rows(table) && has_columns(table, {"correlationId", "start"}))
                calls.push_back(fmt::format("SELECT correlationId, start FROM \"{}\"", table));
        if (calls.empty()) return;
        std::string launches;
        for (const std::string& call : calls) launches += (launches.empty() ? "" : " UNION ALL ") + call;
        std::map<std::int64_t, std::int64_t> earliest;  // device -> min(GPU start - call start)
        for (const char* table :
             {"CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
              "CUPTI_ACTIVITY_KIND_MEMCPY2", "CUPTI_ACTIVITY_KIND_MEMSET"}) {
            if (!has_rows(table) || !has_columns(table, {"deviceId", "correlationId", "start"})) continue;
            store::Statement query(
                db_, path_,
                fmt::format("WITH launch AS ({}) SELECT g.deviceId, MIN(g.start - l.start) FROM \"{}\" g JOIN launch l "
                            "ON l.correlationId = g.correlationId WHERE g.correlationId > 0 GROUP BY g.deviceId",
                            launches, table));
            while (query.next_row()) {
                if (query.column_type(1) != SQLITE_INTEGER) continue;
                const std::int64_t device = query.column_int64(0), lead = query.column_int64(1);
                auto [entry, inserted] = earliest.try_emplace(device, lead);
                if (!inserted) entry->second = std::min(entry->second, lead);
            }
        }
        for (const auto& [device, lead] : earliest) {
            if (lead >= 0 && lead <= kClockDisagreement) continue;
            clock_shift_[device] = lead;
            sink_.note(fmt::format(
                "GPU {}'s clock is {:.6f} s {} the host's: its kernels, copies and memsets were moved {} by that much, "
                "so that none starts before the call that launched it",
                device, std::abs(static_cast<double>(lead)) / 1e9, lead > 0 ? "ahead of" : "behind",
                lead > 0 ? "back" : "forward"));
        }
    }

    // A GPU row's interval moved onto the host's clock (by its device's lead, above).
    template <typename Event>
    void to_host_clock(Event& event) const {
        auto found = clock_shift_.find(event.device_id);
        const trace::TimeNs shift = found == clock_shift_.end() ? 0 : found->second;
        event.start_ns -= shift;
        event.end_ns -= shift;
    }

    template <std::size_t N>
    void read_api(const char* table, const CbidName (&names)[N], const char* what) {
        if (!has_table(table)) return;
        TableScan scan(db_, path_, table, {"cbid", "start", "end"},
                       {"processId", "threadId", "correlationId", "returnValue"}, {}, kUnknownSchema);
        std::unordered_map<std::int64_t, trace::StringId> name_ids;
        while (scan.next()) {
            const std::int64_t start = scan.integer(1), end = scan.integer(2);
            if (!valid_interval(scan, start, end)) continue;
            const std::int64_t cbid = scan.integer(0);
            auto [name, inserted] = name_ids.try_emplace(cbid);
            if (inserted) name->second = sink_.intern(api_name(names, cbid, what));
            trace::ApiEvent call;
            call.start_ns = start;
            call.end_ns = end;
            call.thread_id = thread(scan.maybe_integer(3).value_or(0), scan.maybe_integer(4).value_or(0));
            call.correlation_id = correlation_of(scan, 5);
            call.name_id = name->second;
            call.result = static_cast<std::int32_t>(scan.maybe_integer(6).value_or(0));
            sink_.api_call(call);
        }
    }

    void read_kernels(const char* table) {
        if (!has_table(table)) return;
        TableScan scan(db_, path_, table, {"start", "end", "deviceId", "streamId", "name"},
                       {"contextId", "correlationId", "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ",
                        "registersPerThread", "staticSharedMemory", "dynamicSharedMemory", "graphId", "graphNodeId"},
                       {}, kUnknownSchema);
        std::unordered_map<std::int64_t, trace::StringId> name_ids;
        while (scan.next()) {
            std::optional<trace::KernelEvent> row = gpu_row<trace::KernelEvent>(scan, 5, 6);
            if (!row) continue;
            const std::int64_t name = scan.integer(4);
            auto known = name_ids.find(name);
            if (known == name_ids.end()) {
                std::optional<std::string> text = string_of(scan, "name", name);
                if (!text) continue;
                known = name_ids.emplace(name, sink_.intern(kernel_name(*text, sink_.options().kernel_names))).first;
            }
            trace::KernelEvent& kernel = *row;
            to_host_clock(kernel);
            kernel.name_id = known->second;
            kernel.launch = launch_of(scan, 7);
            read_graph_ids(scan, 16, kernel);
            sink_.kernel(kernel);
        }
    }

    void read_memcpys(const char* table) {
        if (!has_table(table)) return;
        TableScan scan(db_, path_, table, {"start", "end", "deviceId", "streamId", "bytes", "copyKind"},
                       {"contextId", "correlationId", "srcKind", "dstKind", "dstDeviceId", "srcDeviceId", "graphId",
                        "graphNodeId"},
                       {}, kUnknownSchema);
        while (scan.next()) {
            std::optional<trace::MemcpyEvent> row = sized_activity<trace::MemcpyEvent>(scan, 6, 4, 7);
            if (!row) continue;
            trace::MemcpyEvent& copy = *row;
            to_host_clock(copy);
            copy.direction = cupti_copy_direction(scan.integer(5));
            copy.source_kind = memory_kind(scan.maybe_integer(8));
            copy.destination_kind = memory_kind(scan.maybe_integer(9));
            if (copy.direction == trace::MemcpyDirection::peer_to_peer) {
                // The other device of the copy.
                for (int column : {10, 11}) {
                    std::optional<std::int64_t> peer = scan.maybe_integer(column);
                    if (peer && *peer >= 0 && *peer <= 1'000'000 && *peer != copy.device_id) {
                        copy.peer_device_id = static_cast<trace::DeviceId>(*peer);
                        break;
                    }
                }
            }
            read_graph_ids(scan, 12, copy);
            sink_.memcpy(copy);
        }
    }

    void read_memsets() {
        const char* table = "CUPTI_ACTIVITY_KIND_MEMSET";
        if (!has_table(table)) return;
        TableScan scan(db_, path_, table, {"start", "end", "deviceId", "streamId", "bytes"},
                       {"contextId", "correlationId", "value", "memoryKind", "graphId", "graphNodeId"}, {},
                       kUnknownSchema);
        while (scan.next()) {
            std::optional<trace::MemsetEvent> row = sized_activity<trace::MemsetEvent>(scan, 5, 4, 6);
            if (!row) continue;
            trace::MemsetEvent& set = *row;
            to_host_clock(set);
            set.value = static_cast<std::uint32_t>(scan.maybe_integer(7).value_or(0));
            const trace::MemoryKind kind = memory_kind(scan.maybe_integer(8));
            set.memory_kind = kind == trace::MemoryKind::unknown ? trace::MemoryKind::device : kind;
            read_graph_ids(scan, 9, set);
            sink_.memset(set);
        }
    }

    // Synchronizations are stamped on the host, where the call waited.
    void read_synchronizations() {
        const char* table = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION";
        if (!has_table(table)) return;
        TableScan scan(db_, path_, table, {"start", "end", "contextId"},
                       {"streamId", "correlationId", "type", "cudaEventId"}, {}, kUnknownSchema);
        while (scan.next()) {
            const std::int64_t start = scan.integer(0), end = scan.integer(1);
            if (!valid_interval(scan, start, end)) continue;
            const std::int64_t context = scan.integer(2);
            auto device = context_device_.find(context);
            if (device == context_device_.end()) {
                reject(scan, "context with no device",
                       fmt::format("contextId {} is in no CUPTI_ACTIVITY_KIND_CONTEXT row", context));
                continue;
            }
            trace::SyncEvent wait;
            wait.start_ns = start;
            wait.end_ns = end;
            wait.device_id = static_cast<trace::DeviceId>(device->second);
            // A context-wide wait has no stream (CUPTI's all-ones): ember's stream 0.
            const std::optional<std::int64_t> stream = scan.maybe_integer(3);
            if (stream && *stream >= 0 && *stream < kInvalidId) {
                auto track = streams_.find({device->second, *stream});
                wait.stream_id = track != streams_.end()
                                     ? track->second
                                     : sink_.stream(wait.device_id, static_cast<std::uint64_t>(*stream),
                                                    static_cast<std::uint32_t>(context));
                if (track == streams_.end()) streams_.emplace(std::make_pair(device->second, *stream), wait.stream_id);
            }
            wait.correlation_id = correlation_of(scan, 4);
            const std::int64_t type = scan.maybe_integer(5).value_or(0);
            wait.kind = type >= 1 && type <= 4 ? static_cast<trace::SyncKind>(type) : trace::SyncKind::unknown;
            const std::optional<std::int64_t> event = scan.maybe_integer(6);
            wait.cuda_event_id = event && *event > 0 && *event < kInvalidId ? static_cast<std::uint64_t>(*event) : 0;
            sink_.sync(wait);
        }
    }

    // ---------------------------------------------------------------------------
    // [SECTION] NVTX markers
    // ---------------------------------------------------------------------------

    // CUPTI_ACTIVITY_KIND_MARKER: an instantaneous marker is a mark; a start and an end
    // sharing an id are a range (push/pop and start/end alike, nested by time on their
    // thread). MARKER_DATA adds the colour, category and payload of each id. A range
    // whose end is missing (the program ended inside it) ends with the trace.
    void read_markers() {
        const char* table = "CUPTI_ACTIVITY_KIND_MARKER";
        if (!has_rows(table)) return;
        struct Data {
            std::uint32_t color = 0, category = 0;
            trace::Payload payload;
        };
        std::unordered_map<std::int64_t, Data> data;
        if (has_table("CUPTI_ACTIVITY_KIND_MARKER_DATA")) {
            TableScan scan(db_, path_, "CUPTI_ACTIVITY_KIND_MARKER_DATA", {"id"},
                           {"payloadKind", "payload", "color", "category"}, {}, kUnknownSchema);
            while (scan.next()) {
                Data& entry = data[scan.integer(0)];
                entry.color = static_cast<std::uint32_t>(scan.maybe_integer(3).value_or(0));
                entry.category = static_cast<std::uint32_t>(scan.maybe_integer(4).value_or(0));
                const std::string payload = blob(scan, 2);
                if (payload.size() >= 8) {
                    // CUpti_MetricValueKind: 0 double, 1 uint64, 4 int64.
                    switch (scan.maybe_integer(1).value_or(-1)) {
                        case 0: {
                            double value;
                            std::memcpy(&value, payload.data(), sizeof value);
                            entry.payload = trace::Payload::of_real(value);
                            break;
                        }
                        case 1:
                        case 4: {
                            std::int64_t value;
                            std::memcpy(&value, payload.data(), sizeof value);
                            entry.payload = trace::Payload::of_integer(value);
                            break;
                        }
                        default:
                            break;
                    }
                }
            }
        }
        struct Open {
            trace::TimeNs start = 0;
            trace::ThreadId thread = 0;
            trace::StringId name = trace::kNoString, domain = trace::kNoString;
        };
        std::map<std::int64_t, Open> open;  // by marker id
        TableScan scan(db_, path_, table, {"flags", "timestamp", "id"}, {"objectKind", "objectId", "name", "domain"},
                       "timestamp", kUnknownSchema);
        auto text = [&](std::optional<std::int64_t> id) -> trace::StringId {
            if (!id || *id == 0) return trace::kNoString;
            std::optional<std::string> value = string_of(scan, "name", *id);
            return value ? sink_.intern(*value) : trace::kNoString;
        };
        while (scan.next()) {
            const std::int64_t flags = scan.integer(0), time = scan.integer(1), id = scan.integer(2);
            if (time > kLargestTimeNs || time < -kLargestTimeNs) {
                reject(scan, "time out of range", fmt::format("timestamp {} lies beyond ±146 years of 1970", time));
                continue;
            }
            trace::ThreadId thread_id = 0;
            if (scan.maybe_integer(3).value_or(0) == kObjectThread) {
                if (auto object = process_and_thread(blob(scan, 4))) thread_id = thread(object->first, object->second);
            }
            if (flags & kMarkerInstant) {
                trace::MarkEvent mark;
                mark.time_ns = time;
                mark.thread_id = thread_id;
                mark.name_id = text(scan.maybe_integer(5));
                mark.domain_id = text(scan.maybe_integer(6));
                auto found = data.find(id);
                if (found != data.end()) {
                    mark.color = found->second.color;
                    mark.category = found->second.category;
                    mark.payload = found->second.payload;
                }
                sink_.mark(mark);
            } else if (flags & kMarkerStart) {
                open[id] = {time, thread_id, text(scan.maybe_integer(5)), text(scan.maybe_integer(6))};
            } else if (flags & kMarkerEnd) {
                auto started = open.find(id);
                if (started == open.end()) {
                    reject(scan, "range end without a start", fmt::format("marker {} ends but never started", id));
                    continue;
                }
                if (time < started->second.start) {
                    reject(
                        scan, "negative duration",
                        fmt::format("marker {} ends at {}, before it started at {}", id, time, started->second.start));
                    open.erase(started);
                    continue;
                }
                emit_range(id, started->second, time, data);
                open.erase(started);
            }
        }
        if (!open.empty()) {
            for (const auto& [id, started] : open)
                emit_range(id, started, std::max(started.start, sink_.latest_ns()), data);
            sink_.note(fmt::format("{} NVTX range{} never ended (the program ended inside): ended with the trace",
                                   open.size(), open.size() == 1 ? "" : "s"));
        }
    }

    template <typename Data>
    void emit_range(std::int64_t id, const auto& started, trace::TimeNs end,
                    const std::unordered_map<std::int64_t, Data>& data) {
        PendingRange range;
        range.start_ns = started.start;
        range.end_ns = end;
        range.thread_id = started.thread;
        range.domain_id = started.domain;
        range.name_id = started.name;
        auto found = data.find(id);
        if (found != data.end()) {
            range.color = found->second.color;
            range.category = found->second.category;
            range.payload_kind = found->second.payload.kind;
            range.payload_integer = found->second.payload.integer;
            range.payload_real = found->second.payload.real;
        }
        sink_.nested_range(range);
    }

    // ---------------------------------------------------------------------------
    // [SECTION] Overhead, what is not imported, the run
    // ---------------------------------------------------------------------------

    void read_overhead() {
        const char* table = "CUPTI_ACTIVITY_KIND_OVERHEAD";
        if (!has_rows(table)) return;
        TableScan scan(db_, path_, table, {"start", "end"}, {"overheadKind", "objectKind", "objectId"}, {},
                       kUnknownSchema);
        std::unordered_map<std::int64_t, trace::StringId> names;
        while (scan.next()) {
            const std::int64_t start = scan.integer(0), end = scan.integer(1);
            if (!valid_interval(scan, start, end)) continue;
            const std::int64_t kind = scan.maybe_integer(2).value_or(0);
            auto [name, inserted] = names.try_emplace(kind);
            if (inserted) name->second = sink_.intern(overhead_name(kind));
            trace::ThreadId thread_id = 0;
            if (scan.maybe_integer(3).value_or(0) == kObjectThread) {
                if (auto object = process_and_thread(blob(scan, 4))) thread_id = thread(object->first, object->second);
            }
            sink_.overhead({start, end, thread_id, name->second});
        }
    }

    // Tables with rows that hold what ember does not import (metrics, events, PC
    // sampling, unified memory, ...): counted, named.
    void count_unimported_tables() {
        static const std::set<std::string> read = {"StringTable",
                                                   "Version",
                                                   "sqlite_sequence",
                                                   "CUPTI_ACTIVITY_KIND_RUNTIME",
                                                   "CUPTI_ACTIVITY_KIND_DRIVER",
                                                   "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL",
                                                   "CUPTI_ACTIVITY_KIND_KERNEL",
                                                   "CUPTI_ACTIVITY_KIND_MEMCPY",
                                                   "CUPTI_ACTIVITY_KIND_MEMCPY2",
                                                   "CUPTI_ACTIVITY_KIND_MEMSET",
                                                   "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
                                                   "CUPTI_ACTIVITY_KIND_MARKER",
                                                   "CUPTI_ACTIVITY_KIND_MARKER_DATA",
                                                   "CUPTI_ACTIVITY_KIND_DEVICE",
                                                   "CUPTI_ACTIVITY_KIND_CONTEXT",
                                                   "CUPTI_ACTIVITY_KIND_STREAM",
                                                   "CUPTI_ACTIVITY_KIND_NAME",
                                                   "CUPTI_ACTIVITY_KIND_OVERHEAD"};
        for (const std::string& table : tables_) {
            if (read.count(table)) continue;
            store::Statement count(db_, path_, fmt::format("SELECT COUNT(*) FROM \"{}\"", table));
            if (count.next_row() && count.column_int64(0) > 0)
                sink_.skip(fmt::format("{} row (not imported)", table), count.column_int64(0));
        }
    }

    void finish() {
        trace::RunInfo& run = sink_.run();
        const ImportOptions& options = sink_.options();
        run.rank = options.rank.value_or(0);
        run.rank_source = options.rank ? "--rank" : "";
        run.world_size = options.world_size.value_or(1);
        run.pid = run_pid_;
        run.clock_name = "nvprof (Unix epoch ns)";
        auto name = process_names_.find(run_pid_);
        if (name != process_names_.end()) run.command_line = name->second;
        if (sink_.any_event()) {
            run.start_ns = sink_.earliest_ns();
            run.end_ns = sink_.latest_ns();
        }
    }

    std::int64_t version_ = 0;
    std::unordered_map<std::int64_t, std::string> strings_;
    std::map<std::int64_t, std::int64_t> context_device_;
    std::map<std::int64_t, trace::TimeNs> clock_shift_;  // device -> lead
    std::map<std::uint32_t, std::string> process_names_;
    std::uint32_t run_pid_ = 0;
};

}  // namespace

void import_nvprof_sqlite(ImportSink& sink) {
    NvprofImporter importer(sink);
    importer.run();
}

}  // namespace ember::importing
