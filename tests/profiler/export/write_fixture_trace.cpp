// write_fixture_trace.cpp: writes the fixture trace (tests/profiler/analysis/
// fixture_trace.cpp) to the path given, for script-driven tests (the speedscope
// browser test and the `ember stats`/`ember export` command tests); with
// --with-cpu-samples, also the fixture's CPU samples.
#include "tests/support/fixture_trace.h"

#include <cstdio>
#include <cstring>
#include <exception>

int main(int argc, char** argv) {
    ember::testing::FixtureOptions options;
    if (argc == 3 && std::strcmp(argv[2], "--with-cpu-samples") == 0) options.with_cpu_samples = true;
    if (argc != 2 && !options.with_cpu_samples) {
        std::fprintf(stderr, "usage: %s OUT.db [--with-cpu-samples]\n", argv[0]);
        return 2;
    }
    try {
        ember::testing::write_fixture_trace(argv[1], options);
    } catch (const std::exception& error) {
        std::fprintf(stderr, "write_fixture_trace: %s\n", error.what());
        return 1;
    }
    return 0;
}
