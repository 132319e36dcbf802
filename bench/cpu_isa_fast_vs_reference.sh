#!/usr/bin/env bash
# cpu_isa_fast_vs_reference.sh: the CPU backend's fast path (oneDNN) against its
# reference loops under each instruction set oneDNN may pick on a user's machine
# (ONEDNN_MAX_CPU_ISA: the machine's own, AVX2, AVX, SSE41), at the Fashion-MNIST models'
# sizes, batch 128. Both sides in the same invocation, the caps interleaved by round so
# that drift on a shared machine hits each alike; wall time per iteration (both sides run
# on the OpenMP/OpenBLAS team of every core), median over the rounds. The reference
# loops do not use oneDNN: their time is the same under every cap, and is measured under
# each anyway, as the yardstick of that round.
#   bash bench/cpu_isa_fast_vs_reference.sh [BENCH_BINARY] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
bench=${1:-build/release/bin/ember_bench_ops_cpu}
rounds=${2:-3}
[ -x "$bench" ] || { echo "cpu_isa_fast_vs_reference: no $bench (cmake --build --preset release --target ember_bench_ops_cpu)" >&2; exit 2; }
filter='BM_SmallCnnStep|BM_Conv(Forward|BackwardData|BackwardFilter)/fast:[01]/nhwc:0/C:(32/K:64/H:14/R:3/stride:1|16/K:32/H:28/R:1/stride:2)'
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "fast path vs reference loops per oneDNN ISA cap: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $rounds rounds"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
caps=(native AVX2 AVX SSE41)
for round in $(seq "$rounds"); do
    for cap in "${caps[@]}"; do
        # OpenBLAS (the reference's GEMMs) picks its kernels by CPU too: capped alike with
        # OPENBLAS_CORETYPE (Haswell: AVX2, Sandybridge: AVX, Nehalem: SSE4.2 at most).
        case $cap in
            native) unset ONEDNN_MAX_CPU_ISA OPENBLAS_CORETYPE ;;
            AVX2) export ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell ;;
            AVX) export ONEDNN_MAX_CPU_ISA=AVX OPENBLAS_CORETYPE=Sandybridge ;;
            SSE41) export ONEDNN_MAX_CPU_ISA=SSE41 OPENBLAS_CORETYPE=Nehalem ;;
        esac
        "$bench" --benchmark_filter="$filter" --benchmark_min_time=0.3 --benchmark_format=json \
            >"$work/$round-$cap.json" 2>/dev/null
    done
done
unset ONEDNN_MAX_CPU_ISA OPENBLAS_CORETYPE
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
# One row per (cap, benchmark without fast:N): median CPU time of each side and the ratio.
python3 - "$work" "${caps[@]}" <<'PY'
import glob, json, os, re, statistics, sys
work, caps = sys.argv[1], sys.argv[2:]
times = {}
for path in glob.glob(os.path.join(work, "*.json")):
    cap = os.path.basename(path).split("-", 1)[1][:-len(".json")]
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
    for b in json.load(open(path))["benchmarks"]:
        fast = "fast:1" in b["name"]
        key = (cap, re.sub(r"/fast:[01]", "", b["name"]).replace("/real_time", ""))
        times.setdefault(key, {}).setdefault(fast, []).append(b["real_time"] * scale[b["time_unit"]])
print("| ISA cap | benchmark | reference (ms) | fast path (ms) | speed-up |")
print("|---|---|---:|---:|---:|")
for cap in caps:
    for (c, name), sides in sorted(times.items()):
        if c != cap or len(sides) < 2: continue
        ref, fast = statistics.median(sides[False]), statistics.median(sides[True])
        print(f"| {cap} | {name} | {ref:.2f} | {fast:.2f} | {ref / fast:.1f}x |")
PY
