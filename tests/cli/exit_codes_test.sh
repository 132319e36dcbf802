#!/usr/bin/env bash
# exit_codes_test.sh EMBER: the one exit-code rule of every command (README, "Exit
# codes"; cli/command_errors.h), as a user meets it: bad input exits 2 with one line
# "ember COMMAND: ..." naming what was wrong (CLI11's own usage errors included, which
# it numbers from 100), a failure at run time exits 1, and `ember record` passes on the
# recorded program's own status. (The diff gate's 4 is tests/cli/diff_command_test.cpp's.)
set -u
ember="$1"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# expect CODE PATTERN -- ARGS...: `ember ARGS` exits CODE and its stderr matches PATTERN.
expect() {
    local code=$1 pattern=$2
    shift 3
    "$ember" "$@" >"$work/out" 2>"$work/err"
    local status=$?
    [ "$status" -eq "$code" ] || { cat "$work/err"; fail "ember $*: exit $status, expected $code"; }
    grep -qE -e "$pattern" "$work/err" || { cat "$work/err"; fail "ember $*: stderr does not match '$pattern'"; }
}

echo "not a trace" >"$work/junk.db"
# Bad input: 2.
expect 2 "ember stats: .*junk.db" -- stats "$work/junk.db"
expect 2 "ember export: unknown format 'nope'" -- export "$work/junk.db" --format nope
expect 2 "ember dump: --pid must be a process id, not 0" -- dump --pid 0
expect 2 "ember record: --children must be suffix or skip, not 'all'" -- record --children all -- true
expect 2 "ember record: no command to record" -- record -o "$work/r.db"
expect 2 "ember synth: " -- synth -o /nonexistent-dir/x.db --events 1000
# CLI11's usage errors: an unknown flag, a missing argument, a value outside a set.
expect 2 "no-such-flag" -- stats --no-such-flag "$work/junk.db"
expect 2 "ember diff: give two traces" -- diff "$work/junk.db"
expect 2 "required" -- attach
expect 2 "bogus" -- attach 1 bogus
# A failure at run time: 1 (no recorded process answers on this pid's socket).
XDG_RUNTIME_DIR="$work" expect 1 "ember attach: " -- attach 999999999 status
# The recorded program's own status passes through, as in a shell.
expect 3 "no trace written" -- record -o "$work/r.db" --python-hz 0 -- sh -c 'exit 3'
expect 127 "ember record: cannot run /no/such/program" -- record -o "$work/r.db" --python-hz 0 -- /no/such/program
# Help and version are not errors.
"$ember" stats --help >/dev/null 2>&1 || fail "ember stats --help: exit $?"
"$ember" --version >/dev/null 2>&1 || fail "ember --version: exit $?"
echo "PASS: every command exits by the one rule"
