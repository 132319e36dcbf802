// cpu_sampler_test.cpp: CPU stack samples name functions dladdr cannot. This
// executable is linked WITHOUT -rdynamic (no ENABLE_EXPORTS), so its own functions
// are absent from .dynsym; a function in an anonymous namespace burns CPU and must
// appear in the stored frames by its demangled name, read from the executable's
// .symtab by ElfSymbolizer.
#include "collectors/elf_symbols.h"
#include "collectors/session.h"
#include "profiler/store/reader.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
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

constexpr const char* kStaticFunction = "(anonymous namespace)::burn_cpu_in_a_static_function(double)";

std::string temp_path(const std::string& name) {
    return (std::filesystem::temp_directory_path() / ("ember_cpu_sampler_" + std::to_string(getpid()) + "_" + name))
        .string();
}

}  // namespace

namespace ember::collector {
namespace {

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
    // libc on Debian is stripped of .symtab: .dynsym still names its exports.
    auto address = reinterpret_cast<std::uintptr_t>(&qsort) + 2;
    ElfSymbolizer symbolizer;
    ResolvedFrame frame = symbolizer.resolve(address);
    EXPECT_NE(frame.function.find("qsort"), std::string::npos) << frame.function;
    EXPECT_NE(frame.module.find("libc"), std::string::npos) << frame.module;
}

TEST(ElfSymbolizer, AnAddressInNoFileIsUnknown) {
    auto heap = std::make_unique<int>(7);
    ElfSymbolizer symbolizer;
    ResolvedFrame frame = symbolizer.resolve(reinterpret_cast<std::uintptr_t>(heap.get()));
    EXPECT_EQ(frame.function, "");
    EXPECT_EQ(frame.module, "");
}

TEST(CollectorCpuSampler, AStaticFunctionOfAnExecutableWithoutRdynamicIsNamedInTheSamples) {
    SessionOptions options;
    options.path = temp_path("static.db");
    options.trace_cuda = false;
    options.nvml_hz = 0;
    options.cpu_sample_hz = 1000;
    options.quiet = true;
    start_session(options);
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

}  // namespace
}  // namespace ember::collector
