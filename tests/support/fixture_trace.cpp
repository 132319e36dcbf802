// fixture_trace.cpp: the fixture trace. Times in ns; the run spans [1000, 6000).
//
// Thread 1 "main" (tid 100), domain "ember":
//   step            [1000,3000)  depth 0      step            [3000,5000)  depth 0
//     forward       [1100,1600)  depth 1        dataloader/wait [3000,3400) depth 1
//     backward      [1600,2400)  depth 1        forward       [3400,3900)  depth 1
//     dataloader/wait [2400,2600) depth 1       allreduce/wait [4500,4800) depth 1
//   epoch (start/end range) [900,5100)
// Thread 2 "loader" (tid 101): dataloader/load [1000,1500) depth 0
//
// API calls on thread 1 and their GPU work (device 0, streams 1 "default", 2 "copy"):
//   corr 1  cudaLaunchKernel      [1200,1210)  gemm  stream 1 [1300,1400)  100 ns
//   corr 2  cudaLaunchKernel      [1700,1710)  gemm  stream 1 [1800,2000)  200 ns
//   corr 3  cudaLaunchKernel      [3500,3510)  gemm  stream 1 [3600,3900)  300 ns
//   corr 4  cudaLaunchKernel      [3520,3530)  relu  stream 2 [3700,3750)   50 ns
//   corr 5  cudaMemcpyAsync       [1150,1160)  HtoD pinned 1000 B stream 2 [1150,1250)
//   corr 6  cudaMemcpy            [2450,2550)  HtoD pageable 2000 B stream 1 [2460,2660)
//   corr 7  cudaMemcpy            [4000,4100)  DtoH pinned 4096 B stream 1 [4010,4090)
//   corr 8  cudaMemsetAsync       [4200,4205)  memset 512 B stream 1 [4300,4350)
//   corr 9  cudaStreamSynchronize [4350,4400)  sync stream 1 [4350,4400)
//   corr 10 cudaLaunchKernel      [5200,5210)  relu  stream 1 [5300,5360)   60 ns
//   (none)                                     nccl_allreduce stream 2 [4600,4700) 100 ns
// Counter "gpu utilization" (%): 50 at 1000, 75 at 2000. Mark "epoch done" at 5050.
#include "tests/support/fixture_trace.h"

#include "profiler/store/writer.h"
#include "tests/support/store.h"
#include "tests/support/temp_path.h"

#include <atomic>
#include <vector>

