// python_reader_test.cpp: CPython stacks read from outside (collectors/python/), under
// every CPython the machine has (pyenv's 3.8 to 3.13 and Debian's python3; a version
// that is absent is skipped, saying so). A real Python program whose functions and
// lines are known, spending known shares of its time in them, is dumped and recorded;
// the frames, lines and shares are checked against the script, and the program must
// still run afterwards. Where the container refuses process_vm_readv (seccomp,
// ptrace_scope) the tests skip, naming the rule.
#include "collectors/python/native_stack.h"
#include "collectors/python/outside_sampler.h"
#include "collectors/python/process_memory.h"
#include "collectors/python/python_reader.h"
#include "profiler/analysis/cpu_profile.h"
#include "profiler/store/reader.h"
#include "profiler/store/writer.h"
#include "tests/collectors/subprocess.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace {

using namespace ember::collector::python;
namespace test = ember::test;

// The program sampled. Lines matter: the checks below name them.
constexpr const char* kScript = R"(import threading, time

def heavy(deadline):
    while time.monotonic() < deadline: pass

def light(deadline):
    while time.monotonic() < deadline: pass

def blocked():
    time.sleep(100000)

class Worker:
    def run(self):
        while True:
            heavy(time.monotonic() + 0.0713)
            light(time.monotonic() + 0.0237)

threading.Thread(target=blocked, name="blocker", daemon=True).start()
print("ready", flush=True)
Worker().run()
)";
constexpr int kHeavyLine = 4, kLightLine = 7, kBlockedLine = 10, kRunHeavyLine = 15, kRunLightLine = 16,
              kModuleLine = 20;
constexpr double kHeavyShare = 0.0713 / (0.0713 + 0.0237);  // of the main thread's time

std::string script_path() {
    const std::string path = test::temp_path("python_work.py");
    std::ofstream(path) << kScript;
    return path;
}

// The running program, killed at the end of the test (or by stop(), before the files
// it writes are removed).
struct Program {
    test::Child child;
    ~Program() { stop(); }
    void stop() {
        if (child.pid > 0) {
            kill(child.pid, SIGKILL);
            test::wait_for(child, 10);
            unlink(child.output_path.c_str());
            child.pid = -1;
        }
    }
    bool running() const {
        int status = 0;
        return child.pid > 0 && waitpid(child.pid, &status, WNOHANG) == 0 && kill(child.pid, 0) == 0;
    }
};

// Why this container refuses to read another process's memory, or "" when it does not.
std::string refusal(pid_t pid) {
    ProcessMemory memory(pid);
    const std::string maps = read_proc_text("/proc/" + std::to_string(pid) + "/maps");
    const std::uint64_t start = std::strtoull(maps.c_str(), nullptr, 16);
    char byte = 0;
    if (memory.read(start, &byte, 1)) return "";
    const int error = memory.last_errno();
    return error == EPERM || error == ENOSYS || error == EACCES ? refusal_reason(pid, error) : "";
}

struct Interpreter {
    std::string name;  // test name part
    std::string path;
};
void PrintTo(const Interpreter& interpreter, std::ostream* out) {
    *out << interpreter.path;
}

std::vector<Interpreter> interpreters() {
    return {{"py38", "/root/.pyenv/versions/3.8.18/bin/python"},
            {"py39", "/root/.pyenv/versions/3.9.18/bin/python"},
            {"py310", "/root/.pyenv/versions/3.10.13/bin/python"},
            {"py311", "/root/.pyenv/versions/3.11.7/bin/python"},
            {"py312", "/root/.pyenv/versions/3.12.1/bin/python"},
            {"py313", "/root/.pyenv/versions/3.13.0/bin/python"},
            {"debian_python3", "/usr/bin/python3"}};
}

class PythonVersions : public ::testing::TestWithParam<Interpreter> {
  protected:
    void SetUp() override {
        if (access(GetParam().path.c_str(), X_OK) != 0) GTEST_SKIP() << GetParam().path << " is not installed";
        script_ = script_path();
        program_.child = test::spawn({GetParam().path, script_});
        ASSERT_TRUE(test::wait_for_output(program_.child, "ready", 60)) << test::read_output(program_.child);
        if (const std::string why = refusal(program_.child.pid); !why.empty()) GTEST_SKIP() << why;
    }
    void TearDown() override { unlink(script_.c_str()); }

    std::string script_;
    Program program_;
};

const PythonThread* thread_with_tid(const std::vector<PythonThread>& threads, pid_t tid) {
    for (const PythonThread& thread : threads)
        if (thread.tid == tid) return &thread;
    return nullptr;
}

TEST_P(PythonVersions, SnapshotNamesEveryThreadsFramesAndLines) {
    PythonProcess process(program_.child.pid);
    std::vector<PythonThread> threads;
    std::string error;
    ASSERT_TRUE(process.snapshot(threads, error)) << error;
    ASSERT_EQ(threads.size(), 2u);

    const PythonThread* main = thread_with_tid(threads, program_.child.pid);
    ASSERT_NE(main, nullptr) << "no thread state for the main thread (tid " << program_.child.pid << ")";
    ASSERT_EQ(main->frames.size(), 3u);
    const PythonFrame& leaf = main->frames[0];
    const bool in_heavy = leaf.function == "heavy";
    EXPECT_TRUE(in_heavy || leaf.function == "light") << leaf.function;
    EXPECT_EQ(leaf.file, script_);
    EXPECT_EQ(leaf.line, in_heavy ? kHeavyLine : kLightLine);
    // 3.11 and later name the method by its co_qualname; 3.8 to 3.10 by the class of `self`.
    EXPECT_EQ(main->frames[1].function, "Worker.run");
    EXPECT_EQ(main->frames[1].line, in_heavy ? kRunHeavyLine : kRunLightLine);
    EXPECT_EQ(main->frames[2].function, "<module>");
    EXPECT_EQ(main->frames[2].line, kModuleLine);

    const PythonThread* blocker = threads[0].tid == program_.child.pid ? &threads[1] : &threads[0];
    ASSERT_FALSE(blocker->frames.empty());
    EXPECT_EQ(blocker->frames[0].function, "blocked");
    EXPECT_EQ(blocker->frames[0].line, kBlockedLine);
    EXPECT_EQ(blocker->frames.back().function.find("_bootstrap") != std::string::npos, true)
        << blocker->frames.back().function;
    // Its threading name, read from the Thread object; the main thread has none (the OS name applies).
    EXPECT_EQ(blocker->name, "blocker");
    EXPECT_EQ(main->name, "");
    const std::vector<pid_t> tids = process_threads(program_.child.pid);
    EXPECT_NE(std::find(tids.begin(), tids.end(), blocker->tid), tids.end()) << "tid " << blocker->tid;
    // Asleep in time.sleep; on a busy machine it may still be on its way there (runnable).
    char blocker_state = thread_state(program_.child.pid, blocker->tid);
    for (int wait = 0; wait < 100 && blocker_state == 'R'; ++wait) {
        usleep(50000);
        blocker_state = thread_state(program_.child.pid, blocker->tid);
    }
    EXPECT_NE(blocker_state, 'R');
    EXPECT_TRUE(program_.running());
}

