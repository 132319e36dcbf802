// cpu_sampler_test.cpp: CPU stack samples name functions dladdr cannot. This
// executable is linked WITHOUT -rdynamic (no ENABLE_EXPORTS), so its own functions
// are absent from .dynsym; a function in an anonymous namespace burns CPU and must
// appear in the stored frames by its demangled name, read from the executable's
// .symtab by ElfSymbolizer.
#include "collectors/elf_symbols.h"
#include "collectors/perf_map.h"
#include "collectors/session.h"
#include "profiler/store/reader.h"
#include "tests/collectors/host_session.h"
#include "tests/support/temp_path.h"

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <string>

namespace {

std::int64_t thread_cpu_ns() {
    timespec now;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return std::int64_t(now.tv_sec) * 1000000000 + now.tv_nsec;
}

std::int64_t wall_ns() {
    timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return std::int64_t(now.tv_sec) * 1000000000 + now.tv_nsec;
}

// Internal linkage, never exported: only .symtab knows its name. Runs for `seconds`
// of this thread's CPU time (the sampler's clock), at most 20 s of wall time.
__attribute__((noinline)) double burn_cpu_in_a_static_function(double seconds) {
    double sum = 0.0;
    std::int64_t cpu_end = thread_cpu_ns() + static_cast<std::int64_t>(seconds * 1e9);
    std::int64_t wall_end = wall_ns() + 20'000'000'000;
    while (thread_cpu_ns() < cpu_end && wall_ns() < wall_end)
        for (int index = 1; index < 1000; ++index) sum += std::sqrt(static_cast<double>(index));
    return sum;
}

#if defined(__x86_64__)
// A function written at run time, as a JIT compiler (oneDNN's) writes one: no unwind
// tables, rbp used as a loop counter, 64 bytes of locals below the saved registers,
// which it writes (a frame's words that no one writes keep stale return addresses of
// earlier calls, which unwinding cannot tell from the true one: see cpu_sampler.cpp).
// long spin(long n): sum of n..1.
using JitFunction = long (*)(long);
JitFunction make_jit_function() {
    static const unsigned char kCode[] = {
        0x53,                          // push rbx
        0x55,                          // push rbp
        0x48, 0x83, 0xec, 0x40,        // sub rsp, 64
        0x31, 0xc0,                    // xor eax, eax
        0x48, 0x89, 0x04, 0x24,        // mov [rsp], rax
        0x48, 0x89, 0x44, 0x24, 0x08,  // mov [rsp+8], rax
        0x48, 0x89, 0x44, 0x24, 0x10,  // mov [rsp+16], rax
        0x48, 0x89, 0x44, 0x24, 0x18,  // mov [rsp+24], rax
        0x48, 0x89, 0x44, 0x24, 0x20,  // mov [rsp+32], rax
        0x48, 0x89, 0x44, 0x24, 0x28,  // mov [rsp+40], rax
        0x48, 0x89, 0x44, 0x24, 0x30,  // mov [rsp+48], rax
        0x48, 0x89, 0x44, 0x24, 0x38,  // mov [rsp+56], rax
        0x48, 0x89, 0xfd,              // mov rbp, rdi
        0x31, 0xdb,                    // xor ebx, ebx
        0x48, 0x01, 0xeb,              // loop: add rbx, rbp
        0x48, 0xff, 0xcd,              //       dec rbp
        0x75, 0xf8,                    //       jnz loop
        0x48, 0x89, 0xd8,              // mov rax, rbx
        0x48, 0x83, 0xc4, 0x40,        // add rsp, 64
        0x5d,                          // pop rbp
        0x5b,                          // pop rbx
        0xc3,                          // ret
    };
    void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return nullptr;
    std::memcpy(page, kCode, sizeof kCode);
    if (mprotect(page, 4096, PROT_READ | PROT_EXEC) != 0) return nullptr;
    return reinterpret_cast<JitFunction>(page);
}

// Calls the JIT function through a pointer, as compiled code calls a JIT kernel, for
// `seconds` of this thread's CPU time.
__attribute__((noinline)) long call_jit_code_from_a_named_function(JitFunction function, double seconds) {
    long sum = 0;
    std::int64_t cpu_end = thread_cpu_ns() + static_cast<std::int64_t>(seconds * 1e9);
    std::int64_t wall_end = wall_ns() + 20'000'000'000;
    while (thread_cpu_ns() < cpu_end && wall_ns() < wall_end) {
        JitFunction volatile through_memory = function;  // an indirect call, never inlined away
        sum += through_memory(2'000'000);
    }
    return sum;
}

__attribute__((noinline)) long outer_caller_of_the_jit_code(JitFunction function, double seconds) {
    long sum = call_jit_code_from_a_named_function(function, seconds);
    asm volatile("" : : "r"(sum) : "memory");  // keeps this frame (no tail call)
    return sum;
}
#endif

constexpr const char* kStaticFunction = "(anonymous namespace)::burn_cpu_in_a_static_function(double)";

std::string temp_path(const std::string& name) {
    const std::filesystem::path file(name);
    return ember::test_support::unique_temp_path("ember_cpu_sampler_" + file.stem().string(), file.extension().string())
        .string();
}

}  // namespace

