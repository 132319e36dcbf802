#!/usr/bin/env bash
# include_rules.sh ROOT: the arrows of docs/architecture.md, checked over the sources
# under ROOT. Each rule names a folder and what its files must not include (or call);
# every violation is printed as file:line: text <- the rule, and the exit code is 1
# when there is one. Run by CTest (architecture.include_rules) so the house stays as
# documented.
set -u
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lint_common.sh"
root=${1:?usage: include_rules.sh ROOT}
cd "$root" || exit 2
violations=0


# The programs sit on top; nothing below them reaches up.
forbid engine "$(includes 'profiler|collectors|viewer|cli|bench|tests')" \
    "engine/ speaks NVTX only: it never includes the trace library, the collectors, the viewer or the programs"
forbid engine '#[[:space:]]*include[[:space:]]*<sqlite3\.h>' "engine/ never writes traces itself"
forbid collectors "$(includes 'engine|viewer|cli|bench|tests')" \
    "collectors/ turn a process into events: they include only the event model and the store"
forbid collectors "$(includes 'profiler/(analysis|export|merge|synth|import|job)')" \
    "collectors/ write through profiler/store; they need no analysis, export, merge, synth or import"
forbid profiler "$(includes 'engine|collectors|viewer|cli|bench|tests')" \
    "profiler/ is the trace library: it never includes engine/, collectors/, viewer/ or the programs"
forbid viewer "$(includes 'engine|collectors|cli|bench|tests')" \
    "viewer/ reads traces through profiler/; it never links the engine, the collectors or CUDA"
forbid viewer 'sqlite3|sqlite_util\.h' "viewer/ reads only through store::TraceReader, never SQLite itself"
forbid viewer '#[[:space:]]*include[[:space:]]*<cuda' "viewer/ never links CUDA"
forbid viewer/model 'imgui|GLFW|<GL/|glad' "viewer/model has no UI: it is tested without a window"
forbid common '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "common/ is the leaf every room may include: it includes nothing of ember"
for folder in engine profiler collectors viewer samples; do
    forbid "$folder" "$(includes 'bench')" "only cli/ runs the benchmarks of bench/"
done
for folder in engine profiler collectors viewer bench samples; do
    forbid "$folder" "$(includes 'cli')" "cli/ is the program: nothing includes it"
done

# Inside the trace library, each room includes only the rooms below it:
#   job ─► analysis, merge, import ─► store ─► trace;  export ─► analysis ─► store.
profiler_rule() {
    local room=$1 allowed=$2 others
    others=$(ls profiler | grep -vxE "$allowed|$room|CMakeLists.txt" | paste -sd'|')
    [ -n "$others" ] && forbid "profiler/$room" "$(includes "profiler/($others)")" \
        "profiler/$room may include only profiler/{$room,${allowed//|/,}}"
}
profiler_rule trace ''
profiler_rule store 'trace'
profiler_rule import 'store|trace'
profiler_rule analysis 'store|trace'
profiler_rule export 'analysis|store|trace'
profiler_rule merge 'store|trace'
profiler_rule synth 'store|trace'
profiler_rule job 'analysis|merge|import|store|trace'

# The viewer's model is tested without a window; the window only draws the model.
forbid viewer/model "$(includes 'viewer/ui')" "viewer/model never includes viewer/ui"
forbid viewer/ui "$(includes 'profiler/(import|merge|job|synth|export)')" \
    "viewer/ui draws viewer/model: opening, importing and analysing traces happen in the model"
# The benchmarks build their inputs themselves, never from the test suites.
forbid bench "$(includes 'tests')" "bench/ never includes tests/: what both need lives in the room it belongs to"

# Inside the engine, each room includes only the rooms below it.
engine_rule() {
    local room=$1 allowed=$2 others
    others=$(ls engine | grep -vxE "$allowed|$room|CMakeLists.txt" | paste -sd'|')
    [ -n "$others" ] && forbid "engine/$room" "$(includes "engine/($others)")" \
        "engine/$room may include only engine/{$room,${allowed//|/,}}"
}
engine_rule core 'common'
engine_rule ops 'core'
engine_rule cpu 'core|ops'
engine_rule cuda 'core|ops'
engine_rule optim 'core'
engine_rule amp 'core|optim'
engine_rule data 'core'
engine_rule nn 'core|ops|cpu|cuda|optim|amp'
engine_rule checkpoint 'core|ops|optim|amp|nn'
engine_rule distributed 'core|ops|cuda|optim|amp|nn'

# The NVTX contract has one home, common/nvtx_contract.h: the files that import, analyse
# or show traces name its categories and well-known ranges through it, never as their
# own numbers or literals (a copy drifts). Comments and quoted names in messages (\"step\")
# may speak of them; so may format detection's list of Kineto markers, which matches raw
# bytes before any parsing.
contract_rule="the NVTX contract lives in common/nvtx_contract.h: use its names, never a copy"
# Every room of the trace library that reads, writes or shows NVTX ranges, and the viewer.
# profiler/job sits on the analyses, the merge and the importers: none of them reaches up to it.
for folder in profiler/trace profiler/store profiler/analysis profiler/merge profiler/import profiler/export profiler/synth; do
    forbid "$folder" "$(includes 'profiler/job')" "profiler/job is the job of several rank files: the rooms below it never include it"
