#!/usr/bin/env bash
# import_throughput.sh: `ember import` of large Chrome trace JSON, in MB/s, against
# Python's json.load of the same file (what any Python tool spends before it does
# anything) and, with BASELINE set, another ember build, in the same rounds.
#   * the files are the Chrome exports of `ember synth --events N --seed 7` (236 MB for
#     10^6 events, 2.39 GB for 10^7), made once in JSON_DIR (default: a temporary
#     folder removed at the end);
#   * each round runs `ember import F -o out.db`, then the baseline's, then
#     `json.load(open(F))`; round 0 warms the page cache and is not counted; ratios
#     are taken pair by pair, so drift on a shared machine hits both sides alike;
#   * json.load is skipped for files over PYTHON_MAX_MB (default 600: Python needs
#     about 5.4 bytes of memory per byte of this JSON, 12.9 GB for the 2.39 GB file).
# Perfetto's trace_processor is not packaged here; its published rate for Chrome JSON
# (177 MB/s on a 454 MB file) is printed beside the results for reference only.
#   bash bench/import_throughput.sh [EMBER] [RUNS] [EVENTS ...]
set -euo pipefail
cd "$(dirname "$0")/.."
ember=$(realpath "${1:-build/release/bin/ember}")
runs=${2:-5}
shift $(( $# >= 2 ? 2 : $# ))
event_counts=("$@")
[ ${#event_counts[@]} -gt 0 ] || event_counts=(1000000 2000000 10000000)
baseline=${BASELINE:+$(realpath "$BASELINE")}
python_max_mb=${PYTHON_MAX_MB:-600}
work=$(mktemp -d /tmp/ember-import-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
json_dir=${JSON_DIR:-$work}
mkdir -p "$json_dir"

source bench/bench_lib.sh
rate_row() {  # label, file of seconds, bytes
    local bytes=$3
    printf '  %-34s median %8.3f s  %6.1f MB/s   (fastest %6.1f MB/s, slowest %6.1f MB/s)\n' "$1" \
        "$(median <"$2")" "$(awk -v b="$bytes" -v s="$(median <"$2")" 'BEGIN {print b / s / 1e6}')" \
        "$(awk -v b="$bytes" -v s="$(minimum <"$2")" 'BEGIN {print b / s / 1e6}')" \
        "$(awk -v b="$bytes" -v s="$(maximum <"$2")" 'BEGIN {print b / s / 1e6}')"
}
ratio_row() {  # label, file of ratios
    printf '  %-34s median %.2fx (min %.2fx, max %.2fx)\n' "$1" "$(median <"$2")" "$(minimum <"$2")" "$(maximum <"$2")"
}

echo "ember import of Chrome JSON: $runs runs each, $(nproc) cores, $(uname -m)"
cpu_line
echo "ember: $ember"
[ -z "$baseline" ] || echo "baseline: $baseline"
echo "reference: Perfetto trace_processor, published: 177 MB/s on a 454 MB Chrome JSON"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for events in "${event_counts[@]}"; do
    json="$json_dir/synth_$events.json"
    synth_chrome_json "$events" "$json"
    bytes=$(stat -c %s "$json")
    python=$(( bytes <= python_max_mb * 1000000 ))
    echo
    echo "ember synth --events $events --seed 7, exported: $bytes bytes"
    for f in import baseline python vs_baseline vs_python; do : >"$work/$f.txt"; done
    for run in $(seq 0 "$runs"); do
        rm -f "$work/out.db"
        now=$(wall "$ember" import "$json" -o "$work/out.db")
        if [ -n "$baseline" ]; then
            rm -f "$work/out.db"
            before=$(wall "$baseline" import "$json" -o "$work/out.db")
        fi
        [ "$python" = 0 ] || py=$(wall python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$json")
        [ "$run" -gt 0 ] || continue
        echo "$now" >>"$work/import.txt"
        if [ -n "$baseline" ]; then
            echo "$before" >>"$work/baseline.txt"
            awk -v b="$before" -v e="$now" 'BEGIN {print b / e}' >>"$work/vs_baseline.txt"
        fi
        if [ "$python" = 1 ]; then
            echo "$py" >>"$work/python.txt"
            awk -v p="$py" -v e="$now" 'BEGIN {print p / e}' >>"$work/vs_python.txt"
        fi
    done
    rate_row "ember import" "$work/import.txt" "$bytes"
    if [ -n "$baseline" ]; then
        rate_row "baseline ember import" "$work/baseline.txt" "$bytes"
        ratio_row "baseline / ember, per pair" "$work/vs_baseline.txt"
    fi
    if [ "$python" = 1 ]; then
        rate_row "python3 json.load(open(F))" "$work/python.txt" "$bytes"
        ratio_row "json.load / ember import, per pair" "$work/vs_python.txt"
    else
        echo "  (json.load skipped: over PYTHON_MAX_MB=$python_max_mb)"
    fi
    /usr/bin/time -f '%M' -o "$work/rss.txt" "$ember" import "$json" -o "$work/out.db" >/dev/null 2>&1
    echo "  ember import peak resident memory: $(( $(cat "$work/rss.txt") / 1024 )) MB"
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
