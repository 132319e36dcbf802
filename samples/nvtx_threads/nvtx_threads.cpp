// nvtx_threads: a program that annotates itself with NVTX and nothing else — the
// kind of job `ember record -- ./sample_nvtx_threads` records. Its events are
// fixed, so tests can check a recording event by event:
//
//   thread "main":   outer (category 1, color 0xFF00FF00)
//                      inner (payload int 42)
//                        mark "inner mark" (payload 2.5)
//                      "registered step" (domain "sample", registered string, payload 7)
//                    "wide ünïcode" (a wide-character message)
//                    start/end range "async work" (not nested: depth -1)
//                    domain "ember" counter marks: loss = 0.5, then 0.25
//   threads "worker 0" .. "worker N-1", K iterations each:
//                    "work item" (payload = iteration) > "compute"; then mark "worker done"
//
//   sample_nvtx_threads [--threads N] [--iterations K] [--forever]
//   sample_nvtx_threads_inprocess --record FILE [same options]   (links ember::collector)
//
// --forever repeats "tick" ranges (1 ms apart) until killed: the crash-safety tests.
#include <nvtx3/nvToolsExt.h>

#ifdef EMBER_SAMPLE_IN_PROCESS
#include "ember/collector.h"
#endif

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <sys/syscall.h>
#include <unistd.h>

namespace {

std::uint32_t os_thread_id() {
    return static_cast<std::uint32_t>(syscall(SYS_gettid));
}

nvtxEventAttributes_t attributes_with_message(const char* message) {
    nvtxEventAttributes_t attributes{};
    attributes.version = NVTX_VERSION;
    attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attributes.message.ascii = message;
    return attributes;
}

void worker(int index, int iterations) {
    std::string name = "worker " + std::to_string(index);
    nvtxNameOsThreadA(os_thread_id(), name.c_str());
    for (int iteration = 0; iteration < iterations; ++iteration) {
        nvtxEventAttributes_t item = attributes_with_message("work item");
        item.payloadType = NVTX_PAYLOAD_TYPE_INT64;
        item.payload.llValue = iteration;
        nvtxRangePushEx(&item);
        nvtxRangePushA("compute");
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        nvtxRangePop();
        nvtxRangePop();
    }
    nvtxMarkA("worker done");
}

void main_thread_events() {
    nvtxNameOsThreadA(os_thread_id(), "main");

    nvtxEventAttributes_t outer = attributes_with_message("outer");
    outer.category = 1;
    outer.colorType = NVTX_COLOR_ARGB;
    outer.color = 0xFF00FF00u;
    nvtxRangePushEx(&outer);
    {
        nvtxEventAttributes_t inner = attributes_with_message("inner");
        inner.payloadType = NVTX_PAYLOAD_TYPE_INT64;
        inner.payload.llValue = 42;
        nvtxRangePushEx(&inner);
        nvtxEventAttributes_t mark = attributes_with_message("inner mark");
        mark.payloadType = NVTX_PAYLOAD_TYPE_DOUBLE;
        mark.payload.dValue = 2.5;
        nvtxMarkEx(&mark);
        nvtxRangePop();

        nvtxDomainHandle_t domain = nvtxDomainCreateA("sample");
        nvtxEventAttributes_t step{};
        step.version = NVTX_VERSION;
        step.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
        step.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        step.message.registered = nvtxDomainRegisterStringA(domain, "registered step");
        step.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
        step.payload.ullValue = 7;
        nvtxDomainRangePushEx(domain, &step);
        nvtxDomainRangePop(domain);
    }
    nvtxRangePop();

    nvtxRangePushW(L"wide \u00fcn\u00efcode");
    nvtxRangePop();

    nvtxRangeId_t async_work = nvtxRangeStartA("async work");
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    nvtxRangeEnd(async_work);

    nvtxDomainHandle_t ember = nvtxDomainCreateA("ember");
    for (double loss : {0.5, 0.25}) {
        nvtxEventAttributes_t counter = attributes_with_message("loss");
        counter.category = 100;  // engine/core/nvtx.h: kCounterCategory
        counter.payloadType = NVTX_PAYLOAD_TYPE_DOUBLE;
        counter.payload.dValue = loss;
        nvtxDomainMarkEx(ember, &counter);
    }
}

[[noreturn]] void tick_forever() {
    for (long tick = 0;; ++tick) {
        nvtxRangePushA("tick");
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        nvtxRangePop();
        if (tick == 0) {
            std::printf("ticking\n");
            std::fflush(stdout);
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    int threads = 2;
    int iterations = 3;
    bool forever = false;
    const char* record_path = nullptr;
    for (int index = 1; index < argc; ++index) {
        std::string argument = argv[index];
        if (argument == "--threads" && index + 1 < argc) {
            threads = std::atoi(argv[++index]);
        } else if (argument == "--iterations" && index + 1 < argc) {
            iterations = std::atoi(argv[++index]);
        } else if (argument == "--forever") {
            forever = true;
        } else if (argument == "--record" && index + 1 < argc) {
            record_path = argv[++index];
        } else {
            std::fprintf(stderr, "usage: %s [--record FILE] [--threads N] [--iterations K] [--forever]\n", argv[0]);
            return 2;
        }
    }
#ifdef EMBER_SAMPLE_IN_PROCESS
    if (record_path) {
        ember_collector_options options;
        ember_collector_options_init(&options);
        options.nvml_hz = 0;
        options.trace_cuda = 0;  // an NVTX-only program
        if (ember_collector_start(record_path, &options) != 0) {
            std::fprintf(stderr, "%s\n", ember_collector_last_error());
            return 1;
        }
    }
#else
    if (record_path) {
        std::fprintf(stderr, "--record needs sample_nvtx_threads_inprocess; use `ember record -- %s`\n", argv[0]);
        return 2;
    }
#endif
    if (forever) tick_forever();

    main_thread_events();
    std::vector<std::thread> workers;
    for (int index = 0; index < threads; ++index) workers.emplace_back(worker, index, iterations);
    for (std::thread& thread : workers) thread.join();

#ifdef EMBER_SAMPLE_IN_PROCESS
    if (record_path && ember_collector_stop() != 0) {
        std::fprintf(stderr, "%s\n", ember_collector_last_error());
        return 1;
    }
#endif
    std::printf("nvtx_threads: %d workers x %d iterations\n", threads, iterations);
    return 0;
}
