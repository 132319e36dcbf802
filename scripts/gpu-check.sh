#!/usr/bin/env bash
# GPU checks on a machine with an NVIDIA device, in one call.
#
#   scripts/gpu-check.sh pack   build here (release preset) and gather every
#                               `gpu`-labelled test, the ember binaries and their
#                               non-CUDA shared libraries into .gpu-bundle/
#   scripts/gpu-check.sh run    on the GPU machine: locate its CUDA, cuDNN, NCCL,
#                               CUPTI and cuBLAS libraries (system CUDA or the
#                               nvidia-* Python wheels next to PyTorch), run every
#                               bundled test and print a table last
#
# GPU_CHECK_FILTER=REGEX runs only the matching tests; GPU_CHECK_TEST_TIMEOUT=S caps each
# (default 600). Every test runs with stdin closed (mpirun would read the test list).
#
# The GPU machine needs a driver and CUDA 13 libraries but no compiler, GoogleTest
# or Debian packages: the bundle carries what the tests link against. One test
# (collectors_python_gpu_test: CUDA API calls carry the Python line that made them)
# runs a Python program under `ember record`: it needs a python3 there, and skips
# saying so without one. Logs go to
# $OUT (when set) or .gpu-bundle/logs.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUNDLE=$ROOT/.gpu-bundle

# Libraries the GPU machine provides itself (driver, CUDA toolkit libraries, libc).
PROVIDED='^(libcuda|libnvidia|libcudart|libcublas|libcublasLt|libcudnn|libnccl|libcupti|libnvrtc|libnvJitLink|libnvToolsExt|libc|libm|libdl|libpthread|librt|libutil|ld-linux|libstdc\+\+|libgcc_s|linux-vdso)[.-]'

