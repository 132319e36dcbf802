#!/usr/bin/env bash
# readme_commands_test.sh EMBER README: the README's table of commands names every
# subcommand `ember --help` lists, and no other. The subcommands are the names under
# "Subcommands:" in the help; the README's are the word after "ember" in the first
# column of the table under "## The `ember` command". A name on one side only fails,
# named (a command added without its row, a row left behind by a removed command).
set -u
ember=${1:?usage: readme_commands_test.sh EMBER README}
readme=${2:?usage: readme_commands_test.sh EMBER README}

help=$("$ember" --help) || { echo "FAIL: $ember --help exited $?"; exit 1; }
from_help=$(awk '/^Subcommands:/ { listed = 1; next } listed && /^  [a-z]/ { print $1 }' <<<"$help" | sort -u)
# The table: the rows after the heading, up to the first line that is not a row.
from_readme=$(awk '/^## The `ember` command/ { section = 1; next }
                   section && /^\|/ { table = 1; print; next }
                   table { exit }' "$readme" |
    awk -F'|' 'NR > 2 { print $2 }' | grep -oE '(^|[^a-z-])ember [a-z][a-z-]*' | awk '{ print $NF }' | sort -u)

[ -n "$from_help" ] || { echo "FAIL: no subcommands found in ember --help"; echo "$help"; exit 1; }
[ -n "$from_readme" ] || { echo "FAIL: no command table found in $readme"; exit 1; }
missing_in_readme=$(comm -23 <(echo "$from_help") <(echo "$from_readme") | paste -sd' ')
missing_in_help=$(comm -13 <(echo "$from_help") <(echo "$from_readme") | paste -sd' ')
status=0
if [ -n "$missing_in_readme" ]; then
    echo "FAIL: ember --help lists commands the README's table does not: $missing_in_readme"
    status=1
fi
if [ -n "$missing_in_help" ]; then
    echo "FAIL: the README's table lists commands ember --help does not: $missing_in_help"
    status=1
fi
[ "$status" -eq 0 ] && echo "PASS: the README's table names the $(wc -l <<<"$from_help") commands of ember --help"
exit "$status"