TEST_P(PythonVersions, RecordShowsTheSharesAndLeavesTheProgramRunning) {
    const std::string output = test::temp_path("python_record_" + GetParam().name + ".db");
    OutsideRecordOptions options;
    options.pid = program_.child.pid;
    options.output = output;
    options.hz = 100;
    options.duration = std::chrono::seconds(3);
    const OutsideRecordResult result = record_python_process(options);
    EXPECT_TRUE(result.error.empty()) << result.error;
    EXPECT_FALSE(result.process_exited);
    // 300 ticks were asked for; a loaded machine may skip some, never most.
    EXPECT_GE(result.snapshots, 150) << result.seconds << " s";

    ember::store::TraceReader reader(output);
    std::map<ember::trace::ThreadId, pid_t> tids;
    for (const auto& thread : reader.threads()) tids[thread.thread_id] = static_cast<pid_t>(thread.tid);
    std::map<std::string, int> main_leaves;
    int main_active = 0, blocker_samples = 0, blocker_idle = 0;
    reader.for_each_stack_sample({}, [&](const ember::trace::StackSample& sample) {
        const std::vector<ember::trace::FrameInfo> frames = reader.stack_frames(sample.stack_id);  // outermost first
        if (tids[sample.thread_id] == program_.child.pid) {
            if (sample.idle || frames.empty()) return true;
            ++main_active;
            const auto& leaf = frames.back();
            EXPECT_TRUE(leaf.is_python());
            EXPECT_EQ(leaf.module, script_);
            main_leaves[leaf.function + ":" + std::to_string(leaf.line)] += 1;
        } else {
            ++blocker_samples;
            if (sample.idle) ++blocker_idle;
            if (!frames.empty()) {
                EXPECT_EQ(frames.back().function + ":" + std::to_string(frames.back().line), "blocked:10");
            }
        }
        return true;
    });
    ASSERT_GT(main_active, 100);
    const int heavy = main_leaves["heavy:" + std::to_string(kHeavyLine)];
    const int light = main_leaves["light:" + std::to_string(kLightLine)];
    // Nearly every sample is on the loop line (a few catch the call's first instruction).
    EXPECT_GE(heavy + light, main_active * 95 / 100);
    EXPECT_NEAR(static_cast<double>(heavy) / (heavy + light), kHeavyShare, 0.06)
        << heavy << " heavy, " << light << " light";
    std::printf("%s: %lld snapshots in %.2f s; main thread: heavy %.1f%% (expected %.1f%%) of %d active samples\n",
                GetParam().path.c_str(), static_cast<long long>(result.snapshots), result.seconds,
                100.0 * heavy / (heavy + light), 100.0 * kHeavyShare, main_active);
    EXPECT_GT(blocker_samples, 100);
    EXPECT_GE(blocker_idle, blocker_samples * 95 / 100);
    EXPECT_TRUE(program_.running()) << "the sampled program stopped";
    std::filesystem::remove(output);
}

INSTANTIATE_TEST_SUITE_P(CPython, PythonVersions, ::testing::ValuesIn(interpreters()),
                         [](const ::testing::TestParamInfo<Interpreter>& info) { return info.param.name; });

// Methods by class: co_qualname from 3.11; from 3.8 to 3.10 the class of the first
// argument (`self`: its type; `cls`: itself), so an inherited classmethod called through
// a subclass is named by the subclass there, as py-spy names it.
class MethodNames : public ::testing::TestWithParam<Interpreter> {};

TEST_P(MethodNames, ClassOfSelfAndCls) {
    if (access(GetParam().path.c_str(), X_OK) != 0) GTEST_SKIP() << GetParam().path << " is not installed";
    const std::string script = test::temp_path("python_methods_" + GetParam().name + ".py");
    const test::RemovedAtEnd removed_script(script);  // also when an assertion ends the test
    std::ofstream(script) << "import time\n"
                             "class Base:\n"
                             "    @classmethod\n"
                             "    def make(cls):\n"
                             "        print('ready', flush=True)\n"
                             "        time.sleep(100000)\n"
                             "class Sub(Base):\n"
                             "    def go(self, other=None):\n"
                             "        self.make()\n"
                             "def plain(self):\n"
                             "    Sub().go()\n"
                             "plain(42)\n";
    Program program;
    program.child = test::spawn({GetParam().path, script});
    ASSERT_TRUE(test::wait_for_output(program.child, "ready", 60)) << test::read_output(program.child);
    if (const std::string why = refusal(program.child.pid); !why.empty()) GTEST_SKIP() << why;
    PythonProcess process(program.child.pid);
    std::vector<PythonThread> threads;
    std::string error;
    ASSERT_TRUE(process.snapshot(threads, error)) << error;
    ASSERT_EQ(threads.size(), 1u);
    ASSERT_EQ(threads[0].frames.size(), 4u);
    const bool qualname = process.version().minor >= 11;
    EXPECT_EQ(threads[0].frames[0].function, qualname ? "Base.make" : "Sub.make");
    EXPECT_EQ(threads[0].frames[1].function, "Sub.go");
    // A function whose first argument is called self but holds an int: int's name, as
    // py-spy would; a function at module level is named plainly on 3.11+.
    EXPECT_EQ(threads[0].frames[2].function, qualname ? "plain" : "int.plain");
    EXPECT_EQ(threads[0].frames[3].function, "<module>");
}

INSTANTIATE_TEST_SUITE_P(CPython, MethodNames, ::testing::ValuesIn(interpreters()),
                         [](const ::testing::TestParamInfo<Interpreter>& info) { return info.param.name; });

// A program that sleeps, started with `interpreter ARGS`; skips when absent.
struct Sleeper : Program {
    explicit Sleeper(const std::vector<std::string>& argv) {
        child = test::spawn(argv);
        test::wait_for_output(child, "ready", 30);
    }
};

std::string open_error(pid_t pid) {
    try {
        PythonProcess process(pid);
    } catch (const PythonReadError& error) {
        return error.what();
    }
    return "";
}

TEST(PythonReader, RefusesVersionsBefore38InOneLine) {
    for (const char* version : {"2.7.18", "3.6.15", "3.7.16"}) {
        const std::string interpreter = std::string("/root/.pyenv/versions/") + version + "/bin/python";
        if (access(interpreter.c_str(), X_OK) != 0) {
            std::printf("%s is not installed: not checked\n", interpreter.c_str());
            continue;
        }
        Sleeper program(
            {interpreter, "-c", "import sys, time; sys.stdout.write('ready\\n'); sys.stdout.flush(); time.sleep(60)"});
        if (const std::string why = refusal(program.child.pid); !why.empty()) GTEST_SKIP() << why;
        const std::string message = open_error(program.child.pid);
        const std::string short_version = std::string(version).substr(0, std::string(version).rfind('.'));
        EXPECT_NE(message.find("runs Python " + short_version), std::string::npos) << message;
        EXPECT_NE(message.find("3.8 to 3.13"), std::string::npos) << message;
        EXPECT_EQ(message.find('\n'), std::string::npos) << message;
        EXPECT_TRUE(program.running());
    }
}

