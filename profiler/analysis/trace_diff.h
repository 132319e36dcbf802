// trace_diff.h: `ember diff A B` as a library — why run B is slower (or faster) than
// run A, and the CI gate on it. docs/diff.md states every rule again for users.
//
// A run is summarised (profile_run) into its training steps and what moved in them:
//   steps       the step windows of step_breakdown.h (ember convention: a step range
//               stretched to the end of the GPU work it launched); a trace without
//               step ranges is one step spanning its events. A job file (several
//               ranks) compares as a whole by default: step N of the job is the
//               slowest rank's step N (its window and its breakdown), the kernel,
//               range and API totals add every rank; `rank` compares one rank.
//   breakdown   each instant of a step window goes to exactly one category, the first
//               that holds on the step's rank:
//                 gpu_compute            a computation kernel runs (any stream)
//                 exposed_communication  a communication kernel runs, or, with the GPU
//                                        idle, the host is in a communication range
//                 exposed_copies         a memcpy/memset (or memory kernel) runs
//                 dataloader_wait        GPU idle, the host waits for its next batch
//                 idle_host_wait         GPU idle in a gap whose next GPU work was
//                                        launched after the gap began (the host was late)
//                 idle_kernel_wait       GPU idle in a gap shorter than the threshold,
//                                        its work queued before (launch overhead)
//                 idle_other             GPU idle in any other gap
//                 host_side              no GPU work before or after (a CPU-backend
//                                        run: all of its host time), split further by
//                                        the top-level range the step's thread is in
//               so the categories of a step add up to its length by construction, and
//               their changes add up to the change of the step time.
//   tables      kernels (and GPU copies, named as `ember stats memory` names them),
//               NVTX/host ranges, CUDA API calls and sampled CPU functions (self time),
//               each by normalised name: total, count and mean.
//
// Two summaries are compared (diff_runs): medians and spreads (p10–p90, median absolute
// deviation) of the step time, the GPU busy time per step and the span; the change of the
// step time split by category; every name's change, largest first. A change of the
// median within the noise band — twice the larger of the two runs' median absolute
// deviations — is called noise, not a regression: the MAD ignores a warm-up step or two
// that would widen a p10–p90 band of a short run.
#pragma once

#include "profiler/analysis/gpu_memory.h"
#include "profiler/analysis/operation_names.h"  // normalise_name: how two runs match names
#include "profiler/analysis/report_table.h"
#include "profiler/analysis/stats_report.h"
#include "profiler/store/reader.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace ember::analysis {

// ---------------------------------------------------------------------------
// [SECTION] One run
// ---------------------------------------------------------------------------

enum class StepCategory : std::uint8_t {
    gpu_compute = 0,
    exposed_communication,
    exposed_copies,
    dataloader_wait,
    idle_host_wait,
    idle_kernel_wait,
    idle_other,
    host_side,
};
inline constexpr int kDiffCategoryCount = static_cast<int>(StepCategory::host_side) + 1;
const char* step_category_name(StepCategory category);  // "gpu_compute", ...

// One step of the compared scope. Times in ns; parts add up to end_ns - start_ns.
struct DiffStep {
    std::int64_t step = 0;  // the step number (step_breakdown.h), or 0 for a whole trace
    std::int32_t rank = 0;  // the rank whose window this is (the slowest, for a whole job)
    trace::TimeNs start_ns = 0;
    trace::TimeNs end_ns = 0;
    std::array<trace::TimeNs, kDiffCategoryCount> parts{};
    // host_side split by top-level range name ("(no range)" for time outside any).
    std::map<std::string, trace::TimeNs> host_side_by_range;

    trace::TimeNs length_ns() const { return end_ns - start_ns; }
    trace::TimeNs gpu_busy_ns() const;  // gpu_compute + exposed_communication + exposed_copies
};

// One name's events in a run.
struct NameTotal {
    std::string name;    // normalised
    std::string domain;  // ranges: the NVTX domain ("" = default); empty for the rest
    trace::TimeNs total_ns = 0;
    std::int64_t instances = 0;
};

