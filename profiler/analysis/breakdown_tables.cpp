// breakdown_tables.cpp: tables of the GPU breakdown reports (breakdown_tables.h).
#include "profiler/analysis/breakdown_tables.h"

#include <fmt/format.h>

#include <map>

namespace ember::analysis {

namespace {

Cell percent_of(trace::TimeNs part, trace::TimeNs whole) {
    if (whole <= 0) return std::monostate{};
    return 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

Cell rank_cell(std::int32_t rank) {
    return static_cast<std::int64_t>(rank);
}

}  // namespace

std::string no_gpu_work_note(const store::TraceReader& reader) {
    if (reader.devices().empty() && reader.event_count("kernels") == 0)
        return "no GPU activity recorded (a CPU-backend run, or a recording without CUDA)";
    return "no GPU work to break down";
}

Table temporal_table(const std::vector<RankGpuWork>& work) {
    Table table{
        "temporal", "Temporal breakdown (GPU time from the first to the last GPU event of each rank)", {}, {}, {}};
    table.columns = {
        {"rank", "Rank", ColumnKind::integer},
        {"span_ns", "Span", ColumnKind::time},
        {"idle_ns", "Idle", ColumnKind::time},
        {"compute_ns", "Compute", ColumnKind::time},
        {"non_compute_ns", "Non-compute", ColumnKind::time},
        {"idle_percent", "Idle (%)", ColumnKind::percent},
        {"compute_percent", "Compute (%)", ColumnKind::percent},
        {"non_compute_percent", "Non-compute (%)", ColumnKind::percent},
    };
    for (const TemporalRow& row : temporal_breakdown(work))
        table.rows.push_back({rank_cell(row.rank), row.span_ns, row.idle_ns, row.compute_ns, row.non_compute_ns,
                              percent_of(row.idle_ns, row.span_ns), percent_of(row.compute_ns, row.span_ns),
                              percent_of(row.non_compute_ns, row.span_ns)});
    return table;
}

std::vector<Table> kernel_type_tables(const store::TraceReader& reader, const std::vector<RankGpuWork>& work,
                                      std::size_t top) {
    Table types{"kernel_types", "GPU time by kernel type (exclusive combinations of overlapping classes)", {}, {}, {}};
    types.columns = {
        {"rank", "Rank", ColumnKind::integer},
        {"kernel_type", "Kernel Type", ColumnKind::text},
        {"total_ns", "Total Time", ColumnKind::time},
        {"percent", "Time (%)", ColumnKind::percent},
    };
    const std::vector<KernelTypeRow> rows = kernel_type_breakdown(work);
    std::map<std::int32_t, trace::TimeNs> rank_total;
    for (const KernelTypeRow& row : rows) rank_total[row.rank] += row.total_ns;
    for (const KernelTypeRow& row : rows)
        types.rows.push_back(
            {rank_cell(row.rank), row.kernel_type, row.total_ns, percent_of(row.total_ns, rank_total[row.rank])});

    Table names{"kernel_types_top", fmt::format("Longest-running kernels of each type (top {})", top), {}, {}, {}};
    names.columns = {
        {"rank", "Rank", ColumnKind::integer},        {"kernel_type", "Kernel Type", ColumnKind::text},
        {"total_ns", "Total Time", ColumnKind::time}, {"instances", "Instances", ColumnKind::integer},
        {"min_ns", "Min", ColumnKind::time},          {"max_ns", "Max", ColumnKind::time},
        {"name", "Name", ColumnKind::text},
    };
    for (const TopKernelRow& row : top_kernels_by_type(reader, work, top))
        names.rows.push_back(
            {rank_cell(row.rank), row.kernel_type, row.total_ns, row.instances, row.min_ns, row.max_ns, row.name});
    return {std::move(types), std::move(names)};
}

Table overlap_table(const std::vector<RankGpuWork>& work) {
    Table table{"overlap", "Communication hidden under computation", {}, {}, {}};
    table.columns = {
        {"rank", "Rank", ColumnKind::integer},
        {"comm_comp_overlap_percent", "Overlap (%)", ColumnKind::percent},
        {"communication_ns", "Communication", ColumnKind::time},
        {"overlapped_ns", "Under Computation", ColumnKind::time},
        {"exposed_ns", "Exposed", ColumnKind::time},
    };
    for (const OverlapRow& row : communication_overlap(work)) {
        Cell percent = row.percent ? Cell{*row.percent} : Cell{std::monostate{}};
        table.rows.push_back({rank_cell(row.rank), percent, row.communication_ns, row.overlapped_ns,
                              row.communication_ns - row.overlapped_ns});
    }
    return table;
}

Table idle_breakdown_table(const std::vector<RankGpuWork>& work, trace::TimeNs kernel_wait_threshold_ns) {
    Table table{"idle_breakdown",
                fmt::format("GPU idle time per stream (kernel_wait: gaps under {} us between back-to-back work)",
                            static_cast<double>(kernel_wait_threshold_ns) / 1e3),
                {},
                {},
                {}};
    table.columns = {
        {"rank", "Rank", ColumnKind::integer},      {"stream", "Stream", ColumnKind::integer},
        {"category", "Category", ColumnKind::text}, {"idle_ns", "Idle", ColumnKind::time},
        {"gaps", "Gaps", ColumnKind::integer},      {"idle_percent", "Of Stream Idle (%)", ColumnKind::percent},
    };
    for (const IdleRow& row : idle_breakdown(work, kernel_wait_threshold_ns)) {
        Cell ratio = row.ratio ? Cell{100.0 * *row.ratio} : Cell{std::monostate{}};
        table.rows.push_back({rank_cell(row.rank), static_cast<std::int64_t>(row.stream),
                              std::string(idle_category_name(row.category)), row.idle_ns, row.gaps, ratio});
    }
    return table;
}

Table launches_table(const store::TraceReader& reader, const std::vector<RankGpuWork>& work, std::size_t top,
                     const LaunchOptions& options) {
    Table table{"launches",
                "Kernel launches: CPU time of the launching call and the delay until the GPU runs the work",
                {},
                {},
                {}};
    table.columns = {
        {"rank", "Rank", ColumnKind::integer},
        {"launches", "Launches", ColumnKind::integer},
        {"launch_total_ns", "Launch Total", ColumnKind::time},
        {"launch_avg_ns", "Launch Avg", ColumnKind::time},
        {"launch_max_ns", "Launch Max", ColumnKind::time},
        {"delay_avg_ns", "Delay Avg", ColumnKind::time},
        {"delay_max_ns", "Delay Max", ColumnKind::time},
        {"gpu_avg_ns", "GPU Avg", ColumnKind::time},
        {"short_kernels", "Shorter Than Launch", ColumnKind::integer},
        {"launch_outliers", "Launch > 50 us", ColumnKind::integer},
        {"delay_outliers", "Delay > 100 us", ColumnKind::integer},
        {"name", "Name", ColumnKind::text},
    };
    std::map<std::int32_t, std::size_t> shown;
    for (const LaunchRow& row : launch_statistics(reader, work, options)) {
        if (top > 0 && shown[row.rank]++ >= top) continue;
        const double n = static_cast<double>(row.launches);
        table.rows.push_back({rank_cell(row.rank), row.launches, row.launch_total_ns,
                              static_cast<double>(row.launch_total_ns) / n, row.launch_max_ns,
                              static_cast<double>(row.delay_total_ns) / n, row.delay_max_ns,
                              static_cast<double>(row.gpu_total_ns) / n, row.short_kernels, row.launch_outliers,
                              row.delay_outliers, row.name});
    }
    return table;
}

Table queue_table(const std::vector<RankGpuWork>& work) {
    Table table{"queue", "Launch queue length per stream (launched, not yet started)", {}, {}, {}};
    table.columns = {
        {"rank", "Rank", ColumnKind::integer},
        {"stream", "Stream", ColumnKind::integer},
        {"samples", "Changes", ColumnKind::integer},
        {"mean", "Mean", ColumnKind::percent},
        {"time_weighted_mean", "Time-weighted Mean", ColumnKind::percent},
        {"median", "Median", ColumnKind::percent},
        {"max", "Max", ColumnKind::integer},
    };
    for (const QueueRow& row : queue_length_summary(work))
        table.rows.push_back({rank_cell(row.rank), static_cast<std::int64_t>(row.stream), row.samples, row.mean,
                              row.time_weighted_mean, row.median, row.max});
    return table;
}

Table gpu_timeline_table(const std::vector<RankGpuWork>& work) {
    Table table{"gpu_timeline", "GPU timeline (computation, exposed communication and copies, idle)", {}, {}, {}};
    table.columns = {
        {"rank", "Rank", ColumnKind::integer},
        {"type", "Type", ColumnKind::text},
        {"time_ns", "Time", ColumnKind::time},
        {"percent", "Of Total (%)", ColumnKind::percent},
    };
    for (const GpuTimelineRow& row : gpu_timeline(work))
        table.rows.push_back({rank_cell(row.rank), row.type, row.time_ns, row.percent});
    return table;
}

Table step_breakdown_table(const std::vector<StepBreakdownRow>& rows, const StepBreakdownNotes& notes,
                           StepConvention convention) {
    Table table{"step_breakdown",
                std::string("Step time by category (each instant counted once: Kernel > Memcpy > Memset > "
                            "Communication > Runtime > DataLoader > CPU Exec > Other; ") +
                    step_convention_name(convention) + " convention)",
                {},
                {},
                {}};
    table.columns = {
        {"rank", "Rank", ColumnKind::integer},     {"step", "Step", ColumnKind::integer},
        {"start_ns", "Start", ColumnKind::time},   {"end_ns", "End", ColumnKind::time},
        {"step_ns", "Duration", ColumnKind::time},
    };
    // One column per category, titled by its name, keyed as its row field.
    static constexpr const char* kKeys[kStepBreakdownCategoryCount] = {
        "kernel_ns",  "memcpy_ns",     "memset_ns",   "communication_ns",
        "runtime_ns", "dataloader_ns", "cpu_exec_ns", "other_ns"};
    for (int category = 0; category < kStepBreakdownCategoryCount; ++category)
        table.columns.push_back({kKeys[category],
                                 step_breakdown_category_name(static_cast<StepBreakdownCategory>(category)),
                                 ColumnKind::time});
    table.columns.push_back({"kernel_percent",
                             std::string(step_breakdown_category_name(StepBreakdownCategory::kernel)) + " (%)",
                             ColumnKind::percent});
    for (const StepBreakdownRow& row : rows) {
        const trace::TimeNs span = row.end_ns - row.start_ns;
        table.rows.push_back({rank_cell(row.rank), row.step, row.start_ns, row.end_ns, span, row.kernel_ns,
                              row.memcpy_ns, row.memset_ns, row.communication_ns, row.runtime_ns, row.dataloader_ns,
                              row.cpu_exec_ns, row.other_ns, percent_of(row.kernel_ns, span)});
    }
    if (rows.empty()) table.empty_note = "no step ranges (\"step\", ProfilerStep#N) in this trace";
    std::string note;
    if (notes.tail_steps_dropped > 0)
        note = std::to_string(notes.tail_steps_dropped) +
               " trailing step(s) left out: their GPU work may have been cut off by the profiler (tb)";
    if (notes.whole_trace_as_one_step) note = "no step ranges: the whole host span is step 0 (tb)";
    if (!note.empty()) table.title += "; " + note;
    return table;
}

}  // namespace ember::analysis
