// sqlite_util.cpp: SQLite error mapping and the Statement owner.
#include "profiler/store/sqlite_util.h"

#include <utility>

namespace ember::store {

TraceErrorKind error_kind_for(int sqlite_result) {
    switch (sqlite_result & 0xff) {
        case SQLITE_CORRUPT: return TraceErrorKind::corrupt;
        case SQLITE_NOTADB: return TraceErrorKind::not_a_trace;
        case SQLITE_CANTOPEN: return TraceErrorKind::not_found;
        default: return TraceErrorKind::io;
    }
}

void throw_sqlite_error(sqlite3* db, const std::string& path, std::string_view what, int result) {
    std::string message(what);
    message += ": ";
    message += db ? sqlite3_errmsg(db) : sqlite3_errstr(result);
    if ((result & 0xff) == SQLITE_CORRUPT) message += " (the file is damaged or truncated)";
    if ((result & 0xff) == SQLITE_NOTADB) message += " (not an SQLite database, so not an ember trace)";
    throw TraceError(error_kind_for(result), path, message);
}

void exec_sql(sqlite3* db, const std::string& path, const char* sql) {
    char* error = nullptr;
    int result = sqlite3_exec(db, sql, nullptr, nullptr, &error);
    if (result != SQLITE_OK) {
        std::string message = std::string("SQL failed (") + (error ? error : sqlite3_errstr(result)) + ")";
        sqlite3_free(error);
        std::string_view first_line(sql);
        while (!first_line.empty() && (first_line.front() == '\n' || first_line.front() == ' '))
            first_line.remove_prefix(1);
        first_line = first_line.substr(0, first_line.find('\n'));
        throw TraceError(error_kind_for(result), path,
                         message + " in: " + std::string(first_line.substr(0, 80)));
    }
}

Statement::Statement(sqlite3* db, const std::string& path, std::string_view sql) : db_(db), path_(path) {
    int result = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                                    &statement_, nullptr);
    if (result != SQLITE_OK) {
        std::string what = "preparing \"" + std::string(sql.substr(0, 80)) + "\"";
        throw_sqlite_error(db, path, what, result);
    }
}

Statement::~Statement() { sqlite3_finalize(statement_); }

Statement::Statement(Statement&& other) noexcept
    : statement_(std::exchange(other.statement_, nullptr)), db_(other.db_), path_(std::move(other.path_)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
    if (this != &other) {
        sqlite3_finalize(statement_);
        statement_ = std::exchange(other.statement_, nullptr);
        db_ = other.db_;
        path_ = std::move(other.path_);
    }
    return *this;
}

void Statement::step_done() {
    int result = sqlite3_step(statement_);
    sqlite3_reset(statement_);
    if (result != SQLITE_DONE && result != SQLITE_ROW) {
        throw_sqlite_error(db_, path_, std::string("executing \"") + sqlite3_sql(statement_) + "\"", result);
    }
}

bool Statement::next_row() {
    int result = sqlite3_step(statement_);
    if (result == SQLITE_ROW) return true;
    if (result == SQLITE_DONE) return false;
    std::string sql = sqlite3_sql(statement_);
    sqlite3_reset(statement_);
    throw_sqlite_error(db_, path_, "reading \"" + sql.substr(0, 120) + "\"", result);
}

std::string Statement::column_text(int column) const {
    const unsigned char* text = sqlite3_column_text(statement_, column);
    int size = sqlite3_column_bytes(statement_, column);
    return text ? std::string(reinterpret_cast<const char*>(text), static_cast<std::size_t>(size)) : std::string();
}

std::string Statement::column_blob(int column) const {
    const void* bytes = sqlite3_column_blob(statement_, column);
    int size = sqlite3_column_bytes(statement_, column);
    return bytes ? std::string(static_cast<const char*>(bytes), static_cast<std::size_t>(size)) : std::string();
}

void bind_payload(Statement& s, int index, const trace::Payload& payload) {
    if (payload.kind == trace::PayloadKind::integer) s.bind(index, payload.integer);
    else if (payload.kind == trace::PayloadKind::real) s.bind(index, payload.real);
    else s.bind_null(index);
}

trace::Payload column_payload(const Statement& s, int column) {
    switch (s.column_type(column)) {
        case SQLITE_INTEGER: return trace::Payload::of_integer(s.column_int64(column));
        case SQLITE_FLOAT: return trace::Payload::of_real(s.column_double(column));
        default: return trace::Payload{};
    }
}

void bind_range_row(Statement& s, int i, const trace::RangeEvent& e) {
    s.bind(i, e.range_id); s.bind(i + 1, e.start_ns); s.bind(i + 2, e.end_ns); s.bind(i + 3, e.thread_id);
    s.bind(i + 4, e.domain_id); s.bind(i + 5, e.name_id); s.bind(i + 6, e.category); s.bind(i + 7, e.color);
    s.bind(i + 8, e.depth); s.bind(i + 9, e.parent_range_id); bind_payload(s, i + 10, e.payload);
}

trace::RangeEvent read_range_row(const Statement& s) {
    trace::RangeEvent e;
    e.range_id = static_cast<trace::RangeId>(s.column_int64(0));
    e.start_ns = s.column_int64(1);
    e.end_ns = s.column_int64(2);
    e.thread_id = static_cast<trace::ThreadId>(s.column_int64(3));
    e.domain_id = static_cast<trace::StringId>(s.column_int64(4));
    e.name_id = static_cast<trace::StringId>(s.column_int64(5));
    e.category = static_cast<std::uint32_t>(s.column_int64(6));
    e.color = static_cast<std::uint32_t>(s.column_int64(7));
    e.depth = static_cast<std::int32_t>(s.column_int64(8));
    e.parent_range_id = static_cast<trace::RangeId>(s.column_int64(9));
    e.payload = column_payload(s, 10);
    return e;
}

}  // namespace ember::store