TEST(PythonReader, RefusesAProgramThatIsNotPython) {
    Sleeper program({"sh", "-c", "echo ready; exec sleep 60"});
    const std::string message = open_error(program.child.pid);
    EXPECT_NE(message.find("is not a CPython process"), std::string::npos) << message;
    EXPECT_TRUE(program.running());
}

TEST(PythonReader, RefusesAProcessThatIsGone) {
    test::Child gone = test::spawn({"true"});
    test::wait_for(gone, 10);
    unlink(gone.output_path.c_str());
    const std::string message = open_error(gone.pid);
    EXPECT_NE(message.find("process " + std::to_string(gone.pid) + " does not exist"), std::string::npos) << message;
}

// `ember dump` and `ember record --pid` end to end, with Debian's python3 (always on the
// machine image); `ember export` then shows the frames in py-spy's naming.
TEST(PythonCommands, DumpAndRecordByPid) {
    const std::string python = "/usr/bin/python3";
    if (access(python.c_str(), X_OK) != 0) GTEST_SKIP() << python << " is not installed";
    const std::string script = script_path();
    const test::RemovedAtEnd removed_script(script);  // also when an assertion ends the test
    Program program;
    program.child = test::spawn({python, script});
    ASSERT_TRUE(test::wait_for_output(program.child, "ready", 60));
    if (const std::string why = refusal(program.child.pid); !why.empty()) GTEST_SKIP() << why;
    const std::string pid = std::to_string(program.child.pid);

    std::string dump;
    ASSERT_EQ(test::run({test::bin("ember"), "dump", "--pid", pid}, &dump, {}, 60), 0) << dump;
    EXPECT_NE(dump.find("Thread " + pid + " (active)"), std::string::npos) << dump;
    EXPECT_NE(dump.find("    blocked (" + script + ":10)\n"), std::string::npos) << dump;
    EXPECT_NE(dump.find("    <module> (" + script + ":20)\n"), std::string::npos) << dump;

    const std::string trace = test::temp_path("python_cli.db");
    std::string record;
    ASSERT_EQ(test::run({test::bin("ember"), "record", "--pid", pid, "--duration", "1s", "-o", trace}, &record, {}, 60),
              0)
        << record;
    EXPECT_TRUE(program.running());
    const std::string folded = test::temp_path("python_cli.folded");
    std::string exported;
    ASSERT_EQ(test::run({test::bin("ember"), "export", trace, "--format", "folded", "--stacks", "cpu", "-o", folded},
                        &exported, {}, 60),
              0)
        << exported;
    std::ifstream file(folded);
    const std::string stacks((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    EXPECT_NE(stacks.find("<module> (" + script + ":20);Worker.run (" + script + ":15);heavy (" + script + ":4) "),
              std::string::npos)
        << stacks;
    // The sleeping thread is idle in every sample: CPU time leaves it out.
    EXPECT_EQ(stacks.find("blocked ("), std::string::npos) << stacks;
    const std::string speedscope = test::temp_path("python_cli.speedscope.json");
    ASSERT_EQ(
        test::run({test::bin("ember"), "export", trace, "--format", "speedscope", "-o", speedscope}, &exported, {}, 60),
        0)
        << exported;
    std::ifstream json_file(speedscope);
    const std::string json((std::istreambuf_iterator<char>(json_file)), std::istreambuf_iterator<char>());
    EXPECT_NE(json.find("\"name\":\"CPU samples\""), std::string::npos);
    EXPECT_NE(json.find("{\"name\":\"heavy (" + script + ":4)\"}"), std::string::npos);
    std::filesystem::remove(speedscope);
    std::filesystem::remove(trace);
    std::filesystem::remove(folded);
}

TEST(PythonCommands, BadPidIsNamed) {
    std::string output;
    EXPECT_EQ(test::run({test::bin("ember"), "dump", "--pid", "999999999"}, &output, {}, 60), 2) << output;
    EXPECT_NE(output.find("--pid 999999999"), std::string::npos) << output;
    EXPECT_EQ(test::run({test::bin("ember"), "record", "--pid", "999999999", "-o", test::temp_path("none.db")}, &output,
                        {}, 60),
              2)
        << output;
    EXPECT_NE(output.find("--pid 999999999"), std::string::npos) << output;
    EXPECT_EQ(
        test::run({test::bin("ember"), "record", "--pid", "1", "--duration", "soon", "-o", test::temp_path("none.db")},
                  &output, {}, 60),
        2)
        << output;
    EXPECT_NE(output.find("--duration"), std::string::npos) << output;
}

// A program that ends by itself: 3 s of heavy (75%) and light (25%), with a sleeping thread.
constexpr const char* kFiniteScript = R"(import threading, time

def heavy(deadline):
    while time.monotonic() < deadline: pass

def light(deadline):
    while time.monotonic() < deadline: pass

def blocked():
    time.sleep(100000)

threading.Thread(target=blocked, daemon=True).start()
end = time.monotonic() + 3
while time.monotonic() < end:
    heavy(time.monotonic() + 0.0713)
    light(time.monotonic() + 0.0237)
)";

// Whether process_vm_readv on a child of ours is refused here: the reason, or "".
std::string refusal_for_children() {
    Sleeper probe({"sh", "-c", "echo ready; exec sleep 30"});
    return refusal(probe.child.pid);
}

// `ember record -- python3 script.py`: the program never touches CUDA or NVTX, and its
// Python stacks are the trace. Under every CPython present.
class RecordCommand : public ::testing::TestWithParam<Interpreter> {};

TEST_P(RecordCommand, SamplesTheCommandsPythonStacksFromTheStart) {
    if (access(GetParam().path.c_str(), X_OK) != 0) GTEST_SKIP() << GetParam().path << " is not installed";
    if (const std::string why = refusal_for_children(); !why.empty()) GTEST_SKIP() << why;
    const std::string script = test::temp_path("python_finite_" + GetParam().name + ".py");
    const test::RemovedAtEnd removed_script(script);  // also when an assertion ends the test
    std::ofstream(script) << kFiniteScript;
    const std::string trace = test::temp_path("python_cmd_" + GetParam().name + ".db");
    std::string output;
    ASSERT_EQ(test::run({test::bin("ember"), "record", "-o", trace, "--", GetParam().path, script}, &output, {}, 90), 0)
        << output;
    EXPECT_EQ(output.find("no trace written"), std::string::npos) << output;
    EXPECT_FALSE(std::filesystem::exists(trace.substr(0, trace.size() - 3) + ".python.db"));

    ember::store::TraceReader reader(trace);
    const ember::analysis::CpuProfile profile = ember::analysis::cpu_profile(reader);
    ASSERT_GT(profile.samples, 100) << output;
    std::map<std::string, std::int64_t> self;
    for (const auto& row : profile.lines) self[row.location] = row.self_samples;
    const std::int64_t heavy = self[script + ":4"], light = self[script + ":7"];
    EXPECT_GE(heavy + light, profile.samples * 90 / 100) << output;
    EXPECT_NEAR(static_cast<double>(heavy) / static_cast<double>(heavy + light), kHeavyShare, 0.07)
        << heavy << " heavy, " << light << " light";
    // The sleeping thread is sampled, idle: out of the CPU counts (but for the instants
    // between its start and its sleep, when it may be caught running), in with --idle.
    EXPECT_LE(self[script + ":10"], 3);
    const ember::analysis::CpuProfile with_idle = ember::analysis::cpu_profile(reader, true);
    std::int64_t blocked = 0;
    for (const auto& row : with_idle.lines)
        if (row.location == script + ":10") blocked = row.self_samples;
    EXPECT_GT(blocked, profile.samples / 2) << "the sleeping thread's samples";
    std::printf("%s: %lld active samples, heavy %.1f%% (expected %.1f%%)\n", GetParam().path.c_str(),
                static_cast<long long>(profile.samples), 100.0 * heavy / (heavy + light), 100.0 * kHeavyShare);
    std::filesystem::remove(trace);
}

INSTANTIATE_TEST_SUITE_P(CPython, RecordCommand, ::testing::ValuesIn(interpreters()),
                         [](const ::testing::TestParamInfo<Interpreter>& info) { return info.param.name; });

// A program that is neither CPython nor a CUDA/NVTX user: no file, its exit status.
TEST(PythonCommands, RecordOfANativeProgramWritesNothingAndKeepsItsStatus) {
    const std::string trace = test::temp_path("python_native.db");
    std::string output;
    EXPECT_EQ(
        test::run({test::bin("ember"), "record", "-o", trace, "--", "sh", "-c", "sleep 0.3; exit 3"}, &output, {}, 60),
        3)
        << output;
    EXPECT_NE(output.find("no trace written"), std::string::npos) << output;
    EXPECT_FALSE(std::filesystem::exists(trace));
    EXPECT_FALSE(std::filesystem::exists(trace.substr(0, trace.size() - 3) + ".python.db"));
    EXPECT_EQ(
        test::run({test::bin("ember"), "record", "--python-hz", "-1", "-o", trace, "--", "true"}, &output, {}, 60), 2);
    EXPECT_NE(output.find("--python-hz"), std::string::npos) << output;
}

// multiprocessing's workers (fork), started by a shell (not CPython) that runs Python:
// --subprocesses finds them under the root, each a process of its own.
constexpr const char* kWorkersScript = R"(import multiprocessing, sys, time

def worker_spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end: pass

if __name__ == "__main__":
    workers = [multiprocessing.Process(target=worker_spin, args=(float(sys.argv[1]),)) for _ in range(2)]
    for worker in workers: worker.start()
    print("ready", flush=True)
    for worker in workers: worker.join()
)";

