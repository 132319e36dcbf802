#!/usr/bin/env bash
# include_rules_test.sh: the include-rule checker catches what it is for. A tree with
# one planted violation per kind of rule (a re-declared NVTX category number and range
# names spelled as literals among them, OS readings outside common/os.h (std::chrono
# clocks of the collectors and the trace library among them), and copies of
# the contracts between programs: the recording environment, the Chrome layout, a JSON
# escaper, a UTF-8 encoder) must fail with each named; the same tree without them, the
# contract named only in comments, messages and other uses of a word, passes.
set -u
checker=$(dirname "$0")/include_rules.sh
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree"/{engine/core,engine/ops,engine/nn,profiler/store,viewer/model,collectors,common,cli}
echo '#include "engine/core/tensor.h"' >"$tree/engine/ops/fine.h"
echo '#include "engine/ops/fine.h"' >"$tree/engine/nn/fine.cpp"
echo '#include "profiler/store/reader.h"' >"$tree/viewer/model/fine.cpp"
printf '#include <vector>\n    clock_gettime(CLOCK_MONOTONIC, &now);\n    gethostname(name, sizeof name);\n' >"$tree/common/fine.h"
echo '    auto start = std::chrono::steady_clock::now();' >"$tree/engine/core/fine_timer.cpp"
printf '// os::monotonic_ns() is clock_gettime(CLOCK_MONOTONIC), os::thread_name reads /proc/PID/task/TID/comm\n' \
    >"$tree/collectors/fine.cpp"
mkdir -p "$tree"/{profiler/analysis,profiler/import}
cat >"$tree/profiler/analysis/fine.cpp" <<'EOF'
// Steps are "step" ranges; "dataloader/wait" is a stall (comments may say so).
inline constexpr int kIdleCategoryCount = 3;
constexpr std::uint32_t kCompute = nvtx::number(nvtx::Category::compute);
const char* note = "no step ranges (\"step\", \"ProfilerStep#N\")";
if (text == "step") return DiffMetric::step;
EOF
cat >"$tree/profiler/import/fine.cpp" <<'EOF'
stamp.mtime_ns = static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec;
device = static_cast<trace::DeviceId>(chrome::device_of_gpu_pid(pid));
skipped += text::json_string(reason);
text::append_utf8(out, code);  // the one encoder; 0xC0 | (code >> 6) is its lead byte
const os::SteadyClock::time_point started = os::SteadyClock::now();  // not std::chrono::steady_clock::now()
EOF
printf '        out += static_cast<char>(0xE0 | (code >> 12));\n        out += static_cast<char>(0x80 | (code & 0x3F));\n' \
    >"$tree/common/text.h"
cat >"$tree/collectors/fine.cpp" <<'EOF'
// ember record sets EMBER_RECORD_OUTPUT and the others (record_environment.h).
if (const char* output = lookup(kRecordOutputVariable)) settings.output = output;
EOF
if ! bash "$checker" "$tree" >/dev/null; then
    echo "FAIL: a clean tree was refused"; bash "$checker" "$tree"; exit 1
