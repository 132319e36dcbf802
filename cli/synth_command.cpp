// synth_command.cpp: `ember synth -o FILE --events N [--ranks R] [--seed S]`,
// deterministic training-shaped traces for tests and benchmarks.
#include "cli/commands.h"
#include "profiler/store/trace_error.h"
#include "profiler/synth/synthetic_trace.h"

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>

namespace ember::cli {

void add_synth_command(CLI::App& app) {
    struct Options {
        std::string output;
        std::int64_t events = 100'000;
        int ranks = 1;
        std::uint64_t seed = 1;
        bool quiet = false;
    };
    auto opts = std::make_shared<Options>();
    CLI::App* cmd = app.add_subcommand(
        "synth", "Write a deterministic, training-shaped synthetic trace (steps, NVTX ranges, kernels on several "
                 "streams, copies, all-reduce, counters)");
    cmd->add_option("-o,--output", opts->output,
                    "Trace file to write; with --ranks R > 1, FILE.rank0.db ... (a trailing .db is dropped first)")
        ->required();
    cmd->add_option("--events", opts->events, "Events per rank (the last step may overshoot by < one step)")
        ->capture_default_str()
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{1'000'000'000}));
    cmd->add_option("--ranks", opts->ranks, "Number of ranks (one file each)")
        ->capture_default_str()
        ->check(CLI::Range(1, 4096));
    cmd->add_option("--seed", opts->seed, "Random seed; the same seed gives the same trace")->capture_default_str();
    cmd->add_flag("-q,--quiet", opts->quiet, "Print nothing on success");
    cmd->callback([opts] {
        synth::SyntheticTraceOptions options;
        options.events = opts->events;
        options.ranks = opts->ranks;
        options.seed = opts->seed;
        auto started = std::chrono::steady_clock::now();
        std::vector<synth::SyntheticRankSummary> summaries;
        try {
            summaries = synth::write_synthetic_traces(opts->output, options);
        } catch (const store::TraceError& error) {
            std::fprintf(stderr, "ember synth: %s\n", error.what());
            throw CLI::RuntimeError(store::kTraceErrorExitCode);
        } catch (const std::invalid_argument& error) {
            std::fprintf(stderr, "ember synth: %s\n", error.what());
            throw CLI::RuntimeError(2);
        }
        double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        if (opts->quiet) return;
        std::vector<std::string> paths = synth::synthetic_rank_paths(opts->output, opts->ranks);
        std::int64_t total = 0;
        for (std::size_t i = 0; i < summaries.size(); ++i) {
            const synth::SyntheticRankSummary& s = summaries[i];
            std::printf("%s: rank %d, %lld events, %lld steps, %.3f s of training\n", paths[i].c_str(), s.rank,
                        static_cast<long long>(s.events), static_cast<long long>(s.steps),
                        static_cast<double>(s.end_ns - s.start_ns) * 1e-9);
            total += s.events;
        }
        std::printf("wrote %lld events in %.2f s (%.2f M events/s, indexes included)\n", static_cast<long long>(total),
                    seconds, static_cast<double>(total) / seconds * 1e-6);
    });
}

}  // namespace ember::cli
