// sqlite_util.cpp: SQLite error mapping and the Statement owner.
#include "profiler/store/sqlite_util.h"

#include <utility>

namespace ember::store {

TraceErrorKind error_kind_for(int sqlite_result) {
    switch (sqlite_result & 0xff) {
        case SQLITE_CORRUPT:
            return TraceErrorKind::corrupt;
        case SQLITE_NOTADB:
            return TraceErrorKind::not_a_trace;
        case SQLITE_CANTOPEN:
            return TraceErrorKind::not_found;
        default:
            return TraceErrorKind::io;
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
        throw TraceError(error_kind_for(result), path, message + " in: " + std::string(first_line.substr(0, 80)));
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

Statement::~Statement() {
    sqlite3_finalize(statement_);
}

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
    if (payload.kind == trace::PayloadKind::integer)
        s.bind(index, payload.integer);
    else if (payload.kind == trace::PayloadKind::real)
        s.bind(index, payload.real);
    else
        s.bind_null(index);
}

trace::Payload column_payload(const Statement& s, int column) {
    switch (s.column_type(column)) {
        case SQLITE_INTEGER:
            return trace::Payload::of_integer(s.column_int64(column));
        case SQLITE_FLOAT:
            return trace::Payload::of_real(s.column_double(column));
        default:
            return trace::Payload{};
    }
}

Connection::Connection(const std::string& path, Mode mode, std::string_view what) : path_(path) {
    const int flags = mode == Mode::read_only    ? SQLITE_OPEN_READONLY
                      : mode == Mode::read_write ? SQLITE_OPEN_READWRITE
                                                 : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    const int result = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
    if (result != SQLITE_OK) {
        struct Closer {
            sqlite3* db;
            ~Closer() { sqlite3_close(db); }
        } closer{std::exchange(db_, nullptr)};
        throw_sqlite_error(closer.db, path, what, result);
    }
}

Connection::~Connection() {
    sqlite3_close(db_);
}

void bind_any(Statement& s, int index, const AnyValue& value) {
    if (value.is_integer)
        s.bind(index, value.integer);
    else
        s.bind_text(index, value.text);
}

AnyValue column_any(const Statement& s, int column) {
    AnyValue value;
    value.is_integer = s.column_type(column) == SQLITE_INTEGER;
    value.integer = s.column_int64(column);
    value.text = s.column_text(column);
    return value;
}

}  // namespace ember::store
