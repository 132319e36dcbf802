#!/usr/bin/env bash
# stats_vs_python.sh: `ember stats` with HTA's four GPU breakdowns against the floor of
# any Python tool on the same file, in one run, and on the 10 M-event synthetic trace.
#   * Kineto traces (gzip JSON): `ember stats --report temporal,kernel_types,overlap,
#     idle_breakdown --like hta`, import included (the cache <file>.ember-cache.db is
#     deleted before every run; the trace is copied to a temporary folder so the cache
#     lands there), against `json.load(gzip.open(F))`: what Holistic Trace Analysis or
#     any Python tool must spend before it computes anything. The two run in turn, run
#     by run, so drift on a shared machine hits both alike; the ratio is taken per pair.
#     The same reports on the cached import are timed too (the analysis alone), and
#     `ember --version`: what starting the program costs (it loads the CUDA libraries
#     the trainer links, whatever the subcommand).
#   * the 10 M-event trace of `ember synth --events 10000000 --seed 7`: the same
#     reports, ember's conventions and --like hta.
# Wall seconds of the whole process (bash's time); min and median over the runs.
#   bash bench/stats_vs_python.sh [EMBER] [RUNS] [TRACE.json.gz ...]
# SYNTH_EVENTS=0 skips the synthetic trace; SYNTH_DB=path reuses one made before.
# BASELINE=path/to/another/ember times that build too, import included, in the same
# rounds (a before/after comparison on equal terms).
set -euo pipefail
cd "$(dirname "$0")/.."
ember=$(realpath "${1:-build/release/bin/ember}")
runs=${2:-5}
shift $(( $# >= 2 ? 2 : $# ))
traces=("$@")
[ ${#traces[@]} -gt 0 ] || traces=(../shared/real-traces/kineto/a100_sampled_rank0.json.gz
                                   ../shared/real-traces/kineto/a100_sampled_rank1.json.gz
                                   ../shared/real-traces/kineto/v100_ns_resolution_rank0.json.gz
                                   ../shared/real-traces/kineto/v100_resnet50_workers0.json.gz)
synth_events=${SYNTH_EVENTS:-10000000}
baseline=${BASELINE:+$(realpath "$BASELINE")}
work=$(mktemp -d /tmp/ember-stats-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
reports=temporal,kernel_types,overlap,idle_breakdown

source bench/bench_lib.sh
row() {  # label, file of seconds
    printf '  %-46s min %7.3f s   median %7.3f s\n' "$1" "$(minimum <"$2")" "$(median <"$2")"
}

echo "ember stats vs Python's json.load: $runs runs each, $(nproc) cores, $(uname -m)"
cpu_line
echo "ember: $ember"
[ -z "$baseline" ] || echo "baseline: $baseline"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for trace in "${traces[@]}"; do
    name=$(basename "$trace")
    copy="$work/$name"
    cp "$trace" "$copy"
    cache="$copy.ember-cache.db"
    echo
    echo "$name: $(stat -c %s "$trace") bytes gzip, $(gzip -dc "$trace" | wc -c) bytes of JSON"
    : >"$work/import.txt"; : >"$work/cached.txt"; : >"$work/python.txt"; : >"$work/ratio.txt"; : >"$work/start.txt"
    : >"$work/baseline.txt"; : >"$work/baseline_ratio.txt"
    for run in $(seq 0 "$runs"); do  # run 0 warms the page cache and is not counted
        rm -f "$cache" "$cache-wal" "$cache-shm"
        imported=$(wall "$ember" stats "$copy" --report "$reports" --like hta)
        cached=$(wall "$ember" stats "$copy" --report "$reports" --like hta)
        python=$(wall python3 -c "import json,gzip,sys; json.load(gzip.open(sys.argv[1]))" "$copy")
        start=$(wall "$ember" --version)
        if [ -n "$baseline" ]; then
            rm -f "$cache" "$cache-wal" "$cache-shm"
            before=$(wall "$baseline" stats "$copy" --report "$reports" --like hta)
        fi
        [ "$run" -gt 0 ] || continue
        if [ -n "$baseline" ]; then
            echo "$before" >>"$work/baseline.txt"
            awk -v p="$python" -v e="$before" 'BEGIN {print p / e}' >>"$work/baseline_ratio.txt"
        fi
        echo "$start" >>"$work/start.txt"
        echo "$imported" >>"$work/import.txt"
        echo "$cached" >>"$work/cached.txt"
        echo "$python" >>"$work/python.txt"
        awk -v p="$python" -v e="$imported" 'BEGIN {print p / e}' >>"$work/ratio.txt"
    done
    row "ember stats --like hta, import included" "$work/import.txt"
    row "ember stats --like hta, import cached" "$work/cached.txt"
    row "python3 json.load(gzip.open(F))" "$work/python.txt"
    row "ember --version (starting the program)" "$work/start.txt"
    printf '  json.load / ember stats (import included), per pair: min %.1fx  median %.1fx\n' \
        "$(minimum <"$work/ratio.txt")" "$(median <"$work/ratio.txt")"
    if [ -n "$baseline" ]; then
        row "baseline: ember stats --like hta, import incl." "$work/baseline.txt"
        printf '  json.load / baseline (import included), per pair: min %.1fx  median %.1fx\n' \
            "$(minimum <"$work/baseline_ratio.txt")" "$(median <"$work/baseline_ratio.txt")"
    fi
done

if [ "$synth_events" -gt 0 ]; then
    synth=${SYNTH_DB:-$work/synth.db}
    echo
    if [ ! -f "$synth" ]; then
        echo "making $synth: ember synth --events $synth_events --seed 7 ($(wall "$ember" synth -o "$synth" --events "$synth_events" --seed 7) s)"
    fi
    echo "$(basename "$synth"): $(stat -c %s "$synth") bytes"
    : >"$work/synth_ember.txt"; : >"$work/synth_hta.txt"
    for run in $(seq 0 "$runs"); do
        ember_s=$(wall "$ember" stats "$synth" --report "$reports")
        hta_s=$(wall "$ember" stats "$synth" --report "$reports" --like hta)
        [ "$run" -gt 0 ] || continue
        echo "$ember_s" >>"$work/synth_ember.txt"
        echo "$hta_s" >>"$work/synth_hta.txt"
    done
    row "ember stats (ember conventions)" "$work/synth_ember.txt"
    row "ember stats --like hta" "$work/synth_hta.txt"
    /usr/bin/time -f '%M' -o "$work/rss.txt" "$ember" stats "$synth" --report "$reports" >/dev/null
    echo "  peak resident memory (ember conventions): $(( $(cat "$work/rss.txt") / 1024 )) MB"
fi
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
