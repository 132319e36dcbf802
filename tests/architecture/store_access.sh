#!/usr/bin/env bash
# store_access.sh ROOT: one way into and out of an ember trace file. Only
# profiler/store/ opens SQLite files (store::Connection serves everyone else, the
# importers' read-only look at another tool's database included), and only it creates
# or inserts into ember's tables: their columns are declared once, in
# profiler/store/tables.h, and a copy elsewhere drifts. The run_metadata keys are named
# once too (store::metadata_key in profiler/store/schema.h): a literal of one elsewhere
# is a copy. Every violation is printed as file:line: text <- the rule; exit code 1 when
# there is one. Tests (which plant old files on purpose) are not checked.
set -u
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

# check REGEX RULE [EXCEPT]: no source file outside profiler/store/ and tests/ may match
# REGEX on the code of a line (what is left of its // comment); hits matching EXCEPT aside.
check() {
    local pattern=$1 rule=$2 except=${3:-} hit code
    while IFS= read -r hit; do
        [ -n "$hit" ] || continue
        code=${hit#*:*:}
        code=${code%%//*}
        grep -qE -e "$pattern" <<<"$code" || continue
        [ -n "$except" ] && grep -qE -e "$except" <<<"$hit" && continue
        printf '%s  <- %s\n' "$hit" "$rule"
        violations=$((violations + 1))
    done < <(grep -rnE --include='*.h' --include='*.hpp' --include='*.cpp' --include='*.cu' --include='*.cuh' \
        --include='*.inc' --exclude-dir=.git --exclude-dir='build*' --exclude-dir=tests --exclude-dir=third_party \
        -e "$pattern" . | sed 's|^\./||' | grep -v '^profiler/store/')
}

check 'sqlite3_open' "only profiler/store/ opens SQLite files: use store::Connection, TraceWriter, TraceReader or TraceEditor"
check "CREATE TABLE|INSERT( OR [A-Z]+)? INTO \"?($tables)\"?[ (]|VALUES *\\(\\?" \
    "ember's tables are declared once (profiler/store/tables.h): write them through the store"
# The trace diff's name tables still read the sample period by its literal.
[ -n "$keys" ] && check "\"($keys)\"" \
    "run_metadata keys are named once (store::metadata_key in profiler/store/schema.h): use the name" \
    '^profiler/analysis/trace_diff_name_tables\.cpp:'

if [ "$violations" -gt 0 ]; then
    echo "store access: $violations violation(s)" >&2
    exit 1
fi
echo "store access: only profiler/store/ opens SQLite files and writes ember's tables"