TEST(PythonCommands, SubprocessesAreFollowedByRecordAndDump) {
    const std::string python = "/usr/bin/python3";
    if (access(python.c_str(), X_OK) != 0) GTEST_SKIP() << python << " is not installed";
    if (const std::string why = refusal_for_children(); !why.empty()) GTEST_SKIP() << why;
    const std::string script = test::temp_path("python_workers.py");
    const test::RemovedAtEnd removed_script(script);  // also when an assertion ends the test
    std::ofstream(script) << kWorkersScript;
    const std::string trace = test::temp_path("python_workers.db");
    std::string output;
    ASSERT_EQ(test::run({test::bin("ember"), "record", "--subprocesses", "-o", trace, "--", "sh", "-c",
                         python + " " + script + " 2; true"},
                        &output, {}, 90),
              0)
        << output;
    {
        ember::store::TraceReader reader(trace);
        std::set<std::int64_t> worker_pids;
        std::map<ember::trace::ThreadId, std::int64_t> pid_of;
        for (const auto& thread : reader.threads()) pid_of[thread.thread_id] = thread.pid;
        std::int64_t worker_samples = 0;
        reader.for_each_stack_sample({}, [&](const ember::trace::StackSample& sample) {
            const auto frames = reader.stack_frames(sample.stack_id);
            if (!sample.idle && !frames.empty() && frames.back().function == "worker_spin") {
                worker_pids.insert(pid_of[sample.thread_id]);
                ++worker_samples;
            }
            return true;
        });
        EXPECT_EQ(worker_pids.size(), 2u) << output;
        EXPECT_GT(worker_samples, 150) << output;  // 2 workers x 2 s at 100 Hz: 400 asked
        EXPECT_GE(reader.processes().size(), 3u);  // the parent Python and its two workers
    }
    // Without --subprocesses only the root is followed: a shell, not CPython: no trace.
    ASSERT_EQ(
        test::run({test::bin("ember"), "record", "-o", trace, "--", "sh", "-c", python + " " + script + " 0.5; true"},
                  &output, {}, 90),
        0)
        << output;
    EXPECT_NE(output.find("no trace written"), std::string::npos) << output;

    Program program;
    program.child = test::spawn({"sh", "-c", python + " " + script + " 30; true"});
    ASSERT_TRUE(test::wait_for_output(program.child, "ready", 60)) << test::read_output(program.child);
    std::string dump;
    ASSERT_EQ(test::run({test::bin("ember"), "dump", "--subprocesses", "--pid", std::to_string(program.child.pid)},
                        &dump, {}, 60),
              0)
        << dump;
    std::size_t processes = 0, spinning = 0;
    for (std::size_t at = dump.find("Process "); at != std::string::npos; at = dump.find("\nProcess ", at + 1))
        ++processes;
    for (std::size_t at = dump.find("    worker_spin (" + script + ":5)"); at != std::string::npos;
         at = dump.find("    worker_spin (" + script + ":5)", at + 1))
        ++spinning;
    EXPECT_EQ(processes, 3u) << dump;
    EXPECT_EQ(spinning, 2u) << dump;
    // ember record --pid --subprocesses under the same shell: both workers' samples.
    ASSERT_EQ(test::run({test::bin("ember"), "record", "--subprocesses", "--pid", std::to_string(program.child.pid),
                         "--duration", "1s", "-o", trace},
                        &output, {}, 60),
              0)
        << output;
    {
        ember::store::TraceReader reader(trace);
        std::map<ember::trace::ThreadId, std::int64_t> pid_of;
        for (const auto& thread : reader.threads()) pid_of[thread.thread_id] = thread.pid;
        std::set<std::int64_t> worker_pids;
        reader.for_each_stack_sample({}, [&](const ember::trace::StackSample& sample) {
            const auto frames = reader.stack_frames(sample.stack_id);
            if (!frames.empty() && frames.back().function == "worker_spin")
                worker_pids.insert(pid_of[sample.thread_id]);
            return true;
        });
        EXPECT_EQ(worker_pids.size(), 2u) << output;
    }
    // Without --subprocesses a shell is refused, naming the pid.
    EXPECT_EQ(test::run({test::bin("ember"), "record", "--pid", std::to_string(program.child.pid), "--duration", "1s",
                         "-o", trace},
                        &output, {}, 60),
              2)
        << output;
    EXPECT_NE(output.find("--pid " + std::to_string(program.child.pid) + ": "), std::string::npos) << output;
    EXPECT_EQ(test::run({test::bin("ember"), "dump", "--pid", std::to_string(program.child.pid)}, &dump, {}, 60), 2);
    EXPECT_NE(dump.find("is not a CPython process"), std::string::npos) << dump;
    for (pid_t pid : descendant_processes(program.child.pid)) kill(pid, SIGKILL);
    std::filesystem::remove(trace);
}

