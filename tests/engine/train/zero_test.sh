#!/usr/bin/env bash
# ZeRO-1 in `ember train` under mpirun -np 2: the run trains like plain data parallel
# (same losses to float rounding, both with global-norm gradient clipping), rank 0 writes one checkpoint whose optimizer state
# was gathered from both shards, and that checkpoint resumes in a single process
# without ZeRO (and a plain data-parallel checkpoint resumes under ZeRO-1).
# Usage: zero_test.sh EMBER_BINARY WORK_DIR
set -euo pipefail
source "$(dirname "$0")/mpi_two_ranks.sh"
common=(--model mlp --train-limit 2000 --test-limit 500 --batch-size 100 --workers 1 --no-progress
        --set optimizer.name=adamw --set optimizer.lr=0.002 --set train.seed=7 --set train.clip_grad_norm=0.5)
run_two_ranks() {  # NAME ZERO [extra args]
    local name=$1 zero=$2
    shift 2
    mpirun_two_ranks "$ember" train "${common[@]}" --set distributed.zero="$zero" --checkpoint-dir "$work/$name" \
        --metrics "$work/$name.jsonl" "$@" >"$work/$name.out" 2>"$work/$name.err" \
        || { cat "$work/$name.err" "$work/$name.out"; echo "FAIL: mpirun ember train ($name) exited non-zero"; exit 1; }
}
run_two_ranks ddp 0 --epochs 1
run_two_ranks zero 1 --epochs 1 --checkpoint-every 10
grep -q "ZeRO-1" "$work/zero.err" || { cat "$work/zero.err"; echo "FAIL: the ZeRO-1 run does not say it shards"; exit 1; }
[ -s "$work/zero/last.ckpt" ] || { ls -R "$work"; echo "FAIL: no checkpoint from the ZeRO-1 run"; exit 1; }

# The per-step losses of both runs agree (ZeRO-1 computes the same update).
python3 - "$work/ddp.jsonl" "$work/zero.jsonl" <<'PY'
import json, sys
def losses(path):
    return [r["loss"] for r in map(json.loads, open(path)) if r.get("type") == "step"]
ddp, zero = losses(sys.argv[1]), losses(sys.argv[2])
assert len(ddp) == len(zero) == 10, (len(ddp), len(zero))
worst = max(abs(a - b) / max(abs(a), 1e-6) for a, b in zip(ddp, zero))
assert worst < 1e-4, f"losses differ by {worst:.2e} (relative)"
print(f"zero-1 vs ddp: {len(ddp)} step losses agree within {worst:.1e} relative")
PY

# A ZeRO-1 checkpoint resumes in one process without ZeRO, and a plain one under ZeRO-1.
"$ember" train "${common[@]}" --epochs 2 --resume "$work/zero/last.ckpt" >"$work/resume_single.out" 2>&1 \
    || { cat "$work/resume_single.out"; echo "FAIL: the ZeRO-1 checkpoint does not resume in a single process"; exit 1; }
grep -q "resumed from" "$work/resume_single.out" || { echo "FAIL: no resume line"; exit 1; }
run_two_ranks resume_zero 1 --epochs 2 --resume "$work/ddp/last.ckpt"
grep -q "resumed from" "$work/resume_zero.err" || { cat "$work/resume_zero.err"; echo "FAIL: ZeRO-1 did not resume"; exit 1; }

# Settings it cannot honour are refused by name.
if mpirun_two_ranks "$ember" train "${common[@]}" --epochs 1 --set distributed.zero=1 --set optimizer.name=lamb >"$work/lamb.out" 2>&1; then
    echo "FAIL: ZeRO-1 accepted lamb"; exit 1
fi
grep -q "distributed.zero = 1" "$work/lamb.out" || { cat "$work/lamb.out"; echo "FAIL: the refusal does not name distributed.zero"; exit 1; }
echo "zero-1: trains like data parallel, checkpoints interchange, refusals name the setting"
