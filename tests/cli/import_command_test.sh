#!/usr/bin/env bash
# `ember import` and the reading commands on files other tools write, as a user runs
# them: synth -> export chrome -> import gives the same kernel/API/NVTX tables; stats,
# export and merge read a Chrome/Kineto file directly, say once that they imported it,
# reuse the import the second time, and import again when the file changes; bad input
# is one line naming the file, exit 2, and no output left behind; an event that cannot
# be placed is skipped and named, or refused with --strict. With ../shared the real
# Kineto and nsys traces import too.
set -u
ember="$1"
shared="$2"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$ember" synth -o "$work/s.db" --events 20000 --seed 3 >/dev/null || fail "synth"
"$ember" export "$work/s.db" --format chrome -o "$work/s.chrome.json" >/dev/null || fail "export chrome"

# import: one input, one trace, counts printed.
out=$("$ember" import "$work/s.chrome.json" -o "$work/back.db") || fail "import exit $?"
echo "$out" | grep -q "chrome, rank 0" || fail "import summary: $out"
echo "$out" | grep -q "wrote $work/back.db" || fail "import did not say what it wrote: $out"

# The round trip keeps the tables stats shows.
for report in kernels api nvtx; do
  "$ember" stats "$work/s.db" --report $report --format csv > "$work/a.csv" || fail "stats $report on s.db"
  "$ember" stats "$work/back.db" --report $report --format csv > "$work/b.csv" || fail "stats $report on back.db"
  cmp -s "$work/a.csv" "$work/b.csv" || { diff "$work/a.csv" "$work/b.csv" | head; fail "$report differs after the round trip"; }
done

# stats on the JSON directly: imported once (said on stderr), reused next time.
"$ember" stats "$work/s.chrome.json" --report kernels --format csv > "$work/c.csv" 2> "$work/err1" || fail "stats on json"
grep -q "ember stats: imported chrome trace" "$work/err1" || fail "first read did not say it imported: $(cat "$work/err1")"
[ "$(grep -c . "$work/err1")" = 1 ] || fail "the import was announced more than once: $(cat "$work/err1")"
"$ember" stats "$work/s.db" --report kernels --format csv | cmp -s - "$work/c.csv" || fail "stats on the json differs"
[ -f "$work/s.chrome.json.ember-cache.db" ] || fail "no cache beside the input"
"$ember" stats "$work/s.chrome.json" --report kernels --format csv > /dev/null 2> "$work/err2" || fail "second stats"
grep -q "through its import" "$work/err2" || fail "second read did not reuse the import: $(cat "$work/err2")"
touch -d '2001-01-01' "$work/s.chrome.json"
"$ember" stats "$work/s.chrome.json" --report kernels --format csv > /dev/null 2> "$work/err3" || fail "third stats"
grep -q "imported chrome trace" "$work/err3" || fail "a changed input was not imported again: $(cat "$work/err3")"

# export and merge read it too.
"$ember" export "$work/s.chrome.json" --format folded --stacks host -o "$work/s.folded" 2>/dev/null || fail "export from json"
[ -s "$work/s.folded" ] || fail "export from json wrote nothing"
"$ember" merge -o "$work/job.db" "$work/s.chrome.json" "$work/s.db" > /dev/null 2>&1 || fail "merge of json + db"

# Bad input: truncated JSON -> one line naming the file and a byte offset, exit 2, nothing written.
head -c 5000 "$work/s.chrome.json" > "$work/cut.json"
"$ember" import "$work/cut.json" -o "$work/cut.db" 2> "$work/err4"; status=$?
[ $status = 2 ] || fail "truncated input: exit $status, expected 2"
grep -q "ember import: .*cut.json.*byte" "$work/err4" || fail "error does not name the file and offset: $(cat "$work/err4")"
[ ! -e "$work/cut.db" ] || fail "a failed import left $work/cut.db"
ls -a "$work" | grep -q "importing" && fail "a failed import left a temporary"
"$ember" stats "$work/cut.json" 2>/dev/null; [ $? = 2 ] || fail "stats on a truncated file: expected exit 2"
"$ember" import "$work/s.chrome.json" --format nope 2>/dev/null; [ $? = 2 ] || fail "bad --format: expected exit 2"