// Hot lines, lines per NVTX range and --idle, on a hand-built trace whose answers are known.
TEST(PythonProfile, HotLinesPerRangeAndIdleOnAHandBuiltTrace) {
    const std::string path = test::temp_path("python_lines.db");
    {
        ember::store::TraceWriter writer(path, {});
        writer.set_metadata("cpu_sample_period_ns", "10000000");
        const auto thread = writer.register_thread({0, 1, 1, "main"});
        const auto module = writer.intern_frame("<module>", "/srv/train.py", 0, 30);
        const auto step = writer.intern_frame("step", "/srv/train.py", 0, 12);
        const auto step_other_line = writer.intern_frame("step", "/srv/train.py", 0, 13);
        const auto wait = writer.intern_frame("wait", "/srv/io.py", 0, 5);
        const auto native = writer.intern_frame("memcpy", "/lib/libc.so.6", 0x1234);
        const ember::trace::FrameId a[] = {module, step, native};     // line 12, then native code
        const ember::trace::FrameId b[] = {module, step_other_line};  // line 13
        const ember::trace::FrameId c[] = {module, wait};             // idle
        const auto stack_a = writer.intern_stack(a), stack_b = writer.intern_stack(b), stack_c = writer.intern_stack(c);
        ember::trace::RangeEvent range;
        range.range_id = writer.next_range_id();
        range.start_ns = 0;
        range.end_ns = 1000;
        range.thread_id = thread;
        range.name_id = writer.intern("forward");
        writer.record_range(range);
        // In "forward": 3 x line 12, 1 x line 13. After it: 2 x line 13, 4 idle in wait.
        for (int i = 0; i < 3; ++i) writer.record_stack_sample({100 + i, thread, stack_a, false});
        writer.record_stack_sample({500, thread, stack_b, false});
        for (int i = 0; i < 2; ++i) writer.record_stack_sample({2000 + i, thread, stack_b, false});
        for (int i = 0; i < 4; ++i) writer.record_stack_sample({3000 + i, thread, stack_c, true});
        writer.close();
    }
    ember::store::TraceReader reader(path);
    const auto profile = ember::analysis::cpu_profile(reader);
    EXPECT_EQ(profile.samples, 6);
    ASSERT_EQ(profile.lines.size(), 3u);  // 12, 13, and <module>'s 30 (total only)
    EXPECT_EQ(profile.lines[0].location, "/srv/train.py:12");
    EXPECT_EQ(profile.lines[0].self_samples, 3);  // the innermost Python frame, native code below it
    EXPECT_EQ(profile.lines[0].function, "step");
    EXPECT_EQ(profile.lines[1].location, "/srv/train.py:13");
    EXPECT_EQ(profile.lines[1].self_samples, 3);
    EXPECT_EQ(profile.lines[2].location, "/srv/train.py:30");
    EXPECT_EQ(profile.lines[2].self_samples, 0);
    EXPECT_EQ(profile.lines[2].total_samples, 6);
    ASSERT_EQ(profile.lines_by_range.size(), 3u);
    // "(no range)" has 2 samples, "forward" 4: forward's lines first.
    EXPECT_EQ(profile.lines_by_range[0].range_path, "forward");
    EXPECT_EQ(profile.lines_by_range[0].location, "/srv/train.py:12");
    EXPECT_EQ(profile.lines_by_range[0].samples, 3);
    EXPECT_EQ(profile.lines_by_range[1].range_path, "forward");
    EXPECT_EQ(profile.lines_by_range[1].samples, 1);
    EXPECT_EQ(profile.lines_by_range[2].range_path, "(no range)");
    EXPECT_EQ(profile.lines_by_range[2].samples, 2);

    const auto with_idle = ember::analysis::cpu_profile(reader, true);
    EXPECT_EQ(with_idle.samples, 10);
    ASSERT_FALSE(with_idle.lines.empty());
    EXPECT_EQ(with_idle.lines[0].location, "/srv/io.py:5");
    EXPECT_EQ(with_idle.lines[0].self_samples, 4);
    EXPECT_EQ(ember::analysis::cpu_stack_tree(reader).inclusive_weight(ember::analysis::StackTree::kRoot),
              6 * 10000000);
    EXPECT_EQ(ember::analysis::cpu_stack_tree(reader, true).inclusive_weight(ember::analysis::StackTree::kRoot),
              10 * 10000000);

    // PyTorch's numbered steps add up: two ProfilerStep#N ranges are one row group.
    {
        const std::string steps_path = test::temp_path("python_steps.db");
        {
            ember::store::TraceWriter writer(steps_path, {});
            const auto thread = writer.register_thread({0, 1, 1, "main"});
            const auto line = writer.intern_frame("step", "/srv/train.py", 0, 12);
            const ember::trace::FrameId frames[] = {line};
            const auto stack = writer.intern_stack(frames);
            for (int step = 0; step < 2; ++step) {
                ember::trace::RangeEvent range;
                range.range_id = writer.next_range_id();
                range.start_ns = step * 1000;
                range.end_ns = step * 1000 + 500;
                range.thread_id = thread;
                range.name_id = writer.intern("ProfilerStep#" + std::to_string(step + 7));
                writer.record_range(range);
                writer.record_stack_sample({step * 1000 + 100, thread, stack, false});
            }
            writer.close();
        }
        ember::store::TraceReader steps(steps_path);
        const auto by_step = ember::analysis::cpu_profile(steps);
        ASSERT_EQ(by_step.lines_by_range.size(), 1u);
        EXPECT_EQ(by_step.lines_by_range[0].range_path, "ProfilerStep#*");
        EXPECT_EQ(by_step.lines_by_range[0].samples, 2);
        std::filesystem::remove(steps_path);
    }

    // ember stats --idle: the same through the command.
    std::string text;
    ASSERT_EQ(test::run({test::bin("ember"), "stats", path, "--report", "cpu"}, &text, {}, 60), 0) << text;
    EXPECT_NE(text.find("Python hot lines"), std::string::npos) << text;
    EXPECT_EQ(text.find("/srv/io.py:5"), std::string::npos) << text;
    ASSERT_EQ(test::run({test::bin("ember"), "stats", path, "--report", "cpu", "--idle"}, &text, {}, 60), 0) << text;
    EXPECT_NE(text.find("/srv/io.py:5"), std::string::npos) << text;
    EXPECT_NE(text.find("idle threads' samples included"), std::string::npos) << text;

    // ember export --idle: the idle stack appears in the folded stacks only with it.
    const std::string folded = test::temp_path("python_lines.folded");
    for (const bool idle : {false, true}) {
        std::vector<std::string> command = {test::bin("ember"), "export", path, "--format", "folded",
                                            "--stacks",         "cpu",    "-o", folded};
        if (idle) command.push_back("--idle");
        ASSERT_EQ(test::run(command, &text, {}, 60), 0) << text;
        const std::string stacks = ember::test_support::read_file(folded);
        EXPECT_EQ(stacks.find("wait (/srv/io.py:5) 40000000\n") != std::string::npos, idle) << stacks;
        EXPECT_NE(stacks.find("step (/srv/train.py:13) 30000000\n"), std::string::npos) << stacks;
    }
    std::filesystem::remove(folded);
    std::filesystem::remove(path);
}

