#!/usr/bin/env bash
# store_access.sh ROOT: one way into and out of an ember trace file. Only
# profiler/store/ opens SQLite files (store::Connection serves everyone else, the
# importers' read-only look at another tool's database included), and only it creates
# or inserts into ember's tables: their columns are declared once, in
# profiler/store/tables.h, and a copy elsewhere drifts. The run_metadata keys are named
# once too (store::metadata_key in profiler/store/schema.h): a literal of one elsewhere
# is a copy. Every violation is printed as file:line: text <- the rule; exit code 1 when
# there is one. Tests (which plant old files on purpose) are not checked. Queries of
# ember's tables are store::TableSql, checked against the declarations at compile time.
set -u
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lint_common.sh"
root=${1:?usage: store_access.sh ROOT}
cd "$root" || exit 2
violations=0

# The ember tables, from their declarations.
tables=$(grep -oE 'static constexpr const char\* name = "[a-z_]+"' profiler/store/tables.h | grep -oE '"[a-z_]+"' |
    tr -d '"' | paste -sd'|')
[ -n "$tables" ] || { echo "store_access: no table declarations found in profiler/store/tables.h" >&2; exit 2; }
# Keys of run_metadata that name nothing else (host, pid, rank, ... are words of other formats too).
keys=$(sed -n '/^namespace metadata_key {/,/^}/p' profiler/store/schema.h | grep -oE '= "[a-z_]+_[a-z_]+"' |
    grep -oE '"[a-z_]+"' | tr -d '"' | grep -vE '^(start_ns|end_ns|world_size|command_line)$' | paste -sd'|')


# check REGEX RULE: no source file outside profiler/store/ (and tests/, which plant old
# files on purpose) may match REGEX on the code of a line.
check() {
    local folder
    for folder in *; do
        [ -d "$folder" ] && [ "$folder" != tests ] && [ "$folder" != build ] || continue
        forbid_code "$folder" "$1" "$2" '^profiler/store/'
    done
}

check 'sqlite3_open' "only profiler/store/ opens SQLite files: use store::Connection, TraceWriter, TraceReader or TraceEditor"
check "CREATE TABLE|INSERT( OR [A-Z]+)? INTO \"?($tables)\"?[ (]|VALUES *\\(\\?" \
    "ember's tables are declared once (profiler/store/tables.h): write them through the store"
[ -n "$keys" ] && check "\"($keys)\"" \
    "run_metadata keys are named once (store::metadata_key in profiler/store/schema.h): use the name"

# SQL of one's own on a trace is a store::TableSql run by store::query() (table_sql.h):
# its names are checked against tables.h when it compiles. Only the importers (another
# tool's database, through store::Connection) and the store's own benchmark (its raw
# SQLite baseline) prepare statements themselves, and the importers never name an ember
# table in a query.
for folder in *; do
    [ -d "$folder" ] && [ "$folder" != tests ] && [ "$folder" != build ] || continue
    forbid_code "$folder" 'store::Connection|\bStatement [a-z_]+\([a-z_]+(\.get\(\))?, |Statement\(' \
        "SQL on a trace is a store::TableSql run by store::query() (profiler/store/table_sql.h)" \
        '^(profiler/store|profiler/import|bench/store_bench\.cpp)'
done
forbid_code profiler/import "FROM \"?($tables)\\b" \
    "importers read ember's tables through TraceReader (or store::query), not a query of their own"

if [ "$violations" -gt 0 ]; then
    echo "store access: $violations violation(s)" >&2
    exit 1
fi
echo "store access: only profiler/store/ opens SQLite files and writes ember's tables"
