#!/usr/bin/env bash
# Installs every Debian package ember needs to build, test and run.
# Idempotent: packages already present are skipped, and nothing runs apt-get
# when everything is installed. Works as root or through sudo.
#
#   scripts/install-deps.sh                  # everything below
#   scripts/install-deps.sh python3-torch    # only the packages named (bench/cpu_vs_pytorch.sh)
set -euo pipefail

PACKAGES=(
  # toolchain; clang-format: the tree's formatting, checked by CTest architecture.format
  build-essential cmake ninja-build pkg-config git clang-format
  # trace store
  libsqlite3-dev sqlite3
  # tests and benchmarks; Boost.Context: the kernel interpreter's fibers
  libgtest-dev libgmock-dev libbenchmark-dev libboost-context-dev
  # distributed training (CPU all-reduce, NCCL bootstrap)
  libopenmpi-dev openmpi-bin
  # command line, config, json, formatting
  libcli11-dev libtomlplusplus-dev nlohmann-json3-dev libfmt-dev
  # mixed Python + native stacks (ember record/dump --native): elfutils' unwinder
  libdw-dev
  # trace importers: multi-GB Kineto / Chrome JSON, parsed element by element
  libsimdjson-dev
  # data: PNG image folders, gzip IDX files, CPU GEMM, the data set itself
  libpng-dev zlib1g-dev libopenblas-dev dataset-fashion-mnist
  # the CPU backend's fast convolutions, BatchNorm and pooling (oneDNN, OpenMP runtime)
  libdnnl-dev
  # viewer: Dear ImGui (GLFW + OpenGL3 backends inside libimgui.a), headless display
  libimgui-dev libglfw3-dev libgl-dev xvfb xauth libgl1-mesa-dri
  # Perfetto and pprof exports, TensorBoard event files: protobuf (library and protoc)
  libprotobuf-dev protobuf-compiler
  # export checks: xmllint for the SVG flamegraph, headless Chromium for the speedscope web
  # test, Go's pprof (go tool pprof) for the pprof export
  libxml2-utils chromium golang-go
  # test checks written in Python (the suite's time limits, the samples' plots)
  python3
  # SVG to PNG (rsvg-convert) for looking at the optimizer-comparison plot
  librsvg2-bin
)
if [ $# -gt 0 ]; then
  PACKAGES=("$@")
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  SUDO=(sudo -n)
else
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: cannot install them: not root and no password-less sudo." >&2
  echo "install-deps: run as root:  apt-get install -y ${missing[*]}" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q
"${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