// Schema 2: a Python frame keeps its line, a sample whether the thread was idle; a
// version 1 file (no such columns) reads as native frames and running samples.
TEST(PythonTraceSchema, LineAndIdleRoundTripAndVersion1FilesStillRead) {
    const std::string path = test::temp_path("python_schema.db");
    {
        ember::store::TraceWriter writer(path, {});
        const auto thread = writer.register_thread({0, 1, 2, "main"});
        const auto python = writer.intern_frame("work", "/srv/train.py", 0, 12);
        const auto native = writer.intern_frame("memcpy", "/lib/libc.so.6", 0x1234);
        const ember::trace::FrameId frames[] = {native, python};
        const auto stack = writer.intern_stack(frames);
        writer.record_stack_sample({100, thread, stack, true});
        writer.record_stack_sample({200, thread, stack, false});
        writer.close();
    }
    auto read = [&] {
        ember::store::TraceReader reader(path);
        std::vector<ember::trace::StackSample> samples;
        reader.for_each_stack_sample({}, [&](const ember::trace::StackSample& s) {
            samples.push_back(s);
            return true;
        });
        return std::make_pair(samples, samples.empty() ? std::vector<ember::trace::FrameInfo>{}
                                                       : reader.stack_frames(samples[0].stack_id));
    };
    auto [samples, frames] = read();
    ASSERT_EQ(samples.size(), 2u);
    EXPECT_TRUE(samples[0].idle);
    EXPECT_FALSE(samples[1].idle);
    ASSERT_EQ(frames.size(), 2u);
    EXPECT_EQ(frames[0].line, -1);
    EXPECT_FALSE(frames[0].is_python());
    EXPECT_EQ(frames[1].line, 12);
    EXPECT_EQ(frames[1].module, "/srv/train.py");

    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "ALTER TABLE frames DROP COLUMN line; ALTER TABLE stack_samples DROP COLUMN idle;",
                           nullptr, nullptr, nullptr),
              SQLITE_OK)
        << sqlite3_errmsg(db);
    sqlite3_close(db);
    std::tie(samples, frames) = read();
    ASSERT_EQ(samples.size(), 2u);
    EXPECT_FALSE(samples[0].idle);
    ASSERT_EQ(frames.size(), 2u);
    EXPECT_EQ(frames[1].line, -1);
    std::filesystem::remove(path);
}

// --- --native: mixed stacks ---

PythonFrame python_frame(const char* function, bool entry) {
    PythonFrame frame{function, "/work/s.py", 3};
    frame.entry = entry;
    return frame;
}

NativeFrame native_frame(const char* function) {
    return {0x1000, function, "/usr/lib/libx.so"};
}

std::vector<std::string> names_of(const std::vector<MixedFrame>& frames) {
    std::vector<std::string> names;
    for (const MixedFrame& frame : frames) names.push_back(frame.function + (frame.is_python() ? " (py)" : ""));
    return names;
}

TEST(MixedStacks, EachEvalLoopCallIsReplacedByThePythonFramesItRan) {
    // 3.11 and later: `inner` ran in the eval call that `key` entered (a C function,
    // list.sort, called key), and `outer` in the one `<module>` entered.
    const std::vector<PythonFrame> python = {python_frame("inner", false), python_frame("key", true),
                                             python_frame("outer", false), python_frame("<module>", true)};
    const std::vector<NativeFrame> native = {native_frame("deflate"),
                                             native_frame("zlib_compress"),
                                             native_frame("_PyEval_EvalFrameDefault"),
                                             native_frame("list_sort_impl"),
                                             native_frame("_PyEval_EvalFrameDefault.cold"),
                                             native_frame("PyEval_EvalCode"),
                                             native_frame("_start")};
    EXPECT_EQ(names_of(merge_stacks(python, native)),
              (std::vector<std::string>{"deflate", "zlib_compress", "inner (py)", "key (py)", "list_sort_impl",
                                        "outer (py)", "<module> (py)", "PyEval_EvalCode", "_start"}));
    // Before 3.11 every frame is an eval call of its own.
    const std::vector<PythonFrame> old = {python_frame("inner", true), python_frame("<module>", true)};
    EXPECT_EQ(
        names_of(merge_stacks(old, {native_frame("zlib_compress"), native_frame("_PyEval_EvalFrameDefault"),
                                    native_frame("function_code_fastcall"), native_frame("_PyEval_EvalFrameDefault"),
                                    native_frame("main")})),
        (std::vector<std::string>{"zlib_compress", "inner (py)", "function_code_fastcall", "<module> (py)", "main"}));
}

TEST(MixedStacks, UnmatchedEvalFramesAndPythonFramesAreNotLost) {
    // An eval call caught before its frame was pushed: nothing to put there.
    const std::vector<PythonFrame> python = {python_frame("f", true)};
    EXPECT_EQ(names_of(merge_stacks(python, {native_frame("_PyEval_EvalFrameDefault"),
                                             native_frame("_PyEval_EvalFrameDefault"), native_frame("_start")})),
              (std::vector<std::string>{"f (py)", "_start"}));
    // A native unwind that stopped short: the Python frames left go outermost.
    EXPECT_EQ(names_of(merge_stacks({python_frame("g", true), python_frame("<module>", true)},
                                    {native_frame("memcpy"), native_frame("_PyEval_EvalFrameDefault")})),
              (std::vector<std::string>{"memcpy", "g (py)", "<module> (py)"}));
    // No native stack at all: the Python frames alone.
    EXPECT_EQ(names_of(merge_stacks({python_frame("g", false)}, {})), (std::vector<std::string>{"g (py)"}));
    EXPECT_TRUE(is_eval_frame("_PyEval_EvalFrameDefault"));
    EXPECT_TRUE(is_eval_frame("_PyEval_EvalFrameDefault.cold"));
    EXPECT_FALSE(is_eval_frame("_PyEval_EvalFrame"));
    EXPECT_FALSE(is_eval_frame("PyEval_EvalCode"));
    EXPECT_FALSE(is_eval_frame("_PyEval_EvalFrameDefaultX"));
}

