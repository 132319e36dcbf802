#!/usr/bin/env bash
# `ember stats FILES... --report collectives` under mpirun: the rank files sharded over 3
# processes give the same JSON, byte for byte, as one process; a file no process can
# read ends every process with a message naming it, exit code 2. So do those of a
# two-dimensional job whose collectives are matched within process groups.
# Usage: mpi_stats_test.sh EMBER_BINARY WORK_DIR
set -euo pipefail
source "$(dirname "$0")/../engine/train/mpi_two_ranks.sh"
export XDG_CACHE_HOME=$work/cache
# mpirun -np N on this machine alone.
mpi() { local n=$1; shift; mpirun -np "$n" --oversubscribe --mca btl self,vader --mca plm_rsh_agent "" "$@"; }
"$ember" synth -o "$work/job.db" --ranks 5 --straggler 3 --clock-skew-ms 4 --steps 8 -q
files=$(ls "$work"/job.rank*.db)
"$ember" stats $files --report collectives --format json >"$work/one.json"
mpi 3 "$ember" stats $files --report collectives --format json >"$work/three.json"
cmp "$work/one.json" "$work/three.json" || { diff "$work/one.json" "$work/three.json" | head; echo "FAIL: 3 processes differ"; exit 1; }
grep -q '"straggler": 3' "$work/three.json" || { echo "FAIL: rank 3 not named"; exit 1; }
# A two-dimensional job: collectives matched within process groups, clocks aligned
# through shared groups; the same answer sharded.
"$ember" synth -o "$work/mesh.db" --ranks 8 --tensor-parallel 2 --straggler 5 --clock-skew-ms 4 --steps 6 -q
mesh=$(ls "$work"/mesh.rank*.db)
"$ember" stats $mesh --report collectives --format json >"$work/mesh_one.json"
mpi 3 "$ember" stats $mesh --report collectives --format json >"$work/mesh_three.json"
cmp "$work/mesh_one.json" "$work/mesh_three.json" || { diff "$work/mesh_one.json" "$work/mesh_three.json" | head; echo "FAIL: 3 processes differ on the 2-D job"; exit 1; }
grep -q '"straggler": 5' "$work/mesh_three.json" || { echo "FAIL: rank 5 not named in the 2-D job"; exit 1; }
grep -q '"pg 1 (mesh_tp) ranks 0-1"' "$work/mesh_three.json" || { echo "FAIL: no process group communicator"; exit 1; }
# Text, and every report (the job file is built by the first process alone).
mpi 2 "$ember" stats $files >"$work/all.txt"
[ "$(grep -c '^Collectives across ranks' "$work/all.txt")" = 1 ] || { echo "FAIL: printed other than once"; exit 1; }
# Bad input under MPI too: every process ends (MPI_Abort) with exit code 2, as one would.
status=0
mpi 2 "$ember" stats $files "$work/no-such-rank.db" --report collectives >"$work/bad.out" 2>&1 || status=$?
[ "$status" -eq 2 ] || { cat "$work/bad.out"; echo "FAIL: a missing rank file ended with exit $status, not 2"; exit 1; }
grep -q "no-such-rank.db" "$work/bad.out" || { cat "$work/bad.out"; echo "FAIL: the message names no file"; exit 1; }
echo "mpi stats: 3 processes give one process's answer"
