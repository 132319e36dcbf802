// report_table.h: the shape every `ember stats` report takes before it is
// printed — a titled table of typed cells — and its three renderings: aligned
// text, CSV and JSON. Times are stored in nanoseconds and converted to the
// requested unit only when printed, so every analysis stays exact.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace ember::analysis {

enum class TimeUnit { ns, us, ms, s };

std::optional<TimeUnit> parse_time_unit(std::string_view text);  // "ns", "us", "ms", "s"
const char* time_unit_name(TimeUnit unit);
double nanoseconds_per(TimeUnit unit);

// How a column's numbers are printed.
enum class ColumnKind {
    text,
    integer,    // counts, ids, bytes: printed as integers
    time,       // nanoseconds, printed in the chosen unit
    percent,    // 0..100, one decimal in text/CSV
    bandwidth,  // GB/s (10^9 bytes per second), three decimals in text/CSV
};

struct Column {
    std::string key;    // JSON member / machine name ("total")
    std::string title;  // text and CSV header ("Total Time"); time columns get the unit appended
    ColumnKind kind = ColumnKind::text;
};

// A cell: text, an exact integer, a real number (averages, percentages), or no value
// (printed "-", JSON null: a percentage of nothing).
using Cell = std::variant<std::string, std::int64_t, double, std::monostate>;

struct Table {
    Table() = default;
    Table(std::string key_, std::string title_, std::vector<Column> columns_ = {},
          std::vector<std::vector<Cell>> rows_ = {}, std::string empty_note_ = {})
        : key(std::move(key_)),
          title(std::move(title_)),
          columns(std::move(columns_)),
          rows(std::move(rows_)),
          empty_note(std::move(empty_note_)) {}

    std::string key;    // report name ("kernels"), the JSON member
    std::string title;  // "GPU kernels"
    std::vector<Column> columns;
    std::vector<std::vector<Cell>> rows;
    // Printed instead of the table when it has no rows: why there is nothing
    // ("no GPU activity recorded: CPU backend"). Empty: "(none)".
    std::string empty_note;
    // Lines printed under the table in text ("straggler: rank 3 ..."); not in CSV.
    std::vector<std::string> notes;
    // A report made of several tables: in JSON, reports[group][key] holds this table's
    // rows and `group_fields` (an object) adds its members to reports[group].
    std::string group;
    nlohmann::json group_fields;
};

// Aligned columns (numbers right, text left), a title line and a dashed rule, as
// Nsight Systems prints its summaries. An empty table prints "(none)".
void write_text(std::ostream& out, const Table& table, TimeUnit unit);
// RFC 4180: a header row, then one row per table row; fields quoted when needed.
void write_csv(std::ostream& out, const Table& table, TimeUnit unit);
// An array of objects keyed by Column::key; times in the chosen unit, except columns
// whose key ends in "_ns", which are always nanoseconds.
nlohmann::json to_json(const Table& table, TimeUnit unit);

// One cell as the text and CSV renderings print it.
std::string format_cell(const Cell& cell, ColumnKind kind, TimeUnit unit);
// A CSV field, quoted when it holds a comma, quote, CR or LF.
std::string csv_field(std::string_view text);

}  // namespace ember::analysis
