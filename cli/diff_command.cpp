// diff_command.cpp: `ember diff A B`, why run B is slower than run A
// (profiler/analysis/trace_diff.h), and the CI gate `--fail-if-slower 5%`. Two jobs:
// `ember diff A0 A1 ... --vs B0 B1 ...` (each side's rank files one job, as `ember stats`
// reads them), with each rank's wait in the collectives and each job's straggler.
// Exit codes: 0 (no regression, or no gate asked), 4 (the gate failed: B slower beyond
// the threshold and beyond the noise), 2 (bad input: a file, a flag value).
#include "profiler/analysis/trace_diff.h"
#include "cli/commands.h"
#include "cli/job_input.h"
#include "cli/trace_input.h"
#include "profiler/analysis/collectives_report.h"
#include "profiler/store/reader.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace ember::cli {

namespace {

struct DiffCommandOptions {
    std::vector<std::string> a, b;  // B: the second positional file, or the files after --vs
    std::string format = "text";
    std::string time_unit = "ms";
    std::size_t top = 15;
    std::optional<std::int32_t> rank;
    std::string fail_if_slower;
    std::string metric = "step";
    double kernel_wait_us = 30.0;
};

// One side: its profile, and its job's collectives when it holds several ranks (several
// rank files: their job, read as `ember stats` reads them; one job file: its ranks).
struct Side {
    analysis::RunProfile profile;
    std::optional<analysis::JobCollectives> job;
};

Side side(const std::vector<std::string>& files, const char* which, const analysis::DiffOptions& options) {
    try {
        Side result;
        if (files.size() == 1) {
            store::TraceReader reader(ember_trace_for(files.front(), "diff"));
            result.profile = analysis::profile_run(reader, options);
            result.profile.path = files.front();
            if (result.profile.ranks.size() >= 2) result.job = analysis::job_collectives(reader);
            return result;
        }
        const Job job = read_job(files, "diff");
        store::TraceReader reader(job_trace(job, "diff"));
        result.profile = analysis::profile_run(reader, options);
        result.profile.path = fmt::format("{} rank files ({} ...)", files.size(), files.front());
        result.job = job.collectives;
        return result;
    } catch (const store::TraceError& error) {
        fail_command("diff", std::string(which) + ": " + error.what());
    }
}

void run_diff(DiffCommandOptions command) {
    // `ember diff A B`: one file each; `ember diff A0 A1 ... --vs B0 B1 ...`: two jobs.
    if (command.b.empty()) {
        if (command.a.size() != 2)
            fail_command("diff",
                         "give two traces (ember diff A B), or two jobs' rank files (ember diff A0 A1 ... --vs "
                         "B0 B1 ...)");
        command.b.assign(1, command.a[1]);
        command.a.resize(1);
    }
    // Every flag is checked before a file is read (an import can take a while).
    auto format = analysis::parse_output_format(command.format);
    if (!format) fail_command("diff", "unknown --format '" + command.format + "' (text, csv, json)");
    auto unit = analysis::parse_time_unit(command.time_unit);
    if (!unit) fail_command("diff", "unknown --time-unit '" + command.time_unit + "' (ns, us, ms, s)");
    auto metric = analysis::parse_diff_metric(command.metric);
    if (!metric) fail_command("diff", "unknown --metric '" + command.metric + "' (step, gpu_busy, span)");
    std::optional<double> threshold;
    if (!command.fail_if_slower.empty()) {
        threshold = analysis::parse_percent(command.fail_if_slower);
        if (!threshold)
            fail_command("diff", "--fail-if-slower '" + command.fail_if_slower + "' is not a percentage (e.g. 5%)");
    }
    if (!(command.kernel_wait_us >= 0)) fail_command("diff", "--kernel-wait-us must be >= 0");
    if (command.rank && *command.rank < 0) fail_command("diff", "--rank must be >= 0");

    analysis::DiffOptions options;
    options.rank = command.rank;
    options.kernel_wait_threshold_ns = static_cast<trace::TimeNs>(command.kernel_wait_us * 1e3);
    const Side a = side(command.a, "A", options);
    const Side b = side(command.b, "B", options);
    const analysis::TraceDiff diff = analysis::diff_runs(a.profile, b.profile);
    // Two jobs: each rank's wait in the collectives and each job's straggler.
    std::vector<analysis::Table> job_tables;
    if ((a.job && a.job->matched > 0) || (b.job && b.job->matched > 0))
        job_tables = analysis::job_diff_tables(a.job.value_or(analysis::JobCollectives{}),
                                               b.job.value_or(analysis::JobCollectives{}), command.top);

    std::optional<analysis::GateResult> gate;
    if (threshold) {
        try {
            gate = analysis::check_gate(diff, *metric, *threshold);
        } catch (const std::invalid_argument& error) {
            fail_command("diff", error.what());
        }
    }

    std::ostringstream buffered;  // print nothing when output fails halfway
    if (*format == analysis::OutputFormat::json) {
        nlohmann::json document = analysis::diff_json(diff);
        for (const analysis::Table& table : job_tables) {
            document["job_diff"][table.key] = analysis::to_json(table, *unit);
            document["job_diff"].update(table.group_fields);
        }
        if (gate)
            document["gate"] = {{"metric", command.metric},
                                {"threshold_percent", *threshold},
                                {"failed", gate->failed},
                                {"reason", gate->reason}};
        buffered << document.dump(2) << '\n';
    } else {
        analysis::DiffOutputOptions output;
        output.format = *format;
        output.time_unit = *unit;
        output.top = command.top;
        analysis::write_diff(buffered, diff, output);
        for (const analysis::Table& table : job_tables) {
            buffered << (*format == analysis::OutputFormat::csv ? "\r\n# job_diff\r\n" : "\n");
            if (*format == analysis::OutputFormat::csv)
                analysis::write_csv(buffered, table, *unit);
            else
                analysis::write_text(buffered, table, *unit);
        }
    }
    std::cout << buffered.str() << std::flush;
    if (gate) {
        // A failed gate exits 4, apart from 1 (a failure) and 2 (bad input), so that a CI
        // step can tell a regression from a broken pipeline.
        if (gate->failed) fail_diff_gate("diff", gate->reason);
        std::fprintf(stderr, "ember diff: %s\n", gate->reason.c_str());
    }
}

}  // namespace

