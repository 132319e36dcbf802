// python_call_site_test.cpp: the Python stack a CUDA API call carries
// (collectors/python_call_site.h), read from real CPython processes of every version
// the machine has (pyenv's 3.8 to 3.13 and Debian's python3; absent ones skip). The
// program stands in a known call chain, 20 frames deep, inside a C function (as a
// thread inside a CUDA call does) and prints its PyThreadState and `_PyRuntime`; the
// capture reads that thread state from outside, as the collector reads its own, and
// the stack must name the script's functions and lines. Also prints the cost of one
// capture (the same call site again, a known one, a new one): no time is asserted.
#include "collectors/python/process_memory.h"
#include "collectors/python_call_site.h"
#include "profiler/store/reader.h"
#include "profiler/store/writer.h"
#include "tests/collectors/subprocess.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>
#include <cstdio>
#include <fstream>

namespace {

using namespace ember;
namespace test = ember::test;

// Lines matter: the checks below name them.
constexpr const char* kScript = R"(import ctypes, sys, time
api = ctypes.pythonapi
api.PyGILState_GetThisThreadState.restype = ctypes.c_void_p
runtime = ctypes.addressof(ctypes.c_char.in_dll(api, "_PyRuntime"))

def wait_in_c():
    print("state", api.PyGILState_GetThisThreadState(), runtime, flush=True)
    time.sleep(100000)

def deep(n):
    if n == 0:
        wait_in_c()
    else:
        deep(n - 1)

class Model:
    def step(self):
        deep(16)

Model().step()
)";
constexpr int kSleepLine = 8, kDeepLeafLine = 12, kDeepLine = 14, kStepLine = 18, kModuleLine = 20;

struct Interpreter {
    std::string name;
    std::string path;
};
void PrintTo(const Interpreter& interpreter, std::ostream* out) {
    *out << interpreter.path;
}

std::vector<Interpreter> every_python() {
    std::vector<Interpreter> found;
    for (const char* version : {"3.8.18", "3.9.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0"}) {
        std::string name = std::string("py") + version;
        name.erase(name.rfind('.'));
        name.erase(std::remove(name.begin(), name.end(), '.'), name.end());
        found.push_back({name, std::string("/root/.pyenv/versions/") + version + "/bin/python"});
    }
    found.push_back({"debian_python3", "/usr/bin/python3"});
    return found;
}

class CallSite : public ::testing::TestWithParam<Interpreter> {
  protected:
    void SetUp() override {
        if (access(GetParam().path.c_str(), X_OK) != 0) GTEST_SKIP() << GetParam().path << " is not installed";
        script_ = test::temp_path("call_site.py");
        std::ofstream(script_) << kScript;
        trace_ = test::temp_path("call_site.db");
        child_ = test::spawn({GetParam().path, script_});
        // The whole line: the numbers may arrive after the word.
        ASSERT_TRUE(test::wait_for_output(child_, "state", 60)) << test::read_output(child_);
        std::string output = test::read_output(child_);
        for (int tries = 0; tries < 6000 && output.find('\n', output.find("state")) == std::string::npos; ++tries) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
            output = test::read_output(child_);
        }
        unsigned long long state = 0, runtime = 0;
        ASSERT_EQ(std::sscanf(output.c_str() + output.find("state"), "state %llu %llu", &state, &runtime), 2) << output;
        thread_state_ = state;
        runtime_ = runtime;
        // Printed just before time.sleep: wait until the thread sleeps in it, so its
        // stack no longer moves.
        for (int tries = 0; tries < 500 && collector::python::thread_state(child_.pid, child_.pid) != 'S'; ++tries)
            usleep(10'000);
        collector::python::ProcessMemory memory(child_.pid);
        char byte = 0;
        if (!memory.read(runtime_, &byte, 1) && (memory.last_errno() == EPERM || memory.last_errno() == ENOSYS))
            GTEST_SKIP() << collector::python::refusal_reason(child_.pid, memory.last_errno());
    }
    void TearDown() override {
        if (child_.pid > 0) {
            kill(child_.pid, SIGKILL);
            test::wait_for(child_, 10);
            unlink(child_.output_path.c_str());
        }
        unlink(script_.c_str());
        store::remove_trace_files(trace_);
    }

