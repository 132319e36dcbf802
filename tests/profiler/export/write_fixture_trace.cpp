// write_fixture_trace.cpp: writes the fixture trace (tests/profiler/analysis/
// fixture_trace.cpp) to the path given, for script-driven tests (the speedscope
// browser test and the `ember stats`/`ember export` command tests).
#include "tests/profiler/analysis/fixture_trace.h"

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s OUT.db\n", argv[0]);
        return 2;
    }
    try {
        ember::testing::write_fixture_trace(argv[1]);
    } catch (const std::exception& error) {
        std::fprintf(stderr, "write_fixture_trace: %s\n", error.what());
        return 1;
    }
    return 0;
}
