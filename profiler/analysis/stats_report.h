// stats_report.h: `ember stats` as a library — which reports to build, how to
// sort and cut them, and how to print them (text, CSV, JSON). The command line
// (cli/stats_command.cpp) only parses options and calls write_stats.
#pragma once

#include "profiler/analysis/collectives.h"
#include "profiler/analysis/duration_summary.h"
#include "profiler/analysis/gpu_work.h"
#include "profiler/analysis/report_table.h"
#include "profiler/store/reader.h"

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace ember::analysis {

enum class OutputFormat { text, csv, json };
std::optional<OutputFormat> parse_output_format(std::string_view text);

// Report names, in print order.
inline constexpr const char* kReportNames[] = {
    "kernels",      "graphs",   "memory",       "api",     "nvtx",           "gpu_by_range", "steps",  "ranks",
    "collectives",  "temporal", "kernel_types", "overlap", "idle_breakdown", "launches",     "queue",  "step_breakdown",
    "gpu_timeline", "gpu_busy", "idle_gaps",    "cpu",     "python_gpu",     "gpu_memory",   "advice",
};
// Printed when no report is named ("ranks" and "collectives" only for files of several
// ranks; "graphs", not listed here, only for a file where GPU work ran from CUDA graphs).
inline constexpr const char* kDefaultReportNames[] = {
    "kernels",  "memory",       "api",     "nvtx",           "gpu_by_range", "steps",     "ranks", "collectives",
    "temporal", "kernel_types", "overlap", "idle_breakdown", "gpu_busy",     "idle_gaps", "cpu",   "advice",
};
bool is_report_name(std::string_view name);

struct StatsOptions {
    std::vector<std::string> reports;  // empty = all, in kReportNames order
    OutputFormat format = OutputFormat::text;
    TimeUnit time_unit = TimeUnit::ns;
    SummarySort sort = SummarySort::total;  // kernels, api, nvtx
    std::size_t top = 0;                    // rows of kernels/api/nvtx/gpu_by_range; 0 = all
    std::size_t gap_count = 5;              // idle_gaps rows
    bool all_steps = false;                 // text: every step, not only the summary and the slowest
    // Whose conventions the GPU breakdowns follow (--like): ember's own keep every
    // event; hta, tb and tracelens reproduce those tools' numbers (gpu_work.h).
    Convention like = Convention::ember;
    trace::TimeNs kernel_wait_threshold_ns = 30'000;  // idle_breakdown's kernel_wait bound
    std::size_t kernels_per_type = 5;                 // kernel_types_top rows per class
    bool include_idle = false;                        // cpu: also the samples of threads that were not running (--idle)
};

// The selected reports as tables, in kReportNames order. With no report named, the
// kDefaultReportNames; "ranks" and "collectives" are built only for a file holding two
// or more ranks. `job`: the job's collectives when the file is the job of several rank
// files (job/job.h analysed them from the files); else they are analysed from `reader`.
std::vector<Table> build_stats_tables(const store::TraceReader& reader, const StatsOptions& options,
                                      const JobCollectives* job = nullptr);

// What the printed report says about its input (JSON: "file" or "files").
struct ReportHeader {
    std::vector<std::string> files;
    std::uint64_t dropped_records = 0;
    std::string warning;  // dropped_records_warning's, or "" when none
};

// Prints `tables` in options.format.
void write_tables(std::ostream& out, const std::vector<Table>& tables, const ReportHeader& header,
                  const StatsOptions& options);

// The warning printed above every report when the file records lost events, or
// "" when none were lost: "WARNING: 12 records were dropped (cupti: 10, ...)".
std::string dropped_records_warning(const store::TraceReader& reader);

// Builds and prints the selected reports. Throws TraceError on a read failure.
void write_stats(std::ostream& out, const store::TraceReader& reader, const StatsOptions& options,
                 const JobCollectives* job = nullptr, const std::vector<std::string>& files = {});

}  // namespace ember::analysis
