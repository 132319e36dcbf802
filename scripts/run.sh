#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, then report the
# environment ember sees.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
./build/release/bin/ember doctor
