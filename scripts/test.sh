#!/usr/bin/env bash
# The whole test suite on a fresh machine: install what is missing, configure the
# release preset, build, run every CTest test (the `gpu`-labelled ones skip when no
# CUDA device is present) and print CTest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)"
ctest --preset release -j "$(nproc)" "$@"
