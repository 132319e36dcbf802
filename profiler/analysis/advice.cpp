// advice.cpp: the advice rules.
#include "profiler/analysis/advice.h"

#include "profiler/analysis/gpu_breakdown.h"
#include "common/text.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>

namespace ember::analysis {

namespace {

double percent(std::int64_t part, std::int64_t whole) {
    return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

std::string milliseconds(trace::TimeNs ns) { return fmt::format("{:.3f} ms", static_cast<double>(ns) / 1e6); }

}  // namespace

namespace {

// Op families a CPU profile's hot functions belong to, with what usually helps each.
struct CpuFamily {
    const char* name;
    std::vector<const char*> markers;  // substrings of the function name
    const char* advice;
    // Share of the sampled CPU time from which it is advised on: work a step needs is
    // worth a look when it dominates; pure overhead (reorders) sooner.
    double threshold_percent = kCpuHotspotThresholdPercent;
};

const std::vector<CpuFamily>& cpu_families() {
    static const std::vector<CpuFamily> families = {
        // Before the convolutions: oneDNN names its reorder kernels "jit_uni_reorder_kernel_f32",
        // its other JIT kernels by what they compute ("jit_avx512_common_conv_bwd_weights_kernel_f32",
        // "jit_brgemm_kernel_t").
        {"layout reordering (oneDNN)", {"reorder"},
         "oneDNN converts the activations between the framework's nchw and its own blocked layout around "
         "the convolutions: keep them channels-last (ember: switches.channels_last = true; PyTorch: "
         "model.to(memory_format=torch.channels_last) and the input likewise), which the convolutions take "
         "as they are",
         kCpuReorderThresholdPercent},
        {"convolution and GEMM",
         {"im2col", "col2im", "conv2d_", "_conv_", "conv_fwd", "conv_bwd", "brgemm", "brg_conv", "sgemm", "dgemm",
          "gemm_kernel", "gemm"},
         "convolutions and matrix products dominate: a convolution library that needs no im2col copy (oneDNN, as "
         "PyTorch uses on the CPU), channels-last layout, or more GEMM threads when the loader leaves cores idle"},
        {"BatchNorm", {"batchnorm"},
         "BatchNorm's passes over the activations are memory-bound: channels-last loops, or fewer BatchNorm layers"},
        {"pooling", {"pool2d", "maxpool", "avgpool"}, "pooling is memory-bound: channels-last loops help"},
        {"activations", {"relu", "gelu", "sigmoid", "tanh"}, "fuse the activation into the op before it"},
        {"zeroing and copying memory", {"memset", "memcpy", "memmove"},
         "buffers are cleared or copied each step: set gradients to none instead of zeroing, reuse buffers"},
        {"data decoding (zlib)", {"[libz", "inflate"},
         "decoding compressed data: decode once and keep the data set in memory, or more loader workers"},
        {"optimizer", {"optim::", "update_rules", "optimizer"}, "use the fused multi-tensor optimizer"},
    };
    return families;
}

}  // namespace

// Where a CPU-backend run spends its time, and whether backward is out of proportion.
void advise_cpu(const AdviceInputs& inputs, std::int64_t step_count, std::vector<AdviceItem>& items) {
    auto per_step = [&](trace::TimeNs total) { return step_count > 0 ? total / step_count : total; };
    const CpuProfile* cpu = inputs.cpu;
    if (cpu != nullptr && cpu->samples > 0) {
        // Each sample counts once, in the family of its innermost frame that has one.
        std::vector<std::int64_t> family_samples(cpu_families().size(), 0);
        for (const CpuFunctionRow& row : cpu->functions) {
            const std::string name = text::ascii_lowercase(row.function);
            for (std::size_t f = 0; f < cpu_families().size(); ++f) {
                const auto& markers = cpu_families()[f].markers;
                if (std::any_of(markers.begin(), markers.end(),
                                [&](const char* marker) { return name.find(text::ascii_lowercase(marker)) != std::string::npos; })) {
                    family_samples[f] += row.self_samples;
                    break;
                }
            }
        }
        for (std::size_t f = 0; f < family_samples.size(); ++f) {
            const double share = percent(family_samples[f], cpu->samples);
            if (share < cpu_families()[f].threshold_percent) continue;
            const bool timed = cpu->period_ns > 0;
            items.push_back({"cpu_hotspot",
                             fmt::format("{} takes {:.1f}% of the sampled CPU time ({} of {} samples{})",
                                         cpu_families()[f].name, share, family_samples[f], cpu->samples,
                                         timed ? ", " + milliseconds(cpu->cpu_ns(family_samples[f])) : ""),
                             cpu_families()[f].advice,
                             timed ? std::optional<trace::TimeNs>(per_step(cpu->cpu_ns(family_samples[f]))) : std::nullopt});
        }
        // Loader workers that barely run hold cores the compute could use.
        std::int64_t worker_samples = 0;
        std::set<std::string> worker_names;  // the train and test loaders reuse the names
        for (const CpuThreadRow& thread : cpu->threads)
            if (thread.name.rfind("dataloader worker", 0) == 0) {
                worker_samples += thread.samples;
                worker_names.insert(thread.name);
            }
        const auto workers = static_cast<std::int64_t>(worker_names.size());
        if (workers > 0 && percent(worker_samples, cpu->samples) < 2.0 && step_count > 0) {
            items.push_back({"idle_loader_workers",
                             fmt::format("the {} data loader worker thread{} used {:.1f}% of the sampled CPU time",
                                         workers, workers == 1 ? "" : "s", percent(worker_samples, cpu->samples)),
                             "the data is cheap to load here: fewer loader workers (data.workers) leave cores to the "
                             "compute (the CPU backend gives GEMM the cores the workers do not take)",
                             std::nullopt});
        }
    }
    if (inputs.forward_ns > 0 && inputs.backward_ns > kBackwardForwardRatio * static_cast<double>(inputs.forward_ns)) {
        items.push_back({"backward_forward_ratio",
                         fmt::format("backward takes {:.1f}x as long as forward ({} against {}); about 2x is usual",
                                     static_cast<double>(inputs.backward_ns) / static_cast<double>(inputs.forward_ns),
                                     milliseconds(inputs.backward_ns), milliseconds(inputs.forward_ns)),
                         "look at the backward ops in the CPU or GPU profile: a backward without a fast kernel "
                         "(weight gradients, scatter-adds) or gradient accumulation in many small pieces",
                         per_step(inputs.backward_ns - 2 * inputs.forward_ns)});
    }
}

void rank_advice(std::vector<AdviceItem>& items) {
    std::stable_sort(items.begin(), items.end(), [](const AdviceItem& a, const AdviceItem& b) {
        const bool a_first = a.topic == "dropped_records", b_first = b.topic == "dropped_records";
        if (a_first != b_first) return a_first;
        if (a.recoverable_ns.has_value() != b.recoverable_ns.has_value()) return a.recoverable_ns.has_value();
        return a.recoverable_ns.value_or(0) > b.recoverable_ns.value_or(0);
    });
}

std::vector<AdviceItem> advise(const GpuActivity& activity, const std::vector<MemoryOperationRow>& memory,
                               std::uint64_t dropped_records) {
    const std::vector<RankGpuWork> no_work;
    return advise(AdviceInputs{activity, memory, dropped_records, no_work});
}

std::vector<AdviceItem> advise(const AdviceInputs& inputs) {
    const GpuActivity& activity = inputs.activity;
    const std::vector<MemoryOperationRow>& memory = inputs.memory;
    const std::uint64_t dropped_records = inputs.dropped_records;
    std::vector<AdviceItem> items;

    // Host-side waits are per step (the same on every device row of a step).
    std::int64_t wall = 0, dataloader = 0, allreduce = 0;
    std::map<trace::DeviceId, std::int64_t> idle, device_wall, device_steps;
    std::set<std::pair<std::int32_t, std::int64_t>> steps;  // (rank, index)
    for (const StepBreakdown& step : activity.steps) {
        if (steps.insert({step.rank, step.step_index}).second) {
            wall += step.wall_ns;
            dataloader += step.dataloader_wait_ns;
            allreduce += step.allreduce_wait_ns;
        }
        idle[step.device_id] += step.gpu_idle_ns;
        device_wall[step.device_id] += step.wall_ns;
        ++device_steps[step.device_id];
    }
    const std::int64_t step_count = static_cast<std::int64_t>(steps.size());
    // Totals become per-step estimates (per run when the trace has no steps).
    auto per_step = [&](std::int64_t total) { return step_count > 0 ? total / step_count : total; };
    const char* per = step_count > 0 ? "per step" : "over the run";

    if (dropped_records > 0) {
        items.push_back({"dropped_records", fmt::format("{} records were dropped while recording", dropped_records),
                         "every number undercounts; record a shorter run or give the collector larger buffers", {}});
    }
    if (wall > 0 && percent(dataloader, wall) >= kDataloaderWaitThresholdPercent) {
        items.push_back({"dataloader_wait",
                         fmt::format("steps wait for data {:.1f}% of their wall time ({} of {} ns)", percent(dataloader, wall),
                                     dataloader, wall),
                         "use more data loader workers, pinned host memory for batches, and prefetch the next batch",
                         per_step(dataloader)});
    }
    if (wall > 0 && percent(allreduce, wall) >= kAllreduceWaitThresholdPercent) {
        items.push_back({"allreduce_wait",
                         fmt::format("steps wait for all-reduce {:.1f}% of their wall time ({} of {} ns)",
                                     percent(allreduce, wall), allreduce, wall),
                         "overlap gradient all-reduce with backward (bucketing) or send fewer bytes (compression, "
                         "larger batches per step)",
                         per_step(allreduce)});
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
                         "can run asynchronously",
                         {}});
    }