struct DiffOptions {
    std::optional<std::int32_t> rank;                 // none: the whole job
    trace::TimeNs kernel_wait_threshold_ns = 30'000;  // as `ember stats --kernel-wait-us`
};

// A device's GPU memory peaks (`ember stats --report gpu_memory`), for files with memory events.
struct MemoryPeak {
    trace::DeviceId device = 0;
    std::int64_t allocated_bytes = 0;
    std::int64_t reserved_bytes = 0;
    // What was live at the allocated peak, by allocating op (empty when no block names its
    // thread) and by allocating line; places named through normalise_name.
    std::vector<GpuMemoryPlace> by_op, by_line;
};

struct RunProfile {
    std::string path;
    std::vector<std::int32_t> ranks;  // every rank of the file
    std::string scope;                // "rank 0", "whole job (4 ranks)"
    bool has_step_ranges = false;     // false: the trace is one step
    bool has_gpu_work = false;        // GPU events in scope
    std::vector<DiffStep> steps;      // in time order
    trace::TimeNs span_ns = 0;        // first step start to last step end
    std::vector<NameTotal> kernels;   // kernels and copies ("[CUDA memcpy HtoD]", "[CUDA memset]"), by name
    std::vector<NameTotal> ranges;
    std::vector<NameTotal> api;
    std::vector<NameTotal> cpu_functions;  // self time of sampled stacks; empty when not sampled
    bool cpu_sampled = false;
    std::vector<MemoryPeak> memory;  // by device; empty without memory events

    std::array<trace::TimeNs, kDiffCategoryCount> category_totals() const;
    trace::TimeNs step_total_ns() const;
};

// Throws TraceError on a read failure, and (bad_value) when options.rank names a rank
// the file does not hold.
RunProfile profile_run(const store::TraceReader& reader, const DiffOptions& options = {});

// ---------------------------------------------------------------------------
// [SECTION] Two runs
// ---------------------------------------------------------------------------

enum class DiffMetric : std::uint8_t { step, gpu_busy, span };
std::optional<DiffMetric> parse_diff_metric(std::string_view text);  // "step", "gpu_busy", "span"
const char* diff_metric_name(DiffMetric metric);

enum class Verdict : std::uint8_t { unchanged, noise, faster, slower };
const char* verdict_name(Verdict verdict);  // "unchanged", "noise", "faster", "slower"

// One metric of one run over its steps (span: one value). Percentiles interpolate
// linearly between the sorted values (numpy's default).
struct MetricStats {
    std::int64_t samples = 0;
    double median_ns = 0.0;
    double p10_ns = 0.0;
    double p90_ns = 0.0;
    double mad_ns = 0.0;  // median of |value - median|
    double mean_ns = 0.0;
};

struct MetricComparison {
    DiffMetric metric = DiffMetric::step;
    bool available = false;  // gpu_busy: both runs have GPU work
    MetricStats a, b;
    double delta_ns = 0.0;                // b.median - a.median
    std::optional<double> delta_percent;  // of a.median; none when a.median is 0
    double noise_ns = 0.0;                // 2 × the larger MAD (0 for span: one value per run)
    Verdict verdict = Verdict::unchanged;
};

// A category (or a host-side range, or a group of categories): its totals over the
// compared steps, which add up exactly to the summed step time, and its mean per step.
struct BreakdownDelta {
    std::string name;
    trace::TimeNs a_total_ns = 0, b_total_ns = 0;
    double a_ns = 0.0, b_ns = 0.0;  // per step: total / steps
    double delta_ns() const { return b_ns - a_ns; }
    trace::TimeNs delta_total_ns() const { return b_total_ns - a_total_ns; }
};

enum class NameStatus : std::uint8_t { both, appeared, disappeared };  // "", "new", "gone"
const char* name_status_name(NameStatus status);

struct NameDelta {
    std::string name;
    std::string domain;
    trace::TimeNs a_total_ns = 0, b_total_ns = 0;
    std::int64_t a_instances = 0, b_instances = 0;
    NameStatus status = NameStatus::both;
    trace::TimeNs delta_ns() const { return b_total_ns - a_total_ns; }
};