pack() {
    bash scripts/install-deps.sh
    cmake --preset release >/dev/null
    cmake --build --preset release -j "$(nproc)"
    rm -rf "$BUNDLE"
    mkdir -p "$BUNDLE/bin" "$BUNDLE/lib"
    # The gpu-labelled tests as CTest knows them (name, command, environment).
    ctest --preset release -L gpu --show-only=json-v1 >"$BUNDLE/ctest.json"
    python3 - "$BUNDLE" "$ROOT/build/release" <<'PY'
import json, os, shutil, sys
bundle, build = sys.argv[1], sys.argv[2]
tests = json.load(open(os.path.join(bundle, "ctest.json")))["tests"]
binaries = set()
with open(os.path.join(bundle, "manifest.tsv"), "w") as out:
    for t in tests:
        cmd = []
        for arg in t["command"]:
            if arg.startswith(build) and os.path.isfile(arg) and os.access(arg, os.X_OK):
                binaries.add(arg)
                arg = "@BUNDLE@/bin/" + os.path.basename(arg)
            cmd.append(arg)
        out.write(t["name"] + "\t" + "\x1f".join(cmd) + "\n")
for b in sorted(binaries):
    shutil.copy2(b, os.path.join(bundle, "bin"))
print(f"gpu-check: {len(tests)} gpu tests in {len(binaries)} binaries")
PY
    # ember itself, the viewer and the samples, and the collector library that
    # `ember record` injects (tests find them under the build tree's bin/ and lib/).
    cp build/release/bin/* "$BUNDLE/bin/" 2>/dev/null || true
    mkdir -p "$BUNDLE/buildlib"
    cp build/release/lib/*.so "$BUNDLE/buildlib/" 2>/dev/null || true
    echo "$ROOT/build/release" >"$BUNDLE/build_dir.txt"
    # Non-CUDA shared libraries the binaries need (fmt, sqlite, MPI, OpenBLAS, ...).
    for exe in "$BUNDLE"/bin/* "$BUNDLE"/buildlib/*.so; do
        ldd "$exe" 2>/dev/null | awk '/=> \//{print $1, $3}'
    done | sort -u | while read -r soname path; do
        if ! [[ $soname =~ $PROVIDED ]]; then
            cp -L "$path" "$BUNDLE/lib/$soname"
        fi
    done
    du -sh "$BUNDLE"
    echo "gpu-check: bundle ready; on the GPU machine run: bash scripts/gpu-check.sh run"
}

locate_cuda_libraries() {
    local dirs=()
    for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/local/cuda/lib64 \
             /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
        [ -d "$d" ] && dirs+=("$d")
    done
    # PyTorch's nvidia-* wheels: site-packages/nvidia/<component>/lib
    local py
    for py in python3 /opt/torch/.venv/bin/python3; do
        command -v "$py" >/dev/null 2>&1 || continue
        while IFS= read -r d; do dirs+=("$d"); done < <("$py" - <<'PY' 2>/dev/null
import glob, os, site
seen = set()
for sp in site.getsitepackages():
    for so in glob.glob(os.path.join(sp, "nvidia", "**", "lib*.so*"), recursive=True):
        d = os.path.dirname(so)
        if d not in seen:
            seen.add(d)
            print(d)
PY
)
    done
    local IFS=:
    echo "${dirs[*]}"
}

run() {
    [ -f "$BUNDLE/manifest.tsv" ] || { echo "gpu-check: no bundle; run 'scripts/gpu-check.sh pack' first and carry .gpu-bundle" >&2; exit 2; }
    local logs=${OUT:-$BUNDLE/logs}
    mkdir -p "$logs"
    export LD_LIBRARY_PATH="$BUNDLE/lib:$BUNDLE/buildlib:$(locate_cuda_libraries)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    # Tests know the build tree's path from compile time: make it resolve here too.
    local build_dir
    build_dir=$(cat "$BUNDLE/build_dir.txt")
    if [ ! -e "$build_dir/bin" ]; then
        mkdir -p "$build_dir"
        ln -sfn "$BUNDLE/bin" "$build_dir/bin"
        ln -sfn "$BUNDLE/buildlib" "$build_dir/lib"
    fi
    echo "== device"
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader || echo "nvidia-smi failed"
    echo "== libraries"
    for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2 libcupti.so.13; do
        found=$(IFS=:; for d in $LD_LIBRARY_PATH; do [ -e "$d/$lib" ] && { echo "$d/$lib"; break; }; done)
        printf '  %-20s %s\n' "$lib" "${found:-MISSING}"
    done
    missing=$(for exe in "$BUNDLE"/bin/*; do ldd "$exe" | grep "not found"; done | sort -u || true)
    [ -n "$missing" ] && { echo "gpu-check: unresolved libraries:"; echo "$missing"; }
    "$BUNDLE/bin/ember" doctor | tee "$logs/doctor.txt" || true
    echo "== python (the Python call-site test runs a CUDA program with it)"
    command -v python3 >/dev/null 2>&1 && python3 --version || echo "  no python3: collectors_python_gpu_test skips"

    local pass=0 fail=0 skip=0 rows=()
    while IFS=$'\t' read -r name cmd; do
        # GPU_CHECK_FILTER (an extended regex) runs only the tests whose names match it.
        [[ -n ${GPU_CHECK_FILTER:-} && ! $name =~ $GPU_CHECK_FILTER ]] && continue
        IFS=$'\x1f' read -r -a argv <<<"${cmd//@BUNDLE@/$BUNDLE}"
        local log="$logs/$(echo "$name" | tr -c 'A-Za-z0-9_.-' '_').log"
        local start=$(date +%s.%N) status
        if timeout "${GPU_CHECK_TEST_TIMEOUT:-600}" "${argv[@]}" >"$log" 2>&1 </dev/null; then
            if grep -q '\[  SKIPPED \]' "$log"; then status=SKIP; skip=$((skip+1)); else status=PASS; pass=$((pass+1)); fi
        else
            status=FAIL; fail=$((fail+1)); tail -20 "$log"
        fi
        rows+=("$(printf '%-6s %8.2fs  %s' "$status" "$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')" "$name")")
    done <"$BUNDLE/manifest.tsv"
    echo "== gpu tests"
    printf '%s\n' "${rows[@]}"
    echo "$pass passed, $fail failed, $skip skipped"
    train_on_gpu "$logs" || fail=$((fail+1))
    [ "$fail" -eq 0 ]
}

# The README's main job on the device: the quickstart CNN trained with CUDA and profiled,
# then `ember stats` of its trace. The data root is $EMBER_GPU_CHECK_DATA (the four
# Fashion-MNIST *-ubyte.gz files) or Debian's dataset-fashion-mnist folder.
train_on_gpu() {
    local logs=$1 data=${EMBER_GPU_CHECK_DATA:-/usr/share/datasets/fashion-mnist}
    echo "== profiled training on the GPU"
    if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
        echo "  no Fashion-MNIST under $data: skipped (set EMBER_GPU_CHECK_DATA)"
        return 0
    fi
    local trace=$logs/quickstart_gpu.db
    rm -f "$trace"
    if ! timeout "${GPU_CHECK_TEST_TIMEOUT:-600}" "$BUNDLE/bin/ember" train --config samples/configs/quickstart.toml \
            --data-root "$data" --profile "$trace" >"$logs/train.log" 2>&1; then
        echo "FAIL   ember train on the GPU"; tail -20 "$logs/train.log"; return 1
    fi
    tail -5 "$logs/train.log"
    "$BUNDLE/bin/ember" stats "$trace" >"$logs/train_stats.txt" 2>&1 || { echo "FAIL   ember stats of the GPU trace"; tail -20 "$logs/train_stats.txt"; return 1; }
    head -60 "$logs/train_stats.txt"
}

case "${1:-}" in
    pack) pack ;;
    run) run ;;
    *) echo "usage: $0 pack|run" >&2; exit 2 ;;
esac
