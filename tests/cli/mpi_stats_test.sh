#!/usr/bin/env bash
# `ember stats FILES... --report collectives` under mpirun: the rank files sharded over 3
# processes give the same JSON, byte for byte, as one process; a file no process can
# read ends every process with a message naming it.
# Usage: mpi_stats_test.sh EMBER_BINARY WORK_DIR
set -euo pipefail
source "$(dirname "$0")/../engine/train/mpi_two_ranks.sh"
export XDG_CACHE_HOME=$work/cache
"$ember" synth -o "$work/job.db" --ranks 5 --straggler 3 --clock-skew-ms 4 --steps 8 -q
files=$(ls "$work"/job.rank*.db)
"$ember" stats $files --report collectives --format json >"$work/one.json"
mpirun -np 3 --oversubscribe --mca btl self,vader --mca plm_rsh_agent "" \
    "$ember" stats $files --report collectives --format json >"$work/three.json"
cmp "$work/one.json" "$work/three.json" || { diff "$work/one.json" "$work/three.json" | head; echo "FAIL: 3 processes differ"; exit 1; }
grep -q '"straggler": 3' "$work/three.json" || { echo "FAIL: rank 3 not named"; exit 1; }
# Text, and every report (the job file is built by the first process alone).
mpirun -np 2 --oversubscribe --mca btl self,vader --mca plm_rsh_agent "" \
    "$ember" stats $files >"$work/all.txt"
[ "$(grep -c '^Collectives across ranks' "$work/all.txt")" = 1 ] || { echo "FAIL: printed other than once"; exit 1; }
if mpirun -np 2 --oversubscribe --mca btl self,vader --mca plm_rsh_agent "" \
    "$ember" stats $files "$work/no-such-rank.db" --report collectives >"$work/bad.out" 2>&1; then
    echo "FAIL: a missing rank file succeeded"; exit 1
fi
grep -q "no-such-rank.db" "$work/bad.out" || { cat "$work/bad.out"; echo "FAIL: the message names no file"; exit 1; }
echo "mpi stats: 3 processes give one process's answer"
