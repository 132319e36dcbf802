#!/usr/bin/env bash
# cpu_sampling_overhead.sh: what CPU stack sampling costs `ember train --profile`.
# Trains the quickstart CNN on the CPU backend with each sampling rate, the rates
# interleaved run by run (so drift on a shared machine hits every rate alike), and
# prints per rate the median images/s and the median CPU time (user + system, of the
# whole process) per 1,000 images. The slowdown is taken from the CPU time, which other
# work on the machine moves far less than the wall-clock rate.
#   bash bench/cpu_sampling_overhead.sh [EMBER] [RUNS] [RATES...]
set -euo pipefail
cd "$(dirname "$0")/.."
ember=${1:-build/release/bin/ember}
runs=${2:-5}
shift $(( $# >= 2 ? 2 : $# ))
rates=("$@")
[ ${#rates[@]} -gt 0 ] || rates=(0 99 199 499 997)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source bench/bench_lib.sh
echo "cpu sampling overhead: quickstart CNN, 12000 training images, $runs runs per rate, $(nproc) cores"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
TIMEFORMAT='%U %S'
for run in $(seq "$runs"); do
    for hz in "${rates[@]}"; do
        { time "$ember" train --config samples/configs/quickstart.toml --train-limit 12000 --test-limit 500 \
              --no-progress --profile "$work/run.db" --cpu-sample-hz "$hz" >"$work/out.txt" 2>/dev/null; } 2>"$work/time.txt"
        rate=$(sed -n 's/.*(\([0-9]*\) img\/s).*/\1/p' "$work/out.txt")
        images=$(sed -n 's/.* \([0-9]*\) images in .*/\1/p' "$work/out.txt")
        echo "$rate" >>"$work/rate_$hz.txt"
        awk -v i="$images" '{print 1000 * ($1 + $2) / i}' "$work/time.txt" >>"$work/cpu_$hz.txt"
    done
done
base=$(median <"$work/cpu_0.txt")
printf '%-10s %12s %20s %20s %10s\n' "rate (Hz)" "images/s" "CPU s / 1000 images" "(min - max)" "overhead"
for hz in "${rates[@]}"; do
    m=$(median <"$work/cpu_$hz.txt")
    printf '%-10s %12s %20.3f %9.3f - %-8.3f %9.1f%%\n' "$hz" "$(median <"$work/rate_$hz.txt")" "$m" \
        "$(minimum <"$work/cpu_$hz.txt")" "$(maximum <"$work/cpu_$hz.txt")" \
        "$(awk -v b="$base" -v m="$m" 'BEGIN {print 100 * (m - b) / b}')"
done
echo "medians over the runs; load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
