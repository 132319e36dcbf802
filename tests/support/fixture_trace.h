// fixture_trace.h: a small hand-built trace whose every number is known, written
// through the real TraceWriter. The tests of `ember stats` and of the exports pin
// their output against the values listed in fixture_trace.cpp.
#pragma once

#include <string>

namespace ember::testing {

struct FixtureOptions {
    bool with_dropped_records = true;  // 10 "cupti" + 2 "writer buffer full"
    // CPU samples (period 100 ns), outermost frame first:
    //   main   x3  main > train_step(int) > gemm_cpu(...) > [libopenblas.so.0] (1200, 1300, 1400)
    //   main   x2  main > train_step(int) > forward (model.py:12) > gemm_cpu(...) (1700, 1800)
    //   main   x1  main > train_step(int) > cudaStreamSynchronize (4360: inside the sync wait)
    //   main   x1  main > train_step(int), idle (2000: not running)
    //   loader x2  decode_png(...) (1100, 1200)
    // 8 running samples, 9 with the idle one.
    bool with_cpu_samples = false;
};

// Writes the fixture trace to `path` (replacing it).
void write_fixture_trace(const std::string& path, FixtureOptions options = {});

// A fresh path under the test temp directory ($TMPDIR or /tmp), unique per call.
std::string temporary_path(const std::string& stem, const std::string& extension);

}  // namespace ember::testing
