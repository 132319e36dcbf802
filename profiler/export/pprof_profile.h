// pprof_profile.h: the CPU samples of a trace as a gzipped pprof profile
// (proto/pprof_profile.proto), which `go tool pprof`, Pyroscope and OpenTelemetry's
// profiles read.
//
// The samples are those of `ember stats --report cpu`: every running sample (also the
// idle ones with include_idle), each standing for one sampling period. Values per sample:
// "samples" (count) and, when the trace records its period, "cpu" (nanoseconds).
// Stacks are innermost first. A native frame is a location at its address in the
// mapping of its module, with a function named as the CPU tables name it (parameter
// lists dropped; the full demangled name as the system name; "[module]" for an
// unresolved address); a Python frame is a line (file, line number) of a function.
// A sample taken inside a GPU wait ends in the frame "[waiting on GPU]", as in the CPU
// tables. Labels: "thread" (its name) and "tid" (the OS thread id). Samples of one
// stack and thread are one sample with their sum.
#pragma once

#include "profiler/export/output_file.h"
#include "profiler/store/reader.h"

#include <cstdint>

namespace ember::exporting {

// What an export wrote.
struct PprofCounts {
    std::int64_t samples = 0;  // trace samples counted (the sum of the "samples" values)
    std::int64_t stacks = 0;   // pprof samples (distinct stack and thread)
    std::int64_t locations = 0;
    std::int64_t functions = 0;
};

PprofCounts export_pprof(const store::TraceReader& reader, OutputFile& out, bool include_idle = false);

}  // namespace ember::exporting