void add_diff_command(CLI::App& app) {
    auto command = std::make_shared<DiffCommandOptions>();
    CLI::App* diff = app.add_subcommand(
        "diff",
        "Why run B is slower than run A: step time and its noise, where the change went, the kernels, "
        "ranges and calls that moved; --fail-if-slower gates CI (exit 4)");
    const char* trace_help =
        "trace: an ember trace (.db), a PyTorch profiler (Kineto) JSON, an Nsight Systems SQLite "
        "export or a Chrome trace (imported on the fly, cached)";
    diff->add_option("a", command->a,
                     std::string("the baseline ") + trace_help +
                         "; with --vs, every rank file of the baseline job (then A is these files, B those after --vs)")
        ->required();
    diff->add_option("--vs", command->b, "the job compared with A: its rank files (several files are one job)");
    diff->add_option("--format", command->format, "text (default), csv or json");
    diff->add_option("--time-unit", command->time_unit,
                     "text and CSV: ns, us, ms (default) or s; JSON *_ns members are ns");
    diff->add_option("--top", command->top,
                     "rows of each name table in text and CSV (default 15, 0 = all; JSON has all)");
    diff->add_option("--rank", command->rank,
                     "compare this rank of job files (default: the whole job, each step its slowest rank)");
    diff->add_option("--fail-if-slower", command->fail_if_slower,
                     "exit 4 when B is slower than A by more than this percentage (e.g. 5%) and beyond the noise");
    diff->add_option("--metric", command->metric,
                     "what --fail-if-slower compares: step (median step time, default), gpu_busy (median GPU busy "
                     "time per step) or span (first step start to last step end)");
    diff->add_option("--kernel-wait-us", command->kernel_wait_us,
                     "GPU idle gaps shorter than this are kernel_wait (default 30, as ember stats)");
    add_strict_flag(diff);
    diff->callback([command] { run_diff(*command); });
}

}  // namespace ember::cli
