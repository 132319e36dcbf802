// report_table.cpp: text, CSV and JSON renderings of a report Table.
#include "profiler/analysis/report_table.h"

#include "profiler/analysis/enum_names.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ember::analysis {

namespace {

constexpr EnumName<TimeUnit> kTimeUnitNames[] = {
    {TimeUnit::ns, "ns"},
    {TimeUnit::us, "us"},
    {TimeUnit::ms, "ms"},
    {TimeUnit::s, "s"},
};

}  // namespace

std::optional<TimeUnit> parse_time_unit(std::string_view text) {
    return value_in(kTimeUnitNames, text);
}

const char* time_unit_name(TimeUnit unit) {
    return name_in(kTimeUnitNames, unit, "ns");
}

double nanoseconds_per(TimeUnit unit) {
    switch (unit) {
        case TimeUnit::ns:
            return 1.0;
        case TimeUnit::us:
            return 1e3;
        case TimeUnit::ms:
            return 1e6;
        case TimeUnit::s:
            return 1e9;
    }
    return 1.0;
}

namespace {

double as_double(const Cell& cell) {
    if (const auto* integer = std::get_if<std::int64_t>(&cell)) return static_cast<double>(*integer);
    if (const auto* real = std::get_if<double>(&cell)) return *real;
    return 0.0;
}

bool is_numeric(ColumnKind kind) {
    return kind != ColumnKind::text;
}

std::string column_title(const Column& column, TimeUnit unit) {
    if (column.kind == ColumnKind::time) return column.title + " (" + time_unit_name(unit) + ")";
    return column.title;
}

}  // namespace

std::string format_cell(const Cell& cell, ColumnKind kind, TimeUnit unit) {
    if (const auto* text = std::get_if<std::string>(&cell)) return *text;
    if (std::holds_alternative<std::monostate>(cell)) return "-";
    switch (kind) {
        case ColumnKind::text:
        case ColumnKind::integer:
            if (const auto* integer = std::get_if<std::int64_t>(&cell)) return fmt::format("{}", *integer);
            return fmt::format("{:.1f}", as_double(cell));
        case ColumnKind::time:
            // Nanoseconds: integers stay integers, averages get one decimal.
            if (unit == TimeUnit::ns) {
                if (const auto* integer = std::get_if<std::int64_t>(&cell)) return fmt::format("{}", *integer);
                return fmt::format("{:.1f}", as_double(cell));
            }
            return fmt::format("{:.3f}", as_double(cell) / nanoseconds_per(unit));
        case ColumnKind::percent:
            return fmt::format("{:.1f}", as_double(cell));
        case ColumnKind::bandwidth:
            return fmt::format("{:.3f}", as_double(cell));
    }
    return {};
}

void write_text(std::ostream& out, const Table& table, TimeUnit unit) {
    out << table.title << "\n\n";
    auto write_notes = [&] {
        if (table.notes.empty()) return;
        out << '\n';
        for (const std::string& note : table.notes) out << ' ' << note << '\n';
    };
    if (table.rows.empty()) {
        out << " " << (table.empty_note.empty() ? "(none)" : table.empty_note) << "\n";
        write_notes();
        return;
    }
    std::vector<std::string> titles;
    std::vector<std::size_t> widths;
    for (const Column& column : table.columns) {
        titles.push_back(column_title(column, unit));
        widths.push_back(titles.back().size());
    }
    std::vector<std::vector<std::string>> cells;
    for (const auto& row : table.rows) {
        std::vector<std::string> printed;
        for (std::size_t c = 0; c < table.columns.size(); ++c) {
            printed.push_back(format_cell(row[c], table.columns[c].kind, unit));
            widths[c] = std::max(widths[c], printed.back().size());
        }
        cells.push_back(std::move(printed));
    }
    auto write_line = [&](const std::vector<std::string>& fields, bool header) {
        std::string line;
        for (std::size_t c = 0; c < fields.size(); ++c) {
            bool last = c + 1 == fields.size();
            bool right = is_numeric(table.columns[c].kind);
            std::string padding(widths[c] - fields[c].size(), ' ');
            line += ' ';
            if (right && !header)
                line += padding + fields[c];
            else if (right && header)
                line += padding + fields[c];
            else
                line += last ? fields[c] : fields[c] + padding;
            if (!last) line += ' ';
        }
        while (!line.empty() && line.back() == ' ') line.pop_back();
        out << line << '\n';
    };
    write_line(titles, true);
    std::vector<std::string> rules;
    for (std::size_t c = 0; c < widths.size(); ++c) rules.emplace_back(widths[c], '-');
    write_line(rules, true);
    for (const auto& printed : cells) write_line(printed, false);
    write_notes();
}

std::string csv_field(std::string_view text) {
    if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
    std::string quoted = "\"";
    for (char c : text) {
        if (c == '"') quoted += '"';
        quoted += c;
    }
    quoted += '"';
    return quoted;
}

void write_csv(std::ostream& out, const Table& table, TimeUnit unit) {
    for (std::size_t c = 0; c < table.columns.size(); ++c) {
        if (c > 0) out << ',';
        out << csv_field(column_title(table.columns[c], unit));
    }
    out << "\r\n";
    for (const auto& row : table.rows) {
        for (std::size_t c = 0; c < table.columns.size(); ++c) {
            if (c > 0) out << ',';
            out << csv_field(format_cell(row[c], table.columns[c].kind, unit));
        }
        out << "\r\n";
    }
}

nlohmann::json to_json(const Table& table, TimeUnit unit) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& row : table.rows) {
        nlohmann::json object = nlohmann::json::object();
        for (std::size_t c = 0; c < table.columns.size(); ++c) {
            const Column& column = table.columns[c];
            const Cell& cell = row[c];
            const bool always_ns = column.key.size() > 3 && column.key.compare(column.key.size() - 3, 3, "_ns") == 0;
            if (const auto* text = std::get_if<std::string>(&cell)) {
                object[column.key] = *text;
            } else if (std::holds_alternative<std::monostate>(cell)) {
                object[column.key] = nullptr;
            } else if (column.kind == ColumnKind::time && unit != TimeUnit::ns && !always_ns) {
                object[column.key] = as_double(cell) / nanoseconds_per(unit);
            } else if (const auto* integer = std::get_if<std::int64_t>(&cell)) {
                object[column.key] = *integer;
            } else {
                object[column.key] = std::get<double>(cell);
            }
        }
        rows.push_back(std::move(object));
    }
    return rows;
}

}  // namespace ember::analysis
