// trace_builder.h: hand-built traces for the analysis and viewer tests, through the real
// TraceWriter, GPU work filled as the importers fill it (gpu_activity.h). It hands out
// correlation and range ids and registers a process, a device the first time one of
// theirs is used. Times are the file's nanoseconds: each test turns its microseconds
// into them.
#pragma once

#include "profiler/import/gpu_activity.h"
#include "profiler/store/writer.h"
#include "tests/support/store.h"

#include <cstdint>
#include <optional>
#include <set>
#include <string>

namespace ember::testing {

// What a memory event names past its block: whose allocator, the thread that allocated
// or freed it (its open range is the op), where (a stack), what the device had free
// (an OOM's).
struct MemoryContext {
    trace::DeviceId device = 0;     // trace::kNoDevice: the host's allocator
    trace::ThreadId thread = 0;     // 0: none named
    trace::StackId stack = 0;       // 0: none recorded
    std::int64_t device_free = -1;  // -1: not known
};

class TraceBuilder {
  public:
    TraceBuilder(const std::string& path, const trace::RunInfo& run)
        : writer_(path, run, store::testing::quiet_options()), pid_(run.pid) {}

    // Process 42 ("train"), recording from `start_ns`, rank `rank` of `world_size`.
    static trace::RunInfo run_info(trace::TimeNs start_ns, std::int32_t rank = 0, std::int32_t world_size = 1) {
        trace::RunInfo run;
        run.pid = 42;
        run.rank = rank;
        run.world_size = world_size;
        run.start_ns = start_ns;
        return run;
    }

    store::TraceWriter& writer() { return writer_; }

    // A thread of process `pid` (the run's own by default; tid 0: the next free one).
    trace::ThreadId thread(const char* name, std::int64_t pid = 0, std::int64_t tid = 0) {
        if (pid == 0) pid = pid_;
        if (registered_pids_.insert(pid).second) writer_.register_process({pid, pid == pid_ ? "train" : "rank"});
        return writer_.register_thread({0, pid, tid != 0 ? tid : next_tid_++, name});
    }
    // A device with its own name and properties (else the first stream on it registers
    // a default "Test GPU").
    void device(const trace::DeviceInfo& info) {
        if (registered_devices_.insert(info.device_id).second) writer_.register_device(info);
    }
    trace::StreamId stream(std::uint64_t cuda_stream, trace::DeviceId device_id = 0, const char* name = "") {
        device({device_id, "Test GPU", "", 9, 0, 132, 80ll << 30, 3.35e12});
        return writer_.register_stream({0, device_id, 1, cuda_stream, 0, name});
    }

    // A CUDA API call (made at `stack`, when one was recorded); returns its correlation id.
    trace::CorrelationId call(trace::ThreadId thread, const char* name, trace::TimeNs start, trace::TimeNs end,
                              trace::StackId stack = 0) {
        trace::ApiEvent event;
        event.start_ns = start;
        event.end_ns = end;
        event.thread_id = thread;
        event.correlation_id = next_correlation_++;
        event.name_id = writer_.intern(name);
        event.stack_id = stack;
        EXPECT_TRUE(writer_.record_api_call(event));
        return event.correlation_id;
    }
    void kernel(trace::StreamId stream, const char* name, trace::TimeNs start, trace::TimeNs end,
                trace::CorrelationId correlation, trace::DeviceId device_id = 0) {
        auto event = importing::gpu_activity<trace::KernelEvent>(start, end, stream, device_id, correlation);
        event.name_id = writer_.intern(name);
        EXPECT_TRUE(writer_.record_kernel(event));
    }
    // A host-to-device copy of 1 MiB.
    void memcpy(trace::StreamId stream, trace::TimeNs start, trace::TimeNs end, trace::CorrelationId correlation) {
        auto event = importing::gpu_activity<trace::MemcpyEvent>(start, end, stream, 0, correlation);
        event.direction = trace::MemcpyDirection::host_to_device;
        event.bytes = 1 << 20;
        EXPECT_TRUE(writer_.record_memcpy(event));
    }
    // A memset of 4 KiB.
    void memset(trace::StreamId stream, trace::TimeNs start, trace::TimeNs end, trace::CorrelationId correlation) {
        auto event = importing::gpu_activity<trace::MemsetEvent>(start, end, stream, 0, correlation);
        event.bytes = 4096;
        EXPECT_TRUE(writer_.record_memset(event));
    }
    trace::RangeId range(trace::ThreadId thread, const char* domain, const char* name, trace::TimeNs start,
                         trace::TimeNs end, std::uint32_t category = 0, std::int32_t depth = 0,
                         std::optional<std::int64_t> payload = {}) {
        trace::RangeEvent event;
        event.range_id = writer_.next_range_id();
        event.start_ns = start;
        event.end_ns = end;
        event.thread_id = thread;
        event.domain_id = writer_.intern(domain);
        event.name_id = writer_.intern(name);
        event.category = category;
        event.depth = depth;
        if (payload) event.payload = trace::Payload::of_integer(*payload);
        EXPECT_TRUE(writer_.record_range(event));
        return event.range_id;
    }
    // An event of a caching allocator (device 0's unless the context says otherwise).
    void memory(trace::TimeNs time, trace::MemoryAction action, std::uint64_t address, std::int64_t bytes,
                const MemoryContext& context = {}) {
        EXPECT_TRUE(writer_.record_memory_event({.time_ns = time,
                                                 .device_id = context.device,
                                                 .action = action,
                                                 .address = address,
                                                 .bytes = bytes,
                                                 .stack_id = context.stack,
                                                 .device_free_bytes = context.device_free,
                                                 .thread_id = context.thread}));
    }
    void close() { writer_.close(); }

