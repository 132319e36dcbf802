// synth_command.cpp: `ember synth -o FILE --events N [--ranks R] [--seed S]`,
// deterministic training-shaped traces for tests and benchmarks.
#include "cli/command_errors.h"
#include "cli/commands.h"
#include "profiler/store/trace_error.h"
#include "profiler/synth/synthetic_job.h"
#include "profiler/synth/synthetic_trace.h"

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>

namespace ember::cli {

namespace {

// Runs a synthetic writer: a file it cannot write or an option out of range is bad
// input (exit 2).
template <typename Write>
auto write_or_fail(Write&& write) {
    try {
        return write();
    } catch (const store::TraceError& error) {
        fail_command("synth", error.what());
    } catch (const std::invalid_argument& error) {
        fail_command("synth", error.what());
    }
}

}  // namespace

void add_synth_command(CLI::App& app) {
    struct Options {
        std::string output;
        std::int64_t events = 100'000;
        int ranks = 1;
        std::uint64_t seed = 1;
        bool quiet = false;
        int straggler = -1;
        double straggler_ms = 2.0;
        double clock_skew_ms = 0.0;
        std::int64_t steps = 50;
        int tensor_parallel = 1;
        bool job = false;
    };
    auto opts = std::make_shared<Options>();
    CLI::App* cmd = app.add_subcommand(
        "synth",
        "Write a deterministic, training-shaped synthetic trace (steps, NVTX ranges, kernels on several "
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
    cmd->add_flag("--job", opts->job,
                  "A data-parallel job whose answer is known: every rank's collectives coupled, each rank's wait "
                  "computed and printed (implied by --straggler and --clock-skew-ms)");
    cmd->add_option("--straggler", opts->straggler,
                    "With --ranks: this rank computes --straggler-ms longer every step");
    cmd->add_option("--straggler-ms", opts->straggler_ms, "The straggler's extra compute per step, ms")
        ->capture_default_str();
    cmd->add_option("--clock-skew-ms", opts->clock_skew_ms,
                    "Each rank's clock is off the true time by up to this many ms (a job over several hosts)")
        ->capture_default_str();
    cmd->add_option("--steps", opts->steps, "With --job: training steps per rank")->capture_default_str();
    cmd->add_option("--tensor-parallel", opts->tensor_parallel,
                    "With --job: a two-dimensional job (DeviceMesh): tensor-parallel groups of this many ranks and "
                    "data-parallel groups across them, named in Kineto's collective metadata")
        ->capture_default_str();
    cmd->callback([opts] {
        if (opts->job || opts->straggler >= 0 || opts->clock_skew_ms > 0 || opts->tensor_parallel > 1) {
            synth::SyntheticJobOptions options;
            options.ranks = opts->ranks;
            options.steps = opts->steps;
            options.seed = opts->seed;
            options.straggler = opts->straggler;
            options.straggler_extra_ns = static_cast<trace::TimeNs>(opts->straggler_ms * 1e6);
            options.clock_skew_ns = static_cast<trace::TimeNs>(opts->clock_skew_ms * 1e6);
            options.tensor_parallel = opts->tensor_parallel;
            const std::vector<synth::SyntheticJobTruth> truth =
                write_or_fail([&] { return synth::write_synthetic_job(opts->output, options); });
            if (opts->quiet) return;
            const std::vector<std::string> paths = synth::synthetic_rank_paths(opts->output, opts->ranks);
            std::printf("%-6s %14s %14s %13s  %s\n", "rank", "wait (ms)", "arrived last", "clock (ms)", "file");
            for (const synth::SyntheticJobTruth& t : truth)
                std::printf("%-6d %14.3f %14lld %13.3f  %s\n", t.rank, static_cast<double>(t.wait_ns) / 1e6,
                            static_cast<long long>(t.arrived_last), static_cast<double>(t.clock_offset_ns) / 1e6,
                            paths[static_cast<std::size_t>(t.rank)].c_str());
            if (opts->straggler >= 0)
                std::printf("straggler: rank %d (+%.3f ms of compute every step)\n", opts->straggler,
                            opts->straggler_ms);
            else
                std::printf("no straggler\n");
            return;
        }
        synth::SyntheticTraceOptions options;
        options.events = opts->events;
        options.ranks = opts->ranks;
        options.seed = opts->seed;
        auto started = std::chrono::steady_clock::now();
        const std::vector<synth::SyntheticRankSummary> summaries =
            write_or_fail([&] { return synth::write_synthetic_traces(opts->output, options); });
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
