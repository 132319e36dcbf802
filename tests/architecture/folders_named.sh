#!/usr/bin/env bash
# folders_named.sh ROOT: docs/architecture.md's Rooms block names every folder of the
# tree, so a newcomer finds each one there. A folder counts as named when its own name
# followed by "/" appears in the block ("interpreter/" for engine/cuda/interpreter).
# tests/ mirrors the tree and samples/ holds one folder per program (the block says so),
# so only their first level is checked. Lists every unnamed folder; exit 1 when there is one.
set -u
root=${1:?usage: folders_named.sh ROOT}
cd "$root" || exit 2
doc=docs/architecture.md
[ -f "$doc" ] || { echo "folders_named: $root/$doc is missing" >&2; exit 2; }
rooms=$(sed -n '/^## Rooms/,/^## Arrows/p' "$doc")
[ -n "$rooms" ] || { echo "folders_named: $doc has no '## Rooms' ... '## Arrows' block" >&2; exit 2; }

# The tracked folders (a fresh clone: git; otherwise every folder but build outputs).
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    folders=$(git ls-files | sed -n 's#/[^/]*$##p' | sort -u)
else
    folders=$(find . -type f -not -path './build/*' -not -path './.git/*' | sed -n 's#^\./##; s#/[^/]*$##p' | sort -u)
fi
# Every ancestor of a folder with files is a folder too.
all=$(for f in $folders; do while [ -n "$f" ]; do echo "$f"; case $f in */*) f=${f%/*} ;; *) f= ;; esac; done; done | sort -u)

missing=0
for folder in $all; do
    case $folder in
        tests/*/*|samples/*/*|samples/*) [ "${folder%%/*}" = tests ] && continue; continue ;;
    esac
    name=${folder##*/}
    if ! grep -qF -- "$name/" <<<"$rooms"; then
        echo "$folder/ is not named in $doc's Rooms"
        missing=$((missing + 1))
    fi
done
if [ "$missing" -gt 0 ]; then
    echo "folders_named: $missing folder(s) missing from $doc; add a line for each where it belongs" >&2
    exit 1
fi
echo "folders_named: docs/architecture.md names every folder"
