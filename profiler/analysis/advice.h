// advice.h: factual suggestions drawn from the reports, ranked by the time they could
// win back. Each rule names the measured number it rests on, a threshold documented
// in docs/stats.md, and, where one can be estimated, the time per step it would
// recover (the waiting it would remove), so the list reads most-valuable first.
#pragma once

#include "profiler/analysis/cpu_profile.h"
#include "profiler/analysis/gpu_activity.h"
#include "profiler/analysis/gpu_memory.h"
#include "profiler/analysis/gpu_work.h"
#include "profiler/analysis/memory_summary.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ember::analysis {

// What the run was set to do, where the trace says (ember's trainer records its settings
// in run_metadata `train_config`, as TOML): a rule does not suggest a remedy the run
// already applies. Empty for other traces: every remedy is named.
struct RunSettings {
    std::map<std::string, std::string> values;  // "switches.channels_last" -> "true"
    bool known() const { return !values.empty(); }
    std::optional<std::string> value(const std::string& key) const;
    bool is_on(const std::string& key) const { return value(key) == "true"; }
};
// The settings of the run a trace recorded (run_metadata `train_config`).
RunSettings run_settings(const store::TraceReader& reader);
RunSettings parse_run_settings(std::string_view toml);

struct AdviceItem {
    std::string topic;    // "dataloader_wait", "gpu_idle", "launch_overhead", "exposed_communication", ...
    std::string finding;  // what was measured
    std::string advice;   // what usually helps
    // Time per step (per run for traces without steps) the advice could recover; none
    // when every remedy the rule knows is already applied.
    std::optional<trace::TimeNs> recoverable_ns;
};

// Thresholds (percent of the summed step wall time, or of the run window).
inline constexpr double kDataloaderWaitThresholdPercent = 10.0;
inline constexpr double kAllreduceWaitThresholdPercent = 10.0;
inline constexpr double kGpuIdleThresholdPercent = 20.0;
inline constexpr double kLowBusyThresholdPercent = 50.0;        // runs without step ranges
inline constexpr double kLaunchOverheadThresholdPercent = 5.0;  // kernel_wait gaps of the GPU span
inline constexpr double kExposedCommunicationThresholdPercent = 5.0;
inline constexpr double kCpuHotspotThresholdPercent = 15.0;  // an op family's share of the sampled CPU
inline constexpr double kCpuReorderThresholdPercent = 5.0;   // layout reorders: overhead, not work
inline constexpr double kBackwardForwardRatio = 3.0;         // backward slower than this many forwards
// GPU memory (gpu_memory.h): one allocating op (else line) holding this share of the
// allocated peak; reserved memory unused at the peak, as a share of the reserved bytes
// then and in bytes.
inline constexpr double kMemoryHolderThresholdPercent = 25.0;
inline constexpr double kUnusedReservedThresholdPercent = 25.0;
inline constexpr std::int64_t kUnusedReservedThresholdBytes = 256ll << 20;

struct AdviceInputs {
    const GpuActivity& activity;
    const std::vector<MemoryOperationRow>& memory;
    std::uint64_t dropped_records = 0;
    const std::vector<RankGpuWork>& gpu_work;  // may be empty (no breakdown asked for)
    trace::TimeNs kernel_wait_threshold_ns = 30'000;
    const CpuProfile* cpu = nullptr;  // sampled CPU stacks, when there are any
    trace::TimeNs forward_ns = 0;     // summed "forward" / "backward" NVTX ranges
    trace::TimeNs backward_ns = 0;
    RunSettings settings = {};                    // what the run already applies
    const GpuMemoryReport* gpu_memory = nullptr;  // the replay of memory events, when there are any
};

// Dropped records first (every other number undercounts), then by recoverable time,
// largest first; items without an estimate last, in rule order.
std::vector<AdviceItem> advise(const AdviceInputs& inputs);
// The rules that need only the step activity and the copies.
std::vector<AdviceItem> advise(const GpuActivity& activity, const std::vector<MemoryOperationRow>& memory,
                               std::uint64_t dropped_records);

// The CPU rules (op families in the sampled stacks, idle loader workers, the
// backward/forward ratio), appended to `items`.
void advise_cpu(const AdviceInputs& inputs, std::int64_t step_count, std::vector<AdviceItem>& items);

// The GPU memory rules (one op holding much of the peak, reserved memory unused at the
// peak, out-of-memory events), appended to `items`. They recover memory, not time: no
// recoverable_ns.
void advise_gpu_memory(const GpuMemoryReport& report, const RunSettings& settings, std::vector<AdviceItem>& items);

// Puts items in the order advise() returns them.
void rank_advice(std::vector<AdviceItem>& items);

}  // namespace ember::analysis
