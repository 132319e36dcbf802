// schema.h: the SQLite schema of an ember trace file, version by version.
// docs/trace-schema.md documents every table and column; keep the two in step.
//
// Compatibility rule. A file stores `schema_version` (what wrote it) and
// `min_reader_version` (the oldest reader that understands it) in run_metadata.
// A reader opens a file when
//     kOldestReadableSchemaVersion <= schema_version   and   min_reader_version <= kSchemaVersion
// so a newer writer that only adds tables/columns keeps min_reader_version low and
// older readers still open its files; a change that would be misread raises it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ember::store {

// 2: frames.line (Python frames), stack_samples.idle.
// 3: graph_id and graph_node_id of kernels, memcpys and memsets (CUDA graphs),
//    api_calls.stack_id (the call site's stack). Only columns were added: a version 1 or 2
//    reader still opens version 3 files, and this reader reads the columns a version 1/2
//    file lacks as 0.
// 4: collective_calls (Kineto's collective metadata of kernels and ranges). Only a table
//    was added: older readers open version 4 files, and this reader reads the table as
//    empty in older files.
// 5: memory_events and memory_blocks (a caching allocator's events and its state, from
//    PyTorch memory snapshots). Only tables were added: older readers open version 5
//    files, and this reader reads the tables as empty in older files ("no memory events").
// 6: memory_events.thread_id (the thread that allocated or freed, so the range open on it
//    is the allocating op). Only a column was added (DEFAULT 0): older readers open
//    version 6 files, and this reader reads the column a version 5 file lacks as 0.
constexpr int kSchemaVersion = 6;
constexpr int kOldestReadableSchemaVersion = 1;
constexpr int kMinReaderVersionWritten = 1;  // what this writer puts in min_reader_version

// PRAGMA application_id of every ember trace: "EMBR".
constexpr std::int32_t kApplicationId = 0x454D4252;