// The program whose mixed stacks are checked: Python calling zlib's C code (a stdlib
// extension module, or built into Debian's python3), and a thread sleeping in libc.
// It counts its compressions in the file named by argv[1]: the proof that it goes on.
constexpr const char* kNativeScript = R"(import os, sys, threading, time, zlib

data = os.urandom(1 << 18)

def nap():
    while True:
        time.sleep(0.5)

def squeeze():
    count = 0
    while True:
        zlib.compress(data, 9)
        count += 1
        if count % 4 == 0:
            with open(sys.argv[1], "w") as progress: progress.write(str(count))

threading.Thread(target=nap, name="napper", daemon=True).start()
print("ready", flush=True)
squeeze()
)";

// The frame lines ("    name (where)") of thread TID in `ember dump` output.
std::vector<std::string> dumped_frames(const std::string& dump, pid_t tid) {
    std::vector<std::string> frames;
    const std::size_t start = dump.find("\nThread " + std::to_string(tid) + " (");
    if (start == std::string::npos) return frames;
    std::istringstream lines(dump.substr(dump.find('\n', start + 1) + 1));
    std::string line;
    while (std::getline(lines, line) && line.rfind("    ", 0) == 0) frames.push_back(line.substr(4));
    return frames;
}

// The index of the first frame containing `text`, or -1.
long frame_index(const std::vector<std::string>& frames, const std::string& text) {
    for (std::size_t index = 0; index < frames.size(); ++index)
        if (frames[index].find(text) != std::string::npos) return static_cast<long>(index);
    return -1;
}

std::string joined(const std::vector<std::string>& frames) {
    std::string text;
    for (const std::string& frame : frames) text += "  " + frame + "\n";
    return text;
}

// Whether ptrace may stop a child of ours here: the reason it may not, or "".
std::string ptrace_refusal(pid_t pid) {
    ThreadStop stop(pid);
    return stop.stopped_count() > 0 ? "" : stop.error();
}

class NativeVersions : public ::testing::TestWithParam<Interpreter> {
  protected:
    void SetUp() override {
        if (access(GetParam().path.c_str(), X_OK) != 0) GTEST_SKIP() << GetParam().path << " is not installed";
        script_ = test::temp_path("python_native_" + GetParam().name + ".py");
        progress_ = script_ + ".progress";
        std::ofstream(script_) << kNativeScript;
        program_.child = test::spawn({GetParam().path, script_, progress_});
        ASSERT_TRUE(test::wait_for_output(program_.child, "ready", 60)) << test::read_output(program_.child);
        if (const std::string why = refusal(program_.child.pid); !why.empty()) GTEST_SKIP() << why;
        if (const std::string why = ptrace_refusal(program_.child.pid); !why.empty()) GTEST_SKIP() << why;
    }
    void TearDown() override {
        program_.stop();  // it rewrites its progress file until it is gone
        unlink(script_.c_str());
        unlink(progress_.c_str());
    }
    long progress() const { return std::atol(ember::test_support::read_file(progress_).c_str()); }
    // The program goes on: no thread left stopped, and its count moves.
    void expect_running_unharmed() {
        ASSERT_TRUE(program_.running());
        for (pid_t tid : process_threads(program_.child.pid))
            EXPECT_NE(thread_state(program_.child.pid, tid), 't') << "thread " << tid << " left stopped";
        const long before = progress();
        const std::int64_t deadline = test::monotonic_ns() + 30'000'000'000ll;
        while (progress() <= before && test::monotonic_ns() < deadline) usleep(20000);
        EXPECT_GT(progress(), before) << "the program stopped counting";
    }

    std::string script_, progress_;
    Program program_;
};

TEST_P(NativeVersions, DumpShowsThePythonCallerAroundTheNativeCallee) {
    const pid_t pid = program_.child.pid;
    const std::string napper_tid = [&] {
        for (pid_t tid : process_threads(pid))
            if (tid != pid) return std::to_string(tid);
        return std::string();
    }();
    // One dump is one instant: the main thread may be between two compressions. A few
    // tries catch it inside zlib (where it spends nearly all its time).
    std::string dump;
    std::vector<std::string> main;
    for (int attempt = 0; attempt < 20; ++attempt) {
        ASSERT_EQ(test::run({test::bin("ember"), "dump", "--pid", std::to_string(pid), "--native"}, &dump, {}, 60), 0)
            << dump;
        main = dumped_frames(dump, pid);
        if (frame_index(main, "(libz.so") >= 0) break;
    }
    const long zlib = frame_index(main, "(libz.so");
    const long squeeze = frame_index(main, "squeeze (" + script_ + ":12)");
    const long module = frame_index(main, "<module> (" + script_ + ":19)");
    ASSERT_GE(zlib, 0) << dump;
    EXPECT_LT(zlib, squeeze) << joined(main);
    EXPECT_LT(squeeze, module) << joined(main);
    EXPECT_EQ(frame_index(main, "_PyEval_EvalFrameDefault"), -1) << "eval frames are replaced\n" << joined(main);
    EXPECT_GE(frame_index(main, "_start ("), module) << joined(main);  // the whole stack, down to its start

    // The sleeping thread: libc's sleep (select before 3.11, clock_nanosleep after) inside nap.
    const std::vector<std::string> napper = dumped_frames(dump, std::atoi(napper_tid.c_str()));
    const long libc = frame_index(napper, "(libc.so");
    const long nap = frame_index(napper, "nap (" + script_ + ":7)");
    ASSERT_GE(libc, 0) << dump;
    EXPECT_LT(libc, nap) << joined(napper);
    // The thread is shown by its threading name, as py-spy does.
    const std::size_t napper_line = dump.find("Thread " + napper_tid + " (");
    ASSERT_NE(napper_line, std::string::npos) << dump;
    EXPECT_EQ(dump.substr(dump.find(':', napper_line), 11), ": \"napper\"\n") << dump;
    expect_running_unharmed();
}

TEST_P(NativeVersions, RecordByPidWritesMixedStacks) {
    const std::string trace = test::temp_path("python_native_" + GetParam().name + ".db");
    std::string output;
    ASSERT_EQ(test::run({test::bin("ember"), "record", "--pid", std::to_string(program_.child.pid), "--native",
                         "--duration", "1s", "-o", trace},
                        &output, {}, 60),
              0)
        << output;
    EXPECT_EQ(output.find("Python frames only"), std::string::npos) << output;
    ember::store::TraceReader reader(trace);
    std::int64_t in_squeeze = 0, mixed = 0;
    reader.for_each_stack_sample({}, [&](const ember::trace::StackSample& sample) {
        const auto frames = reader.stack_frames(sample.stack_id);  // outermost first
        long squeeze = -1, zlib = -1;
        for (std::size_t index = 0; index < frames.size(); ++index) {
            if (frames[index].is_python() && frames[index].function == "squeeze") squeeze = static_cast<long>(index);
            if (!frames[index].is_python() && frames[index].module.find("/libz.so") != std::string::npos && zlib < 0)
                zlib = static_cast<long>(index);
        }
        if (squeeze >= 0) ++in_squeeze;
        if (squeeze >= 0 && zlib > squeeze) ++mixed;
        return true;
    });
    ASSERT_GT(in_squeeze, 20) << output;
    std::set<std::string> names;
    for (const auto& thread : reader.threads()) names.insert(thread.name);
    EXPECT_EQ(names.count("napper"), 1u) << "the threading name of the sleeping thread";
    // The program compresses nearly all the time: most samples are inside zlib.
    EXPECT_GT(mixed, in_squeeze / 2) << mixed << " of " << in_squeeze << " samples in squeeze reach libz";
    std::printf("%s: %lld of %lld samples in squeeze() reach libz below it\n", GetParam().path.c_str(),
                static_cast<long long>(mixed), static_cast<long long>(in_squeeze));
    std::filesystem::remove(trace);
    expect_running_unharmed();
}

