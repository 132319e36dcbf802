// python_gpu.h: the link between a Python program and its GPU work (`ember stats
// --report python_gpu`, and the GPU waits of the CPU profile).
//
// Call sites. ember's collector gives every CUDA API call of a CPython process the
// Python stack that made it (api_calls.stack_id, trace schema 3). A kernel, copy or
// memset reaches that stack through its correlation id (GPU work -> API call ->
// stack). Its Python call site is the innermost *user* frame of the stack: the
// innermost Python frame whose file is not the interpreter's or an installed
// package's (python_user_frame), else the innermost Python frame. GPU time per call
// site is the summed duration of the work launched from it.
//
// GPU waits. A synchronizing API call (waits_for_gpu) holds its thread until GPU work
// finishes: cudaStreamSynchronize, a synchronous copy to the host, PyTorch's `.item()`
// (a copy, then cudaStreamSynchronize). The work waited for is the GPU work that ran
// while the call waited: on the stream the call names (its synchronization record or
// its copy, when the file has one), else on its device, else on every device; each
// piece weighted by its overlap with the call ([API start, API end]). CPU samples of
// the waiting thread taken inside the call are waiting on that work, not running the
// Python line on top of their stack; the CPU profile shows them so (cpu_profile.h).
// Threads are matched by OS thread (pid, tid). `ember merge` of the collector's file
// and the Python sampler's (the same process) moves the second copy's pid by 10^9; a
// thread with no waits of its own is therefore matched to the one thread with the same
// tid and pid modulo 10^9 that has waits, so the sampler's samples meet the collector's
// API calls. Two such threads (the same pid and tid on two hosts, both waiting) match
// neither.
#pragma once

#include "profiler/store/reader.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace ember::analysis {

// The one list of API calls that block the host until GPU work is done (runtime and
// driver names; a "_v2", "_ptds" or "_ptsz" suffix is ignored): device, stream,
// event and context synchronization, and the copies that return only when done
// (cudaMemcpy, cudaMemcpy2D/3D, cudaMemcpyFromSymbol, cudaMemcpyPeer, cuMemcpyDtoH,
// cuMemcpyHtoD, cuMemcpy, ...). An async copy to pageable host memory waits too; that
// is told from its copy record (waits_for_gpu(name, copy)).
bool waits_for_gpu(std::string_view api_name);
// The same, with the copy the call made: an async copy from the device into pageable
// host memory is staged by the driver and returns only when done.
bool waits_for_gpu(std::string_view api_name, const trace::MemcpyEvent* copy);

// Whether a Python frame's file belongs to the program rather than to Python or an
// installed package: not under site-packages or dist-packages, not the standard
// library (".../lib/pythonX.Y/..."), not "<frozen ...>" or another "<...>" file.
bool python_user_frame(const trace::FrameInfo& frame);

// "(no Python stack)" for a call without one; else the call site: "file:line" and
// the function of the innermost user frame (python_user_frame), else of the
// innermost Python frame, else of the innermost frame.
struct CallSite {
    std::string location;
    std::string function;
    bool operator<(const CallSite& other) const {
        return std::tie(location, function) < std::tie(other.location, other.function);
    }
};
inline constexpr const char* kNoPythonStack = "(no Python stack)";
CallSite call_site_of(const std::vector<trace::FrameInfo>& frames_outermost_first);

struct GpuWorkShare {
    std::string name;  // a kernel, "[CUDA memcpy DtoH]", "[CUDA memset]"
    double share = 0;  // of the wait; a wait's shares add up to 1
};
inline constexpr const char* kNoGpuWorkRecorded = "(no GPU work recorded)";
// The CPU profile's frame for samples inside a wait; the flamegraph's names the work:
// "[waiting on GPU: <work>]" (waiting_on_gpu_frame).
inline constexpr const char* kWaitingOnGpuFrame = "[waiting on GPU]";
inline std::string waiting_on_gpu_frame(std::string_view work) {
    return "[waiting on GPU: " + std::string(work) + "]";
}

struct GpuWait {
    trace::ThreadId thread_id = 0;
    trace::TimeNs start_ns = 0;
    trace::TimeNs end_ns = 0;
    std::string api;
    trace::StackId stack_id = 0;           // the call's Python stack, 0 = unknown
    std::vector<GpuWorkShare> waited_for;  // most first; empty: no GPU work overlapped the wait
};

// Every wait of a file, by thread, to ask which (if any) a sample fell in.
class GpuWaits {
  public:
    explicit GpuWaits(const store::TraceReader& reader);
    // The wait thread `thread` (any thread of the same OS thread) was in at `time`, or null.
    const GpuWait* at(trace::ThreadId thread, trace::TimeNs time) const;
    const std::vector<GpuWait>& all() const { return waits_; }
    bool empty() const { return waits_.empty(); }

  private:
    using ThreadKey = std::pair<std::int64_t, std::int64_t>;  // (pid, tid), or (-1, thread id) when the tid is unknown
    ThreadKey key_of(trace::ThreadId thread) const;
    static ThreadKey merged_key(const ThreadKey& key);  // the pid without ember merge's 10^9 moves
    const store::TraceReader& reader_;
    std::vector<GpuWait> waits_;
    std::map<ThreadKey, std::vector<std::size_t>> by_thread_;    // indices into waits_, by start; none nested
    std::map<ThreadKey, std::vector<ThreadKey>> by_merged_key_;  // merged_key -> the keys in by_thread_
};

struct PythonGpuSiteRow {
    CallSite site;
    trace::TimeNs gpu_ns = 0;                                     // summed duration of the work launched from the site
    std::int64_t operations = 0;                                  // kernels, copies and memsets
    std::int64_t calls = 0;                                       // API calls from the site that launched any
    std::vector<std::pair<std::string, trace::TimeNs>> top_work;  // by GPU time, most first (3 at most)
};

struct PythonGpuWaitRow {
    CallSite site;           // the waiting call's
    std::string api;         // cudaStreamSynchronize, ...
    std::string waited_for;  // a GpuWorkShare::name or kNoGpuWorkRecorded
    double wait_ns = 0;      // the waits' time times the work's share
    std::int64_t waits = 0;  // calls that waited for it (any share)
};

struct PythonGpuReport {
    bool has_call_stacks = false;         // some API call of the file carries a stack
    trace::TimeNs gpu_ns = 0;             // all GPU work with a launching call
    std::vector<PythonGpuSiteRow> sites;  // by GPU time, most first
    std::vector<PythonGpuWaitRow> waits;  // by wait time, most first
};

PythonGpuReport python_gpu(const store::TraceReader& reader);

}  // namespace ember::analysis
