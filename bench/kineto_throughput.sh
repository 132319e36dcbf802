#!/usr/bin/env bash
# kineto_throughput.sh: `ember import` of a multi-GB Kineto (PyTorch profiler) trace in
# MB/s, against Python's json.load of the same file, against `ember import` of a Chrome
# trace of about the same size, and (BASELINE set) against another ember build, all in
# the same rounds.
#   * the Kineto file is a real trace scaled up by bench/kineto_scale.py (copies shifted
#     in time and in every linking id) to SIZE_MB; the Chrome file is the export of
#     `ember synth --seed 7` with as many events as make about the same size (239 bytes
#     an event); both are made once in JSON_DIR (default: a temporary folder removed at
#     the end);
#   * each round runs, in turn: ember import of the Kineto file, the baseline's, json.load
#     of it, ember import of the Chrome file, the baseline's; round 0 warms the page cache
#     and is not counted; ratios are taken pair by pair (within one round), so drift on a
#     shared machine hits both sides alike;
#   * every run is timed by /usr/bin/time: wall seconds, CPU seconds (user + system: what
#     a machine shared with other work shows better than the wall) and peak resident
#     memory;
#   * json.load is skipped for files over PYTHON_MAX_MB (default 2500: Python needs about
#     5-6 bytes of memory per byte of this JSON).
#   bash bench/kineto_throughput.sh KINETO_SOURCE.json[.gz] [EMBER] [RUNS] [SIZE_MB]
set -euo pipefail
cd "$(dirname "$0")/.."
source_trace=$(realpath "$1")
ember=$(realpath "${2:-build/release/bin/ember}")
runs=${3:-2}
size_mb=${4:-2000}
baseline=${BASELINE:+$(realpath "$BASELINE")}
python_max_mb=${PYTHON_MAX_MB:-2500}
work=$(mktemp -d /tmp/ember-kineto-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
json_dir=${JSON_DIR:-$work}
mkdir -p "$json_dir"
source bench/bench_lib.sh

# Wall seconds, CPU seconds and peak KB of one run of "$@", appended to $1.wall, $1.cpu
# and $1.rss; a failure stops the script.
timed() {
    local name=$1
    shift
    /usr/bin/time -f '%e %M %U %S' -o "$work/time.txt" "$@" >/dev/null 2>"$work/err.txt" || { cat "$work/err.txt" >&2; exit 1; }
    read -r seconds kilobytes user system <"$work/time.txt"
    last_seconds=$seconds
    last_cpu=$(awk -v u="$user" -v s="$system" 'BEGIN {print u + s}')
    if [ "$counted" = 1 ]; then
        echo "$seconds" >>"$work/$name.wall"
        echo "$last_cpu" >>"$work/$name.cpu"
        echo "$kilobytes" >>"$work/$name.rss"
    fi
}
rate_row() {  # label, name, bytes
    local wall=$work/$2.wall bytes=$3
    printf '  %-32s median %7.2f s %6.1f MB/s (fastest %6.1f, slowest %6.1f MB/s), CPU %7.2f s, peak %6d MB\n' "$1" \
        "$(median <"$wall")" "$(awk -v b="$bytes" -v s="$(median <"$wall")" 'BEGIN {print b / s / 1e6}')" \
        "$(awk -v b="$bytes" -v s="$(minimum <"$wall")" 'BEGIN {print b / s / 1e6}')" \
        "$(awk -v b="$bytes" -v s="$(maximum <"$wall")" 'BEGIN {print b / s / 1e6}')" \
        "$(median <"$work/$2.cpu")" "$(( $(maximum <"$work/$2.rss") / 1024 ))"
}
ratio_row() {  # label, file of ratios
    printf '  %-36s median %.2fx (min %.2fx, max %.2fx)\n' "$1" "$(median <"$2")" "$(minimum <"$2")" "$(maximum <"$2")"
}
pair() {  # file of ratios, numerator, denominator (the seconds of one round)
    awk -v a="$2" -v b="$3" 'BEGIN {print a / b}' >>"$work/$1.ratio"
}

kineto="$json_dir/$(basename "${source_trace%.gz}" .json).x${size_mb}MB.json"
[ -f "$kineto" ] || python3 bench/kineto_scale.py "$source_trace" "$kineto" --size-mb "$size_mb"
kineto_bytes=$(stat -c %s "$kineto")
events=$(( size_mb * 1000000 / 239 ))
chrome="$json_dir/synth_$events.json"
synth_chrome_json "$events" "$chrome"
chrome_bytes=$(stat -c %s "$chrome")
python=$(( kineto_bytes <= python_max_mb * 1000000 ))

echo "ember import of Kineto JSON against json.load and Chrome JSON: $runs runs each, $(nproc) cores, $(uname -m)"
cpu_line
echo "ember: $ember"
[ -z "$baseline" ] || echo "baseline: $baseline"
echo "Kineto: $(basename "$kineto") ($kineto_bytes bytes, from $(basename "$source_trace"))"
echo "Chrome: ember synth --events $events --seed 7, exported ($chrome_bytes bytes)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for run in $(seq 0 "$runs"); do
    counted=$(( run > 0 ))
    rm -f "$work/out.db"; timed kineto "$ember" import "$kineto" -o "$work/out.db"; kineto_s=$last_seconds; kineto_cpu=$last_cpu
    if [ -n "$baseline" ]; then
        rm -f "$work/out.db"; timed kineto_baseline "$baseline" import "$kineto" -o "$work/out.db"
        kineto_base_s=$last_seconds; kineto_base_cpu=$last_cpu
    fi
    if [ "$python" = 1 ]; then
        timed python python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$kineto"; python_s=$last_seconds
    fi
    rm -f "$work/out.db"; timed chrome "$ember" import "$chrome" -o "$work/out.db"; chrome_s=$last_seconds
    if [ -n "$baseline" ]; then
        rm -f "$work/out.db"; timed chrome_baseline "$baseline" import "$chrome" -o "$work/out.db"; chrome_base_s=$last_seconds
    fi
    rm -f "$work/out.db"
    echo "  round $run: kineto ${kineto_s} s${baseline:+ (baseline ${kineto_base_s} s)}, json.load ${python_s:-skipped} s, chrome ${chrome_s} s${baseline:+ (baseline ${chrome_base_s} s)}, load $(cut -d' ' -f1 /proc/loadavg)"
    [ "$counted" = 1 ] || continue
    # Rates compared as (bytes / s) of one over the other.
    pair kineto_vs_chrome "$(awk -v b="$kineto_bytes" -v s="$kineto_s" 'BEGIN {print b / s}')" \
                          "$(awk -v b="$chrome_bytes" -v s="$chrome_s" 'BEGIN {print b / s}')"
    [ "$python" = 0 ] || pair python_vs_kineto "$python_s" "$kineto_s"
    if [ -n "$baseline" ]; then
        pair kineto_baseline_vs_now "$kineto_base_s" "$kineto_s"
        pair kineto_baseline_vs_now_cpu "$kineto_base_cpu" "$kineto_cpu"
        pair chrome_baseline_vs_now "$chrome_base_s" "$chrome_s"
        [ "$python" = 0 ] || pair python_vs_kineto_baseline "$python_s" "$kineto_base_s"
    fi
done
echo
rate_row "ember import, Kineto" kineto "$kineto_bytes"
[ -z "$baseline" ] || rate_row "baseline ember import, Kineto" kineto_baseline "$kineto_bytes"
[ "$python" = 0 ] || rate_row "python3 json.load, Kineto" python "$kineto_bytes"
rate_row "ember import, Chrome" chrome "$chrome_bytes"
[ -z "$baseline" ] || rate_row "baseline ember import, Chrome" chrome_baseline "$chrome_bytes"
echo
[ -z "$baseline" ] || ratio_row "Kineto: baseline / ember" "$work/kineto_baseline_vs_now.ratio"
[ -z "$baseline" ] || ratio_row "Kineto: baseline / ember, CPU time" "$work/kineto_baseline_vs_now_cpu.ratio"
[ "$python" = 0 ] || ratio_row "Kineto: json.load / ember" "$work/python_vs_kineto.ratio"
[ -z "$baseline" ] || [ "$python" = 0 ] || ratio_row "Kineto: json.load / baseline" "$work/python_vs_kineto_baseline.ratio"
ratio_row "MB/s Kineto / MB/s Chrome (ember)" "$work/kineto_vs_chrome.ratio"
[ -z "$baseline" ] || ratio_row "Chrome: baseline / ember" "$work/chrome_baseline_vs_now.ratio"
[ "$python" = 1 ] || echo "  (json.load skipped: over PYTHON_MAX_MB=$python_max_mb)"
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
