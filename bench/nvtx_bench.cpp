// nvtx_overhead_bench.cpp: what one NVTX push+pop costs a program that records
// itself in-process (ember::collector linked, session open). Not a test: numbers
// for docs/performance.md "## NVTX overhead". The load average is printed before
// and after: on a shared machine the CPU-time column is the one to read.
//
//   collector_nvtx_bench --benchmark_min_time=1s
#include "ember/collector.h"
#include "common/os.h"

#include <benchmark/benchmark.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>

namespace {

std::string bench_path() {
    return "/tmp/ember_nvtx_bench_" + std::to_string(getpid()) + ".db";
}

void print_load_average(const char* when) {
    std::printf("load average %s: %s\n", when, ember::os::load_average().c_str());
}

nvtxDomainHandle_t bench_domain() {
    static nvtxDomainHandle_t domain = nvtxDomainCreateA("bench");
    return domain;
}

// A registered string in a domain: how engine/core/nvtx.h annotates.
nvtxEventAttributes_t registered_step() {
    nvtxEventAttributes_t attributes{};
    attributes.version = NVTX_VERSION;
    attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attributes.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    attributes.message.registered = nvtxDomainRegisterStringA(bench_domain(), "step");
    attributes.category = 1;
    return attributes;
}

// Back to back, far faster than the writer thread stores them: the rings fill and
// most pairs take the drop path (counted, as in a real overload).
void BM_DomainPushPopRegistered(benchmark::State& state) {
    nvtxDomainHandle_t domain = bench_domain();
    nvtxEventAttributes_t attributes = registered_step();
    for (auto _ : state) {
        nvtxDomainRangePushEx(domain, &attributes);
        nvtxDomainRangePop(domain);
    }
}

// The same pair with room in the ring: every 4096 pairs the writer is drained
// (untimed), so every range is stored.
void BM_DomainPushPopRegisteredStored(benchmark::State& state) {
    constexpr int kBatch = 4096;
    nvtxDomainHandle_t domain = bench_domain();
    nvtxEventAttributes_t attributes = registered_step();
    int in_batch = 0;
    for (auto _ : state) {
        nvtxDomainRangePushEx(domain, &attributes);
        nvtxDomainRangePop(domain);
        if (++in_batch == kBatch) {
            state.PauseTiming();
            ember_collector_flush();
            state.ResumeTiming();
            in_batch = 0;
        }
    }
}

void BM_PushPopAscii(benchmark::State& state) {
    for (auto _ : state) {
        nvtxRangePushA("forward");
        nvtxRangePop();
    }
}

void BM_MarkAscii(benchmark::State& state) {
    for (auto _ : state) nvtxMarkA("tick");
}

}  // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    // Recording: rings drop rather than block, so the benchmark also shows whether
    // the writer keeps up (dropped count printed at the end).
    ember_collector_options options;
    ember_collector_options_init(&options);
    options.trace_cuda = 0;
    options.nvml_hz = 0;
    options.quiet = 1;
    std::string path = bench_path();
    if (ember_collector_start(path.c_str(), &options) != 0) {
        std::fprintf(stderr, "%s\n", ember_collector_last_error());
        return 1;
    }
    benchmark::RegisterBenchmark("nvtx_push_pop/domain_registered", BM_DomainPushPopRegistered);
    benchmark::RegisterBenchmark("nvtx_push_pop/domain_registered_stored", BM_DomainPushPopRegisteredStored);
    benchmark::RegisterBenchmark("nvtx_push_pop/ascii", BM_PushPopAscii);
    benchmark::RegisterBenchmark("nvtx_mark/ascii", BM_MarkAscii);
    print_load_average("before");
    benchmark::RunSpecifiedBenchmarks();
    print_load_average("after");
    ember_collector_status status;
    ember_collector_get_status(&status);
    std::printf("events recorded %llu, dropped (ring full) %llu\n",
                static_cast<unsigned long long>(status.events_recorded),
                static_cast<unsigned long long>(status.events_dropped));
    ember_collector_stop();
    std::remove(path.c_str());
    return 0;
}
