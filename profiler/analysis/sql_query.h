// sql_query.h: a prepared SELECT on a trace's SQLite connection, for the
// aggregates the analyses compute in SQL (GROUP BY, ORDER BY) rather than in a
// visitor. Every failure throws TraceError naming the trace file and the query.
#pragma once

#include "profiler/store/trace_error.h"

#include <cstdint>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace ember::analysis {

class SqlQuery {
public:
    // Prepares `sql` on `database`; `path` names the trace in error messages.
    SqlQuery(sqlite3* database, const std::string& path, std::string_view sql);
    ~SqlQuery();
    SqlQuery(const SqlQuery&) = delete;
    SqlQuery& operator=(const SqlQuery&) = delete;

    void bind_int64(int index, std::int64_t value);  // index counts from 1, as in SQLite
    // True with a row ready, false when the result is exhausted.
    bool next_row();
    void reset();

    std::int64_t int64(int column) const;
    double real(int column) const;
    bool is_null(int column) const;
    std::string text(int column) const;

private:
    [[noreturn]] void fail(std::string_view what, int result) const;

    sqlite3* database_ = nullptr;
    sqlite3_stmt* statement_ = nullptr;
    std::string path_;
    std::string sql_;
};

}  // namespace ember::analysis
