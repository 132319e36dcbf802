#!/bin/sh
# diff_train_test.sh EMBER WORKDIR: two short CPU-backend training runs of the small CNN,
# recorded with --profile, the second with one switch flipped (conv_bias_before_bn: a
# bias on the convolutions that feed BatchNorm), then `ember diff` of the two. The diff
# must name the cause: the conv bias gradient, a function only the second run calls,
# is the first CPU function that appears in B's sampled CPU time.
set -eu
ember=$1
dir=$2
rm -rf "$dir"
mkdir -p "$dir"

for bias in false true; do
    if ! "$ember" train --model cnn --backend cpu --max-steps 48 --batch-size 64 \
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

# CSV sections start with "# key"; a row of cpu_functions is name,status,...
first_new=$(awk '/^# cpu_functions/ { in_table = 1; next } /^# / { in_table = 0 } in_table' "$dir/diff.csv" |
    grep ',new,' | head -n 1 || true)
echo "first function new in B: $first_new"
case "$first_new" in
    *conv2d_backward_bias*) ;;
    *) echo "FAIL: the conv bias gradient is not the first function new in B"; exit 1 ;;
esac
# Nothing of the bias is in A.
if awk '/^# cpu_functions/ { in_table = 1; next } /^# / { in_table = 0 } in_table' "$dir/diff.csv" |
    grep 'conv2d_backward_bias' | grep -v ',new,'; then
    echo "FAIL: run A (no conv bias) computed a conv bias gradient"
    exit 1
fi
echo "PASS: the diff names the conv bias gradient"