fi
echo '#include "engine/core/tensor.h"' >"$tree/profiler/store/bad.cpp"
echo '  sqlite3_open(path, &db);' >"$tree/viewer/model/bad.cpp"
echo '#include "engine/nn/model.h"' >"$tree/engine/ops/bad.h"
echo '#  include "engine/core/tensor.h"' >"$tree/collectors/bad.cpp"
echo '#include "engine/core/tensor.h"' >"$tree/common/bad.h"
echo '#include "cli/commands.h"' >"$tree/engine/core/bad.cpp"
echo 'constexpr std::uint32_t kCommunicationCategory = 4;' >"$tree/profiler/analysis/bad_category.cpp"
echo '    name = "dataloader/wait";' >"$tree/profiler/import/bad_name.cpp"
echo '    auto step = reader.find_string("step");  // the steps' >"$tree/viewer/model/bad_step.cpp"
mkdir -p "$tree"/{profiler/export,profiler/merge}
echo '    if (range.category == 3) return "loader";' >"$tree/profiler/export/bad_category.cpp"
echo '    if (name == "step") ++steps;' >"$tree/profiler/merge/bad_step.cpp"
mkdir -p "$tree"/{viewer/ui,bench}
echo '#include "profiler/merge/merge.h"' >"$tree/profiler/import/bad_room.cpp"
echo '#include "viewer/ui/viewer_app.h"' >"$tree/viewer/model/bad_ui.cpp"
echo '#include "profiler/import/import.h"' >"$tree/viewer/ui/bad_import.cpp"
echo '#include "tests/engine/ops/test_util.h"' >"$tree/bench/bad_tests.cpp"
echo '    return std::string("Memcpy ") + direction;' >"$tree/profiler/export/bad_copy_name.cpp"
echo '    clock_gettime(CLOCK_REALTIME, &wall);' >"$tree/collectors/bad_clock.cpp"
echo '    std::ifstream comm("/proc/self/task/" + std::to_string(tid) + "/comm");' >"$tree/profiler/store/bad_comm.cpp"
echo '    std::ifstream file("/proc/self/cmdline", std::ios::binary);' >"$tree/cli/bad_cmdline.cpp"
echo '    if (gethostname(buffer, sizeof buffer) == 0) return buffer;' >"$tree/viewer/model/bad_host.cpp"
echo '    pthread_getname_np(pthread_self(), name, sizeof name);' >"$tree/engine/core/bad_thread_name.cpp"
echo '        setenv("EMBER_RECORD_OUTPUT", output.c_str(), 1);' >"$tree/cli/bad_record.cpp"
echo "constexpr std::int64_t kGpuPidBase = 1'000'000'000ll;" >"$tree/profiler/import/bad_layout.cpp"
echo '        while (pids.count(pid)) pid += 1000000000;  // same pid on two hosts' >"$tree/profiler/merge/bad_pid_step.cpp"
echo '            out += fmt::format("\\u{:04x}", byte);' >"$tree/profiler/export/bad_json.cpp"
echo '            out.push_back(static_cast<char>(0xF0 | (code >> 18)));' >"$tree/profiler/import/bad_utf8.cpp"
echo '    const auto started = std::chrono::steady_clock::now();' >"$tree/profiler/import/bad_clock.cpp"
echo '        event.start_ns = std::chrono::high_resolution_clock::now().time_since_epoch().count();' \
    >"$tree/collectors/bad_chrono.cpp"
echo '        bytes[1] = static_cast<char>(0x80 | ((point >> 6) & 0x3F));' >"$tree/collectors/bad_utf8.cpp"
output=$(bash "$checker" "$tree" 2>&1)
status=$?
echo "$output"
[ "$status" -eq 1 ] || { echo "FAIL: exit $status, expected 1"; exit 1; }
for planted in profiler/store/bad.cpp viewer/model/bad.cpp engine/ops/bad.h collectors/bad.cpp common/bad.h \
               engine/core/bad.cpp profiler/analysis/bad_category.cpp profiler/import/bad_name.cpp \
               viewer/model/bad_step.cpp profiler/export/bad_category.cpp profiler/merge/bad_step.cpp \
               profiler/import/bad_room.cpp viewer/model/bad_ui.cpp viewer/ui/bad_import.cpp bench/bad_tests.cpp profiler/export/bad_copy_name.cpp \
               collectors/bad_clock.cpp profiler/store/bad_comm.cpp cli/bad_cmdline.cpp viewer/model/bad_host.cpp \
               engine/core/bad_thread_name.cpp cli/bad_record.cpp profiler/import/bad_layout.cpp profiler/merge/bad_pid_step.cpp profiler/export/bad_json.cpp \
               profiler/import/bad_utf8.cpp collectors/bad_utf8.cpp profiler/import/bad_clock.cpp collectors/bad_chrono.cpp; do
    grep -q "^$planted:" <<<"$output" || { echo "FAIL: $planted was not reported"; exit 1; }
done
# engine/core/bad.cpp breaks two rules (engine reaches up; nothing includes cli/).
grep -q "30 violation" <<<"$output" || { echo "FAIL: expected 30 violations"; exit 1; }
echo "PASS"
