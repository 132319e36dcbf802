#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, train a CNN on
# Fashion-MNIST with profiling on (CUDA when a GPU is present, else the CPU backend),
# write the trace to SQLite, print its summary and leave pictures of it: a CPU (or,
# with a GPU, GPU-time-by-range) flamegraph as SVG and a timeline PNG rendered
# headless by the viewer (under Xvfb when there is no display).
#   bash scripts/run.sh [extra `ember train` options, e.g. --epochs 3]
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"

ember=./build/release/bin/ember
mkdir -p out
"$ember" doctor
"$ember" train --config samples/configs/quickstart.toml --profile out/quickstart.db \
    --metrics out/quickstart.jsonl --checkpoint-dir out/checkpoints "$@"
"$ember" stats out/quickstart.db --top 15 --time-unit ms
echo

# Pictures. The flamegraph of sampled CPU stacks shows where a CPU-backend run
# spends its time; a GPU run's GPU time by NVTX range shows where the device's goes.
pictures=()
if "$ember" stats out/quickstart.db --report kernels --format csv | tail -n +2 | grep -q .; then
    "$ember" export out/quickstart.db --format svg --stacks gpu -o out/quickstart.flamegraph.svg >/dev/null
else
    "$ember" export out/quickstart.db --format svg --stacks cpu -o out/quickstart.flamegraph.svg >/dev/null
fi
pictures+=(out/quickstart.flamegraph.svg)
viewer=./build/release/bin/ember-view
if [ -x "$viewer" ]; then
    shot=("$ember" view out/quickstart.db --screenshot out/quickstart.timeline.png --size 1600x900)
    rm -f out/quickstart.timeline.png
    # The picture is there or not: xvfb-run's own exit status can fail in its clean-up.
    if [ -n "${DISPLAY:-}" ]; then
        "${shot[@]}" >/dev/null 2>&1 || true
    elif command -v xvfb-run >/dev/null; then
        xvfb-run -a -s "-screen 0 1600x900x24" "${shot[@]}" >/dev/null 2>&1 || true
    fi
    if [ -s out/quickstart.timeline.png ]; then
        pictures+=(out/quickstart.timeline.png)
    else
        echo "timeline picture: skipped (no display, and no xvfb-run to make one)"
    fi
fi

echo "trace:    out/quickstart.db   metrics: out/quickstart.jsonl   checkpoint: out/checkpoints/last.ckpt"
echo "pictures: ${pictures[*]}"
echo "next:     $ember view out/quickstart.db   (timeline, flamegraphs)"
echo "          $ember export out/quickstart.db --format chrome -o out/quickstart.json   (open in Perfetto)"
