#!/usr/bin/env bash
# format_check_test.sh: format_check.sh refuses a file clang-format would change and
# passes it once formatted (skips, 77, where format_check.sh itself would skip).
set -u
checker=$(dirname "$0")/format_check.sh
root=$(cd "$(dirname "$0")/../.." && pwd)
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
cp "$root/.clang-format" "$tree/"
printf 'int  main( ) {return 0;}\n' >"$tree/bad.cpp"
output=$(bash "$checker" "$tree" 2>&1)
status=$?
[ "$status" -eq 77 ] && { echo "$output"; exit 77; }
[ "$status" -eq 1 ] || { echo "FAIL: exit $status for an unformatted file, expected 1"; echo "$output"; exit 1; }
grep -q "^bad.cpp: not as clang-format writes it" <<<"$output" || { echo "FAIL: bad.cpp not named"; echo "$output"; exit 1; }
formatter=$(command -v clang-format-14 || command -v clang-format)
"$formatter" -i "$tree/bad.cpp"
bash "$checker" "$tree" >/dev/null || { echo "FAIL: a formatted file was refused"; bash "$checker" "$tree"; exit 1; }
echo "PASS"
