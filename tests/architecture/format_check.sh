#!/usr/bin/env bash
# format_check.sh ROOT: every C++ and CUDA source of the tree is as clang-format (the
# tree's .clang-format) writes it. Formatting differs between clang-format releases, so
# the check runs with the release the tree is formatted with (Debian 12's clang-format
# 14, installed by scripts/install-deps.sh) and skips, saying why, under any other.
# Fix a difference with:  git ls-files '*.cpp' '*.h' '*.hpp' '*.cu' '*.cuh' | xargs clang-format -i
# (twice: a few macros settle on the second pass).
set -u
root=${1:?usage: format_check.sh ROOT}
cd "$root" || exit 2
expected_major=14
formatter=$(command -v "clang-format-$expected_major" || command -v clang-format || true)
if [ -z "$formatter" ]; then
    echo "format_check: skipped: no clang-format (scripts/install-deps.sh installs it)"
    exit 77
fi
version=$("$formatter" --version)
major=$(sed -nE 's/.*version ([0-9]+)\..*/\1/p' <<<"$version")
if [ "$major" != "$expected_major" ]; then
    echo "format_check: skipped: $version is not clang-format $expected_major, the release the tree is formatted with"
    exit 77
fi
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    files=$(git ls-files '*.cpp' '*.h' '*.hpp' '*.cu' '*.cuh')
else
    files=$(find . -not -path './build/*' -not -path './.git/*' -type f \
        \( -name '*.cpp' -o -name '*.h' -o -name '*.hpp' -o -name '*.cu' -o -name '*.cuh' \) | sed 's#^\./##')
fi
# One clang-format for every file: it names each place that differs.
differing=$(xargs "$formatter" --style=file --dry-run <<<"$files" 2>&1 | sed -nE 's/^([^:]+):[0-9]+:[0-9]+: (warning|error): .*/\1/p' | sort -u)
if [ -n "$differing" ]; then
    sed 's/$/: not as clang-format writes it/' <<<"$differing"
    echo "format_check: $(wc -l <<<"$differing") file(s) differ; run: git ls-files '*.cpp' '*.h' '*.hpp' '*.cu' '*.cuh' | xargs $formatter -i" >&2
    exit 1
fi
echo "format_check: $(wc -w <<<"$files") files as clang-format $expected_major writes them"
