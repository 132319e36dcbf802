// stats_report.cpp: turns the analyses into tables and prints them.
#include "profiler/analysis/stats_report.h"

#include "common/nvtx_contract.h"
#include "profiler/analysis/advice.h"
#include "profiler/analysis/breakdown_tables.h"
#include "profiler/analysis/collectives_report.h"
#include "profiler/analysis/cpu_profile.h"
#include "profiler/analysis/cuda_graphs.h"
#include "profiler/analysis/gpu_activity.h"
#include "profiler/analysis/gpu_time_by_range.h"
#include "profiler/analysis/memory_summary.h"
#include "profiler/analysis/gpu_memory.h"
#include "profiler/analysis/python_gpu.h"
#include "profiler/analysis/rank_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <type_traits>

namespace ember::analysis {

std::optional<OutputFormat> parse_output_format(std::string_view text) {
    if (text == "text") return OutputFormat::text;
    if (text == "csv") return OutputFormat::csv;
    if (text == "json") return OutputFormat::json;
    return std::nullopt;
}

bool is_report_name(std::string_view name) {
    for (const char* known : kReportNames) {
        if (name == known) return true;
    }
    return false;
}

namespace {

Table duration_table(std::string key, std::string title, const std::vector<DurationSummaryRow>& rows, bool nvtx) {
    Table table{std::move(key), std::move(title), {}, {}, {}};
    table.columns = {
        {"time_percent", "Time (%)", ColumnKind::percent},
        {"total", "Total Time", ColumnKind::time},
        {"instances", "Instances", ColumnKind::integer},
        {"avg", "Avg", ColumnKind::time},
        {"med", "Med", ColumnKind::time},
        {"min", "Min", ColumnKind::time},
        {"max", "Max", ColumnKind::time},
        {"stddev", "StdDev", ColumnKind::time},
    };
    if (nvtx) {
        table.columns.push_back({"style", "Style", ColumnKind::text});
        table.columns.push_back({"domain", "Domain", ColumnKind::text});
    }
    table.columns.push_back({"name", "Name", ColumnKind::text});
    for (const DurationSummaryRow& row : rows) {
        std::vector<Cell> cells = {row.time_percent,    row.stats.total_ns, row.stats.instances, row.stats.average_ns,
                                   row.stats.median_ns, row.stats.min_ns,   row.stats.max_ns,    row.stats.stddev_ns};
        if (nvtx) {
            cells.emplace_back(row.style);
            cells.emplace_back(row.domain);
        }
        cells.emplace_back(row.name);
        table.rows.push_back(std::move(cells));
    }
    return table;
}

std::vector<DurationSummaryRow> sorted(std::vector<DurationSummaryRow> rows, const StatsOptions& options) {
    sort_and_cut(rows, options.sort, options.top);
    return rows;
}

Table memory_table(const std::vector<MemoryOperationRow>& rows) {
    Table table{"memory", "GPU memory operations", {}, {}, {}};
    table.columns = {
        {"operation", "Operation", ColumnKind::text}, {"memory", "Memory", ColumnKind::text},
        {"count", "Count", ColumnKind::integer},      {"total_bytes", "Total Bytes", ColumnKind::integer},
        {"total", "Total Time", ColumnKind::time},    {"bandwidth_gb_per_s", "Bandwidth (GB/s)", ColumnKind::bandwidth},
    };
    for (const MemoryOperationRow& row : rows) {
        table.rows.push_back(
            {row.operation, row.memory, row.count, row.total_bytes, row.total_ns, row.bandwidth_gb_per_s});
    }
    return table;
}

Table gpu_by_range_table(const std::vector<GpuTimeByRangeRow>& rows, std::size_t top) {
    Table table{
        "gpu_by_range", "GPU time per NVTX range (kernels, innermost range of the launching thread)", {}, {}, {}};
    table.columns = {
        {"gpu_percent", "GPU Time (%)", ColumnKind::percent},
        {"gpu_time", "GPU Time", ColumnKind::time},
        {"kernels", "Kernels", ColumnKind::integer},
        {"range", "Range", ColumnKind::text},
    };
    for (std::size_t i = 0; i < rows.size() && (top == 0 || i < top); ++i) {
        table.rows.push_back({rows[i].gpu_percent, rows[i].gpu_ns, rows[i].kernels, rows[i].range_path});
    }
    return table;
}

Cell device_cell(trace::DeviceId device) {
    return device == trace::kNoDevice ? Cell{std::string("-")} : Cell{static_cast<std::int64_t>(device)};
}

Table steps_table(const GpuActivity& activity, const trace::RunInfo& run, bool collective_waits) {
    Table table{"steps", "Training steps (NVTX \"step\" ranges)", {}, {}, {}};
    table.columns = {
        {"step", "Step", ColumnKind::integer},
        {"device", "Device", ColumnKind::integer},
        {"start", "Start", ColumnKind::time},
        {"wall", "Wall", ColumnKind::time},
        {"gpu_compute", "GPU Compute", ColumnKind::time},
        {"communication", "Communication", ColumnKind::time},
        {"copies", "Copies", ColumnKind::time},
        {"dataloader_wait", "Dataloader Wait", ColumnKind::time},
        {"allreduce_wait", "All-reduce Wait", ColumnKind::time},
        {"gpu_idle", "GPU Idle", ColumnKind::time},
        {"gpu_idle_percent", "GPU Idle (%)", ColumnKind::percent},
    };
    if (collective_waits) table.columns.push_back({"collective_wait", "Collective Wait", ColumnKind::time});
    // A job trace of several ranks: which rank ran each step.
    const bool ranks = std::any_of(activity.steps.begin(), activity.steps.end(),
                                   [](const StepBreakdown& step) { return step.rank >= 0; });
    if (ranks) table.columns.insert(table.columns.begin() + 1, {"rank", "Rank", ColumnKind::integer});
    for (const StepBreakdown& step : activity.steps) {
        double idle_percent =
            step.wall_ns > 0 ? 100.0 * static_cast<double>(step.gpu_idle_ns) / static_cast<double>(step.wall_ns) : 0.0;
        std::vector<Cell> cells = {step.step_index,
                                   device_cell(step.device_id),
                                   step.start_ns - run.start_ns,
                                   step.wall_ns,
                                   step.gpu_compute_ns,
                                   step.communication_ns,
                                   step.copies_ns,
                                   step.dataloader_wait_ns,
                                   step.allreduce_wait_ns,
                                   step.gpu_idle_ns,
                                   idle_percent};
        if (collective_waits) cells.push_back(step.collective_wait_ns);
        if (ranks) cells.insert(cells.begin() + 1, Cell{static_cast<std::int64_t>(step.rank)});
        table.rows.push_back(std::move(cells));
    }
    return table;
}

// The steps in brief: per rank and device, how long a step takes (median and spread)
// and what a median step is made of; then the slowest steps and what made each slow.
std::vector<Table> step_summary_tables(const GpuActivity& activity, std::size_t slowest, bool collective_waits) {
    struct Group {
        std::int32_t rank = -1;
        trace::DeviceId device = trace::kNoDevice;
        std::vector<const StepBreakdown*> steps;
    };
    std::vector<Group> groups;
    for (const StepBreakdown& step : activity.steps) {
        auto found = std::find_if(groups.begin(), groups.end(),
                                  [&](const Group& g) { return g.rank == step.rank && g.device == step.device_id; });
        if (found == groups.end()) found = groups.insert(groups.end(), Group{step.rank, step.device_id, {}});
        found->steps.push_back(&step);
    }
    auto median_of = [](std::vector<trace::TimeNs> values) -> trace::TimeNs {
        if (values.empty()) return 0;
        std::sort(values.begin(), values.end());
        const std::size_t n = values.size();
        return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
    };
    const bool ranks = std::any_of(groups.begin(), groups.end(), [](const Group& g) { return g.rank >= 0; });
    Table summary{
        "steps_summary", "Training steps in brief (NVTX \"step\" ranges; medians over the steps)", {}, {}, {}};
    summary.columns = {{"device", "Device", ColumnKind::integer},
                       {"steps", "Steps", ColumnKind::integer},
                       {"wall_median", "Wall Med", ColumnKind::time},
                       {"wall_min", "Wall Min", ColumnKind::time},
                       {"wall_p90", "Wall P90", ColumnKind::time},
                       {"wall_max", "Wall Max", ColumnKind::time},
                       {"gpu_compute_median", "GPU Compute Med", ColumnKind::time},
                       {"communication_median", "Communication Med", ColumnKind::time},
                       {"copies_median", "Copies Med", ColumnKind::time},
                       {"dataloader_wait_median", "Dataloader Wait Med", ColumnKind::time},
                       {"allreduce_wait_median", "All-reduce Wait Med", ColumnKind::time},
                       {"gpu_idle_median", "GPU Idle Med", ColumnKind::time}};
    if (collective_waits)
        summary.columns.push_back({"collective_wait_median", "Collective Wait Med", ColumnKind::time});
    if (ranks) summary.columns.insert(summary.columns.begin(), {"rank", "Rank", ColumnKind::integer});
    Table slow{
        "slowest_steps", "Slowest steps and what made each slow (its largest excess over the median step)", {}, {}, {}};
    slow.columns = {{"step", "Step", ColumnKind::integer},
                    {"device", "Device", ColumnKind::integer},
                    {"wall", "Wall", ColumnKind::time},
                    {"over_median", "Over Median", ColumnKind::time},
                    {"cause", "Cause", ColumnKind::text}};
    if (ranks) slow.columns.insert(slow.columns.begin() + 1, {"rank", "Rank", ColumnKind::integer});
    slow.empty_note = "no step is slower than the median step";
    for (const Group& group : groups) {
        std::vector<trace::TimeNs> wall, compute, communication, copies, dataloader, allreduce, idle, collective;
        for (const StepBreakdown* step : group.steps) {
            collective.push_back(step->collective_wait_ns);
            wall.push_back(step->wall_ns);
            compute.push_back(step->gpu_compute_ns);
            communication.push_back(step->communication_ns);
            copies.push_back(step->copies_ns);
            dataloader.push_back(step->dataloader_wait_ns);
            allreduce.push_back(step->allreduce_wait_ns);
            idle.push_back(step->gpu_idle_ns);
        }
        std::vector<trace::TimeNs> sorted_wall = wall;
        std::sort(sorted_wall.begin(), sorted_wall.end());
        const std::size_t n = sorted_wall.size();
        const trace::TimeNs p90 = sorted_wall[std::min(n - 1, static_cast<std::size_t>(std::ceil(0.9 * n)) - 1)];
        const trace::TimeNs median_wall = median_of(wall), median_compute = median_of(compute),
                            median_communication = median_of(communication), median_copies = median_of(copies),
                            median_dataloader = median_of(dataloader), median_allreduce = median_of(allreduce),
                            median_idle = median_of(idle);
        std::vector<Cell> row = {device_cell(group.device),
                                 static_cast<std::int64_t>(n),
                                 median_wall,
                                 sorted_wall.front(),
                                 p90,
                                 sorted_wall.back(),
                                 median_compute,
                                 median_communication,
                                 median_copies,
                                 median_dataloader,
                                 median_allreduce,
                                 median_idle};
        if (ranks) row.insert(row.begin(), Cell{static_cast<std::int64_t>(group.rank)});
        const trace::TimeNs median_collective = median_of(collective);
        if (collective_waits) row.push_back(median_collective);
        summary.rows.push_back(std::move(row));

        std::vector<const StepBreakdown*> by_wall = group.steps;
        std::stable_sort(by_wall.begin(), by_wall.end(),
                         [](const StepBreakdown* a, const StepBreakdown* b) { return a->wall_ns > b->wall_ns; });
        for (std::size_t i = 0; i < by_wall.size() && i < slowest; ++i) {
            const StepBreakdown& step = *by_wall[i];
            if (step.wall_ns <= median_wall) break;
            // The component that grew most over its median names the cause; what no
            // measured part explains is host time (compute on a CPU run). "GPU idle"
            // growing alone means the host fell behind for a reason the trace does not name.
            const bool on_gpu = step.device_id != trace::kNoDevice;
            std::vector<std::pair<std::string, trace::TimeNs>> excess = {
                {"dataloader wait", step.dataloader_wait_ns - median_dataloader},
                {"all-reduce wait", step.allreduce_wait_ns - median_allreduce},
                {"waiting in collectives for a later rank", step.collective_wait_ns - median_collective},
                {"GPU compute", on_gpu ? step.gpu_compute_ns - median_compute : 0},
                {"communication", on_gpu ? step.communication_ns - median_communication : 0},
                {"copies", on_gpu ? step.copies_ns - median_copies : 0},
                {"GPU idle (host busy or waiting)", on_gpu ? step.gpu_idle_ns - median_idle : 0},
            };
            if (!on_gpu) {
                trace::TimeNs explained = 0;
                for (const auto& part : excess) explained += std::max<trace::TimeNs>(0, part.second);
                excess.emplace_back("host compute", step.wall_ns - median_wall - explained);
            }
            const auto largest = std::max_element(excess.begin(), excess.end(),
                                                  [](const auto& a, const auto& b) { return a.second < b.second; });
            std::string cause = largest->second > 0
                                    ? fmt::format("{} +{:.3f} ms", largest->first, largest->second / 1e6)
                                    : std::string("host time outside the measured parts");
            // The first step of a run pays once for what later steps reuse.
            const bool first = std::none_of(group.steps.begin(), group.steps.end(), [&](const StepBreakdown* other) {
                return other->start_ns < step.start_ns;
            });
            if (first) cause += " (first step: one-time setup such as allocations, kernel/primitive creation, warm-up)";
            std::vector<Cell> cells = {step.step_index, device_cell(step.device_id), step.wall_ns,
                                       step.wall_ns - median_wall, cause};
            if (ranks) cells.insert(cells.begin() + 1, Cell{static_cast<std::int64_t>(step.rank)});
            slow.rows.push_back(std::move(cells));
        }
    }
    summary.empty_note = "no NVTX \"step\" ranges in this trace";
    // Without a GPU the device and GPU columns say nothing: leave them out.
    const bool gpu =
        std::any_of(groups.begin(), groups.end(), [](const Group& g) { return g.device != trace::kNoDevice; });
    if (!gpu) {
        for (Table* table : {&summary, &slow})
            for (const char* key :
                 {"device", "gpu_compute_median", "communication_median", "copies_median", "gpu_idle_median"}) {
                auto column = std::find_if(table->columns.begin(), table->columns.end(),
                                           [&](const Column& c) { return c.key == key; });
                if (column == table->columns.end()) continue;
                const auto index = column - table->columns.begin();
                table->columns.erase(column);
                for (std::vector<Cell>& row : table->rows) row.erase(row.begin() + index);
            }
    }
    if (groups.empty()) return {std::move(summary)};
    return {std::move(summary), std::move(slow)};
}

Table ranks_table(const RankSummary& summary) {
    Table table{"ranks",
                summary.from_collectives ? "Ranks (compute, wait in collectives, straggler: the collectives report's)"
                                         : "Ranks (compute, all-reduce wait, straggler)",
                {},
                {},
                {}};
    table.columns = {
        {"rank", "Rank", ColumnKind::integer},
        {"steps", "Steps", ColumnKind::integer},
        {"step_time", "Step Time", ColumnKind::time},
        {"compute", "Compute", ColumnKind::time},
    };
    if (summary.from_collectives) {
        table.columns.push_back({"collective_wait", "Collective Wait", ColumnKind::time});
        table.columns.push_back({"collective_wait_percent", "Collective Wait (%)", ColumnKind::percent});
        table.columns.push_back({"arrived_last", "Arrived Last", ColumnKind::integer});
    }
    // ember's `allreduce/wait` ranges: only where some rank has them, beside the collectives.
    const bool nvtx_waits =
        !summary.from_collectives || std::any_of(summary.ranks.begin(), summary.ranks.end(),
                                                 [](const RankTimes& rank) { return rank.allreduce_wait_ns > 0; });
    if (nvtx_waits) {
        table.columns.push_back({"allreduce_wait", "All-reduce Wait", ColumnKind::time});
        table.columns.push_back({"allreduce_wait_percent", "All-reduce Wait (%)", ColumnKind::percent});
    }
    table.columns.push_back({"dataloader_wait", "Dataloader Wait", ColumnKind::time});
    table.columns.push_back({"role", "Role", ColumnKind::text});
    auto percent_of_step = [](const RankTimes& rank, trace::TimeNs part) -> Cell {
        if (rank.step_ns <= 0) return std::monostate{};
        return 100.0 * static_cast<double>(part) / static_cast<double>(rank.step_ns);
    };
    for (std::size_t i = 0; i < summary.ranks.size(); ++i) {
        const RankTimes& rank = summary.ranks[i];
        std::string role = summary.straggler == i ? "straggler" : (summary.straggler ? "waits" : "");
        std::vector<Cell> row = {static_cast<std::int64_t>(rank.rank), rank.steps, rank.step_ns, rank.compute_ns};
        if (summary.from_collectives) {
            row.push_back(rank.collective_wait_ns);
            row.push_back(percent_of_step(rank, rank.collective_wait_ns));
            row.push_back(rank.arrived_last);
        }
        if (nvtx_waits) {
            row.push_back(rank.allreduce_wait_ns);
            row.push_back(rank.step_ns > 0 ? percent_of_step(rank, rank.allreduce_wait_ns) : Cell{0.0});
        }
        row.push_back(rank.dataloader_wait_ns);
        row.push_back(role);
        table.rows.push_back(std::move(row));
    }
    if (std::any_of(summary.ranks.begin(), summary.ranks.end(), [](const RankTimes& r) { return r.compute_from_gpu; }))
        table.notes.push_back(
            "compute: the union of each rank's kernels that are not communication, where a file has "
            "no ember compute ranges");
    if (summary.straggler && !summary.straggler_evidence.empty())
        table.notes.push_back("straggler: " + summary.straggler_evidence + ".");
    else if (!summary.straggler && summary.from_collectives && summary.ranks.size() >= 2)
        table.notes.push_back("no straggler: no rank arrived last markedly more often than the others.");
    return table;
}

// A straggler whose lateness costs the other ranks a noticeable share of their steps.
std::optional<AdviceItem> straggler_advice(const RankSummary& summary) {
    if (!summary.straggler) return std::nullopt;
    trace::TimeNs others_step_ns = 0;
    for (std::size_t i = 0; i < summary.ranks.size(); ++i)
        if (i != *summary.straggler) others_step_ns += summary.ranks[i].step_ns;
    if (others_step_ns <= 0) return std::nullopt;
    const double percent = 100.0 * static_cast<double>(summary.others_wait_ns) / static_cast<double>(others_step_ns);
    if (percent < kAllreduceWaitThresholdPercent) return std::nullopt;
    const RankTimes& slow = summary.ranks[*summary.straggler];
    const trace::TimeNs per_step = summary.ranks[*summary.straggler].steps > 0
                                       ? summary.others_wait_ns /
                                             std::max<std::int64_t>(1, summary.ranks[*summary.straggler].steps) /
                                             static_cast<std::int64_t>(summary.ranks.size() - 1)
                                       : summary.others_wait_ns;
    const std::string where = summary.from_collectives
                                  ? fmt::format(
                                        "waiting in collectives because it came late (it arrived last to {} "
                                        "of them)",
                                        slow.arrived_last)
                                  : fmt::format("in {} for it", nvtx::range::kAllreduceWait);
    return AdviceItem{
        "straggler",
        fmt::format("rank {} is the straggler: the other ranks spent {:.1f}% of their step time ({:.3f} s) {}",
                    slow.rank, percent, static_cast<double>(summary.others_wait_ns) / 1e9, where),
        fmt::format("look at rank {}'s host: data loading, a slower or throttled GPU, uneven shards or other "
                    "work on that machine; every rank steps at the pace of the slowest",
                    slow.rank),
        per_step};
}

Table gpu_busy_table(const GpuActivity& activity) {
    Table table{"gpu_busy", "GPU busy over the run", {}, {}, {}};
    table.columns = {
        {"device", "Device", ColumnKind::integer}, {"window", "Window", ColumnKind::time},
        {"busy", "Busy", ColumnKind::time},        {"busy_percent", "Busy (%)", ColumnKind::percent},
        {"idle", "Idle", ColumnKind::time},        {"idle_gaps", "Idle Gaps", ColumnKind::integer},
    };
    for (const DeviceBusy& device : activity.devices) {
        trace::TimeNs window = device.window_end_ns - device.window_start_ns;
        table.rows.push_back({static_cast<std::int64_t>(device.device_id), window, device.busy_ns,
                              100.0 * device.busy_fraction, window - device.busy_ns, device.idle_gap_count});
    }
    return table;
}

Table idle_gaps_table(const GpuActivity& activity, const trace::RunInfo& run) {
    Table table{"idle_gaps", "Longest GPU idle gaps", {}, {}, {}};
    table.columns = {
        {"device", "Device", ColumnKind::integer},
        {"start", "Start", ColumnKind::time},
        {"end", "End", ColumnKind::time},
        {"duration", "Duration", ColumnKind::time},
    };
    for (const IdleGap& gap : activity.longest_gaps) {
        table.rows.push_back({static_cast<std::int64_t>(gap.device_id), gap.start_ns - run.start_ns,
                              gap.end_ns - run.start_ns, gap.end_ns - gap.start_ns});
    }
    return table;
}

Table advice_table(const std::vector<AdviceItem>& items) {
    Table table{"advice", "Advice (most time to win back first)", {}, {}, {}};
    table.columns = {
        {"topic", "Topic", ColumnKind::text},
        {"recoverable_per_step_ns", "Recoverable", ColumnKind::time},
        {"finding", "Finding", ColumnKind::text},
        {"advice", "Advice", ColumnKind::text},
    };
    for (const AdviceItem& item : items) {
        std::vector<Cell>& row = table.rows.emplace_back();
        row.emplace_back(item.topic);
        if (item.recoverable_ns)
            row.emplace_back(*item.recoverable_ns);
        else
            row.emplace_back(std::monostate{});
        row.emplace_back(item.finding);
        row.emplace_back(item.advice);
    }
    table.empty_note = "nothing stands out: no wait or idle time above the thresholds of docs/stats.md";
    if (!items.empty())
        table.notes.push_back(
            "Recoverable: the most each advice could win back per step (over the run where the trace "
            "has no steps): the waiting it would remove, or for a CPU hot spot the time its functions "
            "took; none where the run already applies every remedy named");
    return table;
}

// The CPU reports: hot functions, CPU per NVTX range, per thread.
std::vector<Table> cpu_tables(const CpuProfile& profile, std::size_t top) {
    const bool timed = profile.period_ns > 0;
    auto share = [&](double samples) {
        return profile.samples > 0 ? 100.0 * samples / static_cast<double>(profile.samples) : 0.0;
    };
    // A count of samples as every CPU table shows it: its share of all samples, then,
    // for a timed profile, the CPU time it stands for (a split count, rounded to the ns).
    auto measure_columns = [&](Table& table, Column percent, Column time) {
        table.columns.push_back(std::move(percent));
        if (timed) table.columns.push_back(std::move(time));
    };
    auto measure_cells = [&]<typename Count>(std::vector<Cell>& cells, Count samples) {
        cells.emplace_back(share(static_cast<double>(samples)));
        if (!timed) return;
        if constexpr (std::is_integral_v<Count>)
            cells.emplace_back(profile.cpu_ns(samples));
        else
            cells.emplace_back(
                static_cast<std::int64_t>(std::llround(samples * static_cast<double>(profile.period_ns))));
    };
    Table functions{"cpu_functions",
                    fmt::format("CPU hot functions ({} stack samples{}{})", profile.samples,
                                timed ? fmt::format(", one per {:.1f} ms of {}", profile.period_ns / 1e6,
                                                    profile.include_idle ? "a thread's time" : "CPU time")
                                      : "",
                                profile.include_idle ? ", idle threads' samples included" : ""),
                    {},
                    {},
                    {}};
    measure_columns(functions, {"self_percent", "Self (%)", ColumnKind::percent},
                    {"self_ns", "Self", ColumnKind::time});
    measure_columns(functions, {"total_percent", "Total (%)", ColumnKind::percent},
                    {"total_ns", "Total", ColumnKind::time});
    functions.columns.push_back({"self_samples", "Self Samples", ColumnKind::integer});
    functions.columns.push_back({"function", "Function", ColumnKind::text});
    std::size_t shown = 0;
    for (const CpuFunctionRow& row : profile.functions) {
        if (row.self_samples == 0 || (top > 0 && shown >= top)) continue;
        ++shown;
        std::vector<Cell>& cells = functions.rows.emplace_back();
        measure_cells(cells, row.self_samples);
        measure_cells(cells, row.total_samples);
        cells.emplace_back(row.self_samples);
        cells.emplace_back(row.function);
    }
    functions.empty_note = "no CPU stack samples (ember train --profile samples them; ember record --sample-cpu HZ)";
    Table ranges{
        "cpu_by_range",
        "CPU time per NVTX range (innermost range open on the sampled thread; for an OpenMP team thread, on the thread leading the team)",
        {},
        {},
        {}};
    measure_columns(ranges, {"percent", "CPU (%)", ColumnKind::percent}, {"cpu_ns", "CPU", ColumnKind::time});
    ranges.columns.push_back({"samples", "Samples", ColumnKind::integer});
    ranges.columns.push_back({"range", "Range", ColumnKind::text});
    shown = 0;
    for (const CpuRangeRow& row : profile.by_range) {
        if (top > 0 && shown++ >= top) break;
        std::vector<Cell>& cells = ranges.rows.emplace_back();
        measure_cells(cells, row.samples);
        cells.emplace_back(row.samples);
        cells.emplace_back(row.range_path);
    }
    Table threads{"cpu_threads", "CPU time per thread", {}, {}, {}};
    measure_columns(threads, {"percent", "CPU (%)", ColumnKind::percent}, {"cpu_ns", "CPU", ColumnKind::time});
    threads.columns.push_back({"samples", "Samples", ColumnKind::integer});
    threads.columns.push_back({"tid", "TID", ColumnKind::integer});
    threads.columns.push_back({"thread", "Thread", ColumnKind::text});
    for (const CpuThreadRow& row : profile.threads) {
        if (row.samples == 0) continue;
        std::vector<Cell>& cells = threads.rows.emplace_back();
        measure_cells(cells, row.samples);
        cells.emplace_back(row.samples);
        cells.emplace_back(row.tid);
        cells.emplace_back(row.name);
    }
    if (profile.samples == 0) return {std::move(functions)};
    std::vector<Table> tables;
    tables.push_back(std::move(functions));
    // Python lines, as line_profiler shows them (with no decorators).
    if (!profile.lines.empty()) {
        Table lines{"python_lines",
                    "Python hot lines (innermost Python frame of each sample: self; anywhere on the stack: total)",
                    {},
                    {},
                    {}};
        measure_columns(lines, {"self_percent", "Self (%)", ColumnKind::percent},
                        {"self_ns", "Self", ColumnKind::time});
        measure_columns(lines, {"total_percent", "Total (%)", ColumnKind::percent},
                        {"total_ns", "Total", ColumnKind::time});
        lines.columns.push_back({"line", "Line", ColumnKind::text});
        lines.columns.push_back({"function", "Function", ColumnKind::text});
        shown = 0;
        for (const CpuLineRow& row : profile.lines) {
            if (row.self_samples == 0 || (top > 0 && shown >= top)) continue;
            ++shown;
            std::vector<Cell>& cells = lines.rows.emplace_back();
            measure_cells(cells, row.self_samples);
            measure_cells(cells, row.total_samples);
            cells.emplace_back(row.location);
            cells.emplace_back(row.function);
        }
        tables.push_back(std::move(lines));
    }
    if (!profile.gpu_waits.empty()) {
        Table waits{"cpu_gpu_waits",
                    fmt::format("CPU samples waiting on the GPU ({} samples inside a synchronizing CUDA call, "
                                "split over the GPU work that ran during the wait)",
                                profile.gpu_wait_samples),
                    {},
                    {},
                    {}};
        measure_columns(waits, {"percent", "Share (%)", ColumnKind::percent}, {"ns", "Time", ColumnKind::time});
        waits.columns.push_back({"samples", "Samples", ColumnKind::percent});
        waits.columns.push_back({"line", "Waiting Line", ColumnKind::text});
        waits.columns.push_back({"function", "Function", ColumnKind::text});
        waits.columns.push_back({"waited_for", "Waiting For", ColumnKind::text});
        shown = 0;
        for (const CpuGpuWaitRow& row : profile.gpu_waits) {
            if (top > 0 && shown++ >= top) break;
            std::vector<Cell>& cells = waits.rows.emplace_back();
            measure_cells(cells, row.samples);
            cells.emplace_back(row.samples);
            cells.emplace_back(row.location);
            cells.emplace_back(row.function);
            cells.emplace_back(row.waited_for);
        }
        tables.push_back(std::move(waits));
    }
    tables.push_back(std::move(ranges));
    if (!profile.lines_by_range.empty()) {
        Table per_range{"python_lines_by_range",
                        "Python hot lines per NVTX range (the innermost range open on the sampled thread)",
                        {},
                        {},
                        {}};
        measure_columns(per_range, {"percent", "Share (%)", ColumnKind::percent}, {"ns", "Time", ColumnKind::time});
        per_range.columns.push_back({"range", "Range", ColumnKind::text});
        per_range.columns.push_back({"line", "Line", ColumnKind::text});
        per_range.columns.push_back({"function", "Function", ColumnKind::text});
        std::map<std::string, std::size_t> shown_in_range;  // the top lines of each range
        for (const CpuRangeLineRow& row : profile.lines_by_range) {
            if (top > 0 && shown_in_range[row.range_path]++ >= top) continue;
            std::vector<Cell>& cells = per_range.rows.emplace_back();
            measure_cells(cells, row.samples);
            cells.emplace_back(row.range_path);
            cells.emplace_back(row.location);
            cells.emplace_back(row.function);
        }
        tables.push_back(std::move(per_range));
    }
    tables.push_back(std::move(threads));
    return tables;
}

// The Python call sites of GPU work, and the host's waits on it (python_gpu.h).
std::vector<Table> python_gpu_tables(const PythonGpuReport& report, std::size_t top) {
    Table sites{"python_gpu_sites",
                "GPU time per Python call site (the innermost frame of the program's own code on the launching "
                "CUDA call's Python stack)",
                {},
                {},
                {}};
    sites.columns = {
        {"percent", "GPU (%)", ColumnKind::percent},
        {"gpu_ns", "GPU Time", ColumnKind::time},
        {"operations", "Operations", ColumnKind::integer},
        {"calls", "Calls", ColumnKind::integer},
        {"line", "Line", ColumnKind::text},
        {"function", "Function", ColumnKind::text},
        {"top_work", "Top Operations", ColumnKind::text},
    };
    for (const PythonGpuSiteRow& row : report.sites) {
        if (top > 0 && sites.rows.size() >= top) break;
        std::string work;
        for (const auto& [name, ns] : row.top_work)
            work +=
                fmt::format("{}{} ({:.0f}%)", work.empty() ? "" : ", ", name,
                            row.gpu_ns > 0 ? 100.0 * static_cast<double>(ns) / static_cast<double>(row.gpu_ns) : 0.0);
        sites.rows.push_back(
            {report.gpu_ns > 0 ? 100.0 * static_cast<double>(row.gpu_ns) / static_cast<double>(report.gpu_ns) : 0.0,
             row.gpu_ns, row.operations, row.calls, row.site.location, row.site.function, work});
    }
    sites.empty_note = "no GPU work with a launching CUDA call in this file";
    Table waits{"python_gpu_waits",
                "Host waits on the GPU per Python call site (time inside synchronizing CUDA calls, split over the GPU "
                "work that ran during each wait)",
                {},
                {},
                {}};
    waits.columns = {
        {"wait_ns", "Wait Time", ColumnKind::time}, {"waits", "Waits", ColumnKind::integer},
        {"line", "Line", ColumnKind::text},         {"function", "Function", ColumnKind::text},
        {"api", "Call", ColumnKind::text},          {"waited_for", "Waiting For", ColumnKind::text},
    };
    for (const PythonGpuWaitRow& row : report.waits) {
        if (top > 0 && waits.rows.size() >= top) break;
        waits.rows.push_back({static_cast<std::int64_t>(std::llround(row.wait_ns)), row.waits, row.site.location,
                              row.site.function, row.api, row.waited_for});
    }
    waits.empty_note = "no synchronizing CUDA call in this file";
    std::vector<Table> tables;
    tables.push_back(std::move(sites));
    tables.push_back(std::move(waits));
    if (!report.has_call_stacks) {
        Table note{"python_gpu_note", "Python call sites", {}, {}, {}};
        note.empty_note =
            "no CUDA API call in this file carries a call stack (ember record gives them one when the "
            "recorded program is CPython): every call site reads \"" +
            std::string(kNoPythonStack) + "\"";
        tables.push_back(std::move(note));
    }
    return tables;
}

bool wanted(const StatsOptions& options, std::string_view name) {
    if (options.reports.empty())
        return std::find(std::begin(kDefaultReportNames), std::end(kDefaultReportNames), name) !=
               std::end(kDefaultReportNames);
    return std::find(options.reports.begin(), options.reports.end(), name) != options.reports.end();
}

}  // namespace

std::vector<Table> build_stats_tables(const store::TraceReader& reader, const StatsOptions& options,
                                      const JobCollectives* job) {
    std::vector<Table> tables;
    const trace::RunInfo& run = reader.run();
    bool need_activity = wanted(options, "steps") || wanted(options, "gpu_busy") || wanted(options, "idle_gaps") ||
                         wanted(options, "advice");
    bool need_memory = wanted(options, "memory") || wanted(options, "advice");
    const auto named = [&](std::string_view name) {
        return std::find(options.reports.begin(), options.reports.end(), name) != options.reports.end();
    };
    const bool ranks_named = named("ranks"), collectives_named = named("collectives");
    const bool several_ranks = job ? job->ranks.size() >= 2 : reader.processes().size() >= 2;
    // The job's collectives (matched, aligned, waits, straggler): the collectives, ranks,
    // steps and advice reports share one analysis.
    std::optional<JobCollectives> own_job;
    if (!job && (collectives_named || (several_ranks && (wanted(options, "ranks") || wanted(options, "collectives") ||
                                                         wanted(options, "advice") || wanted(options, "steps"))))) {
        own_job = job_collectives(reader);
        job = &*own_job;
    }
    GpuActivity activity;
    if (need_activity) activity = gpu_activity(reader, options.gap_count);
    // Each step's wait in the collectives, as the job analysis found it (per rank, its
    // steps in start order: the same steps, steps.h).
    const bool collective_waits = job && job->matched > 0;
    if (collective_waits) {
        for (StepBreakdown& step : activity.steps) {
            const std::int32_t rank = step.rank >= 0 ? step.rank : std::max(0, run.rank);
            const RankWaitRow* row = job->rank(rank);
            if (!row && job->ranks.size() == 1) row = &job->ranks.front();
            if (row && step.step_index >= 0 && static_cast<std::size_t>(step.step_index) < row->step_waits.size())
                step.collective_wait_ns = row->step_waits[static_cast<std::size_t>(step.step_index)];
        }
    }
    std::vector<MemoryOperationRow> memory;
    if (need_memory) memory = memory_summary(reader);

    // The NVTX table and the advice (forward vs backward time) read the same summary.
    std::vector<DurationSummaryRow> ranges;
    if (wanted(options, "nvtx") || wanted(options, "advice")) ranges = range_summary(reader);

    if (wanted(options, "kernels")) {
        tables.push_back(duration_table("kernels", "GPU kernels", sorted(kernel_summary(reader), options), false));
    }
    // CUDA graphs: asked for by name, or in the default report where GPU work ran from one.
    const bool graphs_named =
        std::find(options.reports.begin(), options.reports.end(), "graphs") != options.reports.end();
    if (graphs_named || options.reports.empty()) {
        const CudaGraphSummary graphs = cuda_graph_summary(reader);
        if (graphs_named || graphs.any()) tables.push_back(cuda_graphs_table(graphs));
    }
    if (wanted(options, "memory")) tables.push_back(memory_table(memory));
    if (wanted(options, "api")) {
        tables.push_back(duration_table("api", "CUDA API calls", sorted(api_summary(reader), options), false));
    }
    if (wanted(options, "nvtx")) {
        tables.push_back(duration_table("nvtx", "NVTX ranges", sorted(ranges, options), true));
    }
    if (wanted(options, "gpu_by_range")) {
        tables.push_back(gpu_by_range_table(gpu_time_by_range_rows(gpu_time_by_range(reader)), options.top));
    }
    if (wanted(options, "steps")) {
        for (Table& table : step_summary_tables(activity, 5, collective_waits)) tables.push_back(std::move(table));
        // Every step: on request in text; always in the machine-readable formats.
        if (options.all_steps || options.format != OutputFormat::text)
            tables.push_back(steps_table(activity, run, collective_waits));
    }
    // Per-rank numbers (another pass over the ranges) only where they can show: asked
    // for by name, or a file of several ranks (the default table, the straggler advice).
    RankSummary ranks;
    if (ranks_named || (several_ranks && (wanted(options, "ranks") || wanted(options, "advice"))))
        ranks = rank_summary(reader, job);
    if (ranks_named || (options.reports.empty() && ranks.ranks.size() >= 2)) tables.push_back(ranks_table(ranks));
    if (job && (collectives_named || (options.reports.empty() && job->ranks.size() >= 2))) {
        for (Table& table :
             collectives_tables(*job, options.top > 0 ? options.top : 10, options.format == OutputFormat::text))
            tables.push_back(std::move(table));
    }
    // The GPU breakdowns share one pass over the GPU work, under the chosen conventions.
    const bool need_gpu_work = wanted(options, "temporal") || wanted(options, "kernel_types") ||
                               wanted(options, "overlap") || wanted(options, "idle_breakdown") ||
                               wanted(options, "launches") || wanted(options, "queue") ||
                               wanted(options, "gpu_timeline") || wanted(options, "advice");
    std::vector<RankGpuWork> work;
    if (need_gpu_work) work = gpu_work(reader, options.like);
    const bool any_gpu_work =
        std::any_of(work.begin(), work.end(), [](const RankGpuWork& rank) { return !rank.events.empty(); });
    auto add = [&](Table table) {
        if (table.rows.empty() && !any_gpu_work) table.empty_note = no_gpu_work_note(reader);
        tables.push_back(std::move(table));
    };
    if (wanted(options, "temporal")) add(temporal_table(work));
    if (wanted(options, "kernel_types")) {
        std::vector<Table> types = kernel_type_tables(reader, work, options.kernels_per_type);
        add(std::move(types[0]));
        if (any_gpu_work) add(std::move(types[1]));  // the top names only where there are any
    }
    if (wanted(options, "overlap")) {
        const bool communication = std::any_of(work.begin(), work.end(), [](const RankGpuWork& rank) {
            return std::any_of(rank.events.begin(), rank.events.end(),
                               [](const GpuEvent& e) { return e.kernel_class == KernelClass::communication; });
        });
        // Without communication kernels the overlap is a one-line statement, not a table of dashes.
        if (communication || !options.reports.empty()) add(overlap_table(work));
    }
    if (wanted(options, "idle_breakdown")) add(idle_breakdown_table(work, options.kernel_wait_threshold_ns));
    if (wanted(options, "launches")) add(launches_table(reader, work, options.top, launch_options_for(options.like)));
    if (wanted(options, "queue")) add(queue_table(work));
    if (wanted(options, "step_breakdown")) {
        StepBreakdownNotes notes;
        const StepConvention convention = step_convention_for(options.like);
        tables.push_back(step_breakdown_table(step_breakdown(reader, convention, &notes), notes, convention));
    }
    if (wanted(options, "gpu_timeline")) add(gpu_timeline_table(work));
    if (wanted(options, "gpu_busy")) tables.push_back(gpu_busy_table(activity));
    if (wanted(options, "idle_gaps")) tables.push_back(idle_gaps_table(activity, run));
    CpuProfile cpu;
    if (wanted(options, "cpu") || wanted(options, "advice")) cpu = cpu_profile(reader, options.include_idle);
    if (wanted(options, "cpu"))
        for (Table& table : cpu_tables(cpu, options.top > 0 ? options.top : 15)) tables.push_back(std::move(table));
    if (wanted(options, "python_gpu"))
        for (Table& table : python_gpu_tables(python_gpu(reader), options.top > 0 ? options.top : 15))
            tables.push_back(std::move(table));
    // The memory replay, for its report and for the advice (empty without memory events).
    std::optional<GpuMemoryReport> memory_report;
    if (wanted(options, "gpu_memory") || wanted(options, "advice")) memory_report = gpu_memory(reader);
    if (wanted(options, "gpu_memory"))
        for (Table& table : gpu_memory_tables(*memory_report, run, options.top)) tables.push_back(std::move(table));
    // A trace without GPU activity: its GPU tables say so in one line each, and the
    // default text report says it once for all of them.
    if (!any_gpu_work && reader.event_count("kernels") == 0 && reader.event_count("memcpys") == 0) {
        const std::vector<std::string> gpu_keys = {
            "kernels",        "memory",   "api",   "gpu_by_range", "temporal", "kernel_types", "overlap",
            "idle_breakdown", "launches", "queue", "gpu_timeline", "gpu_busy", "idle_gaps"};
        auto is_gpu = [&](const Table& table) {
            return table.rows.empty() && std::find(gpu_keys.begin(), gpu_keys.end(), table.key) != gpu_keys.end();
        };
        std::string left_out;
        for (Table& table : tables)
            if (is_gpu(table)) {
                table.empty_note = no_gpu_work_note(reader);
                left_out += (left_out.empty() ? "" : ", ") + table.key;
            }
        if (options.reports.empty() && options.format == OutputFormat::text && !left_out.empty()) {
            tables.erase(std::remove_if(tables.begin(), tables.end(), is_gpu), tables.end());
            Table gpu{"gpu", "GPU", {}, {}, {}};
            gpu.empty_note = no_gpu_work_note(reader) + ": " + left_out + " left out";
            tables.insert(tables.begin(), std::move(gpu));
        }
    }
    if (wanted(options, "advice")) {
        AdviceInputs inputs{activity, memory, reader.total_dropped(), work, options.kernel_wait_threshold_ns};
        inputs.cpu = &cpu;
        inputs.settings = run_settings(reader);
        inputs.gpu_memory = memory_report ? &*memory_report : nullptr;
        for (const DurationSummaryRow& range : ranges) {
            if (range.name == nvtx::range::kForward) inputs.forward_ns += range.stats.total_ns;
            if (range.name == nvtx::range::kBackward) inputs.backward_ns += range.stats.total_ns;
        }
        std::vector<AdviceItem> items = advise(inputs);
        if (std::optional<AdviceItem> straggler = straggler_advice(ranks)) items.push_back(std::move(*straggler));
        rank_advice(items);
        tables.push_back(advice_table(items));
    }
    return tables;
}

std::string dropped_records_warning(const store::TraceReader& reader) {
    std::uint64_t total = reader.total_dropped();
    if (total == 0) return {};
    std::map<std::string, std::uint64_t> by_source;
    for (const trace::DroppedRecords& dropped : reader.dropped_records()) {
        std::string source(reader.string(dropped.source_id));
        by_source[source.empty() ? "unknown" : source] += dropped.count;
    }
    std::string detail;
    for (const auto& [source, count] : by_source) {
        if (!detail.empty()) detail += ", ";
        detail += fmt::format("{}: {}", source, count);
    }
    return fmt::format("WARNING: {} records were dropped ({}); the numbers below undercount.", total, detail);
}

void write_tables(std::ostream& out, const std::vector<Table>& tables, const ReportHeader& header,
                  const StatsOptions& options) {
    const std::string& warning = header.warning;
    switch (options.format) {
        case OutputFormat::text: {
            if (!warning.empty()) out << warning << "\n\n";
            bool first = true;
            for (const Table& table : tables) {
                if (!first) out << '\n';
                first = false;
                write_text(out, table, options.time_unit);
            }
            break;
        }
        case OutputFormat::csv: {
            // One table: plain CSV. Several: each after a "# key" line, separated by a blank line.
            if (!warning.empty()) out << "# " << warning << "\r\n";
            bool several = tables.size() > 1;
            bool first = true;
            for (const Table& table : tables) {
                if (several) {
                    if (!first) out << "\r\n";
                    out << "# " << (table.group.empty() ? table.key : table.group + "." + table.key) << "\r\n";
                }
                first = false;
                write_csv(out, table, options.time_unit);
            }
            break;
        }
        case OutputFormat::json: {
            nlohmann::json document = nlohmann::json::object();
            if (header.files.size() == 1)
                document["file"] = header.files.front();
            else
                document["files"] = header.files;
            document["time_unit"] = time_unit_name(options.time_unit);
            document["dropped_records"] = header.dropped_records;
            document["warnings"] = nlohmann::json::array();
            if (!warning.empty()) document["warnings"].push_back(warning);
            nlohmann::json reports = nlohmann::json::object();
            for (const Table& table : tables) {
                if (table.group.empty()) {
                    reports[table.key] = to_json(table, options.time_unit);
                    continue;
                }
                nlohmann::json& group = reports[table.group];
                if (!group.is_object()) group = nlohmann::json::object();
                group[table.key] = to_json(table, options.time_unit);
                if (table.group_fields.is_object()) group.update(table.group_fields);
            }
            document["reports"] = std::move(reports);
            out << document.dump(2) << '\n';
            break;
        }
    }
}

void write_stats(std::ostream& out, const store::TraceReader& reader, const StatsOptions& options,
                 const JobCollectives* job, const std::vector<std::string>& files) {
    const std::vector<Table> tables = build_stats_tables(reader, options, job);
    ReportHeader header;
    header.files = files.empty() ? std::vector<std::string>{reader.path()} : files;
    header.dropped_records = reader.total_dropped();
    header.warning = dropped_records_warning(reader);
    write_tables(out, tables, header, options);
}

}  // namespace ember::analysis
