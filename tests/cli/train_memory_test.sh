#!/bin/sh
# train_memory_test.sh EMBER WORKDIR: a short CPU-backend training run under --profile.
# The trainer prints its host allocator's peaks (AllocatorStats) and writes them to the
# metrics summary; the trace, which holds the allocator's NVTX memory-extension calls as
# recorded by the collector, must give the same peaks when `ember stats --report
# gpu_memory` replays it (device -1: host memory), and with switches.layer_ranges the
# memory live at the peak is attributed to the layers that allocated it.
set -eu
ember=$1
dir=$2
rm -rf "$dir"
mkdir -p "$dir"

if ! "$ember" train --model cnn --backend cpu --max-steps 3 --batch-size 16 --train-limit 256 --test-limit 32 \
    --workers 0 --no-progress --set switches.layer_ranges=true --profile "$dir/run.db" \
    --metrics "$dir/metrics.jsonl" >"$dir/train.log" 2>&1; then
    echo "FAIL: ember train failed:"
    cat "$dir/train.log"
    exit 1
fi
line=$(grep '^memory: peak allocated' "$dir/train.log" || true)
if [ -z "$line" ]; then
    echo "FAIL: no 'memory: peak allocated' line in the log:"
    cat "$dir/train.log"
    exit 1
fi
allocated=$(echo "$line" | sed 's/^memory: peak allocated \([0-9]*\) bytes, peak reserved \([0-9]*\) bytes.*/\1/')
reserved=$(echo "$line" | sed 's/^memory: peak allocated \([0-9]*\) bytes, peak reserved \([0-9]*\) bytes.*/\2/')
"$ember" stats "$dir/run.db" --report gpu_memory --format json >"$dir/stats.json"

python3 - "$dir/stats.json" "$dir/metrics.jsonl" "$allocated" "$reserved" <<'PY'
import json, sys
stats_path, metrics_path, allocated, reserved = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
report = json.load(open(stats_path))["reports"]
rows = [r for r in report["gpu_memory"] if r["device"] == -1]
if len(rows) != 1:
    print("FAIL: the trace has no host (device -1) memory events:", report["gpu_memory"]); sys.exit(1)
row = rows[0]
summary = [json.loads(l) for l in open(metrics_path) if '"summary"' in l][-1]
print(f"trainer: peak allocated {allocated}, reserved {reserved}; metrics: {summary['peak_allocated_bytes']}, "
      f"{summary['peak_reserved_bytes']}; trace: {row['peak_allocated_bytes']}, {row['peak_reserved_bytes']}")
if allocated <= 0 or reserved < allocated:
    print("FAIL: implausible allocator peaks"); sys.exit(1)
if (summary["peak_allocated_bytes"], summary["peak_reserved_bytes"]) != (allocated, reserved):
    print("FAIL: the metrics summary disagrees with the log"); sys.exit(1)
if (row["peak_allocated_bytes"], row["peak_reserved_bytes"]) != (allocated, reserved):
    print("FAIL: the trace's replay disagrees with the allocator's statistics"); sys.exit(1)
places = {r["place"] for r in report["gpu_memory_at_peak_by_line"] if r["device"] == -1}
if "conv1" not in places:
    print("FAIL: the memory live at the peak is not attributed to the layers:", sorted(places)); sys.exit(1)
print("PASS: the trace's memory peaks are the allocator's")
PY