  private:
    store::TraceWriter writer_;
    std::int64_t pid_ = 42;
    std::set<std::int64_t> registered_pids_;
    std::set<trace::DeviceId> registered_devices_;
    std::int64_t next_tid_ = 1000;
    trace::CorrelationId next_correlation_ = 1;
};

// The time base of the GPU breakdown tests (gpu_breakdown_test.cpp and the viewer's
// gpu_analysis_test.cpp): their times are µs after 1 ms (the file stores ns).
namespace breakdown_time {
constexpr trace::TimeNs kBase = 1'000'000;
// The file's time of `micros` µs after the base.
constexpr trace::TimeNs us(double micros) {
    return kBase + static_cast<trace::TimeNs>(micros * 1000);
}
// A span of `micros` µs in ns.
constexpr trace::TimeNs ns_of_us(double micros) {
    return static_cast<trace::TimeNs>(micros * 1000);
}
}  // namespace breakdown_time

// The device-0 work that the GPU breakdown tests work their answers out on, launched
// from `thread`, and the profiler steps; times in µs of breakdown_time:
//   stream s7:  gemm [0,100) launch [-30,-20); gemm [110,200) launch [-10,-5);
//               relu [300,400) launch [250,260); memset [450,460) launch [270,280)
//   stream s13: NCCL all-reduce [150,350) launch [100,110); NCCL all-reduce [600,700),
//               no launching call
//   steps:      ProfilerStep#1 [-50,300), ProfilerStep#2 [300,800) (domain "torch")
inline void add_breakdown_work(TraceBuilder& b, trace::ThreadId thread, trace::StreamId s7, trace::StreamId s13) {
    using breakdown_time::us;
    auto launch = [&](const char* api, double start, double end) { return b.call(thread, api, us(start), us(end)); };
    auto kernel = [&](trace::StreamId stream, const char* name, double start, double end, trace::CorrelationId c) {
        b.kernel(stream, name, us(start), us(end), c);
    };
    kernel(s7, "gemm", 0, 100, launch("cudaLaunchKernel", -30, -20));
    kernel(s7, "gemm", 110, 200, launch("cudaLaunchKernel", -10, -5));
    kernel(s7, "relu", 300, 400, launch("cudaLaunchKernel", 250, 260));
    b.memset(s7, us(450), us(460), launch("cudaMemsetAsync", 270, 280));
    kernel(s13, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 150, 350,
           launch("cudaLaunchKernel", 100, 110));
    kernel(s13, "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 600, 700, 0);
    b.range(thread, "torch", "ProfilerStep#1", us(-50), us(300));
    b.range(thread, "torch", "ProfilerStep#2", us(300), us(800));
}

}  // namespace ember::testing
