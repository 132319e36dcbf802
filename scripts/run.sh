#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, train a CNN on
# Fashion-MNIST with profiling on (CUDA when a GPU is present, else the CPU backend),
# write the trace to SQLite and print its summary.
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
echo "trace: out/quickstart.db   metrics: out/quickstart.jsonl   checkpoint: out/checkpoints/last.ckpt"
echo "next:  $ember export out/quickstart.db --format chrome -o out/quickstart.json   (open in Perfetto)"
