#!/usr/bin/env bash
# folders_named_test.sh: folders_named.sh catches a folder the page does not name, and
# passes once the page names it.
set -u
checker=$(dirname "$0")/folders_named.sh
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree"/{docs,engine/core,tests/engine/core,samples/demo}
printf '# House\n## Rooms\nengine/\n  core/\ntests/\nsamples/\ndocs/\n## Arrows\n' >"$tree/docs/architecture.md"
for f in engine/core/a.h tests/engine/core/a_test.cpp samples/demo/main.cpp; do echo x >"$tree/$f"; done
bash "$checker" "$tree" >/dev/null || { echo "FAIL: a tree whose folders are all named was refused"; bash "$checker" "$tree"; exit 1; }
mkdir -p "$tree/engine/core/secret"
echo x >"$tree/engine/core/secret/b.h"
output=$(bash "$checker" "$tree" 2>&1)
status=$?
[ "$status" -eq 1 ] || { echo "FAIL: exit $status for an unnamed folder, expected 1"; echo "$output"; exit 1; }
grep -q "^engine/core/secret/ is not named" <<<"$output" || { echo "FAIL: the unnamed folder was not listed"; echo "$output"; exit 1; }
echo "PASS"
