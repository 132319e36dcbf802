// import_steps.h: the steps the importer tests take again and again: import a file
// the detector must recognise, import skipping invalid events, export an ember trace
// as Chrome JSON, check the one memcpy of a fixture, and a fixed pseudo-random stream
// for the randomized comparisons.
#pragma once

#include "profiler/export/chrome_trace.h"
#include "profiler/import/import.h"
#include "profiler/store/reader.h"
#include "tests/profiler/import/event_lists.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace ember::import_test {

// Imports `input` into `output` once detect_format() has recognised it as `format`;
// anything else fails the test and throws, which stops it as an ASSERT would.
inline importing::ImportedFile import_detected(const std::string& input, const std::string& output,
                                               importing::SourceFormat format) {
    const importing::SourceFormat detected = importing::detect_format(input);
    if (detected != format) {
        const std::string message = input + " detected as " + importing::source_format_name(detected) + ", expected " +
                                    importing::source_format_name(format);
        ADD_FAILURE() << message;
        throw std::runtime_error(message);
    }
    return importing::import_file(input, output);
}

// Imports `input` into `output` as every reading command does: the events that break a
// rule are skipped and counted in counts.invalid instead of failing the import.
inline importing::ImportedFile import_skipping_invalid(const std::string& input, const std::string& output) {
    return importing::import_file(input, output);
}

// Imports `input` into `output` with ImportOptions::strict: the first event that breaks a
// rule is an error.
inline importing::ImportedFile import_strict(const std::string& input, const std::string& output) {
    importing::ImportOptions options;
    options.strict = true;
    return importing::import_file(input, output, options);
}

// Writes the ember trace at `trace` as a Chrome trace (JSON) to `json`.
inline void export_chrome(const std::string& trace, const std::string& json) {
    store::TraceReader reader(trace);
    exporting::OutputFile out(json);
    exporting::export_chrome_trace(reader, out);
    out.close();
}

// The trace holds exactly one memcpy, of `bytes` bytes, `direction`, from `source` to
// `destination` memory; returned for the test's further checks.
inline trace::MemcpyEvent expect_one_memcpy(const store::TraceReader& reader, trace::MemcpyDirection direction,
                                            trace::MemoryKind source, trace::MemoryKind destination,
                                            std::uint64_t bytes) {
    auto copies = all_events(reader, &store::TraceReader::for_each_memcpy);
    EXPECT_EQ(copies.size(), 1u);
    if (copies.empty()) return {};
    EXPECT_EQ(copies[0].direction, direction);
    EXPECT_EQ(copies[0].source_kind, source);
    EXPECT_EQ(copies[0].destination_kind, destination);
    EXPECT_EQ(copies[0].bytes, bytes);
    return copies[0];
}

// Marsaglia's xorshift64: the same stream from the same seed on every machine.
struct XorShift64 {
    std::uint64_t state;
    std::uint64_t operator()() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        return state;
    }
};

}  // namespace ember::import_test
