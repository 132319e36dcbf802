#!/usr/bin/env bash
# The main job end to end, as a user runs it: `ember train` on real Fashion-MNIST with
# profiling, metrics and checkpoints; `ember stats` on the trace; a resumed run; bad
# input refused. Usage: train_job_test.sh EMBER_BINARY WORK_DIR
set -euo pipefail
ember=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. A short MLP run on 6,000 training images: it must learn (the published MLP
#    baselines reach 0.87+ on the full set; a fifth of an epoch's worth of data gets
#    well above chance, which is 0.10).
"$ember" train --model mlp --epochs 1 --train-limit 6000 --test-limit 1000 --batch-size 100 \
    --optimizer adam --lr 0.001 --seed 3 --no-progress \
    --profile "$work/run.db" --metrics "$work/metrics.jsonl" --checkpoint-dir "$work/ckpt" \
    >"$work/train.out" 2>"$work/train.err" || { cat "$work/train.err"; fail "ember train exited $?"; }
grep -q '^settings: mlp, adam (lr 0.001), batch 100, 1 epoch' "$work/train.out" \
    || fail "the one-line settings were not printed: $(head -3 "$work/train.out")"
! grep -q '^\[model\]' "$work/train.out" || fail "the full configuration was printed without --print-config"
# --print-config: every setting, as the user writes them, read back to the same run.
"$ember" train --config "$(dirname "$0")/../../../samples/configs/quickstart.toml" --print-config >"$work/config.toml" \
    || fail "--print-config exited $?"
grep -qx 'lr = 0.05' "$work/config.toml" || fail "lr not printed as written: $(grep '^lr' "$work/config.toml")"
grep -qx 'nesterov = true' "$work/config.toml" || fail "nesterov not printed as a boolean"
"$ember" train --config "$work/config.toml" --print-config >"$work/config2.toml" || fail "the printed config does not load"
cmp -s "$work/config.toml" "$work/config2.toml" || fail "the printed config does not read back to the same settings"
accuracy=$(sed -n 's/.*test accuracy \([0-9.]*\),.*/\1/p' "$work/train.out" | tail -1)
[ -n "$accuracy" ] || fail "no test accuracy in the output"
awk -v a="$accuracy" 'BEGIN { exit !(a >= 0.70) }' || fail "test accuracy $accuracy < 0.70"
[ -s "$work/ckpt/last.ckpt" ] || fail "no checkpoint written"
grep -q '"type":"epoch"' "$work/metrics.jsonl" || fail "no epoch record in the JSONL metrics"
grep -q '"type":"summary"' "$work/metrics.jsonl" || fail "no summary record in the JSONL metrics"
python3 -c "import json,sys; [json.loads(l) for l in open(sys.argv[1])]" "$work/metrics.jsonl" \
    || fail "metrics file is not JSON lines"

# 2. The trace: steps, dataloader waits and the NVTX tree are in `ember stats`.
"$ember" stats "$work/run.db" >"$work/stats.out" || fail "ember stats exited $?"
for name in step forward backward optimizer dataloader/load evaluation; do
    grep -qE "[[:space:]]$name\$" "$work/stats.out" || fail "NVTX range '$name' missing from ember stats"
done
grep -q "Dataloader Wait" "$work/stats.out" || fail "no per-step dataloader wait column in ember stats"
steps=$(awk '$NF == "step" && $9 == "push/pop" {print $3}' "$work/stats.out" | head -1)
[ "$steps" = "60" ] || fail "expected 60 step ranges (6000 / 100), found '$steps'"
# The trace keeps the run's settings (what the advice checks its remedies against).
python3 - "$work/run.db" <<'PY' || fail "the trace holds no train_config with the run's settings"
import sqlite3, sys
row = sqlite3.connect(sys.argv[1]).execute("SELECT value FROM run_metadata WHERE key = 'train_config'").fetchone()
assert row and "[model]" in row[0] and "name = 'mlp'" in row[0].replace('"', "'"), row
PY

# 3. Resume: a second epoch from the checkpoint continues at step 60.
"$ember" train --model mlp --epochs 2 --train-limit 6000 --test-limit 1000 --batch-size 100 \
    --optimizer adam --lr 0.001 --seed 3 --no-progress --resume "$work/ckpt/last.ckpt" \
    >"$work/resume.out" 2>"$work/resume.err" || { cat "$work/resume.err"; fail "resumed run exited $?"; }
grep -q "resumed from .* at step 60" "$work/resume.err" || fail "resume did not start at step 60"
grep -q "120 steps" "$work/resume.out" || fail "resumed run did not end at step 120"

# 4. Bad input: a clear message naming the problem and exit code 2.
set +e
"$ember" train --set train.epoch=3 2>"$work/bad.err"; code=$?
set -e
[ $code -eq 2 ] || fail "unknown key: exit code $code, expected 2"
grep -q "did you mean 'train.epochs'" "$work/bad.err" || fail "unknown key message: $(cat "$work/bad.err")"
printf 'not a checkpoint' >"$work/bogus.ckpt"
set +e
"$ember" train --model mlp --train-limit 200 --test-limit 100 --resume "$work/bogus.ckpt" --no-progress \
    >/dev/null 2>"$work/bogus.err"; code=$?
set -e
[ $code -eq 2 ] || fail "bogus checkpoint: exit code $code, expected 2"
grep -q "bogus.ckpt" "$work/bogus.err" || fail "bogus checkpoint message does not name the file: $(cat "$work/bogus.err")"
echo "train job: accuracy $accuracy, $steps steps, resume and refusals ok"
