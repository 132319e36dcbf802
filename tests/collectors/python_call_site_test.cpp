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

#include <algorithm>
#include <cerrno>
#include <chrono>
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
void PrintTo(const Interpreter& interpreter, std::ostream* out) { *out << interpreter.path; }

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
        ASSERT_TRUE(test::wait_for_output(child_, "state", 60)) << test::read_output(child_);
        const std::string output = test::read_output(child_);
        unsigned long long state = 0, runtime = 0;
        ASSERT_EQ(std::sscanf(output.c_str() + output.find("state"), "state %llu %llu", &state, &runtime), 2) << output;
        thread_state_ = state;
        runtime_ = runtime;
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
        std::remove(trace_.c_str());
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
        std::printf("[ cost     ] %s: %.2f us per call at a known call site, %.1f us to resolve a new one "
                    "(20 frames)\n", GetParam().path.c_str(), same, resolve);
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
    const std::string path = test::temp_path("not_python.db");
    {
        store::TraceWriter writer(path, trace::RunInfo{});
        std::string why;
        EXPECT_EQ(collector::PythonCallSites::open_in_process(writer, why), nullptr);
        EXPECT_NE(why.find("not a CPython process"), std::string::npos) << why;
        writer.close();
    }
    std::remove(path.c_str());
}

}  // namespace
