// open_inputs.h: what `ember view` was given, as ember traces to load. Kineto JSON,
// Nsight Systems exports, nvprof databases, Chrome traces and memory snapshots are
// imported (once, cached: profiler/import's open_as_ember_trace); ember traces are used
// as they are.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace ember::viewer {

struct OpenInputsOptions {
    bool strict = false;  // refuse an input with events the importer cannot place
    // One line per input that was imported or taken from the cache ("imported x.json ...").
    std::function<void(const std::string& line)> on_import;
};

// The ember trace of each input, in order. Throws store::TraceError naming the input.
std::vector<std::string> open_inputs(const std::vector<std::string>& inputs, const OpenInputsOptions& options = {});

}  // namespace ember::viewer
