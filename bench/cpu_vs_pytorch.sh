#!/usr/bin/env bash
# cpu_vs_pytorch.sh: ember's CPU backend against PyTorch on the CPU, in one run: the four
# models (mlp, cnn, resnet, transformer) trained by `ember train` and by a PyTorch mirror
# of each (bench/cpu_vs_pytorch.py), same architecture, batch, fp32, threads and data,
# back to back, for a few rounds; prints steady-state images/s and the ratio.
#
#   bash bench/cpu_vs_pytorch.sh                          # build/release/bin/ember, 3 rounds
#   bash bench/cpu_vs_pytorch.sh --ember build/cpu/bin/ember --rounds 5 --threads 2
#   bash bench/cpu_vs_pytorch.sh --models resnet,cnn --channels-last
#   bash bench/cpu_vs_pytorch.sh --with-reference          # + ember's reference loops (before/after)
#
# Every other argument goes to `cpu_vs_pytorch.py compare` (--batch-size, --steps,
# --warmup, --data-root). PyTorch is Debian's python3-torch (1.13), installed by
# scripts/install-deps.sh when it is missing and this runs as root (or with password-less sudo).
# Numbers and the command that produced them: docs/performance.md, "ember vs PyTorch on
# the CPU".
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ember="$root/build/release/bin/ember"
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --ember) ember="$2"; shift 2 ;;
    --ember=*) ember="${1#--ember=}"; shift ;;
    *) args+=("$1"); shift ;;
  esac
done

# Debian's torch lives in /usr/lib/python3/dist-packages: use the system interpreter,
# whatever python3 comes first on PATH.
python=/usr/bin/python3
if [ ! -x "$python" ]; then
  echo "cpu_vs_pytorch: $python not found (install python3)" >&2
  exit 1
fi
if ! "$python" -c "import torch" 2>/dev/null; then
  echo "cpu_vs_pytorch: PyTorch is not installed (Debian package python3-torch)"
  bash "$root/scripts/install-deps.sh" python3-torch || {
    echo "cpu_vs_pytorch: python3-torch could not be installed; nothing was measured." >&2
    exit 1
  }
  "$python" -c "import torch" || { echo "cpu_vs_pytorch: torch still does not import" >&2; exit 1; }
fi

if [ ! -x "$ember" ]; then
  echo "cpu_vs_pytorch: $ember not found: build it (cmake --build build/release --target ember_cli)" \
       "or pass --ember PATH" >&2
  exit 1
fi

echo "PyTorch: Debian python3-torch $(dpkg-query -W -f='${Version}' python3-torch 2>/dev/null || echo '?'); " \
     "ember: $ember"
exec "$python" "$root/bench/cpu_vs_pytorch.py" compare --ember "$ember" "${args[@]}"
