// advice.cpp: the advice rules.
#include "profiler/analysis/advice.h"

#include "profiler/analysis/gpu_breakdown.h"
#include "common/text.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <set>

namespace ember::analysis {

namespace {

double percent(std::int64_t part, std::int64_t whole) {
    return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

std::string milliseconds(trace::TimeNs ns) {
    return fmt::format("{:.3f} ms", static_cast<double>(ns) / 1e6);
}

}  // namespace

// ---------------------------------------------------------------------------
// [SECTION] What the run already applies
// ---------------------------------------------------------------------------

std::optional<std::string> RunSettings::value(const std::string& key) const {
    auto found = values.find(key);
    if (found == values.end()) return std::nullopt;
    return found->second;
}

RunSettings parse_run_settings(std::string_view toml) {
    RunSettings settings;
    std::string section;
    std::size_t at = 0;
    while (at < toml.size()) {
        std::size_t end = toml.find('\n', at);
        if (end == std::string_view::npos) end = toml.size();
        std::string_view line = toml.substr(at, end - at);
        at = end + 1;
        auto trim = [](std::string_view text) {
            while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
            while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r'))
                text.remove_suffix(1);
            return text;
        };
        line = trim(line);
        if (line.empty() || line.front() == '#') continue;
        if (line.front() == '[' && line.back() == ']') {
            section = std::string(trim(line.substr(1, line.size() - 2)));
            continue;
        }
        const std::size_t equals = line.find('=');
        if (equals == std::string_view::npos) continue;
        std::string_view key = trim(line.substr(0, equals)), value = trim(line.substr(equals + 1));
        if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') && value.back() == value.front())
            value = value.substr(1, value.size() - 2);
        settings.values[section.empty() ? std::string(key) : section + "." + std::string(key)] = std::string(value);
    }
    return settings;
}

RunSettings run_settings(const store::TraceReader& reader) {
    const std::optional<std::string> toml = reader.metadata("train_config");
    return toml ? parse_run_settings(*toml) : RunSettings{};
}

namespace {

// A remedy a rule names, and how the run already applies it (empty: it does not, or
// the trace does not say).
struct Remedy {
    std::string text;
    std::string applied;
};

// "LEAD: a, b or c" of the remedies the run does not apply, then "(already: ...)";
// `none_left` when it applies every one.
std::string with_remedies(std::string_view lead, const std::vector<Remedy>& remedies, bool& none_left) {
    std::vector<std::string> open, applied;
    for (const Remedy& remedy : remedies)
        (remedy.applied.empty() ? open : applied).push_back(remedy.applied.empty() ? remedy.text : remedy.applied);
    auto join = [](const std::vector<std::string>& list, const char* last) {
        std::string text;
        for (std::size_t i = 0; i < list.size(); ++i)
            text += (i == 0 ? "" : (i + 1 == list.size() ? last : ", ")) + list[i];
        return text;
    };
    none_left = open.empty();
    std::string text(lead);
    if (!open.empty()) text += (lead.empty() ? "" : ": ") + join(open, " or ");
    if (!applied.empty())
        text += std::string(open.empty() ? "; the run already applies what usually helps (" : " (already in place: ") +
                join(applied, " and ") + ")";
    return text;
}

// An AdviceItem whose advice is a lead and its remedies; no recoverable time when the
// run already applies every remedy.
AdviceItem advice_item(std::string topic, std::string finding, std::string_view lead,
                       const std::vector<Remedy>& remedies, std::optional<trace::TimeNs> recoverable) {
    bool none_left = false;
    std::string advice = with_remedies(lead, remedies, none_left);
    return {std::move(topic), std::move(finding), std::move(advice), none_left ? std::nullopt : recoverable};
}

std::string applied_if(bool on, std::string how) {
    return on ? std::move(how) : std::string();
}

// Op families a CPU profile's hot functions belong to, with what usually helps each.
struct CpuFamily {
    const char* name;
    std::vector<const char*> markers;  // substrings of the function name
    const char* lead;
    // The remedies, given the run's settings and its hot functions (lower case).
    std::function<std::vector<Remedy>(const RunSettings&, const std::set<std::string>&)> remedies;
    // Share of the sampled CPU time from which it is advised on: work a step needs is
    // worth a look when it dominates; pure overhead (reorders) sooner.
    double threshold_percent = kCpuHotspotThresholdPercent;
};

bool any_contains(const std::set<std::string>& names, std::initializer_list<const char*> needles) {
    return std::any_of(names.begin(), names.end(), [&](const std::string& name) {
        return std::any_of(needles.begin(), needles.end(),
                           [&](const char* needle) { return name.find(needle) != std::string::npos; });
    });
}

const std::vector<CpuFamily>& cpu_families() {
    static const std::vector<CpuFamily> families = {
        // Before the convolutions: oneDNN names its reorder kernels "jit_uni_reorder_kernel_f32",
        // its other JIT kernels by what they compute ("jit_avx512_common_conv_bwd_weights_kernel_f32",
        // "jit_brgemm_kernel_t").
        {"layout reordering (oneDNN)",
         {"reorder"},
         "oneDNN converts tensors between the framework's layout and its own blocked one around the convolutions",
         [](const RunSettings& settings, const std::set<std::string>&) {
             return std::vector<Remedy>{
                 {"keep the activations channels-last (ember: switches.channels_last = true; PyTorch: "
                  "model.to(memory_format=torch.channels_last) and the input likewise), which the convolutions take "
                  "as they are",
                  applied_if(settings.is_on("switches.channels_last"),
                             "switches.channels_last is on: the reorders left are of the weights and gradients")}};
         },
         kCpuReorderThresholdPercent},
        {"convolution and GEMM",
         {"im2col", "col2im", "conv2d_", "_conv_", "conv_fwd", "conv_bwd", "brgemm", "brg_conv", "sgemm", "dgemm",
          "gemm_kernel", "gemm"},
         "convolutions and matrix products dominate",
         [](const RunSettings& settings, const std::set<std::string>& hot) {
             const bool onednn = any_contains(hot, {"jit_", "dnnl", "onednn", "mkldnn"});
             return std::vector<Remedy>{
                 {"a convolution library that needs no im2col copy (oneDNN, as PyTorch uses on the CPU)",
                  applied_if(onednn, "oneDNN's JIT kernels, no im2col, are the hot functions")},
                 {"channels-last layout",
                  applied_if(settings.is_on("switches.channels_last"), "switches.channels_last is on")},
                 {"more GEMM threads when the loader leaves cores idle", ""}};
         }},
        {"BatchNorm",
         {"batchnorm"},
         "BatchNorm's passes over the activations are memory-bound",
         [](const RunSettings& settings, const std::set<std::string>&) {
             return std::vector<Remedy>{{"channels-last loops", applied_if(settings.is_on("switches.channels_last"),
                                                                           "switches.channels_last is on")},
                                        {"fewer BatchNorm layers", ""}};
         }},
        {"pooling",
         {"pool2d", "maxpool", "avgpool"},
         "pooling is memory-bound",
         [](const RunSettings& settings, const std::set<std::string>&) {
             return std::vector<Remedy>{{"channels-last loops", applied_if(settings.is_on("switches.channels_last"),
                                                                           "switches.channels_last is on")}};
         }},
        {"activations",
         {"relu", "gelu", "sigmoid", "tanh"},
         "",
         [](const RunSettings&, const std::set<std::string>&) {
             return std::vector<Remedy>{{"fuse the activation into the op before it", ""}};
         }},
        {"zeroing and copying memory",
         {"memset", "memcpy", "memmove"},
         "buffers are cleared or copied each step",
         [](const RunSettings& settings, const std::set<std::string>&) {
             return std::vector<Remedy>{
                 {"set gradients to none instead of zeroing",
                  applied_if(settings.is_on("switches.grads_to_none"), "switches.grads_to_none is on")},
                 {"reuse buffers", ""}};
         }},
        {"data decoding (zlib)",
         {"[libz", "inflate"},
         "decoding compressed data",
         [](const RunSettings&, const std::set<std::string>&) {
             return std::vector<Remedy>{{"decode once and keep the data set in memory", ""},
                                        {"more loader workers", ""}};
         }},
        {"optimizer",
         {"optim::", "update_rules", "optimizer"},
         "the optimizer's update",
         [](const RunSettings& settings, const std::set<std::string>&) {
             return std::vector<Remedy>{
                 {"use the fused multi-tensor optimizer",
                  applied_if(settings.is_on("switches.fused_optimizer"), "switches.fused_optimizer is on")}};
         }},
    };
    return families;
}

}  // namespace

// Where a CPU-backend run spends its time, and whether backward is out of proportion.
void advise_cpu(const AdviceInputs& inputs, std::int64_t step_count, std::vector<AdviceItem>& items) {
    auto per_step = [&](trace::TimeNs total) { return step_count > 0 ? total / step_count : total; };
    const char* per = step_count > 0 ? "a step" : "over the run";
    const CpuProfile* cpu = inputs.cpu;
    if (cpu != nullptr && cpu->samples > 0) {
        // Each sample counts once, in the family of its innermost frame that has one.
        std::vector<std::int64_t> family_samples(cpu_families().size(), 0);
        std::vector<std::set<std::string>> family_functions(cpu_families().size());
        for (const CpuFunctionRow& row : cpu->functions) {
            const std::string name = text::ascii_lowercase(row.function);
            for (std::size_t f = 0; f < cpu_families().size(); ++f) {
                const auto& markers = cpu_families()[f].markers;
                if (std::any_of(markers.begin(), markers.end(), [&](const char* marker) {
                        return name.find(text::ascii_lowercase(marker)) != std::string::npos;
                    })) {
                    family_samples[f] += row.self_samples;
                    if (row.self_samples > 0) family_functions[f].insert(name);
                    break;
                }
            }
        }
        for (std::size_t f = 0; f < family_samples.size(); ++f) {
            const CpuFamily& family = cpu_families()[f];
            const double share = percent(family_samples[f], cpu->samples);
            if (share < family.threshold_percent) continue;
            const bool timed = cpu->period_ns > 0;
            const trace::TimeNs time = timed ? cpu->cpu_ns(family_samples[f]) : 0;
            items.push_back(advice_item(
                "cpu_hotspot",
                fmt::format(
                    "{} takes {:.1f}% of the sampled CPU time ({} of {} samples{})", family.name, share,
                    family_samples[f], cpu->samples,
                    timed ? fmt::format(", {}; {} {}", milliseconds(time), milliseconds(per_step(time)), per) : ""),
                family.lead, family.remedies(inputs.settings, family_functions[f]),
                timed ? std::optional<trace::TimeNs>(per_step(time)) : std::nullopt));
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
    const RunSettings& settings = inputs.settings;
    const bool graphs = settings.is_on("switches.cuda_graph");

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
        items.push_back({"dropped_records",
                         fmt::format("{} records were dropped while recording", dropped_records),
                         "every number undercounts; record a shorter run or give the collector larger buffers",
                         {}});
    }
    if (wall > 0 && percent(dataloader, wall) >= kDataloaderWaitThresholdPercent) {
        const std::optional<std::string> workers = settings.value("data.workers");
        const std::optional<std::string> prefetch = settings.value("data.prefetch_factor");
        items.push_back(advice_item(
            "dataloader_wait",
            fmt::format("steps wait for data {:.1f}% of their wall time ({} of {} ns)", percent(dataloader, wall),
                        dataloader, wall),
            "to have each batch ready when the step wants it",
            {{workers ? fmt::format("more data loader workers (data.workers is {})", *workers)
                      : "more data loader workers",
              ""},
             {"pinned host memory for batches", applied_if(settings.is_on("data.pin_memory"), "data.pin_memory is on")},
             {"prefetching the next batches",
              applied_if(prefetch && *prefetch != "0" && *prefetch != "1",
                         fmt::format("data.prefetch_factor is {}", prefetch.value_or("")))}},
            per_step(dataloader)));
    }
    if (wall > 0 && percent(allreduce, wall) >= kAllreduceWaitThresholdPercent) {
        items.push_back(advice_item("allreduce_wait",
                                    fmt::format("steps wait for all-reduce {:.1f}% of their wall time ({} of {} ns)",
                                                percent(allreduce, wall), allreduce, wall),
                                    "",
                                    {{"overlap gradient all-reduce with backward (bucketing)",
                                      applied_if(settings.is_on("distributed.overlap"), "distributed.overlap is on")},
                                     {"send fewer bytes (compression, larger batches per step)", ""}},
                                    per_step(allreduce)));
    }
    std::int64_t pageable_count = 0, pageable_bytes = 0;
    for (const MemoryOperationRow& row : memory) {
        if ((row.operation == "HtoD" || row.operation == "DtoH") && row.memory == "pageable") {
            pageable_count += row.count;
            pageable_bytes += row.total_bytes;
        }
    }
    if (pageable_count > 0) {
        items.push_back(advice_item(
            "pageable_copies",
            fmt::format("{} host-device copies ({} bytes) use pageable host memory", pageable_count, pageable_bytes),
            "",
            {{"copy from pinned (page-locked) host memory: the copy engine reads it directly and the copy can run "
              "asynchronously",
              applied_if(settings.is_on("data.pin_memory"),
                         "data.pin_memory is on, so these are not the batches: evaluation, model loading, .item() and "
                         "the like")}},
            {}));
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
                cause = fmt::format(
                    "; across its streams {:.0f}% of the gaps before GPU work were the host launching "
                    "it only after the stream had run dry",
                    percent(host_wait_total, idle_total));
            items.push_back(advice_item(
                "gpu_idle",
                fmt::format("GPU {} is idle {:.1f}% of step wall time ({} of {} ns, {} {}){}", device, idle_percent,
                            idle_ns, device_wall[device],
                            milliseconds(idle_ns / std::max<std::int64_t>(1, device_steps[device])), per, cause),
                "the GPU waits for the host (look at the dataloader wait, CUDA API time and synchronizations inside "
                "steps); to cut launch overhead",
                {{"larger batches", ""}, {"CUDA graphs", applied_if(graphs, "switches.cuda_graph is on")}},
                idle_ns / std::max<std::int64_t>(1, device_steps[device])));
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
        items.push_back(advice_item(
            "launch_overhead",
            fmt::format(
                "rank {}: {} gap{} shorter than {:.0f} us between back-to-back GPU work add up to {:.1f}% of the "
                "GPU span ({}, {:.1f} us each)",
                rank.rank, gaps, gaps == 1 ? "" : "s", static_cast<double>(inputs.kernel_wait_threshold_ns) / 1e3,
                percent(kernel_wait, rank.span_ns), milliseconds(kernel_wait),
                static_cast<double>(kernel_wait) / static_cast<double>(gaps) / 1e3),
            "each kernel costs a launch",
            {{"capture the step in a CUDA graph", applied_if(graphs, "switches.cuda_graph is on")},
             {"fuse small elementwise kernels", ""},
             {"use larger batches so each launch does more work", ""}},
            per_step(kernel_wait)));
    }
    // Communication the computation does not hide.
    for (const OverlapRow& rank : communication_overlap(inputs.gpu_work)) {
        const trace::TimeNs exposed = rank.communication_ns - rank.overlapped_ns;
        trace::TimeNs span = 0;
        for (const TemporalRow& row : temporal_breakdown(inputs.gpu_work))
            if (row.rank == rank.rank) span = row.span_ns;
        if (span <= 0 || percent(exposed, span) < kExposedCommunicationThresholdPercent) continue;
        items.push_back(advice_item(
            "exposed_communication",
            fmt::format("rank {}: {:.1f}% of its communication ({}) runs with no computation beside it, {:.1f}% of the "
                        "GPU span",
                        rank.rank, 100.0 - rank.percent.value_or(0.0), milliseconds(exposed), percent(exposed, span)),
            "",
            {{"start all-reduces during backward (gradient buckets) so they run under the remaining computation",
              applied_if(settings.is_on("distributed.overlap"), "distributed.overlap is on")},
             {"fewer, larger buckets cut the per-collective cost", ""}},
            per_step(exposed)));
    }
    advise_cpu(inputs, step_count, items);
    if (inputs.gpu_memory != nullptr) advise_gpu_memory(*inputs.gpu_memory, settings, items);
    rank_advice(items);
    return items;
}

// ---------------------------------------------------------------------------
// [SECTION] GPU memory
// ---------------------------------------------------------------------------

namespace {

// "1.2 GiB", "300.0 MiB", "12.0 KiB", "512 B".
std::string bytes_text(std::int64_t bytes) {
    const double value = static_cast<double>(bytes);
    if (bytes >= (1ll << 30)) return fmt::format("{:.1f} GiB", value / static_cast<double>(1ll << 30));
    if (bytes >= (1ll << 20)) return fmt::format("{:.1f} MiB", value / static_cast<double>(1ll << 20));
    if (bytes >= (1ll << 10)) return fmt::format("{:.1f} KiB", value / static_cast<double>(1ll << 10));
    return fmt::format("{} B", bytes);
}

// A place that names an op or a line, not "(allocated before the trace began)" and the like.
bool names_a_place(const std::string& place) {
    return !place.empty() && place.front() != '(';
}

}  // namespace

void advise_gpu_memory(const GpuMemoryReport& report, const RunSettings& settings, std::vector<AdviceItem>& items) {
    for (const GpuMemoryDevice& d : report.devices) {
        // One op (or line, for a source that records no threads) holding much of the peak.
        const bool by_op = !d.at_peak_by_op.empty();
        const std::vector<GpuMemoryPlace>& places = by_op ? d.at_peak_by_op : d.at_peak_by_line;
        for (const GpuMemoryPlace& place : places) {
            if (!names_a_place(place.place)) continue;
            const double share = percent(place.bytes, d.peak_allocated_bytes);
            const std::int64_t cut = place.bytes - place.largest_block_bytes;
            if (share >= kMemoryHolderThresholdPercent && cut > 0) {
                const std::string finding = fmt::format(
                    "on {}, blocks allocated in `{}` hold {:.0f}% of the allocated peak ({} of {}, {} blocks, the "
                    "largest {})",
                    memory_device_text(d.device), place.place, share, bytes_text(place.bytes),
                    bytes_text(d.peak_allocated_bytes), place.blocks, bytes_text(place.largest_block_bytes));
                if (report.has_steps && d.peak_step.empty()) {
                    // A peak outside every training step (an evaluation pass, the set-up) holds no
                    // activations for a backward pass: recomputation would not lower it.
                    items.push_back(
                        {"gpu_memory_holder", finding,
                         fmt::format("the peak comes outside the training steps{}, where no backward pass keeps "
                                     "activations, so activation checkpointing would not lower it: a smaller batch "
                                     "in that phase, or freeing its tensors sooner, would",
                                     d.peak_range.empty() ? std::string() : " (in `" + d.peak_range + "`)"),
                         std::nullopt});
                    break;
                }
                const std::string lead = fmt::format(
                    "if they are activations kept for backward, recomputing them would cut the peak by about {} (what "
                    "`{}` holds at the peak less its largest block, which a recomputation still needs)",
                    bytes_text(cut), place.place);
                items.push_back(advice_item("gpu_memory_holder", finding, lead,
                                            {{"activation checkpointing on that block",
                                              applied_if(settings.is_on("switches.activation_checkpointing"),
                                                         "switches.activation_checkpointing is on")}},
                                            std::nullopt));
            }
            break;  // the largest named place only: the places are largest first
        }
        // Reserved memory the allocator held but nothing used at the peak.
        const std::int64_t unused = d.reserved_at_peak_bytes - d.peak_allocated_bytes;
        if (unused >= kUnusedReservedThresholdBytes &&
            percent(unused, d.reserved_at_peak_bytes) >= kUnusedReservedThresholdPercent) {
            std::string finding =
                fmt::format("on {}, {} of the {} reserved at the allocated peak held no live block ({:.0f}%)",
                            memory_device_text(d.device), bytes_text(unused), bytes_text(d.reserved_at_peak_bytes),
                            percent(unused, d.reserved_at_peak_bytes));
            if (d.largest_free_block_bytes >= 0)
                finding += fmt::format("; the allocator's state has {} free, the largest free block {}",
                                       bytes_text(d.free_blocks_bytes), bytes_text(d.largest_free_block_bytes));
            items.push_back(
                {"gpu_memory_fragmentation", std::move(finding),
                 "memory reserved in segments of the wrong sizes: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
                 "lets a segment grow instead of reserving a new one per size, and fewer distinct tensor shapes "
                 "(padding to a few sizes) let blocks be reused",
                 std::nullopt});
        }
        // Out of memory: the request against what was free and what was held.
        for (const GpuMemoryOom& oom : d.ooms) {
            std::string finding = fmt::format("on {}, an allocation of {} failed", memory_device_text(d.device),
                                              bytes_text(oom.request_bytes));
            if (oom.device_free_bytes >= 0)
                finding += fmt::format(" with {} free on the device", bytes_text(oom.device_free_bytes));
            finding += fmt::format("; {} in {} live blocks, {} reserved", bytes_text(oom.allocated_bytes),
                                   oom.live_blocks, bytes_text(oom.reserved_bytes));
            const GpuMemoryPlace* largest = nullptr;
            for (const GpuMemoryPlace& place : oom.live_by_line)
                if (names_a_place(place.place)) {
                    largest = &place;
                    break;
                }
            if (largest != nullptr)
                finding += fmt::format("; the most held by `{}` ({})", largest->place, bytes_text(largest->bytes));
            const std::int64_t unused = oom.reserved_bytes - oom.allocated_bytes;
            std::string advice;
            if (unused >= oom.request_bytes)
                advice = fmt::format(
                    "the allocator held {} reserved but unused, more than the request, yet not in one piece: "
                    "fragmentation; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, or freeing cached blocks "
                    "(torch.cuda.empty_cache()) before the large allocation",
                    bytes_text(unused));
            else if (oom.device_free_bytes >= 0 &&
                     std::max<std::int64_t>(unused, 0) + oom.device_free_bytes >= oom.request_bytes)
                advice = fmt::format(
                    "reserved-but-unused ({}) and device-free ({}) memory together cover the request, neither "
                    "alone: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets the allocator grow a segment "
                    "into the free memory",
                    bytes_text(std::max<std::int64_t>(unused, 0)), bytes_text(oom.device_free_bytes));
            else
                advice = fmt::format(
                    "the live blocks leave no room: {} more than was reserved-but-unused{} would have been needed; "
                    "a smaller batch, activation checkpointing, mixed precision, or freeing what the largest holder "
                    "keeps",
                    bytes_text(oom.request_bytes - std::max<std::int64_t>(unused, 0) -
                               std::max<std::int64_t>(oom.device_free_bytes, 0)),
                    oom.device_free_bytes >= 0 ? " and free on the device" : "");
            items.push_back({"gpu_memory_oom", std::move(finding), std::move(advice), std::nullopt});
        }
    }
}

}  // namespace ember::analysis