    // Why the GPU waits: the idle breakdown of the GPU work (all streams of a rank).
    std::map<std::int32_t, std::array<trace::TimeNs, 3>> idle_by_cause;  // rank -> host, kernel, other
    std::map<std::int32_t, std::int64_t> kernel_wait_gaps;
    for (const IdleRow& row : idle_breakdown(inputs.gpu_work, inputs.kernel_wait_threshold_ns)) {
        idle_by_cause[row.rank][static_cast<int>(row.category)] += row.idle_ns;
        if (row.category == IdleCategory::kernel_wait) kernel_wait_gaps[row.rank] += row.gaps;
    }
    trace::TimeNs host_wait_total = 0, idle_total = 0;
    for (const auto& [rank, causes] : idle_by_cause) {
        host_wait_total += causes[0];
        idle_total += causes[0] + causes[1] + causes[2];
    }
    for (const auto& [device, idle_ns] : idle) {
        if (device == trace::kNoDevice) continue;
        double idle_percent = percent(idle_ns, device_wall[device]);
        if (idle_percent >= kGpuIdleThresholdPercent) {
            std::string cause;
            if (idle_total > 0)
                cause = fmt::format("; across its streams {:.0f}% of the gaps before GPU work were the host launching "
                                    "it only after the stream had run dry",
                                    percent(host_wait_total, idle_total));
            items.push_back({"gpu_idle",
                             fmt::format("GPU {} is idle {:.1f}% of step wall time ({} of {} ns, {} {}){}", device,
                                         idle_percent, idle_ns, device_wall[device],
                                         milliseconds(idle_ns / std::max<std::int64_t>(1, device_steps[device])), per,
                                         cause),
                             "the GPU waits for the host: look at the dataloader wait, CUDA API time and "
                             "synchronizations inside steps; larger batches or CUDA graphs cut launch overhead",
                             idle_ns / std::max<std::int64_t>(1, device_steps[device])});
        }
    }
    if (activity.steps.empty()) {
        for (const DeviceBusy& device : activity.devices) {
            double busy_percent = 100.0 * device.busy_fraction;
            if (busy_percent < kLowBusyThresholdPercent) {
                const trace::TimeNs window = device.window_end_ns - device.window_start_ns;
                items.push_back({"gpu_idle",
                                 fmt::format("GPU {} is busy only {:.1f}% of the run", device.device_id, busy_percent),
                                 "the GPU waits for the host most of the time: see the longest idle gaps",
                                 window - device.busy_ns});
            }
        }
    }
    // Launch overhead: many short gaps between back-to-back GPU work.
    for (const TemporalRow& rank : temporal_breakdown(inputs.gpu_work)) {
        const trace::TimeNs kernel_wait = idle_by_cause[rank.rank][1];
        if (rank.span_ns <= 0 || percent(kernel_wait, rank.span_ns) < kLaunchOverheadThresholdPercent) continue;
        const std::int64_t gaps = std::max<std::int64_t>(1, kernel_wait_gaps[rank.rank]);
        items.push_back(
            {"launch_overhead",
             fmt::format("rank {}: {} gap{} shorter than {:.0f} us between back-to-back GPU work add up to {:.1f}% of "
                         "the GPU span ({}, {:.1f} us each)",
                         rank.rank, gaps, gaps == 1 ? "" : "s", static_cast<double>(inputs.kernel_wait_threshold_ns) / 1e3,
                         percent(kernel_wait, rank.span_ns), milliseconds(kernel_wait),
                         static_cast<double>(kernel_wait) / static_cast<double>(gaps) / 1e3),
             "each kernel costs a launch: capture the step in a CUDA graph, fuse small elementwise kernels, or use "
             "larger batches so each launch does more work",
             per_step(kernel_wait)});
    }
    // Communication the computation does not hide.
    for (const OverlapRow& rank : communication_overlap(inputs.gpu_work)) {
        const trace::TimeNs exposed = rank.communication_ns - rank.overlapped_ns;
        trace::TimeNs span = 0;
        for (const TemporalRow& row : temporal_breakdown(inputs.gpu_work))
            if (row.rank == rank.rank) span = row.span_ns;
        if (span <= 0 || percent(exposed, span) < kExposedCommunicationThresholdPercent) continue;
        items.push_back({"exposed_communication",
                         fmt::format("rank {}: {:.1f}% of its communication ({}) runs with no computation beside it, "
                                     "{:.1f}% of the GPU span",
                                     rank.rank, 100.0 - rank.percent.value_or(0.0), milliseconds(exposed),
                                     percent(exposed, span)),
                         "start all-reduces during backward (gradient buckets) so they run under the remaining "
                         "computation; fewer, larger buckets cut the per-collective cost",
                         per_step(exposed)});
    }
    advise_cpu(inputs, step_count, items);
    rank_advice(items);
    return items;
}

}  // namespace ember::analysis
