// sqlite_table_scan.h: one scan of a table of another tool's SQLite file (an Nsight
// Systems export, an nvprof database) with the columns it has. Such files gain
// columns between versions: nothing is assumed, each table's columns are listed with
// PRAGMA table_info, a missing required column is an error naming the table, and an
// optional one reads as NULL.
#pragma once

#include "profiler/store/sqlite_util.h"
#include "profiler/store/trace_error.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace ember::importing {

// One scan of a table with the columns it has. Columns are named at construction
// (required ones must exist); values are read by the index index_of() gives, -1 for
// an optional column the table lacks (reads as NULL).
class TableScan {
  public:
    // `unknown_schema`: what a missing required column means ("an nsys export schema this
    // importer does not know").
    TableScan(sqlite3* db, const std::string& path, const std::string& table,
              std::initializer_list<const char*> required, std::initializer_list<const char*> optional,
              std::string_view order_by = {},
              std::string_view unknown_schema = "an nsys export schema this importer does not know")
        : path_(path), table_(table) {
        std::set<std::string> present;
        {
            store::Statement info(db, path, fmt::format("PRAGMA table_info(\"{}\")", table));
            while (info.next_row()) present.insert(info.column_text(1));
        }
        std::string sql = "SELECT rowid";
        int position = 1;
        for (const char* column : required) {
            if (!present.count(column)) {
                throw store::TraceError(store::TraceErrorKind::missing_table, path,
                                        fmt::format("table {} has no column {} ({})", table, column, unknown_schema));
            }
            names_.emplace_back(column);
            positions_.push_back(position++);
            sql += fmt::format(", \"{}\"", column);
        }
        for (const char* column : optional) {
            names_.emplace_back(column);
            if (present.count(column)) {
                positions_.push_back(position++);
                sql += fmt::format(", \"{}\"", column);
            } else {
                positions_.push_back(-1);
            }
        }
        sql += fmt::format(" FROM \"{}\"", table);
        // Ordering by columns the table lacks would be an SQL error: only those present count.
        std::string order;
        for (std::size_t begin = 0; begin < order_by.size();) {
            std::size_t comma = order_by.find(',', begin);
            std::string_view column =
                order_by.substr(begin, comma == std::string_view::npos ? std::string_view::npos : comma - begin);
            if (present.count(std::string(column))) order += fmt::format("{}\"{}\"", order.empty() ? "" : ", ", column);
            begin = comma == std::string_view::npos ? order_by.size() : comma + 1;
        }
        if (!order.empty()) sql += " ORDER BY " + order;
        statement_ = store::Statement(db, path, sql);
    }

    bool next() {
        try {
            return statement_.next_row();
        } catch (const store::TraceError& error) {
            throw store::TraceError(error.kind(), path_, fmt::format("reading table {}: {}", table_, error.what()));
        }
    }
    int index_of(std::string_view column) const {
        for (std::size_t i = 0; i < names_.size(); ++i) {
            if (names_[i] == column) return static_cast<int>(i);
        }
        return -1;
    }
    bool has(int index) const { return index >= 0 && positions_[static_cast<std::size_t>(index)] >= 0; }
    std::int64_t rowid() const { return statement_.column_int64(0); }
    bool is_null(int index) const {
        return !has(index) || statement_.column_type(positions_[static_cast<std::size_t>(index)]) == SQLITE_NULL;
    }
    // An integer column; NULL, text or a real number is an error naming the row.
    std::int64_t integer(int index) const {
        if (!has(index)) fail(fmt::format("has no column {}", names_[static_cast<std::size_t>(index)]));
        int position = positions_[static_cast<std::size_t>(index)];
        int type = statement_.column_type(position);
        if (type != SQLITE_INTEGER) {
            fail(fmt::format("{} is {} where an integer was expected", names_[static_cast<std::size_t>(index)],
                             type == SQLITE_NULL ? "NULL" : (type == SQLITE_TEXT ? "text" : "not an integer")));
        }
        return statement_.column_int64(position);
    }
    std::optional<std::int64_t> maybe_integer(int index) const {
        if (is_null(index)) return std::nullopt;
        int position = positions_[static_cast<std::size_t>(index)];
        if (statement_.column_type(position) != SQLITE_INTEGER) return std::nullopt;
        return statement_.column_int64(position);
    }
    std::optional<double> maybe_real(int index) const {
        if (is_null(index)) return std::nullopt;
        int position = positions_[static_cast<std::size_t>(index)];
        int type = statement_.column_type(position);
        if (type != SQLITE_FLOAT && type != SQLITE_INTEGER) return std::nullopt;
        return statement_.column_double(position);
    }
    // A BLOB column's bytes (nvprof's objectId, payload); nullopt for NULL or another type.
    std::optional<std::string> maybe_blob(int index) const {
        if (is_null(index)) return std::nullopt;
        int position = positions_[static_cast<std::size_t>(index)];
        if (statement_.column_type(position) != SQLITE_BLOB) return std::nullopt;
        return statement_.column_blob(position);
    }
    std::optional<std::string> maybe_text(int index) const {
        if (is_null(index)) return std::nullopt;
        int position = positions_[static_cast<std::size_t>(index)];
        if (statement_.column_type(position) != SQLITE_TEXT) return std::nullopt;
        return statement_.column_text(position);
    }
    [[noreturn]] void fail(const std::string& what,
                           store::TraceErrorKind kind = store::TraceErrorKind::bad_value) const {
        throw store::TraceError(kind, path_, where(what));
    }
    std::string where(const std::string& what) const {
        return fmt::format("table {} row {}: {}", table_, rowid(), what);
    }
    const std::string& table() const { return table_; }

  private:
    std::string path_;
    std::string table_;
    std::vector<std::string> names_;
    std::vector<int> positions_;
    store::Statement statement_;
};

}  // namespace ember::importing
