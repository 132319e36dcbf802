// perf_map.h: names for code generated at run time, read from the process's perf map
// (/tmp/perf-PID.map), the convention by which JIT compilers tell Linux profilers what
// they generated: one line per function, "START SIZE NAME", START and SIZE in hex.
// oneDNN writes one when its JIT profiling flag asks for it (DNNL_JIT_PROFILE=2, or
// dnnl_set_jit_profiling_flags), as do V8, the JVM's perf-map-agent, LuaJIT and
// CPython 3.12's perf trampoline. The file grows while the process runs: each lookup
// first reads the whole lines added since the last one.
//
// Not async-signal-safe (reads a file, allocates): used on the sampler's drain thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::collector {

class PerfMap {
  public:
    explicit PerfMap(std::string path);
    // The map of this process: /tmp/perf-<getpid()>.map.
    static std::string path_for_this_process();

    // The name of the function that covers `address`, or "" when the map (as far as
    // it is written now) has none. The latest line wins where two cover it (a JIT
    // may reuse memory for a new function).
    std::string find(std::uintptr_t address);

  private:
    struct Entry {
        std::uintptr_t start = 0, end = 0;
        std::size_t order = 0;  // line number: later lines win
        std::string name;
    };
    void read_new_lines();
    const Entry* lookup(std::uintptr_t address) const;

    std::string path_;
    std::uint64_t read_bytes_ = 0;  // of the file, whole lines only
    std::vector<Entry> entries_;    // sorted by start
    std::size_t lines_ = 0;
};

}  // namespace ember::collector
