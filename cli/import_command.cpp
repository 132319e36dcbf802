// import_command.cpp: `ember import FILE... [-o OUT.db] [--format auto|kineto|nsys|chrome]`
// — other tools' traces (PyTorch profiler / Kineto JSON, Nsight Systems SQLite
// exports, Chrome trace JSON) into ember traces through profiler/import. One input
// gives one trace; several inputs of one job give one job file (as `ember merge`
// writes) or, with --per-rank, one trace per input. Bad input: one line naming the
// file and the byte offset or table/row, exit 2, nothing left at the output.
#include "cli/commands.h"
#include "cli/trace_input.h"
#include "profiler/import/import.h"
#include "profiler/job/import_job.h"

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ember::cli {

namespace {

struct ImportCommandOptions {
    std::vector<std::string> inputs;
    std::string output;
    std::string format = "auto";
    std::string kernel_names = "demangled";
    std::optional<std::int32_t> rank;
    bool per_rank = false;
    bool strict = false;
    bool skip_invalid = false;
    bool accept_unknown_nsys_schema = false;
};

void print_file(const importing::ImportedFile& file) {
    const importing::ImportCounts& counts = file.counts;
    fmt::print("{} ({}, rank {} of {}): {} events in {:.2f} s\n", file.input,
               importing::source_format_name(file.format), file.rank, file.world_size, counts.written(), file.seconds);
    fmt::print(
        "  kernels {}, memcpys {}, memsets {}, syncs {}, CUDA API calls {}, host ranges {}, marks {}, "
        "counter samples {}, CPU stack samples {}\n",
        counts.kernels, counts.memcpys, counts.memsets, counts.synchronizations, counts.api_calls, counts.ranges,
        counts.marks, counts.counter_samples, counts.stack_samples);
    for (const std::string& note : counts.notes) fmt::print("  note: {}\n", note);
    fmt::print("  GPU events linked to their launch {}, without a launching call {} (kept)", counts.flows,
               counts.unlinked_gpu_events);
    if (counts.nccl_kernels > 0) fmt::print(", NCCL kernels {}", counts.nccl_kernels);
    if (counts.collective_calls > 0) fmt::print(", collective metadata (process groups) {}", counts.collective_calls);
    if (counts.memory_events > 0 || counts.memory_blocks > 0)
        fmt::print(", GPU memory events {}, allocator blocks {}", counts.memory_events, counts.memory_blocks);
    if (counts.ranges_not_nested > 0) fmt::print(", ranges not nested {}", counts.ranges_not_nested);
    fmt::print("\n");
    for (const auto& [reason, count] : counts.skipped) fmt::print("  not stored: {} x {}\n", count, reason);
    if (!counts.invalid.empty()) fmt::print("  {}\n", counts.invalid_summary());
}

void run_import(const ImportCommandOptions& command) {
    importing::ImportOptions options;
    auto format = importing::parse_source_format(command.format);
    if (!format || *format == importing::SourceFormat::ember)
        fail_command("import",
                     "unknown --format '" + command.format + "' (auto, kineto, nsys, nvprof, chrome, memory_snapshot)");
    options.format = *format;
    if (command.kernel_names == "demangled")
        options.kernel_names = importing::KernelNameStyle::demangled;
    else if (command.kernel_names == "short")
        options.kernel_names = importing::KernelNameStyle::short_name;
    else if (command.kernel_names == "mangled")
        options.kernel_names = importing::KernelNameStyle::mangled;
    else
        fail_command("import", "unknown --kernel-names '" + command.kernel_names + "' (demangled, short, mangled)");
    if (command.rank && command.inputs.size() > 1)
        fail_command("import", "--rank applies to one input; a job's ranks come from its files");
    options.rank = command.rank;
    if (command.strict && command.skip_invalid)
        fail_command("import", "--strict and --skip-invalid contradict each other");
    options.strict = command.strict;
    options.accept_unknown_nsys_schema = command.accept_unknown_nsys_schema;
    const std::string output =
        command.output.empty() ? importing::default_output_path(command.inputs.front()) : command.output;
    try {
        const importing::ImportReport report = command.per_rank
                                                   ? importing::import_trace(command.inputs, output, options)
                                                   : job::import_job_file(command.inputs, output, options);
        for (const importing::ImportedFile& file : report.files) print_file(file);
        if (report.merged)
            fmt::print("wrote {} ({} ranks in one job file)\n", output, report.files.size());
        else
            for (const std::string& written : report.outputs) fmt::print("wrote {}\n", written);
    } catch (const store::TraceError& error) {
        fail_command("import", error.what());
    }
}

}  // namespace

void add_import_command(CLI::App& app) {
    auto command = std::make_shared<ImportCommandOptions>();
    CLI::App* cmd = app.add_subcommand(
        "import",
        "Turn PyTorch profiler (Kineto) JSON, Nsight Systems SQLite exports, nvprof databases and Chrome "
        "traces into ember traces (the reading commands also import on the fly)");
    cmd->add_option("files", command->inputs,
                    "inputs (plain or .gz JSON, nsys `export --type sqlite` files, nvprof .nvvp/.prof files); several "
                    "inputs of one job "
                    "become one job file")
        ->required();
    cmd->add_option("-o,--output", command->output,
                    "output trace (default: the first input's name with .db, beside it)");
    cmd->add_option("--format", command->format,
                    "auto (default: from the content), kineto, nsys, nvprof, chrome or memory_snapshot");
    cmd->add_option("--kernel-names", command->kernel_names,
                    "nsys and nvprof kernel names: demangled (default, as nsys stats), short or mangled");
    cmd->add_option("--rank", command->rank, "the rank of a single input (nsys exports record none)");
    cmd->add_flag("--per-rank", command->per_rank,
                  "several inputs: one trace per input (OUT.rank<i>.db) instead of one job file");
    cmd->add_flag("--strict", command->strict,
                  "refuse an input with events that break its format (negative durations, unmatched ends, GPU events "
                  "without a stream): an error naming the first, exit 2; by default they are skipped, counted and "
                  "named");
    cmd->add_flag("--skip-invalid", command->skip_invalid, "kept for old scripts: skipping is the default");
    cmd->add_flag("--accept-unknown-nsys-schema", command->accept_unknown_nsys_schema,
                  "kept for old scripts: every nsys export schema is read (a newer one with a note)");
    cmd->callback([command] { run_import(*command); });
}

}  // namespace ember::cli
