// fixture_trace.h: small, fully known traces written with TraceWriter for the viewer
// tests: one process with a main thread (step > forward/backward ranges, CUDA API
// calls) and a loader thread (dataloader waits), one GPU with a compute stream
// (kernels) and a copy stream (pinned HtoD copies), two counters and CPU samples.
// With `python_stacks`, Python samples every 50 us as well (python_sample_stacks()).
#pragma once

#include "profiler/store/writer.h"
#include "tests/support/store.h"
#include "tests/support/temp_path.h"

#include <cstdint>
#include <filesystem>
#include <string>

namespace ember::viewer::testing {

struct FixtureShape {
    int steps = 4;
    trace::TimeNs step_ns = 1'000'000;  // each step lasts 1 ms
    int kernels_per_step = 6;           // forward: half, backward: half
    trace::TimeNs kernel_ns = 50'000;
    double slowdown = 1.0;                    // scales backward kernels (for difference graphs)
    trace::TimeNs origin_ns = 1'000'000'000;  // the first step's start
    bool python_stacks = false;               // add python_sample_stacks() below
};

// The Python samples of a fixture with `python_stacks`, every kPythonSampleNs from 5 us
// into each step (after the native samples), 20 per step:
//   main      "<module> (train.py:40)" > "train (train.py:30)" > "forward (model.py:12)"
//             for the first 10 samples of a step, "backward (model.py:20)" for the next 10;
//   loader    "worker_loop (loader.py:8)" > "get (queue.py:171)", idle, except while it
//             waits in the dataloader/wait range (100..300 us into the step), where it
//             runs "decode (loader.py:15)" (samples 2..5 of the step: active);
//   pin_memory (thread 4244, no other events) "pin_loop (pin.py:3)", idle.
inline constexpr trace::TimeNs kPythonSampleNs = 50'000;
inline constexpr int kPythonSamplesPerStep = 20;

// Totals the tests compare against.
struct FixtureTotals {
    std::int64_t ranges = 0;
    trace::TimeNs range_depth0_ns = 0;  // sum of outermost range durations (all threads)
    std::int64_t kernels = 0;
    trace::TimeNs kernel_ns = 0;
    std::int64_t copies = 0;
    std::uint64_t copy_bytes = 0;
    std::int64_t api_calls = 0;
    std::int64_t counter_samples = 0;
    std::int64_t stack_samples = 0;
    std::int64_t idle_samples = 0;
    std::int64_t events = 0;  // all events drawn in lanes (not stack samples)
};

inline std::string temporary_trace_path(const std::string& name) {
    return test_support::unique_temp_path("ember_viewer_" + name, ".db").string();
}

inline FixtureTotals write_fixture_trace(const std::string& path, const FixtureShape& shape = {}) {
    using namespace ember::trace;
    FixtureTotals totals;
    RunInfo run;
    run.command_line = "fixture";
    run.pid = 4242;
    store::TraceWriter writer(path, run, store::testing::quiet_options());
    writer.register_process({4242, "trainer"});
    const ThreadId main_thread = writer.register_thread({0, 4242, 4242, "main"});
    const ThreadId loader_thread = writer.register_thread({0, 4242, 4243, "loader"});
    writer.register_device({0, "Fixture GPU", "GPU-0", 9, 0, 132, 80ll << 30, 3.3e12});
    const StreamId compute = writer.register_stream({0, 0, 1, 7, 0, "compute"});
    const StreamId copy = writer.register_stream({0, 0, 1, 8, 0, "copy"});
    const CounterId loss = writer.register_counter({0, "loss", "", kNoDevice});
    const CounterId utilization = writer.register_counter({0, "gpu utilization", "%", 0});
    const StringId step_name = writer.intern("step");
    const StringId forward_name = writer.intern("forward");
    const StringId backward_name = writer.intern("backward");
    const StringId wait_name = writer.intern("dataloader/wait");
    const StringId launch_name = writer.intern("cudaLaunchKernel");
    const StringId copy_api_name = writer.intern("cudaMemcpyAsync");
    const StringId gemm_name = writer.intern("sgemm_128x64");
    const StringId relu_name = writer.intern("relu_kernel");
    const StringId domain = writer.intern("ember");
    const FrameId frame_main = writer.intern_frame("main", "fixture", 0x1000);
    const FrameId frame_train = writer.intern_frame("train_step", "fixture", 0x2000);
    const FrameId frame_decode = writer.intern_frame("decode_png", "fixture", 0x3000);
    const FrameId train_stack_frames[] = {frame_main, frame_train};
    const FrameId decode_stack_frames[] = {frame_main, frame_decode};
    const StackId train_stack = writer.intern_stack(train_stack_frames);
    const StackId decode_stack = writer.intern_stack(decode_stack_frames);
    // Python stacks (line >= 0: the frame is a Python one; module is co_filename).
    const FrameId py_module = writer.intern_frame("<module>", "train.py", 0, 40);
    const FrameId py_train = writer.intern_frame("train", "train.py", 0, 30);
    const FrameId py_forward = writer.intern_frame("forward", "model.py", 0, 12);
    const FrameId py_backward = writer.intern_frame("backward", "model.py", 0, 20);
    const FrameId py_worker = writer.intern_frame("worker_loop", "loader.py", 0, 8);
    const FrameId py_get = writer.intern_frame("get", "queue.py", 0, 171);
    const FrameId py_decode = writer.intern_frame("decode", "loader.py", 0, 15);
    const FrameId py_pin = writer.intern_frame("pin_loop", "pin.py", 0, 3);
    const FrameId forward_frames[] = {py_module, py_train, py_forward};
    const FrameId backward_frames[] = {py_module, py_train, py_backward};
    const FrameId get_frames[] = {py_worker, py_get};
    const FrameId decode_frames[] = {py_worker, py_decode};
    const FrameId pin_frames[] = {py_pin};
    const StackId forward_stack = writer.intern_stack(forward_frames);
    const StackId backward_stack = writer.intern_stack(backward_frames);
    const StackId get_stack = writer.intern_stack(get_frames);
    const StackId decode_stack_py = writer.intern_stack(decode_frames);
    const StackId pin_stack = writer.intern_stack(pin_frames);
    const ThreadId pin_thread = shape.python_stacks ? writer.register_thread({0, 4242, 4244, "pin_memory"}) : 0;

    CorrelationId correlation = 1;
    const TimeNs origin = shape.origin_ns;
    for (int step = 0; step < shape.steps; ++step) {
        const TimeNs step_start = origin + step * shape.step_ns;
        const TimeNs step_end = step_start + shape.step_ns - 10'000;
        const RangeId step_id = writer.next_range_id();
        writer.record_range({step_id, step_start, step_end, main_thread, domain, step_name, 1, 0, 0, 0, {}});
        totals.ranges += 1;
        totals.range_depth0_ns += step_end - step_start;
        const TimeNs half = (step_end - step_start) / 2;
        const TimeNs phase_starts[2] = {step_start + 1000, step_start + half};
        const StringId phase_names[2] = {forward_name, backward_name};
        for (int phase = 0; phase < 2; ++phase) {
            const TimeNs phase_start = phase_starts[phase];
            const TimeNs phase_end = phase_start + half - 2000;
            writer.record_range({writer.next_range_id(),
                                 phase_start,
                                 phase_end,
                                 main_thread,
                                 domain,
                                 phase_names[phase],
                                 2,
                                 0,
                                 1,
                                 step_id,
                                 {}});
            totals.ranges += 1;
            const int kernels = shape.kernels_per_step / 2;
            for (int k = 0; k < kernels; ++k) {
                const TimeNs api_start = phase_start + 100 + k * 20'000;
                writer.record_api_call({api_start, api_start + 5'000, main_thread, correlation, launch_name, 0});
                totals.api_calls += 1;
                const TimeNs duration =
                    phase == 1 ? static_cast<TimeNs>(shape.kernel_ns * shape.slowdown) : shape.kernel_ns;
                const TimeNs kernel_start = phase_start + 10'000 + k * 120'000;
                KernelEvent kernel;
                kernel.start_ns = kernel_start;
                kernel.end_ns = kernel_start + duration;
                kernel.stream_id = compute;
                kernel.correlation_id = correlation;
                kernel.name_id = k % 2 == 0 ? gemm_name : relu_name;
                kernel.launch = {128, 1, 1, 256, 1, 1, 64, 4096, 0};
                writer.record_kernel(kernel);
                totals.kernels += 1;
                totals.kernel_ns += duration;
                ++correlation;
            }
        }
        // One pinned host-to-device copy per step.
        writer.record_api_call({step_start + 500, step_start + 900, main_thread, correlation, copy_api_name, 0});
        totals.api_calls += 1;
        MemcpyEvent memcpy_event;
        memcpy_event.start_ns = step_start + 2'000;
        memcpy_event.end_ns = step_start + 22'000;
        memcpy_event.stream_id = copy;
        memcpy_event.correlation_id = correlation++;
        memcpy_event.direction = MemcpyDirection::host_to_device;
        memcpy_event.bytes = 1 << 20;
        memcpy_event.source_kind = MemoryKind::pinned;
        memcpy_event.destination_kind = MemoryKind::device;
        writer.record_memcpy(memcpy_event);
        totals.copies += 1;
        totals.copy_bytes += memcpy_event.bytes;
        // The loader waits a little in every step.
        writer.record_range({writer.next_range_id(),
                             step_start + 100'000,
                             step_start + 300'000,
                             loader_thread,
                             domain,
                             wait_name,
                             3,
                             0,
                             0,
                             0,
                             {}});
        totals.ranges += 1;
        totals.range_depth0_ns += 200'000;
        writer.record_counter({loss, step_end, 2.0 / (step + 1)});
        writer.record_counter({utilization, step_start, 50.0 + step});
        totals.counter_samples += 2;
        writer.record_stack_sample({step_start + 1234, main_thread, train_stack});
        writer.record_stack_sample({step_start + 2345, main_thread, train_stack});
        writer.record_stack_sample({step_start + 3456, loader_thread, decode_stack});
        totals.stack_samples += 3;
        for (int k = 0; shape.python_stacks && k < kPythonSamplesPerStep; ++k) {
            const TimeNs time = step_start + 5'000 + k * kPythonSampleNs;
            const bool decoding = time >= step_start + 100'000 && time < step_start + 300'000;
            writer.record_stack_sample(
                {time, main_thread, k < kPythonSamplesPerStep / 2 ? forward_stack : backward_stack});
            writer.record_stack_sample({time, loader_thread, decoding ? decode_stack_py : get_stack, !decoding});
            writer.record_stack_sample({time, pin_thread, pin_stack, true});
            totals.stack_samples += 3;
            totals.idle_samples += decoding ? 1 : 2;
        }
    }
    writer.close();
    totals.events = totals.ranges + totals.kernels + totals.copies + totals.api_calls + totals.counter_samples;
    return totals;
}

}  // namespace ember::viewer::testing
