// cupti_rows.h: what the Nsight Systems and nvprof importers share. Both read CUPTI's
// activity records stored as SQLite rows (CUPTI_ACTIVITY_KIND_* tables): the file
// opened read-only, a bad row skipped and named (or refused under
// ImportOptions::strict), intervals and sizes checked, a GPU row's device and stream
// made an ember stream once, and CUPTI's own enumerations.
#pragma once

#include "profiler/import/gpu_activity.h"
#include "profiler/import/import_sink.h"
#include "profiler/import/sqlite_table_scan.h"
#include "profiler/store/sqlite_util.h"

#include <sqlite3.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

namespace ember::importing {

// CUpti_ActivityMemcpyKind: 1 HtoD, 2 DtoH, 3 HtoA, 4 AtoH, 5 AtoA, 6 AtoD, 7 DtoA,
// 8 DtoD, 9 HtoH, 10 PtoP.
trace::MemcpyDirection cupti_copy_direction(std::int64_t kind);

class CuptiRows {
  public:
    CuptiRows(const CuptiRows&) = delete;
    CuptiRows& operator=(const CuptiRows&) = delete;

  protected:
    // `what`: the file as messages name it ("the Nsight Systems export"); `time_origin`:
    // what its timestamps count from ("the session start", "1970").
    CuptiRows(ImportSink& sink, std::string_view what, std::string_view time_origin);
    ~CuptiRows();

    // Opens the file read-only and lists its tables.
    void open_database();
    bool has_table(const std::string& name) const { return tables_.count(name) != 0; }

    // A bad row: skipped and counted with where it was, or an error under ImportOptions::strict.
    bool reject(const TableScan& scan, std::string_view reason, const std::string& what);
    // Times within ±146 years of the origin, and an end not before the start.
    bool valid_interval(const TableScan& scan, std::int64_t start, std::int64_t end);
    // A row's size in bytes; a negative one is rejected (nullopt: skip the row).
    std::optional<std::uint64_t> byte_count(const TableScan& scan, int column);
    // A correlation id; 0 when absent, not positive or CUPTI's all-ones "none".
    static trace::CorrelationId correlation_of(const TableScan& scan, int column);

    // The ember stream of a GPU row's device and stream (created once; the context gives
    // the stream's priority, the null stream is named "default"). nullopt: rejected.
    std::optional<std::pair<trace::DeviceId, trace::StreamId>> gpu_track(const TableScan& scan, int device_column,
                                                                         int stream_column, int context_column);

    // The event of a kernel, copy or memset row (start, end, deviceId, streamId in
    // columns 0-3) whose interval and track are valid; nullopt for a row rejected (and
    // counted) for one of them.
    template <typename Event>
    std::optional<Event> gpu_row(const TableScan& scan, int context_column, int correlation_column) {
        const std::int64_t start = scan.integer(0), end = scan.integer(1);
        if (!valid_interval(scan, start, end)) return std::nullopt;
        auto track = gpu_track(scan, 2, 3, context_column);
        if (!track) return std::nullopt;
        return gpu_activity<Event>(start, end, track->second, track->first, correlation_of(scan, correlation_column));
    }
    // A copy or memset: gpu_row's, with a valid byte count too.
    template <typename Event>
    std::optional<Event> sized_activity(const TableScan& scan, int context_column, int bytes_column,
                                        int correlation_column) {
        std::optional<Event> event = gpu_row<Event>(scan, context_column, correlation_column);
        if (!event) return std::nullopt;
        const std::optional<std::uint64_t> bytes = byte_count(scan, bytes_column);
        if (!bytes) return std::nullopt;
        event->bytes = *bytes;
        return event;
    }

    // The optional columns graphId (at `graph_column`) and graphNodeId (the next one) of a
    // kernel, copy or memset run from a CUDA graph. 0, NULL, a negative id or a graphId
    // beyond 32 bits (CUPTI's type) reads as "none".
    template <typename Event>
    static void read_graph_ids(const TableScan& scan, int graph_column, Event& event) {
        std::optional<std::int64_t> graph = scan.maybe_integer(graph_column);
        if (graph && *graph > 0 && *graph <= 0xffffffffll) event.graph_id = static_cast<trace::GraphId>(*graph);
        std::optional<std::int64_t> node = scan.maybe_integer(graph_column + 1);
        if (node && *node > 0) event.graph_node_id = static_cast<trace::GraphNodeId>(*node);
    }

    // A kernel's launch shape from nine columns from `first` on: gridX, gridY, gridZ,
    // blockX, blockY, blockZ, registersPerThread, staticSharedMemory, dynamicSharedMemory
    // (a missing or impossible one reads as 1 for the grid and block, 0 otherwise).
    static trace::LaunchConfig launch_of(const TableScan& scan, int first);

    // Stream priorities by (context, stream); kAnyContext where the file does not say.
    static constexpr std::int64_t kAnyContext = -1;

    ImportSink& sink_;
    std::string path_;
    std::unique_ptr<store::Connection> connection_;  // the input, read-only
    sqlite3* db_ = nullptr;                          // connection_'s, for the scans
    std::set<std::string> tables_;
    std::set<std::pair<std::int64_t, std::int64_t>> null_streams_;                     // (device, stream)
    std::map<std::pair<std::int64_t, std::int64_t>, std::int32_t> stream_priorities_;  // (context, stream)
    std::map<std::pair<std::int64_t, std::int64_t>, trace::StreamId> streams_;         // (device, stream)

  private:
    std::string what_;
    std::string time_origin_;
};

}  // namespace ember::importing
