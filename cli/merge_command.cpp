// merge_command.cpp: `ember merge -o job.db rank0.db rank1.db ...` — one job trace from
// the per-rank files of a distributed run (profiler/merge), then the per-rank compute
// and all-reduce wait of the result and the straggler, as `ember stats` shows them.
#include "cli/commands.h"
#include "cli/trace_input.h"
#include "profiler/analysis/rank_summary.h"
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

void print_rank_summary(const store::TraceReader& merged) {
    const analysis::RankSummary summary = analysis::rank_summary(merged);
    if (summary.ranks.size() > 1) {
        fmt::print("{:>6} {:>14} {:>20}\n", "rank", "compute (s)", "allreduce/wait (s)");
        for (const analysis::RankTimes& times : summary.ranks)
            fmt::print("{:>6} {:>14.6f} {:>20.6f}\n", times.rank, times.compute_ns / 1e9,
                       times.allreduce_wait_ns / 1e9);
    }
    if (summary.straggler) {
        const analysis::RankTimes& slow = summary.ranks[*summary.straggler];
        fmt::print("straggler: rank {} ({:.6f} s compute); the other ranks waited {:.6f} s in allreduce/wait\n",
                   slow.rank, slow.compute_ns / 1e9, summary.others_wait_ns / 1e9);
    } else if (summary.ranks.size() > 1) {
        fmt::print("no straggler: the ranks waited alike in allreduce/wait\n");
    }
}

void run_merge(const MergeOptions& options) {
    try {
        std::vector<std::string> traces;
        for (const std::string& input : options.inputs) traces.push_back(ember_trace_for(input, "merge"));
        const merge::MergeResult result = merge::merge_traces(traces, options.output);
        for (const merge::RankAlignment& rank : result.ranks)
            fmt::print("rank {}: {} shifted by {:+.3f} ms ({})\n", rank.rank, rank.path, rank.shift_ns / 1e6,
                       rank.how);
        fmt::print("wrote {} ({} ranks)\n", options.output, result.ranks.size());
        print_rank_summary(store::TraceReader(options.output));
    } catch (const store::TraceError& error) {
        fmt::print(stderr, "ember merge: {}\n", error.what());
        throw CLI::RuntimeError(store::kTraceErrorExitCode);
    }
}

}  // namespace

void add_merge_command(CLI::App& app) {
    auto options = std::make_shared<MergeOptions>();
    CLI::App* command = app.add_subcommand(
        "merge", "One job trace from the per-rank files of a distributed run, aligned on clock anchors.");
    command->add_option("-o,--output", options->output, "the merged trace file")->required();
    command->add_option("files", options->inputs, "per-rank trace files (ember traces, or Kineto JSON / nsys SQLite / Chrome traces, imported on the fly)")->required()->check(CLI::ExistingFile);
    command->callback([options] { run_merge(*options); });
}

}  // namespace ember::cli
