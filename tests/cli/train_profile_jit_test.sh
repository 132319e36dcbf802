#!/bin/sh
# train_profile_jit_test.sh EMBER WORKDIR: a CPU-backend training run of the small CNN
# under --profile, whose convolutions run in oneDNN's JIT kernels: code generated at
# run time, with no unwind tables and in no file. The CPU samples taken in those
# kernels must carry the kernels' names (oneDNN's perf map) and the whole call stack
# above them, up to the layer that called oneDNN; the perf map is removed afterwards.
set -eu
ember=$1
dir=$2
rm -rf "$dir"
mkdir -p "$dir"

# One compute thread (OPENBLAS_NUM_THREADS fixes the split ember train would otherwise
# measure and try): the stacks of the OpenMP team's other threads begin in the OpenMP
# runtime, not in the layer that called oneDNN, so with two the share below would be
# about half, and which split a run keeps depends on the machine's load.
if ! OPENBLAS_NUM_THREADS=1 "$ember" train --model cnn --backend cpu --max-steps 40 --batch-size 64 --train-limit 2560 --test-limit 64 \
    --workers 1 --no-progress --cpu-sample-hz 1000 --profile "$dir/cnn.db" >"$dir/train.log" 2>&1; then
    echo "FAIL: ember train failed:"
    cat "$dir/train.log"
    exit 1
fi
"$ember" export "$dir/cnn.db" --format folded --stacks cpu -o "$dir/cnn.folded"
if grep -q "process_vm_readv is refused" "$dir/train.log"; then
    echo "SKIP: process_vm_readv is refused here (a seccomp filter?): the sampler cannot unwind past JIT code"
    exit 0
fi

# Folded stacks: "frame;frame;...;leaf COUNT", outermost first.
awk '
{
    count = $NF
    stack = substr($0, 1, length($0) - length(count) - 1)
    leaf = stack
    sub(/.*;/, "", leaf)
    total += count
    if (leaf ~ /^\[JIT-generated code/) unnamed += count
    if (leaf ~ /jit/) {
        jit += count
        if (stack ~ /;ember::nn::[A-Za-z0-9]+::(forward|backward);/) with_layer += count
    }
}
END {
    printf "samples %d, in named JIT kernels %d (with the calling layer in the stack: %d), in unnamed JIT code %d\n",
        total, jit, with_layer, unnamed
    if (total < 50) { print "FAIL: too few CPU samples to judge"; exit 1 }
    if (jit < total / 10) { print "FAIL: fewer than 10% of the samples are in named oneDNN JIT kernels"; exit 1 }
    if (unnamed * 10 > jit) { print "FAIL: more than one JIT sample in ten has no name"; exit 1 }
    # (oneDNN f32 GEMM kernel moves rsp onto a buffer of its own: its samples, about one
    # JIT sample in ten here, keep only their name.)
    if (with_layer * 10 < jit * 7) { print "FAIL: fewer than 70% of the JIT samples reach the layer that called oneDNN"; exit 1 }
}' "$dir/cnn.folded"

pid_maps=$(grep -o 'pid [0-9]*\|([0-9]*)' "$dir/cnn.folded" | head -n 1 | tr -dc '0-9')
if [ -n "$pid_maps" ] && [ -e "/tmp/perf-$pid_maps.map" ]; then
    echo "FAIL: /tmp/perf-$pid_maps.map was left behind"
    exit 1
fi
echo "PASS: JIT kernels are named and keep their callers"
