// sql_query.cpp: SqlQuery, a checked wrapper around sqlite3_prepare/step.
#include "profiler/analysis/sql_query.h"

#include <sqlite3.h>

namespace ember::analysis {

namespace {

store::TraceErrorKind kind_for(int result) {
    switch (result & 0xff) {
        case SQLITE_CORRUPT: return store::TraceErrorKind::corrupt;
        case SQLITE_NOTADB: return store::TraceErrorKind::not_a_trace;
        default: return store::TraceErrorKind::io;
    }
}

}  // namespace

SqlQuery::SqlQuery(sqlite3* database, const std::string& path, std::string_view sql)
    : database_(database), path_(path), sql_(sql) {
    int result = sqlite3_prepare_v2(database_, sql_.c_str(), static_cast<int>(sql_.size()), &statement_, nullptr);
    if (result != SQLITE_OK) fail("preparing", result);
}

SqlQuery::~SqlQuery() { sqlite3_finalize(statement_); }

void SqlQuery::fail(std::string_view what, int result) const {
    throw store::TraceError(kind_for(result), path_,
                            std::string(what) + " query \"" + sql_ + "\": " + sqlite3_errmsg(database_));
}

void SqlQuery::bind_int64(int index, std::int64_t value) {
    int result = sqlite3_bind_int64(statement_, index, value);
    if (result != SQLITE_OK) fail("binding a parameter of", result);
}

bool SqlQuery::next_row() {
    int result = sqlite3_step(statement_);
    if (result == SQLITE_ROW) return true;
    if (result == SQLITE_DONE) return false;
    fail("running", result);
}

void SqlQuery::reset() {
    sqlite3_reset(statement_);
    sqlite3_clear_bindings(statement_);
}

std::int64_t SqlQuery::int64(int column) const { return sqlite3_column_int64(statement_, column); }
double SqlQuery::real(int column) const { return sqlite3_column_double(statement_, column); }
bool SqlQuery::is_null(int column) const { return sqlite3_column_type(statement_, column) == SQLITE_NULL; }

std::string SqlQuery::text(int column) const {
    const unsigned char* value = sqlite3_column_text(statement_, column);
    if (value == nullptr) return {};
    return std::string(reinterpret_cast<const char*>(value), static_cast<std::size_t>(sqlite3_column_bytes(statement_, column)));
}

}  // namespace ember::analysis