INSTANTIATE_TEST_SUITE_P(CPython, NativeVersions, ::testing::ValuesIn(interpreters()),
                         [](const ::testing::TestParamInfo<Interpreter>& info) { return info.param.name; });

// `ember record --native -- CMD`: the child is ptrace-stopped at each tick while ember
// waits for it; its exit status still comes through, and its stacks are mixed.
TEST(PythonCommands, RecordNativeOfACommandKeepsItsStatus) {
    const std::string python = "/usr/bin/python3";
    if (access(python.c_str(), X_OK) != 0) GTEST_SKIP() << python << " is not installed";
    if (const std::string why = refusal_for_children(); !why.empty()) GTEST_SKIP() << why;
    const std::string script = test::temp_path("python_native_cmd.py");
    const test::RemovedAtEnd removed_script(script);  // also when an assertion ends the test
    std::ofstream(script) << "import os, sys, time, zlib\n"
                             "data = os.urandom(1 << 18)\n"
                             "def squeeze(seconds):\n"
                             "    end = time.monotonic() + seconds\n"
                             "    while time.monotonic() < end: zlib.compress(data, 9)\n"
                             "squeeze(1.5)\n"
                             "sys.exit(3)\n";
    const std::string trace = test::temp_path("python_native_cmd.db");
    std::string output;
    EXPECT_EQ(test::run({test::bin("ember"), "record", "--native", "-o", trace, "--", python, script}, &output, {}, 90),
              3)
        << output;
    ember::store::TraceReader reader(trace);
    std::int64_t mixed = 0;
    reader.for_each_stack_sample({}, [&](const ember::trace::StackSample& sample) {
        bool squeeze = false;
        for (const auto& frame : reader.stack_frames(sample.stack_id)) {
            if (frame.is_python() && frame.function == "squeeze") squeeze = true;
            if (squeeze && !frame.is_python() && frame.module.find("/libz.so") != std::string::npos) {
                ++mixed;
                break;
            }
        }
        return true;
    });
    EXPECT_GT(mixed, 20) << output;
    std::filesystem::remove(trace);
}

// The issue's test: a PyTorch CPU training loop (Debian's python3-torch) recorded with
// --native has single stacks from the script's own function through torch's native
// code into the kernels: oneDNN's (its JIT code, libdnnl) for the convolutions, the
// BLAS (OpenBLAS's sgemm) for the linear layers.
constexpr const char* kTorchScript = R"(import time
import torch
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
    torch.nn.Flatten(), torch.nn.Linear(16 * 32 * 32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
images = torch.randn(32, 3, 32, 32)
labels = torch.randint(0, 10, (32,))

def train_step():
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()

end = time.monotonic() + 3
while time.monotonic() < end:
    train_step()
)";

bool is_kernel(const ember::trace::FrameInfo& frame) {
    if (frame.is_python()) return false;
    const std::string& module = frame.module;
    return frame.function.rfind("sgemm", 0) == 0 || module.find("libopenblas") != std::string::npos ||
           module.find("libblas") != std::string::npos || module.find("libdnnl") != std::string::npos ||
           module.empty();  // oneDNN's JIT-generated kernels are in no file
}

TEST(NativeTorch, TrainingLoopStacksRunFromTheScriptThroughTorchIntoTheKernels) {
    const std::string python = "/usr/bin/python3";
    std::string probe;
    if (access(python.c_str(), X_OK) != 0 || test::run({python, "-c", "import torch"}, &probe, {}, 60) != 0)
        GTEST_SKIP() << python << " cannot import torch (Debian's python3-torch is not installed): " << probe;
    if (const std::string why = refusal_for_children(); !why.empty()) GTEST_SKIP() << why;
    const std::string script = test::temp_path("python_native_torch.py");
    const test::RemovedAtEnd removed_script(script);  // also when an assertion ends the test
    std::ofstream(script) << kTorchScript;
    const std::string trace = test::temp_path("python_native_torch.db");
    std::string output;
    // One BLAS thread: with more, the GEMMs run on OpenBLAS's own threads, whose stacks
    // start in its thread pool, not in the script.
    ASSERT_EQ(test::run({test::bin("ember"), "record", "--native", "-o", trace, "--", python, script}, &output,
                        {"OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1"}, 110),
              0)
        << output;
    ember::store::TraceReader reader(trace);
    std::int64_t in_step = 0, through = 0;
    std::map<std::string, std::int64_t> kernels;
    std::string example;
    reader.for_each_stack_sample({}, [&](const ember::trace::StackSample& sample) {
        if (sample.idle) return true;
        const auto frames = reader.stack_frames(sample.stack_id);  // outermost first
        std::size_t step = frames.size();
        for (std::size_t index = 0; index < frames.size() && step == frames.size(); ++index)
            if (frames[index].is_python() && frames[index].function == "train_step") step = index;
        if (step == frames.size()) return true;
        ++in_step;
        bool torch_native = false;
        for (std::size_t index = step + 1; index + 1 < frames.size(); ++index)
            if (!frames[index].is_python() && (frames[index].function.rfind("at::", 0) == 0 ||
                                               frames[index].module.find("libtorch_cpu") != std::string::npos))
                torch_native = true;
        // A single stack: from the thread's start (_start) to the kernel, nothing glued on.
        if (torch_native && is_kernel(frames.back()) && frames.front().function == "_start") {
            ++through;
            ++kernels[frames.back().module.empty() ? "JIT code" : frames.back().module];
            if (example.empty())
                for (const auto& frame : frames) example += "  " + frame.function + "\n";
        }
        return true;
    });
    ASSERT_GT(in_step, 50) << output;
    // Most of a training step is GEMM and convolution kernels (about 80% measured on a
    // quiet machine); a third leaves room for a busy one.
    EXPECT_GT(through * 3, in_step) << through << " of " << in_step << " samples in train_step\n" << example;
    std::printf("%lld of %lld samples in train_step() reach a kernel through torch's native code:",
                static_cast<long long>(through), static_cast<long long>(in_step));
    for (const auto& [kernel, count] : kernels) std::printf(" %s %lld", kernel.c_str(), static_cast<long long>(count));
    std::printf("\n");
    std::filesystem::remove(trace);
}

}  // namespace
