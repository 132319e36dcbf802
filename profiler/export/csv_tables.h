// csv_tables.h: event tables as CSV (RFC 4180, header row, names resolved from
// the string table), one file per table or one chosen table. Rows stream in
// start-time order.
#pragma once

#include "profiler/export/output_file.h"
#include "profiler/store/reader.h"

#include <string>
#include <string_view>

namespace ember::exporting {

inline constexpr const char* kCsvTables[] = {
    "kernels", "memcpys",         "memsets",         "synchronizations", "api_calls",     "ranges",
    "marks",   "counter_samples", "dropped_records", "collective_calls", "memory_events", "memory_blocks",
};
bool is_csv_table(std::string_view name);

// Writes table `name` (one of kCsvTables) to `out`.
void export_csv_table(const store::TraceReader& reader, std::string_view name, OutputFile& out);

// Writes every table to DIRECTORY/<table>.csv (creating the directory).
void export_csv_directory(const store::TraceReader& reader, const std::string& directory);

}  // namespace ember::exporting
