// advice.cpp: the advice rules.
#include "profiler/analysis/advice.h"

#include <fmt/format.h>

#include <map>

namespace ember::analysis {

namespace {

double percent(std::int64_t part, std::int64_t whole) {
    return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

}  // namespace

std::vector<AdviceItem> advise(const GpuActivity& activity, const std::vector<MemoryOperationRow>& memory,
                               std::uint64_t dropped_records) {
    std::vector<AdviceItem> items;

    // Host-side waits are per step (the same on every device row of a step).
    std::int64_t wall = 0, dataloader = 0, allreduce = 0;
    std::map<trace::DeviceId, std::int64_t> idle, device_wall;
    std::int64_t last_step = -1;
    for (const StepBreakdown& step : activity.steps) {
        if (step.step_index != last_step) {
            wall += step.wall_ns;
            dataloader += step.dataloader_wait_ns;
            allreduce += step.allreduce_wait_ns;
            last_step = step.step_index;
        }
        idle[step.device_id] += step.gpu_idle_ns;
        device_wall[step.device_id] += step.wall_ns;
    }

    if (dropped_records > 0) {
        items.push_back({"dropped_records", fmt::format("{} records were dropped while recording", dropped_records),
                         "every number undercounts; record a shorter run or give the collector larger buffers"});
    }
    if (wall > 0 && percent(dataloader, wall) >= kDataloaderWaitThresholdPercent) {
        items.push_back({"dataloader_wait",
                         fmt::format("steps wait for data {:.1f}% of their wall time ({} of {} ns)", percent(dataloader, wall),
                                     dataloader, wall),
                         "use more data loader workers, pinned host memory for batches, and prefetch the next batch"});
    }
    if (wall > 0 && percent(allreduce, wall) >= kAllreduceWaitThresholdPercent) {
        items.push_back({"allreduce_wait",
                         fmt::format("steps wait for all-reduce {:.1f}% of their wall time ({} of {} ns)",
                                     percent(allreduce, wall), allreduce, wall),
                         "overlap gradient all-reduce with backward (bucketing) or send fewer bytes (compression, "
                         "larger batches per step)"});
    }
    std::int64_t pageable_count = 0, pageable_bytes = 0;
    for (const MemoryOperationRow& row : memory) {
        if ((row.operation == "HtoD" || row.operation == "DtoH") && row.memory == "pageable") {
            pageable_count += row.count;
            pageable_bytes += row.total_bytes;
        }
    }
    if (pageable_count > 0) {
        items.push_back({"pageable_copies",
                         fmt::format("{} host-device copies ({} bytes) use pageable host memory", pageable_count,
                                     pageable_bytes),
                         "copy from pinned (page-locked) host memory: the copy engine reads it directly and the copy "
                         "can run asynchronously"});
    }
    for (const auto& [device, idle_ns] : idle) {
        if (device == trace::kNoDevice) continue;
        double idle_percent = percent(idle_ns, device_wall[device]);
        if (idle_percent >= kGpuIdleThresholdPercent) {
            items.push_back({"gpu_idle",
                             fmt::format("GPU {} is idle {:.1f}% of step wall time ({} of {} ns)", device, idle_percent,
                                         idle_ns, device_wall[device]),
                             "the GPU waits for the host: look at the dataloader wait, CUDA API time and "
                             "synchronizations inside steps; larger batches or CUDA graphs cut launch overhead"});
        }
    }
    if (activity.steps.empty()) {
        for (const DeviceBusy& device : activity.devices) {
            double busy_percent = 100.0 * device.busy_fraction;
            if (busy_percent < kLowBusyThresholdPercent) {
                items.push_back({"gpu_idle", fmt::format("GPU {} is busy only {:.1f}% of the run", device.device_id, busy_percent),
                                 "the GPU waits for the host most of the time: see the longest idle gaps"});
            }
        }
    }
    return items;
}

}  // namespace ember::analysis
