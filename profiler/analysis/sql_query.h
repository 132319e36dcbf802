// sql_query.h: the short names the trace diff's queries use (int64, text, ...) for
// store::Statement, the one statement wrapper; every other analysis and export uses
// store::Statement itself. Every failure throws TraceError naming the trace file and
// the query.
#pragma once

#include "profiler/store/sqlite_util.h"

#include <cstdint>
#include <string>

namespace ember::analysis {

class SqlQuery : public store::Statement {
  public:
    using Statement::Statement;

    void bind_int64(int index, std::int64_t value) { bind(index, value); }
    // Also clears the bindings.
    void reset() {
        Statement::reset();
        sqlite3_clear_bindings(get());
    }
    std::int64_t int64(int column) const { return column_int64(column); }
    double real(int column) const { return column_double(column); }
    bool is_null(int column) const { return column_is_null(column); }
    std::string text(int column) const { return column_text(column); }
};

}  // namespace ember::analysis
