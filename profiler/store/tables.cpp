// tables.cpp: the SQL derived from the table declarations of tables.h.
#include "profiler/store/tables.h"

#include "ember/version.h"
#include "profiler/store/schema.h"

#include <algorithm>
#include <cstring>

namespace ember::store {

const char* sql_type_name(SqlType type) {
    switch (type) {
        case SqlType::integer:
            return "INTEGER";
        case SqlType::real:
            return "REAL";
        case SqlType::text:
            return "TEXT";
        case SqlType::any:
            return "";
    }
    return "";
}

// One column per line, names padded to the longest, as the schema has always been
// written (sqlite_master keeps this text: files stay the same byte for byte).
std::string create_table_sql(const TableInfo& table) {
    std::size_t width = 0;
    for (const ColumnInfo& column : table.columns) width = std::max(width, std::strlen(column.name));
    std::string sql = std::string("CREATE TABLE IF NOT EXISTS ") + table.name + " (\n";
    for (std::size_t i = 0; i < table.columns.size(); ++i) {
        const ColumnInfo& column = table.columns[i];
        sql += "  ";
        sql += column.name;
        if (column.type != SqlType::any) {
            sql.append(width - std::strlen(column.name) + static_cast<std::size_t>(table.name_gap), ' ');
            sql += sql_type_name(column.type);
            if (column.options.primary_key) sql += " PRIMARY KEY";
            if (column.not_null()) sql += " NOT NULL";
            if (column.options.default_sql) sql += std::string(" DEFAULT ") + column.options.default_sql;
        }
        if (i + 1 < table.columns.size() || table.composite_key) sql += ",";
        sql += "\n";
    }
    if (table.composite_key) return sql + "  PRIMARY KEY (" + table.composite_key + ")\n) WITHOUT ROWID;\n";
    return sql + ");\n";
}

std::string create_tables_sql() {
    std::string sql = "\n";
    for (const TableInfo& table : kTables) sql += create_table_sql(table);
    return sql;
}

std::string create_indexes_sql() {
    std::string sql = "\n";
    for (const TableInfo& table : kTables)
        for (const IndexInfo& index : table.indexes)
            sql += std::string("CREATE INDEX IF NOT EXISTS ") + index.name + " ON " + table.name + " (" +
                   index.columns + ");\n";
    return sql;
}

std::string column_list(const TableInfo& table) {
    std::string list;
    for (const ColumnInfo& column : table.columns) {
        if (!list.empty()) list += ", ";
        list += column.name;
    }
    return list;
}

std::string insert_sql(const TableInfo& table, std::string_view verb) {
    std::string sql = "INSERT ";
    if (!verb.empty()) sql += std::string(verb) + " ";
    sql += std::string("INTO ") + table.name + " (" + column_list(table) + ") VALUES (";
    for (std::size_t i = 0; i < table.columns.size(); ++i) sql += i ? ", ?" : "?";
    return sql + ")";
}

namespace {
MetadataRow integer_row(const char* key, std::int64_t value) {
    return {key, AnyValue::of_integer(value)};
}
MetadataRow text_row(const char* key, std::string value) {
    return {key, AnyValue::of_text(std::move(value))};
}
}  // namespace

std::vector<MetadataRow> run_info_rows(const trace::RunInfo& run) {
    return {
        text_row(metadata_key::command_line, run.command_line),
        text_row(metadata_key::host, run.host),
        integer_row(metadata_key::pid, run.pid),
        integer_row(metadata_key::rank, run.rank),
        integer_row(metadata_key::world_size, run.world_size),
        text_row(metadata_key::rank_source, run.rank_source),
        text_row(metadata_key::clock_name, run.clock_name),
        integer_row(metadata_key::clock_offset_to_wall_ns, run.clock_offset_to_wall_ns),
        integer_row(metadata_key::start_ns, run.start_ns),
        integer_row(metadata_key::end_ns, run.end_ns),
    };
}

std::vector<MetadataRow> run_metadata_rows(const trace::RunInfo& run, int schema_version, int min_reader_version) {
    trace::RunInfo opening = run;
    opening.end_ns = 0;  // set at a clean close
    std::vector<MetadataRow> rows = {
        integer_row(metadata_key::schema_version, schema_version),
        integer_row(metadata_key::min_reader_version, min_reader_version),
        text_row(metadata_key::ember_version,
                 run.ember_version.empty() ? std::string(EMBER_VERSION_STRING) : run.ember_version),
    };
    for (MetadataRow& row : run_info_rows(opening)) rows.push_back(std::move(row));
    rows.push_back(text_row(metadata_key::status, metadata_status::recording));
    return rows;
}

}  // namespace ember::store
