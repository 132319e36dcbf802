#!/usr/bin/env bash
# python_sampling_overhead.sh: what reading Python stacks from outside costs.
#
# 1. The sampled program's slowdown: a pure-Python program does a fixed amount of work
#    (recursive calls, a dict, string formatting) and prints how long the work took
#    (time.perf_counter) and its own CPU time; it runs alone and under
#    `ember record -- python3 ...` at the default 100 Hz, the two interleaved round by
#    round and their order alternating (drift on a shared machine hits both alike).
#    Medians of the rounds.
# 2. The sampler's own cost with 100 threads: a program with 100 Python threads (each
#    20 frames deep, asleep) and a busy main thread is sampled by
#    `ember record --pid PID --duration 5s`; ember's CPU time (user + system) over the
#    duration, and the snapshots per second it reached (100 asked).
#   bash bench/python_sampling_overhead.sh [EMBER] [ROUNDS] [PYTHON]
set -euo pipefail
cd "$(dirname "$0")/.."
ember=${1:-build/release/bin/ember}
rounds=${2:-7}
python=${3:-/usr/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat >"$work/work.py" <<'EOF'
import time
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
def words(n):
    table = {}
    for i in range(n):
        key = "w%d" % (i % 5000)
        table[key] = table.get(key, 0) + len(key)
    return table
start, cpu = time.perf_counter(), time.process_time()
for _ in range(20):
    fib(25)
    words(300000)
print("%.4f %.4f" % (time.perf_counter() - start, time.process_time() - cpu))
EOF

cat >"$work/threads.py" <<'EOF'
import threading, time, sys
def nest(depth):
    if depth == 0:
        time.sleep(3600)
    else:
        nest(depth - 1)
for i in range(100):
    threading.Thread(target=nest, args=(20,), daemon=True).start()
print("ready", flush=True)
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    sum(range(1000))
EOF

source bench/bench_lib.sh
echo "python sampling overhead: $("$python" --version 2>&1), $rounds rounds, $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$rounds"); do
    for side in $( ((round % 2)) && echo "alone ember" || echo "ember alone"); do
        if [ "$side" = alone ]; then
            "$python" "$work/work.py" >>"$work/alone.txt"
        else
            "$ember" record -q -o "$work/run.db" -- "$python" "$work/work.py" >>"$work/ember.txt"
            samples=$("$ember" stats "$work/run.db" --report cpu --format csv | awk -F, 'NR == 2 {print $0}' | wc -l)
            [ "$samples" -gt 0 ] || { echo "no samples recorded" >&2; exit 1; }
        fi
    done
done
cut -d' ' -f1 "$work/alone.txt" >"$work/alone_wall.txt"; cut -d' ' -f1 "$work/ember.txt" >"$work/ember_wall.txt"
cut -d' ' -f2 "$work/alone.txt" >"$work/alone_cpu.txt"; cut -d' ' -f2 "$work/ember.txt" >"$work/ember_cpu.txt"
aw=$(median <"$work/alone_wall.txt"); ew=$(median <"$work/ember_wall.txt")
ac=$(median <"$work/alone_cpu.txt"); ec=$(median <"$work/ember_cpu.txt")
span() { echo "$(minimum <"$1")-$(maximum <"$1")"; }
printf '%-34s %12s %14s %12s %14s\n' "" "work (s)" "(min-max)" "its CPU (s)" "(min-max)"
printf '%-34s %12.3f %14s %12.3f %14s\n' "alone" "$aw" "$(span "$work/alone_wall.txt")" "$ac" "$(span "$work/alone_cpu.txt")"
printf '%-34s %12.3f %14s %12.3f %14s\n' "under ember record (100 Hz)" "$ew" "$(span "$work/ember_wall.txt")" "$ec" \
    "$(span "$work/ember_cpu.txt")"
printf '%-34s %11.1f%% %14s %11.1f%%\n' "slowdown (medians)" "$(awk -v a="$aw" -v e="$ew" 'BEGIN {print 100 * (e - a) / a}')" "" \
    "$(awk -v a="$ac" -v e="$ec" 'BEGIN {print 100 * (e - a) / a}')"

# The sampler with 100 threads.
"$python" "$work/threads.py" 30 >"$work/threads.out" &
target=$!
for _ in $(seq 100); do grep -q ready "$work/threads.out" 2>/dev/null && break; sleep 0.1; done
TIMEFORMAT='%U %S %R'
{ time "$ember" record --pid "$target" --duration 5s -o "$work/threads.db" 2>"$work/record.txt"; } 2>"$work/time.txt"
kill "$target" 2>/dev/null || true
wait "$target" 2>/dev/null || true
read -r user system real <"$work/time.txt"
rate=$(sed -n 's/.*(\([0-9.]*\) per second).*/\1/p' "$work/record.txt")
thread_samples=$(sed -n 's/.*, \([0-9]*\) thread samples.*/\1/p' "$work/record.txt")
printf '101 threads (100 asleep 20 frames deep): %s snapshots/s (100 asked), %s thread samples in 5 s,\n' "$rate" "$thread_samples"
printf 'ember CPU %.2f s user + %.2f s system over %.2f s = %.1f%% of one core\n' "$user" "$system" "$real" \
    "$(awk -v u="$user" -v s="$system" -v r="$real" 'BEGIN {print 100 * (u + s) / r}')"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
