// trace_input.cpp: see trace_input.h.
#include "cli/trace_input.h"

#include "profiler/import/import.h"
#include "profiler/store/reader.h"

#include <CLI/CLI.hpp>
#include <fmt/core.h>

namespace ember::cli {

namespace {
bool g_strict = false;
}  // namespace

void add_strict_flag(CLI::App* command) {
    command->add_flag_callback(
        "--strict", [] { g_strict = true; },
        "refuse a trace with events that break its format (an error naming the first, exit 2) instead of skipping "
        "and counting them");
}

bool strict_import() {
    return g_strict;
}

std::string ember_trace_for(const std::string& path, std::string_view command) {
    importing::OpenTraceOptions options;
    options.import.strict = g_strict;
    options.on_import = [&](const importing::OpenedTrace& opened) {
        fmt::print(stderr, "ember {}: {}\n", command, importing::describe_opened(path, opened));
    };
    return importing::open_as_ember_trace(path, options);
}

analysis::RunProfile diff_side(const std::string& path, std::string_view command,
                               const analysis::DiffOptions& options) {
    store::TraceReader reader(ember_trace_for(path, command));
    analysis::RunProfile run = analysis::profile_run(reader, options);
    run.path = path;
    return run;
}

}  // namespace ember::cli
