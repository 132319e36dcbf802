// trace_input.h: what every reading command (`stats`, `export`, `merge`, `diff`)
// does with a FILE argument. An ember trace is used as it is; a PyTorch profiler
// (Kineto) JSON, an Nsight Systems SQLite export or a Chrome trace is imported on
// the fly (profiler/import), cached beside the input or under $XDG_CACHE_HOME, and
// the command says so once on stderr.
#pragma once

#include "cli/command_errors.h"
#include "profiler/analysis/trace_diff.h"

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>

namespace ember::cli {

// The ember trace to read for `path`. Throws store::TraceError (bad input: the
// command prints it and exits 2).
std::string ember_trace_for(const std::string& path, std::string_view command);

// Imports skip the events they cannot place, count them and say so in the line the
// command prints; with `--strict` (add_strict_flag) the first such event is an error
// (exit 2), and a cached import that skipped some is imported again, strictly.
void add_strict_flag(CLI::App* command);
bool strict_import();

// One side of a diff (`ember diff`, `--baseline`): the trace read as ember_trace_for
// reads it, profiled; its path is the file named, not its cached import. Throws
// store::TraceError.
analysis::RunProfile diff_side(const std::string& path, std::string_view command,
                               const analysis::DiffOptions& options = {});

}  // namespace ember::cli
