// cpu_profile.h: where the CPU time went, from the sampled call stacks of a trace
// (`ember train --profile` and `ember record --sample-cpu` take them).
//
// Each stack sample stands for one sampling period of the process's CPU time (the
// collector stores the period as run_metadata "cpu_sample_period_ns"; without it a
// sample counts as one unit and times are not shown). From the samples:
//   functions   per function: self = samples with it as the innermost frame, total =
//               samples with it anywhere on the stack (counted once per sample);
//               unresolved addresses are grouped by the module they belong to
//   by range    each sample is charged to the innermost NVTX push/pop range open on
//               its thread at that instant ("step > forward"), or "(no range)"
//   threads     samples per thread
//   lines       per Python line ("file:line", what line_profiler shows, with no
//               decorators): self = samples whose innermost Python frame is on it,
//               total = samples with it anywhere on the stack
//   lines by range  self samples per (innermost NVTX range, Python line), when the
//               file has ranges (a step's time per line; PyTorch's numbered steps,
//               "ProfilerStep#12", count as one "ProfilerStep#*")
//   GPU waits   a sample taken while its thread was inside a synchronizing CUDA call
//               (cudaStreamSynchronize, a copy to the host, `.item()`: python_gpu.h) is
//               waiting on the GPU, not running its code: its self time goes to the
//               frame "[waiting on GPU]" (its frames keep their total), it is no line's
//               self time, and gpu_waits charges it to the GPU work that ran during the
//               wait, by overlap; the flamegraph ends its stack in "[waiting on GPU:
//               <kernel>]" frames weighted the same way
// Samples of a thread that was not running (the Python sampler reads sleeping and
// blocked threads too, flagged idle) are left out unless `include_idle`: then each
// stands for one period of the thread's wall time, not of CPU time.
// The CPU flamegraph (`ember export --stacks cpu`) is cpu_stack_tree().
#pragma once

#include "profiler/analysis/stack_tree.h"
#include "profiler/store/reader.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ember::analysis {

struct CpuFunctionRow {
    std::string function;  // demangled, or "[module]" for unresolved addresses
    std::string module;
    std::int64_t self_samples = 0;
    std::int64_t total_samples = 0;
};

struct CpuRangeRow {
    std::string range_path;  // "step > forward", "(no range)"
    std::int64_t samples = 0;
};

struct CpuLineRow {
    std::string location;  // "file:line"
    std::string function;  // the function the line is in ("Worker.run")
    std::int64_t self_samples = 0;
    std::int64_t total_samples = 0;
};

struct CpuRangeLineRow {
    std::string range_path;
    std::string location;
    std::string function;
    std::int64_t samples = 0;  // with this line as the innermost Python frame, inside the range
};

// CPU samples inside GPU waits, per waiting line and the GPU work waited for.
struct CpuGpuWaitRow {
    std::string location;  // the sample's call site (python_gpu.h call_site_of): "file:line"
    std::string function;
    std::string waited_for;  // a kernel, "[CUDA memcpy DtoH]", or "(no GPU work recorded)"
    double samples = 0;      // each sample split over the work by overlap
};

struct CpuThreadRow {
    trace::ThreadId thread_id = 0;
    std::int64_t tid = 0;
    std::string name;
    std::int64_t samples = 0;
};

struct CpuProfile {
    std::int64_t samples = 0;
    trace::TimeNs period_ns = 0;            // 0 when the file does not say
    std::vector<CpuFunctionRow> functions;  // by self samples, most first
    // Most first. A sample is charged to the innermost range open on its thread; one on
    // an OpenMP team thread without ranges of its own (stack through libgomp/libomp/
    // libiomp5), to the range open then on its process's thread with the most ranges.
    std::vector<CpuRangeRow> by_range;
    std::vector<CpuThreadRow> threads;  // most first; threads of the file never sampled last, with 0
    std::vector<CpuLineRow> lines;      // Python lines by self samples, most first; empty without Python frames
    std::vector<CpuRangeLineRow> lines_by_range;  // by range (most samples first), then samples; empty without ranges
    std::int64_t gpu_wait_samples = 0;            // samples inside a GPU wait
    std::vector<CpuGpuWaitRow> gpu_waits;         // most samples first; empty without waits
    bool include_idle = false;
    trace::TimeNs cpu_ns(std::int64_t sample_count) const { return sample_count * period_ns; }
};

CpuProfile cpu_profile(const store::TraceReader& reader, bool include_idle = false);

// A sampled frame's name in every CPU table: the demangled function without its
// parameter lists ("f::{lambda#1}::operator()"), "[module]" for an unresolved address
// of a module, "[JIT-generated code ...]" for one in no module.
std::string cpu_frame_name(const trace::FrameInfo& frame);

// The period each sample stands for (run_metadata "cpu_sample_period_ns"); 0 when the
// file does not say.
trace::TimeNs cpu_sample_period_ns(const store::TraceReader& reader);

// Whether a sample is counted: a thread sampled while it was not running only with
// `include_idle`.
bool counts_as_cpu_time(const trace::StackSample& sample, bool include_idle);

// Thread name, then the sampled frames outermost first; weight = CPU ns per sample
// (1 per sample when the period is unknown).
StackTree cpu_stack_tree(const store::TraceReader& reader, bool include_idle = false);

}  // namespace ember::analysis
