#!/bin/sh
# record_jit_names_test.sh EMBER ENGINE WORKDIR: `ember record --sample-cpu` attached to a
# program that runs oneDNN (ember-engine training on its CPU backend, not profiling
# itself): the recorded CPU samples in oneDNN's JIT kernels carry the kernels' names
# (ember record asks oneDNN for its perf map), and the map is gone afterwards.
set -eu
ember=$1
engine=$2
dir=$3
rm -rf "$dir"
mkdir -p "$dir"

if ! "$ember" record --sample-cpu 1000 -o "$dir/rec.db" -- "$engine" train --model cnn --backend cpu --max-steps 30 \
    --batch-size 64 --train-limit 2048 --test-limit 64 --workers 1 --no-progress >"$dir/record.log" 2>&1; then
    echo "FAIL: ember record failed:"
    cat "$dir/record.log"
    exit 1
fi
"$ember" export "$dir/rec.db" --format folded --stacks cpu -o "$dir/rec.folded"
named=$(awk '{ leaf = $0; sub(/ [0-9]+$/, "", leaf); sub(/.*;/, "", leaf); if (leaf ~ /^_?jit_/) n += $NF } END { print n + 0 }' "$dir/rec.folded")
unnamed=$(awk '{ leaf = $0; sub(/ [0-9]+$/, "", leaf); sub(/.*;/, "", leaf); if (leaf ~ /^\[JIT-generated/) n += $NF } END { print n + 0 }' "$dir/rec.folded")
echo "CPU ns in named oneDNN JIT kernels: $named, in unnamed JIT code: $unnamed"
if [ "$named" -eq 0 ]; then
    echo "FAIL: no sample in a named JIT kernel"
    exit 1
fi
if [ "$unnamed" -gt $((named / 10)) ]; then
    echo "FAIL: more than one JIT sample in ten has no name"
    exit 1
fi
pid=$(sed -n 's/^ember-engine (\([0-9]*\));.*/\1/p' "$dir/rec.folded" | head -n 1)
if [ -n "$pid" ] && [ -e "/tmp/perf-$pid.map" ]; then
    echo "FAIL: /tmp/perf-$pid.map was left behind"
    exit 1
fi
echo "PASS: the recorded JIT kernels are named"
