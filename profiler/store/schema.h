// schema.h: the versions of an ember trace file, its event tables and its metadata keys.
// The tables themselves are declared in tables.h; docs/trace-schema.md documents every
// table and column (a test keeps it equal to the declarations).
//
// Compatibility rule. A file stores `schema_version` (what wrote it) and
// `min_reader_version` (the oldest reader that understands it) in run_metadata.
// A reader opens a file when
//     kOldestReadableSchemaVersion <= schema_version   and   min_reader_version <= kSchemaVersion
// so a newer writer that only adds tables/columns keeps min_reader_version low and
// older readers still open its files; a change that would be misread raises it.
#pragma once

#include "profiler/store/tables.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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

// The tables, their columns and indexes are declared in tables.h; create_tables_sql()
// and create_indexes_sql() there give their CREATE statements. Indexes are built once
// when the writer closes (inserting into indexed tables would halve a live recording's
// write throughput), or filled as rows arrive by a writer fed from a file in time order
// (WriterOptions::index_while_writing). A trace whose writer was killed may lack them;
// the reader still answers every query, by scanning, and
// TraceReader::build_missing_indexes() adds them.

// Number of declared indexes (the reader's has_indexes() counts them).
constexpr int kIndexCount = declared_index_count();

// The event tables: their name, the column that says which track an event lies
// on, and the columns holding its time (end_column == start_column for instants).
struct EventTableInfo {
    const char* name;
    const char* track_column;
    const char* start_column;
    const char* end_column;
    // Its declared indexes (tables.h): by (track, start), and by correlation_id
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

// Every index named above is one of its table's declared indexes, and together they
// are all of them.
// (By value, not through find_table's pointer: GCC's constant evaluation under
// -fsanitize=undefined cannot compare that pointer with nullptr.)
constexpr bool names_an_index_of(const char* index, const char* table) {
    if (index == nullptr) return true;
    for (const TableInfo& info : kTables) {
        if (std::string_view(info.name) != table) continue;
        for (const IndexInfo& declared : info.indexes)
            if (std::string_view(declared.name) == index) return true;
        return false;
    }
    return false;
}
constexpr bool event_table_indexes_match() {
    int named = 0;
    for (const EventTableInfo& table : kEventTables) {
        if (!names_an_index_of(table.track_index, table.name) ||
            !names_an_index_of(table.correlation_index, table.name))
            return false;
        named += (table.track_index != nullptr) + (table.correlation_index != nullptr);
    }
    return named == kIndexCount;
}
static_assert(event_table_indexes_match(), "kEventTables' index names must be the declared indexes (tables.h)");

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
constexpr std::size_t required_table_count() {
    std::size_t count = 0;
    for (const TableInfo& table : kTables) count += table.required;
    return count;
}
inline constexpr auto kRequiredTables = [] {
    std::array<const char*, required_table_count()> names{};
    std::size_t next = 0;
    for (const TableInfo& table : kTables)
        if (table.required) names[next++] = table.name;
    return names;
}();

// Tables added after version 1's first files were written: a reader finds them absent
// in older files and reads them as empty (not in kRequiredTables).
inline constexpr const char* kNvtxCategoriesTable = TableOf<NvtxCategoryRow>::name;
inline constexpr const char* kCollectiveCallsTable = TableOf<trace::CollectiveCall>::name;  // version 4
inline constexpr const char* kMemoryEventsTable = TableOf<trace::MemoryEvent>::name;        // version 5
inline constexpr const char* kMemoryBlocksTable = TableOf<trace::MemoryBlock>::name;        // version 5

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
inline constexpr const char* status = "status";  // metadata_status: recording until a clean close
// Set by the CPU samplers (native and Python): the period, in ns, each stack sample
// stands for; absent when nothing was sampled at a fixed period.
inline constexpr const char* cpu_sample_period_ns = "cpu_sample_period_ns";
}  // namespace metadata_key

namespace metadata_status {
inline constexpr const char* recording = "recording";
inline constexpr const char* complete = "complete";
}  // namespace metadata_status

// The run_metadata rows of a run, as a writer opening a file puts them: the versions,
// ember_version, run_info_rows() with end_ns 0, and status recording.
std::vector<MetadataRow> run_metadata_rows(const trace::RunInfo& run, int schema_version = kSchemaVersion,
                                           int min_reader_version = kMinReaderVersionWritten);
// Every RunInfo field but ember_version, under its key (what an import replaces).
std::vector<MetadataRow> run_info_rows(const trace::RunInfo& run);

}  // namespace ember::store
