// merge_command.cpp: `ember merge -o job.db rank0.db rank1.db ...` — one job trace from
// the per-rank files of a distributed run (profiler/merge), each rank on the reference
// rank's clock as the job analysis aligned it on the collectives (profiler/job), then
// each rank's wait in the collectives and the straggler, as `ember stats` shows them.
#include "cli/commands.h"
#include "cli/job_input.h"
#include "cli/trace_input.h"
#include "profiler/job/job.h"
#include "profiler/merge/merge.h"
#include "profiler/store/reader.h"

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <memory>
#include <string>
#include <vector>

namespace ember::cli {

namespace {

struct MergeOptions {
    std::string output;
    std::vector<std::string> inputs;
};

// Each rank's wait in the collectives and the straggler, as `ember stats --report
// collectives` has them (the same analysis).
void print_job_summary(const analysis::JobCollectives& job) {
    if (job.ranks.size() < 2) return;
    if (job.matched == 0) {
        fmt::print("no collectives matched across the ranks: no waits to compare\n");
        return;
    }
    fmt::print("{:>6} {:>12} {:>14} {:>13}\n", "rank", "collectives", "wait (s)", "arrived last");
    for (const analysis::RankWaitRow& row : job.ranks)
        fmt::print("{:>6} {:>12} {:>14.6f} {:>13}\n", row.rank, row.collectives, row.wait_ns / 1e9, row.arrived_last);
    if (job.straggler)
        fmt::print("straggler: {}\n", job.straggler_evidence);
    else
        fmt::print("no straggler: no rank arrived last markedly more often than the others\n");
}

void run_merge(const MergeOptions& options) {
    try {
        const Job job = read_job(options.inputs, "merge");
        std::vector<std::string> traces;
        for (const std::string& input : options.inputs) traces.push_back(ember_trace_for(input, "merge"));
        merge::MergeOptions merge_options;
        merge_options.placements = job::rank_placements(options.inputs, job.collectives);
        const merge::MergeResult result = merge::merge_traces(traces, options.output, merge_options);
        for (const merge::RankAlignment& rank : result.ranks)
            fmt::print("rank {}: {} shifted by {:+.6f} ms ({})\n", rank.rank, rank.path, rank.shift_ns / 1e6, rank.how);
        fmt::print("wrote {} ({} ranks)\n", options.output, result.ranks.size());
        print_job_summary(job.collectives);
    } catch (const store::TraceError& error) {
        fail_command("merge", error.what());
    }
}

}  // namespace

void add_merge_command(CLI::App& app) {
    auto options = std::make_shared<MergeOptions>();
    CLI::App* command = app.add_subcommand(
        "merge",
        "One job trace from the per-rank files of a distributed run, the ranks' clocks aligned on their "
        "collectives (clock anchors or the wall clock where there are none)");
    command->add_option("-o,--output", options->output, "the merged trace file")->required();
    command
        ->add_option(
            "files", options->inputs,
            "per-rank trace files (ember traces, or Kineto JSON / nsys SQLite / Chrome traces, imported on the fly)")
        ->required()
        ->check(CLI::ExistingFile);
    add_strict_flag(command);
    command->callback([options] { run_merge(*options); });
}

}  // namespace ember::cli
