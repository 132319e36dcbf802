#!/usr/bin/env bash
# store_access_test.sh: the store-access checker catches what it is for. A tree with one
# planted violation per rule must fail with each named; the same tree without them
# (the store itself, tests, comments, another tool's tables) passes.
set -u
checker=$(dirname "$0")/store_access.sh
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree"/{profiler/store,profiler/import,profiler/analysis,profiler/export,viewer/model,bench,collectors,tests/profiler}
cat >"$tree/profiler/store/tables.h" <<'EOT'
    static constexpr const char* name = "kernels";
    static constexpr const char* name = "run_metadata";
EOT
cat >"$tree/profiler/store/schema.h" <<'EOT'
namespace metadata_key {
inline constexpr const char* host = "host";
inline constexpr const char* cpu_sample_period_ns = "cpu_sample_period_ns";
}  // namespace metadata_key
EOT
echo '    sqlite3_open_v2(path.c_str(), &db, flags, nullptr);' >"$tree/profiler/store/fine.cpp"
echo '    exec("INSERT INTO kernels VALUES (?,?,?)");' >>"$tree/profiler/store/fine.cpp"
echo '    sqlite3_open(":memory:", &db);  INSERT INTO kernels VALUES (?, ?)' >"$tree/tests/profiler/fine.cpp"
cat >"$tree/profiler/import/fine.cpp" <<'EOT'
// sqlite3_open is the store's; INSERT INTO kernels only there.
    Statement rows(db, path, "SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL");
    json["host"] = host;
    reader.metadata(store::metadata_key::cpu_sample_period_ns);
    store::Connection nsys(path, store::Connection::Mode::read_only);
EOT
echo '    store::Statement rows = store::query(reader, "SELECT start_ns FROM kernels");' >"$tree/profiler/analysis/fine.cpp"
echo '    const store::Statement& row = rows;' >>"$tree/profiler/analysis/fine.cpp"
if ! bash "$checker" "$tree" >/dev/null; then
    echo "FAIL: a clean tree was refused"; bash "$checker" "$tree"; exit 1
fi
echo '    int result = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);' >"$tree/profiler/import/bad_open.cpp"
echo '    Statement insert(db, path, "INSERT OR REPLACE INTO run_metadata (key, value) VALUES (?, ?)");' \
    >"$tree/profiler/import/bad_insert.cpp"
echo '    prepare("INSERT INTO kernels VALUES (?,?,?,?,?,?,?,0,0)");' >"$tree/bench/bad_insert.cpp"
echo '    exec("CREATE TABLE IF NOT EXISTS frames (frame_id INTEGER)");' >"$tree/profiler/analysis/bad_create.cpp"
echo '    writer.set_metadata("cpu_sample_period_ns", text);' >"$tree/collectors/bad_key.cpp"
echo '    store::Statement rows(db, path, "SELECT start_ns FROM kernels");' >"$tree/profiler/export/bad_statement.cpp"
echo '    store::Connection trace(path, store::Connection::Mode::read_only);' >"$tree/viewer/model/bad_connection.cpp"
echo '    Statement rows(db, path, "SELECT start_ns, end_ns FROM kernels WHERE stream_id = ?");' \
    >"$tree/profiler/import/bad_select.cpp"
output=$(bash "$checker" "$tree" 2>&1)
status=$?
echo "$output"
[ "$status" -eq 1 ] || { echo "FAIL: exit $status, expected 1"; exit 1; }
for planted in profiler/import/bad_open.cpp profiler/import/bad_insert.cpp bench/bad_insert.cpp \
               profiler/analysis/bad_create.cpp collectors/bad_key.cpp profiler/export/bad_statement.cpp \
               viewer/model/bad_connection.cpp profiler/import/bad_select.cpp; do
    grep -q "^$planted:" <<<"$output" || { echo "FAIL: $planted was not reported"; exit 1; }
done
grep -q "8 violation" <<<"$output" || { echo "FAIL: expected 8 violations"; exit 1; }
echo "PASS"
