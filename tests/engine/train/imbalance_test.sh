#!/usr/bin/env bash
# Two ranks under mpirun with --imbalance 3: rank 1 repeats its step's compute three times as busy
# work, so rank 0 waits for it in allreduce/wait. `ember merge` must align the two
# rank traces and name rank 1 as the straggler.
# Usage: imbalance_test.sh EMBER_BINARY WORK_DIR
set -euo pipefail
source "$(dirname "$0")/mpi_two_ranks.sh"
mpirun_two_ranks "$ember" train --model mlp --epochs 1 --train-limit 6000 --test-limit 500 --batch-size 100 --workers 1 \
    --no-progress --imbalance 3.0 --profile "$work/run.db" >"$work/train.out" 2>"$work/train.err" \
    || { cat "$work/train.err"; echo "FAIL: mpirun ember train exited $?"; exit 1; }
[ -s "$work/run.rank0.db" ] && [ -s "$work/run.rank1.db" ] || { echo "FAIL: missing rank traces"; ls "$work"; exit 1; }
[ "$(grep -c '^trained ' "$work/train.out")" = 1 ] || { echo "FAIL: only rank 0 should print the summary"; exit 1; }
"$ember" merge -o "$work/job.db" "$work/run.rank0.db" "$work/run.rank1.db" >"$work/merge.out"
cat "$work/merge.out"
grep -q "^straggler: rank 1 " "$work/merge.out" || { echo "FAIL: rank 1 is not named the straggler"; exit 1; }
"$ember" stats "$work/job.db" --report nvtx >"$work/stats.out"
grep -q "allreduce/wait" "$work/stats.out" || { echo "FAIL: no allreduce/wait in the merged trace"; exit 1; }
# `ember stats` on the job trace itemizes the ranks and names the same straggler.
"$ember" stats "$work/job.db" >"$work/stats_all.out"
grep -qE "^ +1 +[0-9]+ .* straggler$" "$work/stats_all.out" || { cat "$work/stats_all.out"; echo "FAIL: ember stats does not name rank 1 the straggler"; exit 1; }
grep -qE "^ +0 +[0-9]+ .* waits$" "$work/stats_all.out" || { echo "FAIL: ember stats does not show rank 0 waiting"; exit 1; }
echo "imbalance: straggler named, merged trace has all-reduce waits"
