// sqlite_util.h: the few SQLite helpers the store shares — a prepared-statement
// owner, calls that turn SQLite failures into TraceError naming the file, and the
// codec of the columns more than one place writes or reads (a payload; a ranges row:
// the writer, the reader, and an import that nests ranges again).
#pragma once

#include "profiler/store/trace_error.h"
#include "profiler/trace/events.h"

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace ember::store {

// TraceError kind for an SQLite result code (corrupt, not a database, io, ...).
TraceErrorKind error_kind_for(int sqlite_result);

// Throws TraceError for `path`: "<what>: <sqlite message>".
[[noreturn]] void throw_sqlite_error(sqlite3* db, const std::string& path, std::string_view what,
                                     int result);

// Runs one or more SQL statements without results; throws on failure.
void exec_sql(sqlite3* db, const std::string& path, const char* sql);

// A prepared statement, finalized on destruction. Bind/step/column helpers stay
// inline and unchecked on the hot path; step_done() and next_row() check.
class Statement {
public:
    Statement() = default;
    Statement(sqlite3* db, const std::string& path, std::string_view sql);
    ~Statement();
    Statement(Statement&& other) noexcept;
    Statement& operator=(Statement&& other) noexcept;
    Statement(const Statement&) = delete;
    Statement& operator=(const Statement&) = delete;

    sqlite3_stmt* get() const { return statement_; }
    explicit operator bool() const { return statement_ != nullptr; }

    void bind(int index, std::int64_t value) { sqlite3_bind_int64(statement_, index, value); }
    void bind(int index, std::uint64_t value) {
        sqlite3_bind_int64(statement_, index, static_cast<std::int64_t>(value));
    }
    void bind(int index, std::int32_t value) { sqlite3_bind_int64(statement_, index, value); }
    void bind(int index, std::uint32_t value) { sqlite3_bind_int64(statement_, index, value); }
    void bind(int index, double value) { sqlite3_bind_double(statement_, index, value); }
    void bind_null(int index) { sqlite3_bind_null(statement_, index); }
    void bind_text(int index, std::string_view text) {
        sqlite3_bind_text(statement_, index, text.data(), static_cast<int>(text.size()),
                          SQLITE_TRANSIENT);
    }

    // Executes a statement that returns no rows, then resets it. Throws on error.
    void step_done();
    // Steps a query: true with a row ready, false when done. Throws on error.
    bool next_row();
    void reset() { sqlite3_reset(statement_); }

    std::int64_t column_int64(int column) const { return sqlite3_column_int64(statement_, column); }
    double column_double(int column) const { return sqlite3_column_double(statement_, column); }
    int column_type(int column) const { return sqlite3_column_type(statement_, column); }
    std::string column_text(int column) const;
    // The column's bytes as stored (a BLOB's; other types as SQLite converts them).
    std::string column_blob(int column) const;

private:
    sqlite3_stmt* statement_ = nullptr;
    sqlite3* db_ = nullptr;
    std::string path_;
};

// A payload column: an integer, a real or NULL (none).
void bind_payload(Statement& s, int index, const trace::Payload& payload);
trace::Payload column_payload(const Statement& s, int column);

// A ranges row, its columns in this order.
inline constexpr const char* kRangeColumns =
    "range_id, start_ns, end_ns, thread_id, domain_id, name_id, category, color, depth, parent_range_id, payload";
// Binds the row's columns from parameter `first` on.
void bind_range_row(Statement& s, int first, const trace::RangeEvent& range);
// Reads the row from columns 0.. of a SELECT of kRangeColumns.
trace::RangeEvent read_range_row(const Statement& s);

}  // namespace ember::store
