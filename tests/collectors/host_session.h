// host_session.h: the options of an in-process recording session that sees only the
// host (no CUDA, no GPU counters) and says nothing, for tests of what the collector
// does with NVTX calls, thread names and CPU samples, and of its clock.
#pragma once

#include "collectors/session.h"

#include <string>

namespace ember::test {

inline collector::SessionOptions host_session_options(const std::string& path) {
    collector::SessionOptions options;
    options.path = path;
    options.trace_cuda = false;
    options.nvml_hz = 0;
    options.quiet = true;
    return options;
}

}  // namespace ember::test
