// gpu_work.h: the GPU work of a trace, rank by rank, as the breakdown reports see it —
// every kernel, memcpy and memset with its class (computation, communication, memory),
// its CUDA stream, and the API call that launched it — under one of four conventions.
//
// Conventions (`ember stats --like NAME`; docs/stats.md states each rule):
//   ember      every GPU event of the file, exact nanoseconds. Events with no
//              launching call are kept (and counted).
//   hta        Holistic Trace Analysis: when the rank has two or more profiler
//              steps, only GPU events whose launching call starts before the last
//              step's start are kept (the last step is incomplete); Kineto's float
//              microsecond times are rounded as HTA's parser rounds them
//              (start = ceil(ts), end = floor(ts + dur), in double arithmetic), so
//              every time is a whole microsecond. HTA takes every event with a stream
//              as GPU work: the CUDA synchronizations recorded on a stream (Kineto's
//              cuda_sync "Stream Sync", "Stream Wait Event", ...; not the context
//              syncs, which have none) are kept too, in stream_syncs, under the same
//              rules. Its names for them match none of its kernel classes (OTHER):
//              they are GPU busy time in the temporal breakdown and in no kernel type
//              or idle-time stream. Synchronizations an import made from runtime calls
//              (a Kineto trace without cuda_sync events) are not GPU records: left out.
//   tb         the TensorBoard profiler plugin: as ember (its step breakdown has its
//              own rules, step_breakdown.h).
//   tracelens  TraceLens: only GPU events linked to a launching runtime/driver call.
//
// Classes follow HTA's names: COMMUNICATION for communication kernels (communication.h:
// HTA's nccl*, hip*, hccl* and "ncclKernel", and NCCL's ncclDevKernel and mangled
// forms); MEMORY for memcpys, memsets and kernels named Memcpy*, Memset*, dma*;
// COMPUTATION for every other kernel.
#pragma once

#include "profiler/analysis/steps.h"
#include "profiler/store/reader.h"

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace ember::analysis {

enum class Convention : std::uint8_t { ember, hta, tb, tracelens };
std::optional<Convention> parse_convention(std::string_view text);  // "ember", "hta", "tb", "tracelens"
const char* convention_name(Convention convention);

enum class KernelClass : std::uint8_t { computation = 0, communication = 1, memory = 2 };
inline constexpr int kKernelClassCount = 3;
// HTA's spelling: "COMPUTATION", "COMMUNICATION", "MEMORY".
const char* kernel_class_name(KernelClass kind);
KernelClass classify_kernel(std::string_view name);

enum class GpuEventKind : std::uint8_t { kernel, memcpy, memset, sync };

inline constexpr trace::TimeNs kNoLaunch = INT64_MIN;

struct GpuEvent {
    trace::TimeNs start_ns = 0;
    trace::TimeNs end_ns = 0;
    trace::TimeNs launch_start_ns = kNoLaunch;  // the launching API call, when the file has it
    trace::TimeNs launch_end_ns = kNoLaunch;
    std::uint64_t cuda_stream = 0;  // as recorded (Kineto's stream tid, CUPTI's streamId)
    trace::CorrelationId correlation = 0;
    trace::StringId name_id = trace::kNoString;         // kernels: the kernel name
    trace::StringId launch_name_id = trace::kNoString;  // "cudaLaunchKernel", ...
    GpuEventKind kind = GpuEventKind::kernel;
    KernelClass kernel_class = KernelClass::computation;
    bool linked() const { return launch_start_ns != kNoLaunch; }
};

struct RankGpuWork {
    std::int32_t rank = 0;
    std::vector<GpuEvent> events;        // by start time
    std::vector<GpuEvent> stream_syncs;  // hta only: synchronizations on a stream, by start time
    // What the convention left out, so reports can say what they count.
    std::int64_t dropped_unlinked = 0;         // no launching call (tracelens, hta)
    std::int64_t dropped_after_last_step = 0;  // launched at or after the last step's start (hta)
    std::int64_t profiler_steps = 0;           // step ranges of the rank
};

// GPU work per rank, ordered by rank. A job trace (`ember merge`) holds one rank per
// "rank R" process with its "rank R: ..." devices; any other file is one rank (its
// RunInfo::rank). Throws TraceError on a read failure.
std::vector<RankGpuWork> gpu_work(const store::TraceReader& reader, Convention convention);

// The double Python's json module reads for a Kineto time of `ns` / 1000 µs (the
// double nearest to that decimal number): what HTA's rounding and the TensorBoard
// plugin's (--like tb) start from.
double microseconds_as_python_float(trace::TimeNs ns);

}  // namespace ember::analysis
