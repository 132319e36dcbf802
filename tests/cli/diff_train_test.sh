#!/bin/sh
# diff_train_test.sh EMBER WORKDIR: two short CPU-backend training runs of the small CNN,
# recorded with --profile, the second with one switch flipped (conv_bias_before_bn: a
# bias on the convolutions that feed BatchNorm), then `ember diff` of the two. The diff
# must name the cause: the conv bias gradient, a function only the second run calls,
# is the first of ember's own CPU functions that appears in B's sampled CPU time.
# (System functions may also appear in one run and not the other: on a loaded machine
# the thread pools' spin-waits land in __sched_yield in one run and not the next, and
# that is run-to-run noise of the machine, not a change of the program.)
set -eu
ember=$1
dir=$2
rm -rf "$dir"
mkdir -p "$dir"

# One compute thread in both runs: the split ember train measures and tries depends on
# the machine's load, and a run that kept two threads would differ from one that kept
# one in more functions than the switch changes.
for bias in false true; do
    if ! OPENBLAS_NUM_THREADS=1 "$ember" train --model cnn --backend cpu --max-steps 48 --batch-size 64 \
        --train-limit 3072 --test-limit 64 --workers 1 --no-progress --cpu-sample-hz 2000 \
        --set switches.conv_bias_before_bn=$bias --profile "$dir/bias_$bias.db" >"$dir/train_$bias.log" 2>&1; then
        echo "ember train (conv_bias_before_bn=$bias) failed:"
        cat "$dir/train_$bias.log"
        exit 1
    fi
done

# The report a user reads (kept in the test log), then the table the test checks.
"$ember" diff "$dir/bias_false.db" "$dir/bias_true.db" --top 8
"$ember" diff "$dir/bias_false.db" "$dir/bias_true.db" --format csv --top 0 >"$dir/diff.csv"

# CSV sections start with "# key"; a row of cpu_functions is name,status,... sorted by
# |change|, largest first.
awk '/^# cpu_functions/ { in_table = 1; next } /^# / { in_table = 0 } in_table' "$dir/diff.csv" \
    >"$dir/cpu_functions.csv"
echo "functions new in B:"
grep ',new,' "$dir/cpu_functions.csv" || true
first_new=$(grep '^"\{0,1\}ember::' "$dir/cpu_functions.csv" | grep ',new,' | head -n 1 || true)
echo "first of ember's functions new in B: $first_new"
case "$first_new" in
    *conv2d_backward_bias*) ;;
    *) echo "FAIL: the conv bias gradient is not the first of ember's functions new in B"; exit 1 ;;
esac
# Nothing of the bias is in A.
if grep 'conv2d_backward_bias' "$dir/cpu_functions.csv" | grep -v ',new,'; then
    echo "FAIL: run A (no conv bias) computed a conv bias gradient"
    exit 1
fi
echo "PASS: the diff names the conv bias gradient"