done
for folder in profiler/trace profiler/import profiler/analysis profiler/synth profiler/export profiler/merge profiler/store profiler/job viewer; do
    forbid_code "$folder" '[Cc]ategory[A-Za-z_]* *(=|==|!=) *([1-6]|100)([^0-9]|$)' "$contract_rule" 'CategoryCount'
    forbid_code "$folder" '(^|[^\\])"(dataloader|allreduce)/' "$contract_rule"
    forbid_code "$folder" '(^|[^\\])"ProfilerStep#' "$contract_rule" '^profiler/import/detect_format\.cpp:'
    forbid_code "$folder" '(find_string|intern|ranges_named)\([^)]*"(step|ember|forward|backward|optimizer)"' "$contract_rule"
    forbid_code "$folder" 'name[A-Za-z_.]* *[!=]= *"(step|ember|forward|backward|optimizer)"' "$contract_rule"
done

# The analyses' vocabularies have one home each; the viewer and the exports use them.
vocabulary_rule="the analyses' vocabularies (step_breakdown.h, idle_gaps.h, operation_names.h) have one home: use them, never a copy"
for folder in viewer profiler/export; do
    forbid_code "$folder" 'k[A-Za-z]*CategoryCount *= *[0-9]' "$vocabulary_rule"
    forbid_code "$folder" '"(CPU Exec|DataLoader)"' "$vocabulary_rule"
    forbid_code "$folder" '"(Memcpy|Memset) ' "$vocabulary_rule"
done

# The operating system's readings have one home, common/os.h: the clocks (and the offset
# of the wall clock, read at the midpoint), the host name, a process's command line and
# thread names are read there and nowhere else (copies drifted: a wall-clock offset
# without the midpoint read, thread names read three ways). Comments may name the calls.
# tests/ is left out on purpose: its checks read the OS themselves, so that os.h and the
# collector's clock are compared with something other than themselves, and its test
# programs (native_spin) spin in loops that include nothing of ember.
os_rule="OS readings live in common/os.h (clocks, host name, command line, thread names): call it, never a copy"
for folder in engine profiler collectors viewer cli bench samples; do
    forbid_code "$folder" 'clock_gettime[[:space:]]*\(' "$os_rule"
    forbid_code "$folder" 'gethostname[[:space:]]*\(|pthread_getname_np[[:space:]]*\(|PR_GET_NAME' "$os_rule"
    forbid_code "$folder" '/(comm|cmdline)"' "$os_rule"
done
# The collectors and the trace library read no std::chrono clock of their own either: a
# time that is or meets a trace timestamp is os::monotonic_ns() (the base of every
# trace), and an elapsed time (a commit interval, an import's duration) is
# os::SteadyClock / os::seconds_since; a clock read elsewhere could stamp an event on
# another base unnoticed.
clock_rule="collectors/ and profiler/ read clocks through common/os.h (os::monotonic_ns for trace times, os::SteadyClock for elapsed time): never a std::chrono clock of their own"
for folder in collectors profiler; do
    forbid_code "$folder" '(steady_clock|high_resolution_clock|system_clock)::now' "$clock_rule"
done

# Contracts between programs have one home each as well, and a copy fails here:
# - the recording environment `ember record` sets for the collector library: its
#   variable names only in collectors/record_environment.h;
# - the Chrome layout shared by `ember export --format chrome` and the Chrome importer:
#   the GPU pids and synchronization lanes (1e9 next to a pid or tid) only in
#   profiler/trace/chrome_layout.h, and a merged job's pid step only in
#   profiler/trace/events.h (kMergedPidStep);
# - JSON string escaping (a \u escape spelled out) only in common/json_string.h.
# - UTF-8 encoding of a code point (a lead byte 0xC0/0xE0/0xF0 or'd with the shifted
#   code point, a continuation byte 0x80 | (... & 0x3F)) only in common/text.h.
record_rule="the recording environment lives in collectors/record_environment.h: use its names, never a copy"
for folder in cli collectors profiler viewer bench engine samples tests; do
    forbid_code "$folder" '"EMBER_RECORD_' "$record_rule" '^collectors/record_environment\.h:'
done
chrome_rule="pids and tids 1e9 apart are the Chrome layout (profiler/trace/chrome_layout.h) or a merged job's pid step (kMergedPidStep, profiler/trace/events.h): never a copy"
for folder in profiler/trace profiler/export profiler/import profiler/merge profiler/analysis profiler/job cli viewer; do
    forbid_code "$folder" "([Pp]id|[Tt]id)[^;]*1'?000'?000'?000|1'?000'?000'?000[^;]*([Pp]id|[Tt]id)" "$chrome_rule" \
        '^profiler/trace/chrome_layout\.h:|^profiler/trace/events\.h:[0-9]+:inline constexpr std::int64_t kMergedPidStep ='
done
json_rule="JSON strings are escaped by common/json_string.h (or nlohmann::json): never a second escaper"
for folder in common cli collectors profiler viewer bench engine; do
    forbid_code "$folder" '\\\\u(\{|%|00)' "$json_rule" '^common/json_string\.h:'
done
utf8_rule="code points are encoded as UTF-8 by common/text.h (text::append_utf8): never a second encoder"
for folder in common cli collectors profiler viewer bench engine samples; do
    forbid_code "$folder" '0x[CcEeFf]0 *\| *\(?[A-Za-z_][A-Za-z_0-9]* *>> *(6|12|18)|0x80 *\| *\(.*& *0x3[Ff]' \
        "$utf8_rule" '^common/text\.h:'
done

if [ "$violations" -gt 0 ]; then
    echo "include rules: $violations violation(s); docs/architecture.md gives the direction of every arrow" >&2
    exit 1
fi
echo "include rules: every arrow points the documented way"
