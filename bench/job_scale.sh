#!/usr/bin/env bash
# job_scale.sh: what the job analysis of many ranks costs (`ember stats RANK_FILES...
# --report collectives`), at 64, 512 and 1024 generated ranks, against baselines in the
# same run:
#   * the cost model: wall time and peak memory at each size; 512 and 1024 ranks as a
#     ratio of 64 (the analysis should grow linearly, in about the same memory);
#   * the old way to one answer, `ember merge` of every event then `ember stats` of the
#     job file, at 64 ranks;
#   * the floor of a Python tool (HTA loads every rank's JSON): json.load of the 64
#     ranks exported as Chrome JSON, against ember reading the same JSON files (import
#     included, then from its cache);
#   * sharded over 2 MPI processes (`mpirun -np 2`), at 1024 ranks;
#   * a two-dimensional job of 1024 ranks whose collectives are matched by process group.
# Each rank: `ember synth --ranks R --straggler 17 --clock-skew-ms 5 --steps STEPS`
# (about 55 events per step). Wall seconds: the median of RUNS runs.
#   bash bench/job_scale.sh [EMBER] [RUNS] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
ember=$(realpath "${1:-build/release/bin/ember}")
runs=${2:-3}
steps=${3:-100}
work=$(mktemp -d /tmp/ember-job-scale.XXXXXX)
trap 'rm -rf "$work"' EXIT
export XDG_CACHE_HOME=$work/cache OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# "median_seconds peak_kb" of RUNS runs of "$@" (output thrown away; a failure stops).
measure() {
    local times=() peak=0 line
    for ((i = 0; i < runs; i++)); do
        /usr/bin/time -f "%e %M" -o "$work/time.txt" "$@" >/dev/null 2>"$work/err.txt" || { cat "$work/err.txt" >&2; exit 1; }
        read -r line <"$work/time.txt"
        times+=("${line% *}")
        peak=$(( ${line#* } > peak ? ${line#* } : peak ))
    done
    printf '%s %s\n' "$(printf '%s\n' "${times[@]}" | sort -g | sed -n "$(( (runs + 1) / 2 ))p")" "$peak"
}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $steps steps per rank"
declare -A seconds memory
for ranks in 64 512 1024; do
    "$ember" synth -o "$work/j$ranks.db" --ranks "$ranks" --straggler 17 --clock-skew-ms 5 --steps "$steps" -q
    events=$(( $(sqlite3 "$work/j$ranks.rank0.db" "SELECT (SELECT COUNT(*) FROM kernels)+(SELECT COUNT(*) FROM ranges)+(SELECT COUNT(*) FROM api_calls)") * ranks ))
    read -r s kb < <(measure "$ember" stats "$work"/j$ranks.rank*.db --report collectives)
    seconds[$ranks]=$s
    memory[$ranks]=$kb
    straggler=$("$ember" stats "$work"/j$ranks.rank*.db --report collectives --format json | python3 -c \
        "import json,sys; print(json.load(sys.stdin)['reports']['collectives']['straggler'])")
    printf '%5d ranks (%d events): %6.2f s, %6.1f MiB peak; straggler found: rank %s\n' "$ranks" "$events" "$s" \
        "$(echo "$kb / 1024" | bc -l)" "$straggler"
done
for ranks in 512 1024; do
    printf '%5d ranks / 64 ranks: time %.1fx, peak memory %.2fx\n' "$ranks" \
        "$(echo "${seconds[$ranks]} / ${seconds[64]}" | bc -l)" "$(echo "${memory[$ranks]} / ${memory[64]}" | bc -l)"
done

# A two-dimensional job of 1024 ranks (tensor-parallel groups of 8, data-parallel groups
# of 128, named in the kernels' collective metadata): 136 communicators instead of 2.
"$ember" synth -o "$work/mesh.db" --ranks 1024 --tensor-parallel 8 --straggler 17 --clock-skew-ms 5 --steps "$steps" -q
read -r mesh_s mesh_kb < <(measure "$ember" stats "$work"/mesh.rank*.db --report collectives)
mesh_straggler=$("$ember" stats "$work"/mesh.rank*.db --report collectives --format json | python3 -c \
    "import json,sys; print(json.load(sys.stdin)['reports']['collectives']['straggler'])")
printf '1024 ranks, tensor-parallel 8 (process groups): %.2f s (%.2fx the data-parallel job), %.1f MiB peak; straggler found: rank %s\n' \
    "$mesh_s" "$(echo "$mesh_s / ${seconds[1024]}" | bc -l)" "$(echo "$mesh_kb / 1024" | bc -l)" "$mesh_straggler"
rm -f "$work"/mesh.rank*.db

# The old way at 64 ranks: every event merged into one job file, then its report.
read -r merge_s merge_kb < <(measure "$ember" merge -o "$work/merged64.db" "$work"/j64.rank*.db)
read -r stats_s stats_kb < <(measure "$ember" stats "$work/merged64.db" --report collectives)
printf 'merge + stats of the job file, 64 ranks: %.2f s (%.1fx the rank files read directly), %.1f MiB peak\n' \
    "$(echo "$merge_s + $stats_s" | bc -l)" "$(echo "($merge_s + $stats_s) / ${seconds[64]}" | bc -l)" \
    "$(echo "$(( merge_kb > stats_kb ? merge_kb : stats_kb )) / 1024" | bc -l)"

# Python's floor on the same 64 ranks as JSON.
mkdir -p "$work/json"
for f in "$work"/j64.rank*.db; do "$ember" export "$f" --format chrome -o "$work/json/$(basename "$f" .db).json" >/dev/null 2>&1; done
read -r python_s python_kb < <(measure python3 -c "import json,glob
for f in sorted(glob.glob('$work/json/*.json')): json.load(open(f))")
read -r cold_s cold_kb < <(measure bash -c "rm -f '$work'/json/*.ember-cache.db; '$ember' stats '$work'/json/*.json --report collectives")
read -r warm_s warm_kb < <(measure "$ember" stats "$work"/json/*.json --report collectives)
bytes=$(cat "$work"/json/*.json | wc -c)
printf '64 ranks as Chrome JSON (%d MB): python json.load %.2f s; ember, import included %.2f s (%.1fx faster), from its cache %.2f s (%.1fx faster)\n' \
    "$(( bytes / 1000000 ))" "$python_s" "$cold_s" "$(echo "$python_s / $cold_s" | bc -l)" "$warm_s" \
    "$(echo "$python_s / $warm_s" | bc -l)"

# Sharded over two MPI processes.
read -r mpi_s mpi_kb < <(measure mpirun -np 2 --oversubscribe --mca btl self,vader --mca plm_rsh_agent "" \
    "$ember" stats "$work"/j1024.rank*.db --report collectives)
printf 'mpirun -np 2 at 1024 ranks: %.2f s (one process: %.2f s), %.1f MiB peak per process\n' "$mpi_s" \
    "${seconds[1024]}" "$(echo "$mpi_kb / 1024" | bc -l)"