    std::string script_, trace_;
    test::Child child_;
    std::uint64_t thread_state_ = 0, runtime_ = 0;
};

// Microseconds per call of `capture`, over `calls` calls.
template <typename Capture>
double microseconds_per_call(int calls, Capture capture) {
    const auto begin = std::chrono::steady_clock::now();
    for (int call = 0; call < calls; ++call) capture();
    const std::chrono::duration<double, std::micro> spent = std::chrono::steady_clock::now() - begin;
    return spent.count() / calls;
}

TEST_P(CallSite, StackNamesTheScriptsFunctionsAndLinesAndIsCached) {
    trace::StackId stack = 0;
    {
        store::TraceWriter writer(trace_, trace::RunInfo{});
        collector::PythonCallSites sites(child_.pid, runtime_, writer);
        collector::PythonCallSiteCache cache;
        stack = sites.stack_of(thread_state_, cache);
        ASSERT_NE(stack, 0u);
        EXPECT_EQ(sites.stack_of(thread_state_, cache), stack);  // the same call site again
        collector::PythonCallSiteCache other_thread;
        EXPECT_EQ(sites.stack_of(thread_state_, other_thread), stack);  // resolved again, same row
        EXPECT_EQ(sites.stack_of(0, cache), 0u);                        // no thread state: unknown
        const auto counts = sites.counts();
        EXPECT_EQ(counts.calls, 4u);
        EXPECT_EQ(counts.same_as_last, 1u);
        EXPECT_EQ(counts.resolved, 2u);
        EXPECT_EQ(counts.unknown, 1u);

        // The cost of one capture against a real interpreter, 20 frames deep.
        collector::PythonCallSiteCache fresh;
        const double same = microseconds_per_call(20000, [&] { sites.stack_of(thread_state_, cache); });
        const double resolve = microseconds_per_call(50, [&] {
            fresh = {};
            sites.stack_of(thread_state_, fresh);
        });
        std::printf(
            "[ cost     ] %s: %.2f us per call at a known call site, %.1f us to resolve a new one "
            "(20 frames)\n",
            GetParam().path.c_str(), same, resolve);
        RecordProperty("known_call_site_us", std::to_string(same));
        RecordProperty("new_call_site_us", std::to_string(resolve));
        writer.close();
    }
    store::TraceReader reader(trace_);
    const std::vector<trace::FrameInfo> frames = reader.stack_frames(stack);  // outermost first
    ASSERT_EQ(frames.size(), 20u);
    auto expect_frame = [&](const trace::FrameInfo& frame, const std::string& function, int line) {
        EXPECT_EQ(frame.function, function);
        EXPECT_EQ(frame.module, script_);
        EXPECT_EQ(frame.line, line);
    };
    expect_frame(frames[0], "<module>", kModuleLine);
    expect_frame(frames[1], "Model.step", kStepLine);
    for (std::size_t depth = 2; depth < 18; ++depth) expect_frame(frames[depth], "deep", kDeepLine);
    expect_frame(frames[18], "deep", kDeepLeafLine);
    expect_frame(frames[19], "wait_in_c", kSleepLine);
}

INSTANTIATE_TEST_SUITE_P(CPython, CallSite, ::testing::ValuesIn(every_python()),
                         [](const auto& info) { return info.param.name; });

TEST(CallSiteInProcess, AProgramThatIsNotPythonHasNoCallSites) {
    if (dlsym(RTLD_DEFAULT, "_PyRuntime"))
        GTEST_SKIP() << "an interpreter is loaded already (the embedded test ran first)";
    const std::string path = test::temp_path("not_python.db");
    {
        store::TraceWriter writer(path, trace::RunInfo{});
        std::string why;
        EXPECT_EQ(collector::PythonCallSites::open_in_process(writer, why), nullptr);
        EXPECT_NE(why.find("not a CPython process"), std::string::npos) << why;
        writer.close();
    }
    store::remove_trace_files(path);
}