namespace ember::collector {
namespace {

// A recording session of this process with CPU samples only (1000 Hz), into a temp file.
SessionOptions start_sampling_session(const std::string& name) {
    SessionOptions options = test::host_session_options(temp_path(name));
    options.cpu_sample_hz = 1000;
    start_session(options);
    return options;
}

TEST(ElfSymbolizer, NamesAStaticFunctionOfThisExecutableThatDladdrCannot) {
    auto address = reinterpret_cast<std::uintptr_t>(&burn_cpu_in_a_static_function) + 4;
    Dl_info info{};
    ASSERT_NE(dladdr(reinterpret_cast<void*>(address), &info), 0);
    EXPECT_EQ(info.dli_sname, nullptr) << "exported after all: " << info.dli_sname;

    ElfSymbolizer symbolizer;
    ResolvedFrame frame = symbolizer.resolve(address);
    EXPECT_EQ(frame.function, kStaticFunction);
    EXPECT_EQ(std::filesystem::canonical(frame.module), std::filesystem::canonical("/proc/self/exe"));
}

TEST(ElfSymbolizer, NamesALibraryFunctionFromItsDynamicSymbols) {
    // libc on Debian is stripped of .symtab: .dynsym still names its exports. (A function
    // the sanitizers do not wrap: under them &qsort is the sanitizer runtime's.)
    auto address = reinterpret_cast<std::uintptr_t>(&getppid) + 2;
    ElfSymbolizer symbolizer;
    ResolvedFrame frame = symbolizer.resolve(address);
    EXPECT_NE(frame.function.find("getppid"), std::string::npos) << frame.function;
    EXPECT_NE(frame.module.find("libc"), std::string::npos) << frame.module;
}

TEST(ElfSymbolizer, AnAddressInNoFileIsUnknown) {
    auto heap = std::make_unique<int>(7);
    ElfSymbolizer symbolizer;
    ResolvedFrame frame = symbolizer.resolve(reinterpret_cast<std::uintptr_t>(heap.get()));
    EXPECT_EQ(frame.function, "");
    EXPECT_EQ(frame.module, "");
}

TEST(PerfMap, NamesAddressesInsideEachFunctionAndNothingOutside) {
    const std::string path = temp_path("perf.map");
    {
        std::ofstream map(path);
        map << "7f0000001000 100 jit:first kernel\n"  // names may hold spaces
            << "0x7f0000002000 0x40 jit:second\n"
            << "not a line\n";
    }
    PerfMap names(path);
    EXPECT_EQ(names.find(0x7f0000001000), "jit:first kernel");
    EXPECT_EQ(names.find(0x7f00000010ff), "jit:first kernel");
    EXPECT_EQ(names.find(0x7f0000001100), "");  // one past the end
    EXPECT_EQ(names.find(0x7f0000000fff), "");
    EXPECT_EQ(names.find(0x7f000000203f), "jit:second");
    // The JIT writes more while the process runs; memory reused by a later function
    // takes its name. A line still being written (no newline yet) waits.
    {
        std::ofstream map(path, std::ios::app);
        map << "7f0000001000 80 jit:reused\n7f0000003000 10 jit:partial";
    }
    EXPECT_EQ(names.find(0x7f0000001010), "jit:reused");
    EXPECT_EQ(names.find(0x7f00000010f0), "jit:first kernel");
    EXPECT_EQ(names.find(0x7f0000003004), "");
    {
        std::ofstream map(path, std::ios::app);
        map << "\n";
    }
    EXPECT_EQ(names.find(0x7f0000003004), "jit:partial");
    std::remove(path.c_str());
    EXPECT_EQ(PerfMap(path).find(0x7f0000001000), "");  // no map: no names
}

TEST(CollectorCpuSampler, AStaticFunctionOfAnExecutableWithoutRdynamicIsNamedInTheSamples) {
    const SessionOptions options = start_sampling_session("static.db");
    volatile double sink = burn_cpu_in_a_static_function(1.0);
    (void)sink;
    std::string error;
    ASSERT_TRUE(stop_session(&error)) << error;

    store::TraceReader reader(options.path);
    std::int64_t samples = 0, in_function = 0;
    std::string versioned;
    reader.for_each_stack_sample({}, [&](const trace::StackSample& sample) {
        ++samples;
        bool counted = false;
        for (const trace::FrameInfo& frame : reader.stack_frames(sample.stack_id)) {
            if (frame.function == kStaticFunction && !counted) {
                ++in_function;
                counted = true;
            }
            // glibc's debug symbols say "__libc_start_main@GLIBC_2.2.5": versions are dropped.
            if (frame.function.find('@') != std::string::npos) versioned = frame.function;
        }
        return true;
    });
    EXPECT_EQ(versioned, "");
    // 1 s of CPU; process CPU timers fire on scheduler ticks (60-250 Hz).
    EXPECT_GE(samples, 40);
    EXPECT_GE(in_function, samples * 8 / 10) << in_function << " of " << samples;
    std::remove(options.path.c_str());
}

// The sampler guards its unwinds past JIT code with a SIGSEGV/SIGBUS handler. A fault
// anywhere else is not its business: it reaches the handler the process had before,
// and once the sampler stops, that handler is the process's again.
sigjmp_buf g_fault_resume;
volatile sig_atomic_t g_faults_seen = 0;
void count_fault_and_resume(int) {
    g_faults_seen = g_faults_seen + 1;
    siglongjmp(g_fault_resume, 1);
}

TEST(CollectorCpuSampler, AFaultOutsideItsUnwindsGoesToTheHandlerInstalledBefore) {
    struct sigaction action {
    }, previous{};
    action.sa_handler = count_fault_and_resume;
    action.sa_flags = SA_NODEFER;
    sigemptyset(&action.sa_mask);
    ASSERT_EQ(sigaction(SIGSEGV, &action, &previous), 0);
    const SessionOptions options = start_sampling_session("fault.db");
    g_faults_seen = 0;
    if (sigsetjmp(g_fault_resume, 1) == 0) {
        std::uintptr_t address = 16;  // the first page is never mapped
        asm volatile("" : "+r"(address));
        *reinterpret_cast<volatile int*>(address) = 1;
    }
    EXPECT_EQ(g_faults_seen, 1);
    std::string error;
    ASSERT_TRUE(stop_session(&error)) << error;
    struct sigaction current {};
    ASSERT_EQ(sigaction(SIGSEGV, nullptr, &current), 0);
    EXPECT_TRUE((current.sa_flags & SA_SIGINFO) == 0 && current.sa_handler == count_fault_and_resume)
        << "the sampler's fault handler is still installed after it stopped";
    sigaction(SIGSEGV, &previous, nullptr);
    std::remove(options.path.c_str());
}

#if defined(__x86_64__)
// Samples taken inside JIT code (no unwind tables) keep their callers: the sampler
// finds the return address into the calling function on the stack and unwinds from
// there. Without it the stack is the JIT address alone.
TEST(CollectorCpuSampler, SamplesInJitCodeKeepTheFunctionsThatCalledIt) {
    {
        // The sampler reads the stack with process_vm_readv; some seccomp filters refuse it.
        long value = 42, copy = 0;
        iovec local{&copy, sizeof copy}, remote{&value, sizeof value};
        if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != static_cast<ssize_t>(sizeof copy))
            GTEST_SKIP()
                << "process_vm_readv is refused here (a seccomp filter?): the sampler cannot unwind past JIT code";
    }
    JitFunction function = make_jit_function();
    ASSERT_NE(function, nullptr) << "mmap/mprotect of an executable page failed";
    ASSERT_EQ(function(4), 10);
    // Named the way a JIT names its code for profilers: a line of /tmp/perf-PID.map.
    // (A map left by an earlier process with this pid is appended to, and left.)
    const std::string map_path = PerfMap::path_for_this_process();
    const bool map_was_there = std::filesystem::exists(map_path);
    struct RemoveAtTheEnd {
        std::string path;
        ~RemoveAtTheEnd() {
            if (!path.empty()) std::remove(path.c_str());
        }
    } remove_map{map_was_there ? std::string() : map_path};
    {
        std::ofstream map(map_path, std::ios::app);
        map << std::hex << reinterpret_cast<std::uintptr_t>(function) << " 80 test_jit:spin_kernel\n";
    }
    const SessionOptions options = start_sampling_session("jit.db");
    volatile long sink = outer_caller_of_the_jit_code(function, 1.0);
    (void)sink;
    std::string error;
    ASSERT_TRUE(stop_session(&error)) << error;

