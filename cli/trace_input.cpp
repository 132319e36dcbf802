// trace_input.cpp: see trace_input.h.
#include "cli/trace_input.h"

#include "profiler/import/import.h"

#include <fmt/core.h>

namespace ember::cli {

std::string ember_trace_for(const std::string& path, std::string_view command) {
    importing::OpenTraceOptions options;
    options.on_import = [&](const importing::OpenedTrace& opened) {
        fmt::print(stderr, "ember {}: {}\n", command, importing::describe_opened(path, opened));
    };
    return importing::open_as_ember_trace(path, options);
}

}  // namespace ember::cli
