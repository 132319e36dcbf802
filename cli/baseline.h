// baseline.h: `--baseline FILE` of `ember train` and `ember bench train`: the run just
// recorded is compared with a saved trace and `ember diff BASELINE RUN` is printed.
#pragma once

#include "profiler/analysis/trace_diff.h"

#include <optional>
#include <string>
#include <string_view>

namespace ember::cli {

// Reads the baseline before the run (importing it if need be), so a bad file is
// reported before any training and the file is read once: the profile, or the message
// to print (exit 2).
struct Baseline {
    std::optional<analysis::RunProfile> profile;
    std::string error;
};
Baseline load_baseline(const std::string& path, std::string_view command);

// Prints the diff of `trace` against the baseline (text, 15 rows per table); fails the
// command (fail_command: exit 2) when the run's trace cannot be read.
void print_baseline_diff(const analysis::RunProfile& baseline, const std::string& trace, std::string_view command);

}  // namespace ember::cli
