#!/bin/bash
# table_sql_compile_test.sh CXX SOURCE_DIR: a store::TableSql that names a table or a
# column tables.h does not declare stops the build, naming the query; the same query
# with declared names compiles (so a broken include path cannot pass for a caught name).
set -u
cxx=$1; src=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
compile() {  # compile NAME QUERY: the output of compiling a translation unit that uses QUERY
    cat > "$work/$1.cpp" <<CPP
#include "profiler/store/table_sql.h"
ember::store::Statement run(const ember::store::TraceReader& reader) { return ember::store::query(reader, "$2"); }
CPP
    "$cxx" -std=c++20 -fsyntax-only -I"$src" "$work/$1.cpp" > "$work/$1.log" 2>&1
}
fail() { echo "FAIL: $*"; exit 1; }

compile good "SELECT stream_id, SUM(end_ns - start_ns) FROM kernels GROUP BY stream_id" ||
    { cat "$work/good.log"; fail "a query of declared names does not compile"; }
for bad in "SELECT stream_id, SUM(end_ns - start_ns) FROM kernels GROUP BY stream" \
           "SELECT stream_id, SUM(bytes) FROM kernels GROUP BY stream_id" \
           "SELECT stream_id FROM kernel_events"; do
    if compile bad "$bad"; then fail "compiled: $bad"; fi
    grep -q "table_sql_names_a_table_or_column_not_declared_in_tables_h" "$work/bad.log" ||
        { cat "$work/bad.log"; fail "no undeclared-name diagnostic for: $bad"; }
    grep -qF "$bad" "$work/bad.log" || { cat "$work/bad.log"; fail "the diagnostic does not quote: $bad"; }
done
echo "ok: undeclared names stop the build"
