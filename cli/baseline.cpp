// baseline.cpp: see baseline.h.
#include "cli/baseline.h"

#include "cli/command_errors.h"
#include "cli/trace_input.h"
#include "profiler/store/trace_error.h"

#include <fmt/core.h>

#include <iostream>
#include <sstream>

namespace ember::cli {

Baseline load_baseline(const std::string& path, std::string_view command) {
    Baseline baseline;
    try {
        baseline.profile = diff_side(path, command);
    } catch (const store::TraceError& error) {
        baseline.error = fmt::format("--baseline {}: {}", path, error.what());
    }
    return baseline;
}

void print_baseline_diff(const analysis::RunProfile& baseline, const std::string& trace, std::string_view command) {
    try {
        const analysis::TraceDiff diff = analysis::diff_runs(baseline, diff_side(trace, command));
        std::ostringstream text;
        analysis::write_diff(text, diff, {});
        std::cout << "\ncompared with the baseline (ember diff " << baseline.path << " " << trace << "):\n\n"
                  << text.str() << std::flush;
    } catch (const store::TraceError& error) {
        fail_command(command, std::string("--baseline: ") + error.what());
    }
}

}  // namespace ember::cli
