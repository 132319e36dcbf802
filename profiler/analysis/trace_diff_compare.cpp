// trace_diff_compare.cpp: two profiled runs compared (diff_runs) and the CI gate
// (check_gate) of `ember diff` (trace_diff.h).
#include "profiler/analysis/trace_diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

namespace ember::analysis {

using trace::TimeNs;

// ---------------------------------------------------------------------------
// [SECTION] Comparing two runs
// ---------------------------------------------------------------------------

namespace {

// Linear interpolation between the closest ranks (numpy's default percentile).
double percentile(const std::vector<TimeNs>& sorted, double fraction) {
    if (sorted.empty()) return 0.0;
    const double position = fraction * static_cast<double>(sorted.size() - 1);
    const auto below = static_cast<std::size_t>(std::floor(position));
    const std::size_t above = std::min(below + 1, sorted.size() - 1);
    const double weight = position - static_cast<double>(below);
    return static_cast<double>(sorted[below]) * (1.0 - weight) + static_cast<double>(sorted[above]) * weight;
}

MetricStats stats_of(std::vector<TimeNs> values) {
    MetricStats stats;
    std::sort(values.begin(), values.end());
    stats.samples = static_cast<std::int64_t>(values.size());
    if (values.empty()) return stats;
    stats.median_ns = percentile(values, 0.5);
    stats.p10_ns = percentile(values, 0.1);
    stats.p90_ns = percentile(values, 0.9);
    std::vector<double> deviations;
    for (TimeNs value : values) deviations.push_back(std::fabs(static_cast<double>(value) - stats.median_ns));
    std::sort(deviations.begin(), deviations.end());
    const std::size_t middle = deviations.size() / 2;
    stats.mad_ns =
        deviations.size() % 2 == 1 ? deviations[middle] : (deviations[middle - 1] + deviations[middle]) / 2.0;
    long double sum = 0;
    for (TimeNs value : values) sum += value;
    stats.mean_ns = static_cast<double>(sum / static_cast<long double>(values.size()));
    return stats;
}

MetricComparison compare_metric(DiffMetric metric, std::vector<TimeNs> a, std::vector<TimeNs> b, bool available) {
    MetricComparison comparison;
    comparison.metric = metric;
    comparison.available = available && !a.empty() && !b.empty();
    if (!comparison.available) return comparison;
    comparison.a = stats_of(std::move(a));
    comparison.b = stats_of(std::move(b));
    comparison.delta_ns = comparison.b.median_ns - comparison.a.median_ns;
    if (comparison.a.median_ns > 0) comparison.delta_percent = comparison.delta_ns / comparison.a.median_ns * 100.0;
    // One value per run (span) has no spread: only the threshold can judge it.
    if (metric != DiffMetric::span) comparison.noise_ns = 2.0 * std::max(comparison.a.mad_ns, comparison.b.mad_ns);
    if (comparison.delta_ns == 0.0)
        comparison.verdict = Verdict::unchanged;
    else if (std::fabs(comparison.delta_ns) <= comparison.noise_ns)
        comparison.verdict = Verdict::noise;
    else
        comparison.verdict = comparison.delta_ns > 0 ? Verdict::slower : Verdict::faster;
    return comparison;
}

// A row from its two totals; its per-step means divide by each run's step count.
BreakdownDelta breakdown_row(std::string name, TimeNs a_total, std::int64_t a_steps, TimeNs b_total,
                             std::int64_t b_steps) {
    BreakdownDelta row;
    row.name = std::move(name);
    row.a_total_ns = a_total;
    row.b_total_ns = b_total;
    row.a_ns = a_steps > 0 ? static_cast<double>(a_total) / static_cast<double>(a_steps) : 0.0;
    row.b_ns = b_steps > 0 ? static_cast<double>(b_total) / static_cast<double>(b_steps) : 0.0;
    return row;
}

std::vector<NameDelta> diff_names(const std::vector<NameTotal>& a, const std::vector<NameTotal>& b) {
    std::map<std::pair<std::string, std::string>, NameDelta> merged;
    // Each run's totals into its side of the (domain, name) row.
    auto add_side = [&merged](const std::vector<NameTotal>& side, TimeNs NameDelta::*total_ns,
                              std::int64_t NameDelta::*instances) {
        for (const NameTotal& row : side) {
            NameDelta& delta = merged[{row.domain, row.name}];
            delta.name = row.name;
            delta.domain = row.domain;
            delta.*total_ns = row.total_ns;
            delta.*instances = row.instances;
        }
    };
    add_side(a, &NameDelta::a_total_ns, &NameDelta::a_instances);
    add_side(b, &NameDelta::b_total_ns, &NameDelta::b_instances);
    std::vector<NameDelta> rows;
    for (auto& [key, delta] : merged) {
        delta.status = delta.a_instances == 0   ? NameStatus::appeared
                       : delta.b_instances == 0 ? NameStatus::disappeared
                                                : NameStatus::both;
        rows.push_back(std::move(delta));
    }
    std::stable_sort(rows.begin(), rows.end(), [](const NameDelta& x, const NameDelta& y) {
        const TimeNs dx = std::llabs(x.delta_ns()), dy = std::llabs(y.delta_ns());
        return dx != dy ? dx > dy : x.name < y.name;
    });
    return rows;
}

}  // namespace

TraceDiff diff_runs(const RunProfile& a, const RunProfile& b) {
    TraceDiff diff;
    diff.a_path = a.path;
    diff.b_path = b.path;
    diff.scope = a.scope == b.scope ? a.scope : "A: " + a.scope + ", B: " + b.scope;
    diff.a_steps = static_cast<std::int64_t>(a.steps.size());
    diff.b_steps = static_cast<std::int64_t>(b.steps.size());

    auto values = [](const RunProfile& run, DiffMetric metric) {
        std::vector<TimeNs> values;
        if (metric == DiffMetric::span) {
            if (!run.steps.empty()) values.push_back(run.span_ns);
            return values;
        }
        for (const DiffStep& step : run.steps)
            values.push_back(metric == DiffMetric::step ? step.length_ns() : step.gpu_busy_ns());
        return values;
    };
    for (DiffMetric metric : {DiffMetric::step, DiffMetric::gpu_busy, DiffMetric::span}) {
        const bool available = metric != DiffMetric::gpu_busy || (a.has_gpu_work && b.has_gpu_work);
        diff.metrics[static_cast<int>(metric)] =
            compare_metric(metric, values(a, metric), values(b, metric), available);
    }

    // The breakdown of the step time, and of its host-side part by top-level range.
    const auto a_totals = a.category_totals(), b_totals = b.category_totals();
    for (int c = 0; c < kDiffCategoryCount; ++c)
        diff.breakdown.push_back(breakdown_row(step_category_name(static_cast<StepCategory>(c)), a_totals[c],
                                               diff.a_steps, b_totals[c], diff.b_steps));
    if (a.has_gpu_work && b.has_gpu_work) {
        TimeNs a_idle = 0, b_idle = 0;
        for (StepCategory c : {StepCategory::dataloader_wait, StepCategory::idle_host_wait,
                               StepCategory::idle_kernel_wait, StepCategory::idle_other}) {
            a_idle += a_totals[static_cast<int>(c)];
            b_idle += b_totals[static_cast<int>(c)];
        }
        diff.gpu_idle = breakdown_row("gpu_idle", a_idle, diff.a_steps, b_idle, diff.b_steps);
    }
    std::map<std::string, std::pair<TimeNs, TimeNs>> host_ranges;
    for (const DiffStep& step : a.steps)
        for (const auto& [name, time] : step.host_side_by_range) host_ranges[name].first += time;
    for (const DiffStep& step : b.steps)
        for (const auto& [name, time] : step.host_side_by_range) host_ranges[name].second += time;
    for (const auto& [name, totals] : host_ranges)
        diff.host_side.push_back(breakdown_row(name, totals.first, diff.a_steps, totals.second, diff.b_steps));
    std::stable_sort(diff.host_side.begin(), diff.host_side.end(),
                     [](const BreakdownDelta& x, const BreakdownDelta& y) {
                         return std::fabs(x.delta_ns()) > std::fabs(y.delta_ns());
                     });

    diff.kernels = diff_names(a.kernels, b.kernels);
    diff.ranges = diff_names(a.ranges, b.ranges);
    diff.api = diff_names(a.api, b.api);
    diff.cpu_sampled = a.cpu_sampled && b.cpu_sampled;
    if (diff.cpu_sampled) diff.cpu_functions = diff_names(a.cpu_functions, b.cpu_functions);
    std::map<trace::DeviceId, MemoryPeakDelta> memory;
    for (const MemoryPeak& peak : a.memory) memory[peak.device].a = peak;
    for (const MemoryPeak& peak : b.memory) memory[peak.device].b = peak;
    for (auto& [device, delta] : memory) {
        delta.device = device;
        diff.memory.push_back(delta);
        if (!delta.a || !delta.b) continue;
        const bool by_op = !delta.a->by_op.empty() && !delta.b->by_op.empty();
        std::map<std::string, MemoryPlaceDelta> places;
        auto add = [&](const std::vector<GpuMemoryPlace>& rows, bool is_a) {
            for (const GpuMemoryPlace& row : rows) {
                MemoryPlaceDelta& place = places[row.place];
                place.device = device;
                place.by = by_op ? "op" : "line";
                place.place = row.place;
                (is_a ? place.a_bytes : place.b_bytes) += row.bytes;
                (is_a ? place.a_blocks : place.b_blocks) += row.blocks;
            }
        };
        add(by_op ? delta.a->by_op : delta.a->by_line, true);
        add(by_op ? delta.b->by_op : delta.b->by_line, false);
        std::vector<MemoryPlaceDelta> rows;
        for (auto& [name, place] : places) rows.push_back(std::move(place));
        std::stable_sort(rows.begin(), rows.end(), [](const MemoryPlaceDelta& x, const MemoryPlaceDelta& y) {
            return std::llabs(x.change_bytes()) > std::llabs(y.change_bytes());
        });
        for (MemoryPlaceDelta& row : rows) diff.memory_places.push_back(std::move(row));
    }

    const bool one_rank = a.scope.rfind("rank ", 0) == 0 && b.scope.rfind("rank ", 0) == 0;
    if (diff.a_steps == diff.b_steps && one_rank) diff.total_step_change_ns = b.step_total_ns() - a.step_total_ns();

    if (!a.has_step_ranges || !b.has_step_ranges)
        diff.notes.push_back(std::string(!a.has_step_ranges && !b.has_step_ranges ? "neither run has"
                                         : !a.has_step_ranges                     ? "A has no"
                                                                                  : "B has no") +
                             " step ranges: such a run is one step, from its first event to its last");
    if (diff.a_steps != diff.b_steps)
        diff.notes.push_back("A has " + std::to_string(diff.a_steps) + " steps, B " + std::to_string(diff.b_steps) +
                             ": the breakdown compares mean steps; the name tables compare totals, so no shares");
    else if (!one_rank)
        diff.notes.push_back("name tables add every rank; their shares of the step-time change need --rank N");
    if (a.cpu_sampled != b.cpu_sampled)
        diff.notes.push_back(std::string("only ") + (a.cpu_sampled ? "A" : "B") +
                             " has sampled CPU stacks: no CPU function table");
    return diff;
}

// ---------------------------------------------------------------------------
// [SECTION] The CI gate
// ---------------------------------------------------------------------------

std::optional<double> parse_percent(std::string_view text) {
    while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
    if (!text.empty() && text.back() == '%') text.remove_suffix(1);
    while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    if (text.empty()) return std::nullopt;
    const std::string copy(text);
    char* end = nullptr;
    const double value = std::strtod(copy.c_str(), &end);
    if (end != copy.c_str() + copy.size() || !std::isfinite(value) || value < 0) return std::nullopt;
    return value;
}

GateResult check_gate(const TraceDiff& diff, DiffMetric metric, double max_slower_percent) {
    const MetricComparison& m = diff.metric(metric);
    if (!m.available)
        throw std::invalid_argument(std::string("--metric ") + diff_metric_name(metric) + ": " +
                                    (metric == DiffMetric::gpu_busy ? "a run has no GPU work" : "a run has no steps"));
    GateResult result;
    const double percent = m.delta_percent ? *m.delta_percent : (m.delta_ns > 0 ? INFINITY : 0.0);
    const bool beyond_threshold = m.delta_ns > 0 && percent > max_slower_percent;
    const bool beyond_noise = m.delta_ns > m.noise_ns;
    result.failed = beyond_threshold && beyond_noise;
    const std::string change = fmt::format("{} median {:+.3f} ms ({:+.2f}%)", diff_metric_name(metric),
                                           m.delta_ns / 1e6, m.delta_percent.value_or(0.0));
    const std::string noise = fmt::format("noise band ±{:.3f} ms", m.noise_ns / 1e6);
    if (result.failed)
        result.reason = fmt::format("FAIL: B is slower: {}, beyond the {}% threshold and the {}", change,
                                    max_slower_percent, noise);
    else if (beyond_threshold)
        result.reason = fmt::format("pass: {} is within the {} (threshold {}%)", change, noise, max_slower_percent);
    else
        result.reason = fmt::format("pass: {} (threshold {}%, {})", change, max_slower_percent, noise);
    return result;
}

}  // namespace ember::analysis
