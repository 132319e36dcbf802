// stats_command.cpp: `ember stats FILE`, the reports of profiler/analysis on the
// command line. Bad files and bad option values print one line and exit 2.
#include "profiler/analysis/stats_report.h"
#include "cli/commands.h"
#include "cli/job_input.h"
#include "cli/trace_input.h"
#include "profiler/analysis/collectives_report.h"
#include "profiler/store/reader.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>

namespace ember::cli {

namespace {

struct StatsCommandOptions {
    std::vector<std::string> files;
    std::string reports;
    std::string format = "text";
    std::string time_unit = "ns";
    std::string sort = "total";
    std::size_t top = 0;
    std::size_t gaps = 5;
    std::string like = "ember";
    bool all_steps = false;
    double kernel_wait_us = 30.0;
    bool idle = false;
};

void run_stats(const StatsCommandOptions& command) {
    analysis::StatsOptions options;
    std::stringstream names(command.reports);
    for (std::string name; std::getline(names, name, ',');) {
        if (name.empty()) continue;
        if (!analysis::is_report_name(name)) {
            std::string known;
            for (const char* report : analysis::kReportNames) known += std::string(known.empty() ? "" : ", ") + report;
            fail_command("stats", "unknown report '" + name + "' (reports: " + known + ")");
        }
        options.reports.push_back(name);
    }
    auto format = analysis::parse_output_format(command.format);
    if (!format) fail_command("stats", "unknown format '" + command.format + "' (text, csv, json)");
    options.format = *format;
    auto unit = analysis::parse_time_unit(command.time_unit);
    if (!unit) fail_command("stats", "unknown time unit '" + command.time_unit + "' (ns, us, ms, s)");
    options.time_unit = *unit;
    auto sort = analysis::parse_summary_sort(command.sort);
    if (!sort)
        fail_command("stats", "unknown sort key '" + command.sort + "' (total, instances, avg, med, min, max, name)");
    options.sort = *sort;
    options.top = command.top;
    options.gap_count = command.gaps;
    options.all_steps = command.all_steps;
    options.include_idle = command.idle;
    auto like = analysis::parse_convention(command.like);
    if (!like) fail_command("stats", "unknown --like '" + command.like + "' (ember, hta, tb, tracelens)");
    options.like = *like;
    if (!(command.kernel_wait_us >= 0)) fail_command("stats", "--kernel-wait-us must be >= 0");
    options.kernel_wait_threshold_ns = static_cast<trace::TimeNs>(command.kernel_wait_us * 1e3);
    try {
        std::ostringstream buffered;  // print nothing when a report fails halfway
        if (command.files.size() == 1) {
            if (!prints_output()) return;  // under MPI one file is the first process's alone
            store::TraceReader reader(ember_trace_for(command.files.front(), "stats"));
            analysis::write_stats(buffered, reader, options);
        } else {
            // Several rank files are one job: their collectives are read in parallel (and
            // sharded over MPI processes under mpirun); the reports that read every event
            // run on one job file of them, on the clocks the collectives aligned.
            const Job job = read_job(command.files, "stats");
            const bool collectives_only =
                !options.reports.empty() && std::all_of(options.reports.begin(), options.reports.end(),
                                                        [](const std::string& r) { return r == "collectives"; });
            if (collectives_only) {
                analysis::ReportHeader header;
                header.files = command.files;
                analysis::write_tables(buffered,
                                       analysis::collectives_tables(job.collectives, options.top > 0 ? options.top : 10,
                                                                    options.format == analysis::OutputFormat::text),
                                       header, options);
            } else {
                store::TraceReader reader(job_trace(job, "stats"));
                analysis::write_stats(buffered, reader, options, &job.collectives, command.files);
            }
            if (!prints_output()) return;
        }
        std::cout << buffered.str() << std::flush;
    } catch (const store::TraceError& error) {
        fail_command("stats", error.what());
    }
}

}  // namespace

void add_stats_command(CLI::App& app) {
    auto command = std::make_shared<StatsCommandOptions>();
    CLI::App* stats = app.add_subcommand("stats",
                                         "Summaries of a trace: kernels, memory copies, CUDA API calls, NVTX "
                                         "ranges, GPU time per range, training steps, GPU busy, advice");
    stats
        ->add_option("files", command->files,
                     "traces: ember traces (.db), PyTorch profiler (Kineto) JSON, Nsight Systems SQLite exports or "
                     "Chrome traces (imported on the fly, cached); several files are the ranks of one job")
        ->required();
    std::string report_list;
    for (const char* report : analysis::kReportNames)
        report_list += std::string(report_list.empty() ? "" : ", ") + report;
    stats->add_option("--report", command->reports,
                      "comma-separated reports; default: the GPU and host summaries, steps, the GPU breakdowns "
                      "and advice. All: " +
                          report_list);
    stats->add_option("--format", command->format, "text (default), csv or json");
    stats->add_option("--time-unit", command->time_unit, "ns (default), us, ms or s");
    stats->add_option("--sort", command->sort,
                      "kernels/api/nvtx order: total (default), instances, avg, med, min, max, name");
    stats->add_option("--top", command->top, "keep the first N rows of kernels/api/nvtx/gpu_by_range (0 = all)");
    stats->add_option("--gaps", command->gaps, "number of longest GPU idle gaps to list (default 5)");
    stats->add_flag("--all-steps", command->all_steps,
                    "steps: print every step (text); the default prints the summary and the slowest steps");
    stats->add_option("--like", command->like,
                      "follow another tool's conventions in the GPU breakdowns: ember (default: every event, exact "
                      "ns), hta (Holistic Trace Analysis), tb (TensorBoard profiler plugin), tracelens");
    stats->add_option("--kernel-wait-us", command->kernel_wait_us,
                      "idle_breakdown: gaps shorter than this between back-to-back GPU work are kernel_wait "
                      "(default 30)");
    stats->add_flag("--idle", command->idle,
                    "cpu: also count the samples of threads that were not running (asleep, blocked, waiting for "
                    "the GIL); by default only running samples count");
    add_strict_flag(stats);
    stats->callback([command] { run_stats(*command); });
}

}  // namespace ember::cli
