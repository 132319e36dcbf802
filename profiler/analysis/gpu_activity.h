// gpu_activity.h: where the wall time of each training step goes, and how busy
// each GPU was over the run.
//
// Definitions (docs/stats.md repeats them for users):
//   step window        [start, end) of an NVTX range named "step" (any domain);
//   GPU compute        length of the union of the intervals of compute kernels (every
//                      kernel but communication.h's communication kernels) on the
//                      device, clipped to the window (streams overlap; the union
//                      counts overlapping time once);
//   communication      the same for communication kernels (NCCL, RCCL, ...);
//   copies             union of memcpy and memset intervals, clipped;
//   dataloader wait    sum of "dataloader/wait" ranges on the step's thread,
//                      clipped to the window;
//   all-reduce wait    the same for "allreduce/wait";
//   GPU idle           wall - union(kernels, memcpys, memsets) on the device;
//   job traces         with two or more processes named "rank R" (`ember merge`), a
//                      step belongs to its thread's rank and has rows only for that
//                      rank's devices (named "rank R: ..."); indices count per rank.
//   busy fraction      union of all GPU activity / the run window, where the run
//                      window is [run start, run end] of the file, or from the
//                      first to the last GPU activity when the file has no end;
//   idle gap           time between two consecutive intervals of that union.
#pragma once

#include "profiler/store/reader.h"

#include <cstdint>
#include <vector>

namespace ember::analysis {

// One step on one device (a step has one row per device with GPU activity in
// the file, or one row with device -1 when no device has any).
struct StepBreakdown {
    std::int64_t step_index = 0;  // 0, 1, ... in start order (per rank in a job trace)
    // In a job trace of several ranks (`ember merge`): the rank whose thread ran the
    // step, whose devices ("rank R: ...") alone are counted for it; -1 otherwise.
    std::int32_t rank = -1;
    trace::DeviceId device_id = trace::kNoDevice;
    trace::TimeNs start_ns = 0;
    trace::TimeNs wall_ns = 0;
    trace::TimeNs gpu_compute_ns = 0;
    trace::TimeNs communication_ns = 0;
    trace::TimeNs copies_ns = 0;
    trace::TimeNs dataloader_wait_ns = 0;
    trace::TimeNs allreduce_wait_ns = 0;
    trace::TimeNs gpu_idle_ns = 0;
    // Its rank's waits in the collectives it arrived at in this step (collectives.h);
    // filled by the stats report from the job analysis, 0 without one.
    trace::TimeNs collective_wait_ns = 0;
};

struct IdleGap {
    trace::DeviceId device_id = 0;
    trace::TimeNs start_ns = 0;
    trace::TimeNs end_ns = 0;
};

struct DeviceBusy {
    trace::DeviceId device_id = 0;
    trace::TimeNs window_start_ns = 0;
    trace::TimeNs window_end_ns = 0;
    trace::TimeNs busy_ns = 0;
    double busy_fraction = 0.0;  // busy_ns / window length
    std::int64_t idle_gap_count = 0;
};

struct GpuActivity {
    std::vector<StepBreakdown> steps;   // by step, then device
    std::vector<DeviceBusy> devices;    // by device id
    std::vector<IdleGap> longest_gaps;  // longest first (ties: earlier first), all devices
};

// `gap_count`: how many of the longest idle gaps to keep.
GpuActivity gpu_activity(const store::TraceReader& reader, std::size_t gap_count);

}  // namespace ember::analysis
