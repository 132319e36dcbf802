// fixture_trace.h: a small hand-built trace whose every number is known, written
// through the real TraceWriter. The tests of `ember stats` and of the exports pin
// their output against the values listed in fixture_trace.cpp.
#pragma once

#include <string>

namespace ember::testing {

struct FixtureOptions {
    bool with_dropped_records = true;  // 10 "cupti" + 2 "writer buffer full"
};

// Writes the fixture trace to `path` (replacing it).
void write_fixture_trace(const std::string& path, FixtureOptions options = {});

// A fresh path under the test temp directory ($TMPDIR or /tmp), unique per call.
std::string temporary_path(const std::string& stem, const std::string& extension);

}  // namespace ember::testing