namespace ember::testing {

using namespace ember::trace;

std::string temporary_path(const std::string& stem, const std::string& extension) {
    static std::atomic<int> counter{0};  // each call its own file, even for one stem
    return test_support::unique_temp_path(stem + "-" + std::to_string(counter++), extension).string();
}

void write_fixture_trace(const std::string& path, FixtureOptions options) {
    RunInfo run;
    run.command_line = "fixture";
    run.host = "fixture-host";
    run.pid = 100;
    run.clock_name = "synthetic";
    run.start_ns = 1000;
    store::TraceWriter writer(path, run, store::testing::quiet_options());

    writer.register_process({100, "fixture"});
    ThreadId main_thread = writer.register_thread({0, 100, 100, "main"});
    ThreadId loader_thread = writer.register_thread({0, 100, 101, "loader"});
    writer.register_device({0, "Fixture GPU", "GPU-fixture", 9, 0, 132, 80ll << 30, 3.35e12});
    StreamId default_stream = writer.register_stream({0, 0, 1, 7, 0, "default"});
    StreamId copy_stream = writer.register_stream({0, 0, 1, 13, 0, "copy"});
    CounterId utilization = writer.register_counter({0, "gpu utilization", "%", 0});

    StringId ember = writer.intern("ember");
    auto range = [&](ThreadId thread, const char* name, TimeNs start, TimeNs end, int depth, RangeId parent,
                     std::uint32_t category) {
        RangeEvent event;
        event.range_id = writer.next_range_id();
        event.start_ns = start;
        event.end_ns = end;
        event.thread_id = thread;
        event.domain_id = ember;
        event.name_id = writer.intern(name);
        event.category = category;
        event.depth = depth;
        event.parent_range_id = parent;
        writer.record_range(event);
        return event.range_id;
    };
    RangeId step0 = range(main_thread, "step", 1000, 3000, 0, 0, 1);
    range(main_thread, "forward", 1100, 1600, 1, step0, 2);
    range(main_thread, "backward", 1600, 2400, 1, step0, 2);
    range(main_thread, "dataloader/wait", 2400, 2600, 1, step0, 3);
    RangeId step1 = range(main_thread, "step", 3000, 5000, 0, 0, 1);
    range(main_thread, "dataloader/wait", 3000, 3400, 1, step1, 3);
    range(main_thread, "forward", 3400, 3900, 1, step1, 2);
    range(main_thread, "allreduce/wait", 4500, 4800, 1, step1, 4);
    range(main_thread, "epoch", 900, 5100, -1, 0, 0);
    range(loader_thread, "dataloader/load", 1000, 1500, 0, 0, 3);

    auto api = [&](const char* name, TimeNs start, TimeNs end, CorrelationId correlation) {
        writer.record_api_call({start, end, main_thread, correlation, writer.intern(name), 0});
    };
    auto kernel = [&](const char* name, StreamId stream, TimeNs start, TimeNs end, CorrelationId correlation) {
        KernelEvent event;
        event.start_ns = start;
        event.end_ns = end;
        event.device_id = 0;
        event.stream_id = stream;
        event.correlation_id = correlation;
        event.name_id = writer.intern(name);
        event.launch = LaunchConfig{128, 1, 1, 256, 1, 1, 32, 0, 0};
        writer.record_kernel(event);
    };
    auto memcpy = [&](StreamId stream, TimeNs start, TimeNs end, CorrelationId correlation, MemcpyDirection direction,
                      std::uint64_t bytes, MemoryKind source, MemoryKind destination) {
        writer.record_memcpy({start, end, 0, stream, correlation, direction, bytes, source, destination, kNoDevice});
    };

    api("cudaLaunchKernel", 1200, 1210, 1);
    kernel("gemm", default_stream, 1300, 1400, 1);
    api("cudaLaunchKernel", 1700, 1710, 2);
    kernel("gemm", default_stream, 1800, 2000, 2);
    api("cudaLaunchKernel", 3500, 3510, 3);
    kernel("gemm", default_stream, 3600, 3900, 3);
    api("cudaLaunchKernel", 3520, 3530, 4);
    kernel("relu", copy_stream, 3700, 3750, 4);
    api("cudaMemcpyAsync", 1150, 1160, 5);
    memcpy(copy_stream, 1150, 1250, 5, MemcpyDirection::host_to_device, 1000, MemoryKind::pinned, MemoryKind::device);
    api("cudaMemcpy", 2450, 2550, 6);
    memcpy(default_stream, 2460, 2660, 6, MemcpyDirection::host_to_device, 2000, MemoryKind::pageable,
           MemoryKind::device);
    api("cudaMemcpy", 4000, 4100, 7);
    memcpy(default_stream, 4010, 4090, 7, MemcpyDirection::device_to_host, 4096, MemoryKind::device,
           MemoryKind::pinned);
    api("cudaMemsetAsync", 4200, 4205, 8);
    writer.record_memset({4300, 4350, 0, default_stream, 8, 512, 0, MemoryKind::device});
    api("cudaStreamSynchronize", 4350, 4400, 9);
    writer.record_sync({4350, 4400, 0, default_stream, 9, SyncKind::stream_synchronize, 0});
    api("cudaLaunchKernel", 5200, 5210, 10);
    kernel("relu", default_stream, 5300, 5360, 10);
    kernel("nccl_allreduce", copy_stream, 4600, 4700, 0);

    writer.record_counter({utilization, 1000, 50.0});
    writer.record_counter({utilization, 2000, 75.0});
    MarkEvent mark;
    mark.time_ns = 5050;
    mark.thread_id = main_thread;
    mark.domain_id = ember;
    mark.name_id = writer.intern("epoch done");
    writer.record_mark(mark);

    if (options.with_cpu_samples) {
        writer.set_metadata("cpu_sample_period_ns", "100");
        FrameId main_frame = writer.intern_frame("main", "/bin/fixture", 0x1000);
        FrameId train = writer.intern_frame("train_step(int)", "/bin/fixture", 0x1100);
        FrameId gemm = writer.intern_frame("gemm_cpu(float const*, float*)", "/bin/fixture", 0x1200);
        FrameId blas = writer.intern_frame("0x7f0000001000", "/usr/lib/libopenblas.so.0", 0x7f0000001000);
        FrameId forward = writer.intern_frame("forward", "model.py", 0, 12);
        FrameId sync = writer.intern_frame("cudaStreamSynchronize", "/usr/lib/libcudart.so.12", 0x7f0000002000);
        FrameId decode = writer.intern_frame("decode_png(unsigned char const*)", "/bin/fixture", 0x1300);
        auto sample = [&](ThreadId thread, TimeNs at, std::vector<FrameId> frames, bool idle = false) {
            StackSample s;
            s.time_ns = at;
            s.thread_id = thread;
            s.stack_id = writer.intern_stack(frames);
            s.idle = idle;
            writer.record_stack_sample(s);
        };
        for (TimeNs at : {1200, 1300, 1400}) sample(main_thread, at, {main_frame, train, gemm, blas});
        for (TimeNs at : {1700, 1800}) sample(main_thread, at, {main_frame, train, forward, gemm});
        sample(main_thread, 4360, {main_frame, train, sync});
        sample(main_thread, 2000, {main_frame, train}, true);
        for (TimeNs at : {1100, 1200}) sample(loader_thread, at, {decode});
    }
    if (options.with_dropped_records) {
        writer.record_dropped({2000, writer.intern("cupti"), 0, 10});
        writer.record_dropped({4000, writer.intern("writer buffer full"), main_thread, 2});
    }
    writer.set_end_time(6000);
    writer.close();
}

}  // namespace ember::testing