// The collector's own path: an interpreter in this process (Debian's libpython3.11,
// loaded with dlopen) calls a C function through ctypes, which releases the GIL as it
// does around a CUDA call; the function reads its caller's stack in-process.
constexpr const char* kEmbeddedScript = R"(import ctypes
capture = ctypes.CDLL(None).ember_test_capture_call_site
def launch():
    capture()
def step():
    for _ in range(3):
        launch()
step()
)";
constexpr int kCaptureLine = 4, kLaunchLine = 7, kEmbeddedStepLine = 8;

struct Embedded {
    collector::PythonCallSites* sites = nullptr;
    collector::PythonCallSiteCache cache;
    std::vector<trace::StackId> stacks;
    double microseconds_per_capture = 0;
};
Embedded g_embedded;

}  // namespace

extern "C" __attribute__((visibility("default"))) void ember_test_capture_call_site() {
    Embedded& embedded = g_embedded;
    const std::uint64_t state = embedded.sites->current_thread_state();
    embedded.stacks.push_back(state == 0 ? 0 : embedded.sites->stack_of(state, embedded.cache));
    if (embedded.stacks.size() == 1)
        embedded.microseconds_per_capture = microseconds_per_call(
            20000, [&] { embedded.sites->stack_of(embedded.sites->current_thread_state(), embedded.cache); });
}

namespace {

TEST(CallSiteInProcess, AnEmbeddedInterpretersCallerIsTheScriptsLine) {
    void* python = dlopen("libpython3.11.so.1.0", RTLD_NOW | RTLD_GLOBAL);
    if (!python) GTEST_SKIP() << "libpython3.11.so.1.0 is not installed (Debian's libpython3.11)";
    auto initialize = reinterpret_cast<void (*)()>(dlsym(python, "Py_Initialize"));
    auto run = reinterpret_cast<int (*)(const char*)>(dlsym(python, "PyRun_SimpleString"));
    ASSERT_TRUE(initialize && run);
    const std::string path = test::temp_path("embedded_call_site.db");
    trace::StackId stack = 0;
    {
        store::TraceWriter writer(path, trace::RunInfo{});
        std::string why;
        std::unique_ptr<collector::PythonCallSites> sites = collector::PythonCallSites::open_in_process(writer, why);
        ASSERT_TRUE(sites) << why;
        EXPECT_EQ(sites->current_thread_state(), 0u);  // not initialized yet
        g_embedded.sites = sites.get();
        initialize();
        ASSERT_EQ(run(kEmbeddedScript), 0);
        ASSERT_EQ(g_embedded.stacks.size(), 3u);
        stack = g_embedded.stacks[0];
        EXPECT_NE(stack, 0u);
        EXPECT_EQ(g_embedded.stacks[1], stack);
        EXPECT_EQ(g_embedded.stacks[2], stack);
        std::printf(
            "[ cost     ] in-process, Debian's libpython3.11: %.2f us per call at a known call site (3 frames)\n",
            g_embedded.microseconds_per_capture);
        RecordProperty("in_process_known_call_site_us", std::to_string(g_embedded.microseconds_per_capture));
        g_embedded.sites = nullptr;
        writer.close();
    }
    store::TraceReader reader(path);
    const std::vector<trace::FrameInfo> frames = reader.stack_frames(stack);
    store::remove_trace_files(path);
    ASSERT_EQ(frames.size(), 3u);
    EXPECT_EQ(frames[0].function, "<module>");
    EXPECT_EQ(frames[0].line, kEmbeddedStepLine);
    EXPECT_EQ(frames[1].function, "step");
    EXPECT_EQ(frames[1].line, kLaunchLine);
    EXPECT_EQ(frames[2].function, "launch");
    EXPECT_EQ(frames[2].line, kCaptureLine);
    EXPECT_EQ(frames[2].module, "<string>");
}

}  // namespace
