// import_fuzz_targets.h: one fuzz entry point per importer, in libFuzzer's shape (so
// a clang build can link them into libFuzzer as they are), driven here by
// import_fuzz_driver.cpp without clang. Each writes the bytes to a private temporary
// file, imports them as its format, and checks the importer's promises:
//   * only store::TraceError comes out (anything else aborts: a finding);
//   * a failed import leaves nothing at the output path and no temporary files;
//   * a successful import opens with store::TraceReader and its counts add up.
// Returns 0 (libFuzzer's convention); a broken promise calls std::abort() after
// printing what broke.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ember::import_fuzz {

int fuzz_kineto(const std::uint8_t* data, std::size_t size);
int fuzz_chrome(const std::uint8_t* data, std::size_t size);
int fuzz_nsys(const std::uint8_t* data, std::size_t size);
int fuzz_nvprof(const std::uint8_t* data, std::size_t size);
int fuzz_memory_snapshot(const std::uint8_t* data, std::size_t size);

// What the last call did: "ok" or the TraceError message (for the driver's tallies).
const std::string& last_outcome();
bool last_succeeded();

}  // namespace ember::import_fuzz
