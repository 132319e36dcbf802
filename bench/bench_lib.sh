# bench_lib.sh: what the shell benchmarks share. Sourced from the repository root
# (`source bench/bench_lib.sh`); wall and synth_chrome_json write under $work and
# synth_chrome_json runs $ember, both set by the benchmark before it calls them.

# Wall seconds of one run of "$@", to the millisecond (output thrown away; a failure
# stops the script).
wall() {
    local TIMEFORMAT=%3R
    { time "$@" >/dev/null 2>"$work/err.txt" || { cat "$work/err.txt" >&2; exit 1; }; } 2>"$work/time.txt"
    cat "$work/time.txt"
}

# The median, least and greatest of the numbers on stdin, one a line (an even count's
# median: the mean of the middle two).
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
minimum() { sort -g | head -1; }
maximum() { sort -g | tail -1; }

# The machine's CPU model and the vector extensions a JSON parser may use.
cpu_line() {
    echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'); ISA: $(grep -o -w -E 'sse4_2|avx|avx2|avx512f|avx512bw|avx512vl|bmi2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
}

# FILE: the Chrome JSON export of `ember synth --events EVENTS --seed 7`, made unless
# it is there already.
synth_chrome_json() {  # events, file
    [ ! -f "$2" ] || return 0
    "$ember" synth -o "$work/synth.db" --events "$1" --seed 7 >/dev/null
    "$ember" export "$work/synth.db" --format chrome -o "$2" >/dev/null
    rm -f "$work/synth.db"
}
