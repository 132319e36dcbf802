// open_inputs.cpp: each input through the importers' cache.
#include "viewer/model/open_inputs.h"

#include "profiler/import/import.h"

namespace ember::viewer {

std::vector<std::string> open_inputs(const std::vector<std::string>& inputs, const OpenInputsOptions& options) {
    std::vector<std::string> traces;
    traces.reserve(inputs.size());
    importing::OpenTraceOptions open_options;
    open_options.import.strict = options.strict;
    for (const std::string& input : inputs) {
        if (options.on_import) {
            open_options.on_import = [&](const importing::OpenedTrace& opened) {
                options.on_import(importing::describe_opened(input, opened));
            };
        }
        traces.push_back(importing::open_as_ember_trace(input, open_options));
    }
    return traces;
}

}  // namespace ember::viewer
