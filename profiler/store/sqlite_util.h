// sqlite_util.h: the few SQLite helpers the store shares — a prepared-statement
// owner, calls that turn SQLite failures into TraceError naming the file, and the
// codec of the untyped columns (a payload, a metadata value). Rows are bound and read
// through the table declarations of tables.h.
#pragma once

#include "profiler/store/trace_error.h"
#include "profiler/trace/events.h"

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace ember::store {

// TraceError kind for an SQLite result code (corrupt, not a database, io, ...).
TraceErrorKind error_kind_for(int sqlite_result);

// Throws TraceError for `path`: "<what>: <sqlite message>".
[[noreturn]] void throw_sqlite_error(sqlite3* db, const std::string& path, std::string_view what, int result);

// Runs one or more SQL statements without results; throws on failure.
void exec_sql(sqlite3* db, const std::string& path, const char* sql);

// An SQLite connection, closed on destruction. The one way code outside the store
// opens an SQLite file: another tool's database, read-only (Nsight Systems and nvprof
// exports), or a scratch database (the store benchmark's plain loop). Throws
// TraceError naming the file.
class Connection {
  public:
    enum class Mode { read_only, read_write, create };
    // `what` begins the error message: "<path>: <what>: <SQLite's reason>".
    Connection(const std::string& path, Mode mode, std::string_view what = "cannot open");
    ~Connection();
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    sqlite3* get() const { return db_; }
    const std::string& path() const { return path_; }

  private:
    sqlite3* db_ = nullptr;
    std::string path_;
};

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
        sqlite3_bind_text(statement_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
    }

    // Executes a statement that returns no rows, then resets it. Throws on error.
    void step_done();
    // Steps a query: true with a row ready, false when done. Throws on error.
    bool next_row();
    void reset() { sqlite3_reset(statement_); }

    std::int64_t column_int64(int column) const { return sqlite3_column_int64(statement_, column); }
    double column_double(int column) const { return sqlite3_column_double(statement_, column); }
    int column_type(int column) const { return sqlite3_column_type(statement_, column); }
    bool column_is_null(int column) const { return column_type(column) == SQLITE_NULL; }
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

// An untyped column's value (run_metadata.value): an integer, or text.
struct AnyValue {
    bool is_integer = false;
    std::int64_t integer = 0;
    std::string text;  // the value as text (an integer's decimal digits)
    static AnyValue of_integer(std::int64_t value) { return {true, value, std::to_string(value)}; }
    static AnyValue of_text(std::string value) { return {false, 0, std::move(value)}; }
};
void bind_any(Statement& s, int index, const AnyValue& value);
AnyValue column_any(const Statement& s, int column);

}  // namespace ember::store
