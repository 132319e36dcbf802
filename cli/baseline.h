// baseline.h: `--baseline FILE` of `ember train` and `ember bench train`: the run just
// recorded is compared with a saved trace and `ember diff BASELINE RUN` is printed.
#pragma once

#include <string>
#include <string_view>

namespace ember::cli {

// Opens (importing if need be) the baseline before the run, so a bad file is reported
// before any training: "" when it reads, else the message to print (exit 2).
std::string check_baseline(const std::string& baseline, std::string_view command);

// Prints the diff of `trace` against `baseline` (text, 15 rows per table). Returns 0,
// or 2 after printing why when a file cannot be read.
int print_baseline_diff(const std::string& baseline, const std::string& trace, std::string_view command);

}  // namespace ember::cli
