// baseline.cpp: see baseline.h.
#include "cli/baseline.h"

#include "cli/trace_input.h"
#include "profiler/analysis/trace_diff.h"
#include "profiler/store/reader.h"

#include <fmt/core.h>

#include <iostream>
#include <sstream>

namespace ember::cli {

std::string check_baseline(const std::string& baseline, std::string_view command) {
    try {
        store::TraceReader reader(ember_trace_for(baseline, command));
        return "";
    } catch (const store::TraceError& error) {
        return fmt::format("--baseline {}: {}", baseline, error.what());
    }
}

int print_baseline_diff(const std::string& baseline, const std::string& trace, std::string_view command) {
    try {
        const analysis::TraceDiff diff = analysis::diff_runs(diff_side(baseline, command), diff_side(trace, command));
        std::ostringstream text;
        analysis::write_diff(text, diff, {});
        std::cout << "\ncompared with the baseline (ember diff " << baseline << " " << trace << "):\n\n"
                  << text.str() << std::flush;
        return 0;
    } catch (const store::TraceError& error) {
        fmt::print(stderr, "ember {}: --baseline: {}\n", command, error.what());
        return 2;
    }
}

}  // namespace ember::cli