// Tables (one statement each, executed in order by the writer at open).
inline constexpr const char* kCreateTablesSql = R"sql(
CREATE TABLE IF NOT EXISTS run_metadata (
  key   TEXT PRIMARY KEY,
  value
);
CREATE TABLE IF NOT EXISTS strings (
  string_id INTEGER PRIMARY KEY,
  value     TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS processes (
  pid     INTEGER PRIMARY KEY,
  name_id INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS threads (
  thread_id INTEGER PRIMARY KEY,
  pid       INTEGER NOT NULL,
  tid       INTEGER NOT NULL,
  name_id   INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS devices (
  device_id                          INTEGER PRIMARY KEY,
  name_id                            INTEGER NOT NULL,
  uuid_id                            INTEGER NOT NULL,
  compute_capability_major           INTEGER NOT NULL,
  compute_capability_minor           INTEGER NOT NULL,
  multiprocessor_count               INTEGER NOT NULL,
  memory_bytes                       INTEGER NOT NULL,
  memory_bandwidth_bytes_per_second  REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS streams (
  stream_id      INTEGER PRIMARY KEY,
  device_id      INTEGER NOT NULL,
  context_id     INTEGER NOT NULL,
  cuda_stream_id INTEGER NOT NULL,
  priority       INTEGER NOT NULL,
  name_id        INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS counters (
  counter_id INTEGER PRIMARY KEY,
  name_id    INTEGER NOT NULL,
  unit_id    INTEGER NOT NULL,
  device_id  INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS launch_configs (
  launch_config_id     INTEGER PRIMARY KEY,
  grid_x               INTEGER NOT NULL,
  grid_y               INTEGER NOT NULL,
  grid_z               INTEGER NOT NULL,
  block_x              INTEGER NOT NULL,
  block_y              INTEGER NOT NULL,
  block_z              INTEGER NOT NULL,
  registers_per_thread INTEGER NOT NULL,
  static_shared_bytes  INTEGER NOT NULL,
  dynamic_shared_bytes INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS frames (
  frame_id    INTEGER PRIMARY KEY,
  function_id INTEGER NOT NULL,
  module_id   INTEGER NOT NULL,
  address     INTEGER NOT NULL,
  line        INTEGER NOT NULL DEFAULT -1
);
CREATE TABLE IF NOT EXISTS stacks (
  stack_id        INTEGER PRIMARY KEY,
  parent_stack_id INTEGER NOT NULL,
  frame_id        INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS kernels (
  start_ns         INTEGER NOT NULL,
  end_ns           INTEGER NOT NULL,
  device_id        INTEGER NOT NULL,
  stream_id        INTEGER NOT NULL,
  correlation_id   INTEGER NOT NULL,
  name_id          INTEGER NOT NULL,
  launch_config_id INTEGER NOT NULL,
  graph_id         INTEGER NOT NULL DEFAULT 0,
  graph_node_id    INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS memcpys (
  start_ns         INTEGER NOT NULL,
  end_ns           INTEGER NOT NULL,
  device_id        INTEGER NOT NULL,
  stream_id        INTEGER NOT NULL,
  correlation_id   INTEGER NOT NULL,
  direction        INTEGER NOT NULL,
  bytes            INTEGER NOT NULL,
  source_kind      INTEGER NOT NULL,
  destination_kind INTEGER NOT NULL,
  peer_device_id   INTEGER NOT NULL,
  graph_id         INTEGER NOT NULL DEFAULT 0,
  graph_node_id    INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS memsets (
  start_ns       INTEGER NOT NULL,
  end_ns         INTEGER NOT NULL,
  device_id      INTEGER NOT NULL,
  stream_id      INTEGER NOT NULL,
  correlation_id INTEGER NOT NULL,
  bytes          INTEGER NOT NULL,
  value          INTEGER NOT NULL,
  memory_kind    INTEGER NOT NULL,
  graph_id       INTEGER NOT NULL DEFAULT 0,
  graph_node_id  INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS synchronizations (
  start_ns       INTEGER NOT NULL,
  end_ns         INTEGER NOT NULL,
  device_id      INTEGER NOT NULL,
  stream_id      INTEGER NOT NULL,
  correlation_id INTEGER NOT NULL,
  kind           INTEGER NOT NULL,
  cuda_event_id  INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS api_calls (
  start_ns       INTEGER NOT NULL,
  end_ns         INTEGER NOT NULL,
  thread_id      INTEGER NOT NULL,
  correlation_id INTEGER NOT NULL,
  name_id        INTEGER NOT NULL,
  result         INTEGER NOT NULL,
  stack_id       INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS ranges (
  range_id        INTEGER PRIMARY KEY,
  start_ns        INTEGER NOT NULL,
  end_ns          INTEGER NOT NULL,
  thread_id       INTEGER NOT NULL,
  domain_id       INTEGER NOT NULL,
  name_id         INTEGER NOT NULL,
  category        INTEGER NOT NULL,
  color           INTEGER NOT NULL,
  depth           INTEGER NOT NULL,
  parent_range_id INTEGER NOT NULL,
  payload
);
CREATE TABLE IF NOT EXISTS marks (
  time_ns   INTEGER NOT NULL,
  thread_id INTEGER NOT NULL,
  domain_id INTEGER NOT NULL,
  name_id   INTEGER NOT NULL,
  category  INTEGER NOT NULL,
  color     INTEGER NOT NULL,
  payload
);
CREATE TABLE IF NOT EXISTS counter_samples (
  counter_id INTEGER NOT NULL,
  time_ns    INTEGER NOT NULL,
  value      REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS stack_samples (
  time_ns   INTEGER NOT NULL,
  thread_id INTEGER NOT NULL,
  stack_id  INTEGER NOT NULL,
  idle      INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS dropped_records (
  time_ns   INTEGER NOT NULL,
  source_id INTEGER NOT NULL,
  thread_id INTEGER NOT NULL,
  count     INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS collector_overhead (
  start_ns  INTEGER NOT NULL,
  end_ns    INTEGER NOT NULL,
  thread_id INTEGER NOT NULL,
  name_id   INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS collective_calls (
  start_ns       INTEGER NOT NULL,
  track_id       INTEGER NOT NULL,
  on_stream      INTEGER NOT NULL,
  name_id        INTEGER NOT NULL,
  group_name_id  INTEGER NOT NULL,
  group_desc_id  INTEGER NOT NULL,
  group_ranks_id INTEGER NOT NULL,
  group_size     INTEGER NOT NULL,
  sequence       INTEGER NOT NULL,
  in_elements    INTEGER NOT NULL,
  out_elements   INTEGER NOT NULL,
  dtype_id       INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS memory_events (
  time_ns           INTEGER NOT NULL,
  device_id         INTEGER NOT NULL,
  action            INTEGER NOT NULL,
  address           INTEGER NOT NULL,
  bytes             INTEGER NOT NULL,
  cuda_stream       INTEGER NOT NULL,
  stack_id          INTEGER NOT NULL,
  device_free_bytes INTEGER NOT NULL,
  thread_id         INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS memory_blocks (
  time_ns            INTEGER NOT NULL,
  device_id          INTEGER NOT NULL,
  state              INTEGER NOT NULL,
  expandable_segment INTEGER NOT NULL,
  small_pool         INTEGER NOT NULL,
  segment_address    INTEGER NOT NULL,
  segment_bytes      INTEGER NOT NULL,
  address            INTEGER NOT NULL,
  bytes              INTEGER NOT NULL,
  requested_bytes    INTEGER NOT NULL,
  cuda_stream        INTEGER NOT NULL,
  stack_id           INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS nvtx_categories (
  domain_id INTEGER NOT NULL,
  category  INTEGER NOT NULL,
  name_id   INTEGER NOT NULL,
  PRIMARY KEY (domain_id, category)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS track_stats (
  event_table     TEXT NOT NULL,
  track_id        INTEGER NOT NULL,
  event_count     INTEGER NOT NULL,
  first_start_ns  INTEGER NOT NULL,
  last_end_ns     INTEGER NOT NULL,
  max_duration_ns INTEGER NOT NULL,
  PRIMARY KEY (event_table, track_id)
) WITHOUT ROWID;
)sql";

// Indexes, built once when the writer closes (inserting into indexed tables would
// halve a live recording's write throughput), or filled as rows arrive by a writer
// fed from a file in time order (WriterOptions::index_while_writing). A trace whose
// writer was killed may lack them; the reader still answers every query, by
// scanning, and TraceReader::build_missing_indexes() adds them.
inline constexpr const char* kCreateIndexesSql = R"sql(
CREATE INDEX IF NOT EXISTS kernels_by_stream_start ON kernels (stream_id, start_ns);
CREATE INDEX IF NOT EXISTS kernels_by_correlation ON kernels (correlation_id);
CREATE INDEX IF NOT EXISTS memcpys_by_stream_start ON memcpys (stream_id, start_ns);
CREATE INDEX IF NOT EXISTS memcpys_by_correlation ON memcpys (correlation_id);
CREATE INDEX IF NOT EXISTS memsets_by_stream_start ON memsets (stream_id, start_ns);
CREATE INDEX IF NOT EXISTS memsets_by_correlation ON memsets (correlation_id);
CREATE INDEX IF NOT EXISTS synchronizations_by_stream_start ON synchronizations (stream_id, start_ns);
CREATE INDEX IF NOT EXISTS synchronizations_by_correlation ON synchronizations (correlation_id);
CREATE INDEX IF NOT EXISTS api_calls_by_thread_start ON api_calls (thread_id, start_ns);
CREATE INDEX IF NOT EXISTS api_calls_by_correlation ON api_calls (correlation_id);
CREATE INDEX IF NOT EXISTS ranges_by_thread_start ON ranges (thread_id, start_ns);
CREATE INDEX IF NOT EXISTS marks_by_thread_time ON marks (thread_id, time_ns);
CREATE INDEX IF NOT EXISTS counter_samples_by_counter_time ON counter_samples (counter_id, time_ns);
CREATE INDEX IF NOT EXISTS stack_samples_by_thread_time ON stack_samples (thread_id, time_ns);
CREATE INDEX IF NOT EXISTS collector_overhead_by_thread_start ON collector_overhead (thread_id, start_ns);
)sql";

// Number of indexes in kCreateIndexesSql (the reader's has_indexes() counts them).
constexpr int kIndexCount = 15;

// The event tables: their name, the column that says which track an event lies
// on, and the columns holding its time (end_column == start_column for instants).
struct EventTableInfo {
    const char* name;
    const char* track_column;
    const char* start_column;
    const char* end_column;
    // Its indexes in kCreateIndexesSql: by (track, start), and by correlation_id
    // (nullptr where the table has none).
    const char* track_index;
    const char* correlation_index;
};

inline constexpr EventTableInfo kEventTables[] = {
    {"kernels", "stream_id", "start_ns", "end_ns", "kernels_by_stream_start", "kernels_by_correlation"},
    {"memcpys", "stream_id", "start_ns", "end_ns", "memcpys_by_stream_start", "memcpys_by_correlation"},
    {"memsets", "stream_id", "start_ns", "end_ns", "memsets_by_stream_start", "memsets_by_correlation"},
    {"synchronizations", "stream_id", "start_ns", "end_ns", "synchronizations_by_stream_start",
     "synchronizations_by_correlation"},
    {"api_calls", "thread_id", "start_ns", "end_ns", "api_calls_by_thread_start", "api_calls_by_correlation"},
    {"ranges", "thread_id", "start_ns", "end_ns", "ranges_by_thread_start", nullptr},
    {"marks", "thread_id", "time_ns", "time_ns", "marks_by_thread_time", nullptr},
    {"counter_samples", "counter_id", "time_ns", "time_ns", "counter_samples_by_counter_time", nullptr},
    {"stack_samples", "thread_id", "time_ns", "time_ns", "stack_samples_by_thread_time", nullptr},
    {"collector_overhead", "thread_id", "start_ns", "end_ns", "collector_overhead_by_thread_start", nullptr},
};

// Every index named above is one of kCreateIndexesSql's, on its table, and together
// they are all kIndexCount of them.
constexpr bool names_an_index_of(const char* index, const char* table) {
    if (index == nullptr) return true;
    const std::string_view sql(kCreateIndexesSql);
    const std::string_view parts[] = {"CREATE INDEX IF NOT EXISTS ", index, " ON ", table, " ("};
    for (std::size_t at = sql.find(parts[0]); at != std::string_view::npos; at = sql.find(parts[0], at + 1)) {
        std::size_t pos = at;
        bool whole = true;
        for (std::string_view part : parts) {
            whole = whole && sql.substr(pos, part.size()) == part;
            pos += part.size();
        }
        if (whole) return true;
    }
    return false;
}
constexpr bool event_table_indexes_match() {
    int named = 0;
    for (const EventTableInfo& table : kEventTables) {
        if (!names_an_index_of(table.track_index, table.name) || !names_an_index_of(table.correlation_index, table.name))
            return false;
        named += (table.track_index != nullptr) + (table.correlation_index != nullptr);
    }
    return named == kIndexCount;
}
static_assert(event_table_indexes_match(), "kEventTables' index names must be kCreateIndexesSql's");

// SELECT computing the track_stats rows of one event table (columns in
// track_stats order), ordered by track; `where`, if given, filters the rows.
inline std::string track_stats_select_sql(const EventTableInfo& table, std::string_view where = {}) {
    std::string start = table.start_column, end = table.end_column, track = table.track_column;
    std::string filter = where.empty() ? std::string() : " WHERE " + std::string(where);
    return std::string("SELECT '") + table.name + "', " + track + ", COUNT(*), MIN(" + start + "), MAX(" + end +
           "), MAX(" + end + " - " + start + ") FROM " + table.name + filter + " GROUP BY " + track + " ORDER BY " +
           track;
}

// Every table a version-1 file must have (the reader refuses a file missing one).
inline constexpr const char* kRequiredTables[] = {
    "run_metadata", "strings", "processes", "threads", "devices", "streams",
    "counters", "launch_configs", "frames", "stacks", "kernels", "memcpys",
    "memsets", "synchronizations", "api_calls", "ranges", "marks",
    "counter_samples", "stack_samples", "dropped_records", "collector_overhead",
    "track_stats",
};

// Tables added to version 1 after its first files were written: a reader finds
// them absent in older files and reads them as empty (not in kRequiredTables).
//   nvtx_categories: names given to NVTX categories (nvtxNameCategory,
//                    nvtxDomainNameCategory), per domain.
inline constexpr const char* kNvtxCategoriesTable = "nvtx_categories";
// Added in version 4.
inline constexpr const char* kCollectiveCallsTable = "collective_calls";
// Added in version 5.
inline constexpr const char* kMemoryEventsTable = "memory_events";
inline constexpr const char* kMemoryBlocksTable = "memory_blocks";

// Keys of run_metadata.
namespace metadata_key {
inline constexpr const char* schema_version = "schema_version";
inline constexpr const char* min_reader_version = "min_reader_version";
inline constexpr const char* ember_version = "ember_version";
inline constexpr const char* command_line = "command_line";
inline constexpr const char* host = "host";
inline constexpr const char* pid = "pid";
inline constexpr const char* rank = "rank";
inline constexpr const char* world_size = "world_size";
inline constexpr const char* rank_source = "rank_source";
inline constexpr const char* clock_name = "clock_name";
inline constexpr const char* clock_offset_to_wall_ns = "clock_offset_to_wall_ns";
inline constexpr const char* start_ns = "start_ns";
inline constexpr const char* end_ns = "end_ns";
inline constexpr const char* status = "status";  // "recording" until a clean close, then "complete"
}  // namespace metadata_key

}  // namespace ember::store
