// python_gpu_record_test.cpp (gpu): a Python program that uses CUDA through ctypes on
// the driver (libcuda.so.1: no PyTorch, no toolkit needed) runs under `ember record`.
// Every CUDA API call it makes carries the Python stack that made it, ending at the
// script's line (cuMemAlloc in allocate(), cuLaunchKernel in launch(), cuCtxSynchronize
// and cuMemcpyDtoH in read_back()); each kernel reaches launch()'s line through its
// correlation id, and `ember stats --report python_gpu` charges the three kernels to
// that line and the wait in cuCtxSynchronize to the kernel that ran during it.
#include "profiler/analysis/python_gpu.h"
#include "profiler/store/reader.h"
#include "tests/collectors/subprocess.h"
#include "tests/support/gpu.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>

namespace ember {
namespace {

// Lines matter: the checks below name them.
constexpr const char* kScript = R"(import ctypes, sys
cuda = ctypes.CDLL("libcuda.so.1")
PTX = b"""
.version 7.0
.target sm_70
.address_size 64
.visible .entry fill(.param .u64 out, .param .u32 n)
{
    .reg .pred %p;
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p, %r5, %r1;
    @%p bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd2, %rd2, %rd3;
    st.global.u32 [%rd2], %r5;
DONE:
    ret;
}
"""

def check(result, what):
    if result != 0:
        sys.exit(f"{what} failed: CUresult {result}")

def setup():
    check(cuda.cuInit(0), "cuInit")
    device, context = ctypes.c_int(), ctypes.c_void_p()
    check(cuda.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
    check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
    check(cuda.cuCtxSetCurrent(context), "cuCtxSetCurrent")
    module, function = ctypes.c_void_p(), ctypes.c_void_p()
    check(cuda.cuModuleLoadData(ctypes.byref(module), PTX), "cuModuleLoadData")
    check(cuda.cuModuleGetFunction(ctypes.byref(function), module, b"fill"), "cuModuleGetFunction")
    return function

def allocate(n):
    pointer = ctypes.c_uint64()
    check(cuda.cuMemAlloc_v2(ctypes.byref(pointer), n * 4), "cuMemAlloc")
    return pointer

def launch(function, pointer, n):
    out, count = ctypes.c_uint64(pointer.value), ctypes.c_uint32(n)
    params = (ctypes.c_void_p * 2)(ctypes.addressof(out), ctypes.addressof(count))
    check(cuda.cuLaunchKernel(function, (n + 255) // 256, 1, 1, 256, 1, 1, 0, None, params, None), "cuLaunchKernel")

def read_back(pointer, n):
    host = (ctypes.c_uint32 * n)()
    check(cuda.cuCtxSynchronize(), "cuCtxSynchronize")
    check(cuda.cuMemcpyDtoH_v2(host, pointer, n * 4), "cuMemcpyDtoH")
    return host

function = setup()
pointer = allocate(1 << 24)
for _ in range(3):
    launch(function, pointer, 1 << 24)
host = read_back(pointer, 1 << 24)
assert host[123457] == 123457, host[123457]
print("ok", flush=True)
)";
constexpr int kAllocateLine = 46, kLaunchLine = 52, kSynchronizeLine = 56, kCopyLine = 57;

std::string python3() {
    for (const char* path : {"/usr/bin/python3", "/usr/local/bin/python3"})
        if (access(path, X_OK) == 0) return path;
    return "";
}

TEST(CollectorPythonGpu, EveryCudaCallCarriesThePythonLineThatMadeIt) {
    EMBER_REQUIRE_GPU();
    const std::string python = python3();
    if (python.empty()) GTEST_SKIP() << "no python3 on this machine";
    const std::string script = test::temp_path("python_gpu.py");
    std::ofstream(script) << kScript;
    const std::string path = test::temp_path("python_gpu.db");
    std::string output;
    const int code = test::run({test::bin("ember"), "record", "-o", path, "--", python, script}, &output, {}, 180.0);
    ASSERT_EQ(code, 0) << output;
    ASSERT_NE(output.find("ok"), std::string::npos) << output;

    store::TraceReader reader(path);
    ASSERT_TRUE(reader.complete());
    // The innermost frame of each call's stack, by API name ("" when the call has none).
    std::map<std::string, std::vector<trace::FrameInfo>> innermost;
    reader.for_each_api_call({}, [&](const trace::ApiEvent& call) {
        std::string name(reader.string(call.name_id));
        const std::vector<trace::FrameInfo> frames = reader.stack_frames(call.stack_id);
        if (!frames.empty()) innermost[name].push_back(frames.back());
        return true;
    });
    auto expect_line = [&](const std::string& api, const char* function, int line, std::size_t calls) {
        ASSERT_EQ(innermost[api].size(), calls) << api << " calls with a Python stack\n" << output;
        for (const trace::FrameInfo& frame : innermost[api]) {
            EXPECT_EQ(frame.function, function) << api;
            EXPECT_EQ(frame.module, script) << api;
            EXPECT_EQ(frame.line, line) << api;
        }
    };
    expect_line("cuMemAlloc_v2", "allocate", kAllocateLine, 1);
    expect_line("cuLaunchKernel", "launch", kLaunchLine, 3);
    expect_line("cuCtxSynchronize", "read_back", kSynchronizeLine, 1);
    expect_line("cuMemcpyDtoH_v2", "read_back", kCopyLine, 1);

    // Kernels -> launching call -> the script's line.
    const analysis::PythonGpuReport report = analysis::python_gpu(reader);
    EXPECT_TRUE(report.has_call_stacks);
    ASSERT_FALSE(report.sites.empty());
    bool launch_site = false;
    for (const analysis::PythonGpuSiteRow& row : report.sites)
        if (row.site.location == script + ":" + std::to_string(kLaunchLine)) {
            launch_site = true;
            EXPECT_EQ(row.operations, 3);
            EXPECT_EQ(row.calls, 3);
            ASSERT_FALSE(row.top_work.empty());
            EXPECT_EQ(row.top_work[0].first, "fill");
        }
    EXPECT_TRUE(launch_site);
    bool waited = false;
    for (const analysis::PythonGpuWaitRow& row : report.waits)
        if (row.api == "cuCtxSynchronize") {
            waited = true;
            EXPECT_EQ(row.site.location, script + ":" + std::to_string(kSynchronizeLine));
        }
    EXPECT_TRUE(waited);
    store::remove_trace_files(path);
    store::remove_trace_files(path.substr(0, path.size() - 3) + ".python.db");  // the Python sampler's file
    unlink(script.c_str());
}

}  // namespace
}  // namespace ember
