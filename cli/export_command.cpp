// export_command.cpp: `ember export FILE --format chrome|perfetto|pprof|speedscope|folded|svg|csv`.
// Every format streams; bad files and bad option values print one line and exit 2.
#include "cli/commands.h"
#include "cli/job_input.h"
#include "cli/trace_input.h"
#include "profiler/export/chrome_trace.h"
#include "profiler/export/csv_tables.h"
#include "profiler/export/flamegraph_svg.h"
#include "profiler/export/folded_stacks.h"
#include "profiler/export/perfetto_trace.h"
#include "profiler/export/pprof_profile.h"
#include "profiler/export/speedscope.h"
#include "profiler/import/import.h"
#include "profiler/store/reader.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <memory>

namespace ember::cli {

namespace {

struct ExportCommandOptions {
    std::vector<std::string> files;
    std::string format;
    std::string output;
    std::string table;
    std::string stacks = "gpu";
    bool idle = false;
};

// FILE without its .db extension, plus `suffix`; an imported file (x.pt.trace.json.gz)
// is named like its import would be (x + suffix).
std::string default_output(const std::string& file, const std::string& suffix) {
    std::filesystem::path path(std::filesystem::path(file).extension() == ".db" ? file
                                                                                : importing::default_output_path(file));
    if (path.extension() == ".db") path.replace_extension();
    return path.string() + suffix;
}

void run_export(const ExportCommandOptions& command) {
    const std::string& format = command.format;
    if (format != "chrome" && format != "perfetto" && format != "pprof" && format != "speedscope" &&
        format != "folded" && format != "svg" && format != "csv") {
        fail_command("export",
                     "unknown format '" + format + "' (chrome, perfetto, pprof, speedscope, folded, svg, csv)");
    }
    auto stacks = exporting::parse_stack_source(command.stacks);
    if (!stacks) fail_command("export", "unknown stack source '" + command.stacks + "' (gpu, host, cpu)");
    if (!command.table.empty() && !exporting::is_csv_table(command.table)) {
        std::string known;
        for (const char* table : exporting::kCsvTables) known += std::string(known.empty() ? "" : ", ") + table;
        fail_command("export", "unknown table '" + command.table + "' (" + known + ")");
    }
    try {
        // Several rank files are one job: exported from its job file, every rank on the
        // clock its collectives aligned (as `ember merge` writes it, cached).
        const std::string& first = command.files.front();
        if (command.files.size() > 1 && command.output.empty())
            fail_command("export", "several rank files are one job: name its output with -o");
        const std::string trace = command.files.size() == 1 ? ember_trace_for(first, "export")
                                                            : job_trace(read_job(command.files, "export"), "export");
        store::TraceReader reader(trace);
        std::string output = command.output;
        if (format == "csv" && command.table.empty()) {
            if (output.empty()) output = default_output(first, "_csv");
            if (output == "-")
                fail_command("export", "--format csv without --table writes a directory; give -o DIR or --table NAME");
            exporting::export_csv_directory(reader, output);
        } else {
            if (output.empty()) {
                std::string suffix = format == "chrome"       ? ".chrome.json"
                                     : format == "perfetto"   ? ".perfetto-trace"
                                     : format == "pprof"      ? ".pb.gz"
                                     : format == "speedscope" ? ".speedscope.json"
                                     : format == "folded"     ? "." + command.stacks + ".folded"
                                     : format == "svg"        ? "." + command.stacks + ".svg"
                                                              : "." + command.table + ".csv";
                output = default_output(first, suffix);
            }
            exporting::OutputFile out(output);
            if (format == "chrome") exporting::export_chrome_trace(reader, out);
            if (format == "perfetto") {
                const exporting::PerfettoCounts counts = exporting::export_perfetto_trace(reader, out);
                std::fprintf(stderr,
                             "ember export: %lld tracks, %lld slices, %lld instants, %lld counter values, "
                             "%lld slices with a flow\n",
                             static_cast<long long>(counts.tracks), static_cast<long long>(counts.slices),
                             static_cast<long long>(counts.instants), static_cast<long long>(counts.counter_values),
                             static_cast<long long>(counts.flow_events));
            }
            if (format == "pprof") {
                const exporting::PprofCounts counts = exporting::export_pprof(reader, out, command.idle);
                std::fprintf(stderr, "ember export: %lld CPU samples as %lld stacks, %lld locations, %lld functions\n",
                             static_cast<long long>(counts.samples), static_cast<long long>(counts.stacks),
                             static_cast<long long>(counts.locations), static_cast<long long>(counts.functions));
            }
            if (format == "speedscope") exporting::export_speedscope(reader, out, command.idle);
            if (format == "folded")
                exporting::write_folded(exporting::build_stacks(reader, *stacks, command.idle), out);
            if (format == "svg") {
                exporting::FlamegraphOptions options;
                options.title = std::string(*stacks == exporting::StackSource::gpu   ? "GPU time by NVTX range: "
                                            : *stacks == exporting::StackSource::cpu ? "CPU time (sampled stacks): "
                                                                                     : "Host time: ") +
                                std::filesystem::path(first).filename().string();
                exporting::write_flamegraph_svg(exporting::build_stacks(reader, *stacks, command.idle), options, out);
            }
            if (format == "csv") exporting::export_csv_table(reader, command.table, out);
            out.close();
        }
        if (output != "-") std::fprintf(stderr, "ember export: wrote %s\n", output.c_str());
    } catch (const store::TraceError& error) {
        fail_command("export", error.what());
    }
}

}  // namespace

void add_export_command(CLI::App& app) {
    auto command = std::make_shared<ExportCommandOptions>();
    CLI::App* exporter = app.add_subcommand(
        "export",
        "Write a trace as Perfetto's protobuf trace, Chrome trace JSON, a pprof profile, speedscope, folded "
        "stacks, an SVG flamegraph or CSV");
    exporter
        ->add_option("files", command->files,
                     "trace: ember (.db), Kineto JSON, nsys SQLite export or Chrome trace (imported on the fly); "
                     "several rank files are one job, exported on the clocks their collectives align (needs -o)")
        ->required();
    exporter
        ->add_option("--format", command->format,
                     "perfetto (protobuf trace for ui.perfetto.dev and trace_processor), chrome (JSON), pprof "
                     "(CPU samples, gzipped profile.proto), speedscope, folded, svg or csv")
        ->required();
    exporter->add_option("-o,--output", command->output,
                         "output path ('-' = stdout); default: FILE without .db plus a suffix; a directory for csv");
    exporter->add_option(
        "--table", command->table,
        "csv: one table (kernels, memcpys, memsets, synchronizations, api_calls, ranges, marks, "
        "counter_samples, dropped_records, collective_calls, memory_events, memory_blocks) instead of a "
        "directory of all");
    exporter->add_option("--stacks", command->stacks,
                         "folded/svg: gpu (NVTX range path + kernel, GPU ns; default), host (thread, ranges, API "
                         "calls, self ns) or cpu (sampled call stacks, CPU ns)");
    exporter->add_flag(
        "--idle", command->idle,
        "cpu stacks (folded/svg --stacks cpu, speedscope's CPU samples, pprof): also the samples of threads "
        "that were not running (asleep, blocked, waiting for the GIL)");
    add_strict_flag(exporter);
    exporter->callback([command] { run_export(*command); });
}

}  // namespace ember::cli