// One device's memory peaks in A and B (none: the run has no memory events there).
struct MemoryPeakDelta {
    trace::DeviceId device = 0;
    std::optional<MemoryPeak> a, b;
};

// One place's bytes live at a device's allocated peak in A and in B (0 where that run has
// none live there), for a device both runs used: by allocating op when both runs name
// the allocating threads, else by allocating line.
struct MemoryPlaceDelta {
    trace::DeviceId device = 0;
    std::string by;  // "op" or "line"
    std::string place;
    std::int64_t a_bytes = 0, b_bytes = 0;
    std::int64_t a_blocks = 0, b_blocks = 0;
    std::int64_t change_bytes() const { return b_bytes - a_bytes; }
};

struct TraceDiff {
    std::string a_path, b_path;
    std::string scope;
    std::int64_t a_steps = 0, b_steps = 0;
    std::array<MetricComparison, 3> metrics;  // step, gpu_busy, span
    std::vector<BreakdownDelta> breakdown;    // kDiffCategoryCount rows, in category order
    std::vector<BreakdownDelta> host_side;    // host_side by top-level range; adds up to its row
    // The GPU's idle time: dataloader_wait + the three idle_* rows (when both runs have
    // GPU work). Moving GPU work later trades these among themselves, never their sum.
    std::optional<BreakdownDelta> gpu_idle;
    // Sorted by |delta_ns|, largest first (ties by name).
    std::vector<NameDelta> kernels, ranges, api, cpu_functions;
    bool cpu_sampled = false;             // both runs have sampled CPU stacks
    std::vector<MemoryPeakDelta> memory;  // by device, when either run has memory events
    // By device, then |change_bytes|, largest first (ties by place).
    std::vector<MemoryPlaceDelta> memory_places;
    // The change of the summed step time, B - A: what a table row's share is of. Only
    // when both runs compare the same number of steps of one rank (a job's totals add
    // ranks, its steps do not).
    std::optional<trace::TimeNs> total_step_change_ns;
    std::vector<std::string> notes;  // said above the tables ("A has 6 steps, B 12: ...")

    const MetricComparison& metric(DiffMetric which) const { return metrics[static_cast<int>(which)]; }
};

TraceDiff diff_runs(const RunProfile& a, const RunProfile& b);

// ---------------------------------------------------------------------------
// [SECTION] The CI gate
// ---------------------------------------------------------------------------

// "5%", "5", "2.5 %" -> 5, 5, 2.5. None for anything else, negative or not finite.
std::optional<double> parse_percent(std::string_view text);

struct GateResult {
    bool failed = false;  // B slower than the threshold allows and beyond the noise
    std::string reason;   // one line either way
};
// Throws std::invalid_argument when the metric is not available (gpu_busy of a run
// without GPU work).
GateResult check_gate(const TraceDiff& diff, DiffMetric metric, double max_slower_percent);

// ---------------------------------------------------------------------------
// [SECTION] Output
// ---------------------------------------------------------------------------

struct DiffOutputOptions {
    OutputFormat format = OutputFormat::text;
    TimeUnit time_unit = TimeUnit::ms;  // text and CSV; JSON `*_ns` members are always ns
    std::size_t top = 15;               // rows of each name table in text and CSV (0 = all);
                                        // JSON always holds every row
};

// The tables in print order: headline, breakdown, host_side (when there is host-side
// time), kernels, ranges, api, cpu_functions (only when both runs were sampled); the
// name tables cut to their first `top` rows (0 = all).
std::vector<Table> diff_tables(const TraceDiff& diff, std::size_t top);
// The JSON document: a, b, scope, notes, headline (per metric), and every table.
nlohmann::json diff_json(const TraceDiff& diff, std::size_t top = 0);
void write_diff(std::ostream& out, const TraceDiff& diff, const DiffOutputOptions& options);

}  // namespace ember::analysis
