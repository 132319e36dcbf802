#!/usr/bin/env bash
# export_formats.sh: Perfetto's protobuf export against the Chrome JSON export of the
# same trace, in the same run: wall time, peak memory, bytes written and bytes gzipped.
# The trace: `ember synth --events EVENTS --seed 7`. Rounds alternate the two formats;
# seconds are the median over RUNS rounds, ratios are chrome / perfetto.
#   bash bench/export_formats.sh [EMBER] [RUNS] [EVENTS]
set -euo pipefail
cd "$(dirname "$0")/.."
ember=$(realpath "${1:-build/release/bin/ember}")
runs=${2:-3}
events=${3:-1000000}
work=$(mktemp -d /tmp/ember-export-formats.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
"$ember" synth -o "$work/trace.db" --events "$events" --seed 7 -q
declare -A times peak
for ((round = 0; round < runs; round++)); do
    for format in perfetto chrome; do
        /usr/bin/time -f "%e %M" -o "$work/time.txt" "$ember" export "$work/trace.db" --format "$format" \
            -o "$work/out.$format" 2>/dev/null
        read -r seconds kb <"$work/time.txt"
        times[$format]+="$seconds "
        peak[$format]=$(( kb > ${peak[$format]:-0} ? kb : ${peak[$format]:-0} ))
    done
done
median() { printf '%s\n' $1 | sort -g | sed -n "$(( (runs + 1) / 2 ))p"; }
printf '%-9s %9s %12s %14s %14s\n' format seconds "peak MiB" bytes gzipped
for format in perfetto chrome; do
    bytes=$(stat -c %s "$work/out.$format")
    gzipped=$(gzip -c "$work/out.$format" | wc -c)
    printf '%-9s %9s %12.1f %14d %14d\n' "$format" "$(median "${times[$format]}")" "$(echo "${peak[$format]} / 1024" | bc -l)" \
        "$bytes" "$gzipped"
    eval "${format}_bytes=$bytes ${format}_gzipped=$gzipped ${format}_seconds=$(median "${times[$format]}")"
done
printf 'chrome / perfetto: time %.2fx, bytes %.2fx, gzipped %.2fx\n' \
    "$(echo "$chrome_seconds / $perfetto_seconds" | bc -l)" "$(echo "$chrome_bytes / $perfetto_bytes" | bc -l)" \
    "$(echo "$chrome_gzipped / $perfetto_gzipped" | bc -l)"