    store::TraceReader reader(options.path);
    const auto jit_address = reinterpret_cast<std::uint64_t>(function);
    std::int64_t in_jit = 0, with_callers = 0;
    std::string example;
    reader.for_each_stack_sample({}, [&](const trace::StackSample& sample) {
        const std::vector<trace::FrameInfo> frames = reader.stack_frames(sample.stack_id);  // outermost first
        if (frames.empty()) return true;
        const trace::FrameInfo& leaf = frames.back();
        if (leaf.address < jit_address || leaf.address >= jit_address + 128) return true;
        ++in_jit;
        EXPECT_EQ(leaf.module, "") << "JIT code is in no module";
        EXPECT_EQ(leaf.function, "test_jit:spin_kernel");
        // The leaf's caller, its caller, and the test body above them, in order.
        const std::size_t depth = frames.size();
        const bool callers =
            depth >= 4 && frames[depth - 2].function.find("call_jit_code_from_a_named_function") != std::string::npos &&
            frames[depth - 3].function.find("outer_caller_of_the_jit_code") != std::string::npos;
        if (callers)
            ++with_callers;
        else if (example.empty())
            for (const trace::FrameInfo& frame : frames) example += frame.function + " <- ";
        return true;
    });
    EXPECT_GE(in_jit, 40);
    EXPECT_GE(with_callers, in_jit * 9 / 10) << with_callers << " of " << in_jit << "; e.g. " << example;
    std::remove(options.path.c_str());
}
#endif

}  // namespace
}  // namespace ember::collector