# A trace with an event ember cannot place (PyTorch's context sync once was one; here a
# kernel on stream -1): read anyway, the skip named on stderr with the element and byte;
# --strict refuses it (exit 2), also when a lenient read left its import cached.
cat > "$work/odd.json" <<'JSON'
{"schemaVersion": 1, "traceEvents": [
  {"ph": "X", "cat": "kernel", "name": "ok", "pid": 0, "tid": 7, "ts": 10, "dur": 5, "args": {"device": 0, "stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "lost", "pid": 0, "tid": -1, "ts": 20, "dur": 5, "args": {"device": 0, "stream": -1}},
  {"ph": "X", "cat": "cuda_sync", "name": "Context Sync", "pid": 0, "tid": 0, "ts": 30, "dur": 2,
   "args": {"cuda_sync_kind": "Context Sync", "stream": -1, "correlation": 5, "device": 0, "context": 1}}
]}
JSON
"$ember" stats "$work/odd.json" --report kernels > "$work/odd.out" 2> "$work/odd.err" || fail "stats of a trace with an odd event: exit $?"
grep -q "skipped 1 event that breaks the format's rules: 1 x GPU event on an impossible device or stream (first: traceEvents element #1 at byte" "$work/odd.err" \
  || fail "the skip is not named: $(cat "$work/odd.err")"
"$ember" stats "$work/odd.json" --report kernels > /dev/null 2> "$work/odd2.err" || fail "second stats"
grep -q "through its import.*skipped 1 event" "$work/odd2.err" || fail "the reused import does not say what it skipped: $(cat "$work/odd2.err")"
"$ember" stats --strict "$work/odd.json" --report kernels > /dev/null 2> "$work/odd3.err"; status=$?
[ $status = 2 ] || fail "--strict read the odd trace: exit $status"
grep -q "odd.json.*element #1" "$work/odd3.err" || fail "--strict does not name the element: $(cat "$work/odd3.err")"
"$ember" import --strict "$work/odd.json" -o "$work/odd.db" 2>/dev/null; [ $? = 2 ] || fail "import --strict: expected exit 2"
"$ember" import "$work/odd.json" -o "$work/odd.db" | grep -q "skipped 1 event" || fail "import does not say what it skipped"

# Real traces, when ../shared is there.
if [ -d "$shared/kineto" ]; then
  out=$("$ember" import "$shared/kineto/a100_sampled_rank0.json.gz" "$shared/kineto/a100_sampled_rank1.json.gz" -o "$work/a100.db") \
    || fail "import of the two A100 ranks"
  echo "$out" | grep -q "2 ranks in one job file" || fail "two ranks: $out"
  "$ember" import "$shared/nsys/saxpy_rank0.sqlite" -o "$work/saxpy.db" | grep -q "nsys, rank 0" || fail "nsys import"
  "$ember" stats "$work/saxpy.db" --report kernels | grep -q saxpy || fail "nsys kernels"
  # Every trace of every kind opens with `ember stats` (copied: a reading command caches
  # its import beside the input).
  mkdir -p "$work/every"
  opened=0
  for file in "$shared"/*/*; do
    case "$file" in */expected/*|*.nsys-stats|*.md) continue ;; esac
    [ -f "$file" ] || continue
    cp "$file" "$work/every/" || fail "copy $file"
    copy="$work/every/$(basename "$file")"
    "$ember" stats "$copy" > "$work/every.out" 2> "$work/every.err"
    status=$?
    [ $status = 0 ] || { cat "$work/every.err"; fail "ember stats $(basename "$file") exit $status"; }
    rm -f "$copy" "$copy".ember-cache.db*
    opened=$((opened + 1))
  done
  echo "every real trace opens with ember stats: $opened files"
else
  echo "real traces: skipped ($shared is absent)"
fi
echo "PASS"
