// record_environment.h: the contract between `ember record` and the collector library
// it injects. ember record cannot call into the recorded program; it tells the library
// what to record through environment variables, and this header is the one place that
// names them and gives their defaults. The launcher (launch.h) writes them with
// RecordSettings::to_environment(); the library (session.cpp) reads them back with
// RecordSettings::from_environment(), so both sides run the same code.
//
// No CUDA, no store: `ember` (which never loads CUDA) and libember_collector.so both
// link it.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember::collector {

// What child processes of a recorded program do (`ember record --children`).
enum class ChildPolicy {
    suffix,  // record into FILE with ".pid<N>" (or ".rank<N>" for MPI/NCCL ranks)
    skip,    // do not record them
};
// "suffix" / "skip", and back (nullopt for anything else).
const char* child_policy_name(ChildPolicy policy);
std::optional<ChildPolicy> parse_child_policy(std::string_view text);

// The variables. Every one of them is written by to_environment(); a variable that is
// absent or empty reads as the default below.
inline constexpr const char* kRecordOutputVariable = "EMBER_RECORD_OUTPUT";
inline constexpr const char* kRecordRootPidVariable = "EMBER_RECORD_ROOT_PID";
inline constexpr const char* kRecordChildrenVariable = "EMBER_RECORD_CHILDREN";
inline constexpr const char* kRecordPausedVariable = "EMBER_RECORD_PAUSED";
inline constexpr const char* kRecordCpuHzVariable = "EMBER_RECORD_CPU_HZ";
inline constexpr const char* kRecordNvmlHzVariable = "EMBER_RECORD_NVML_HZ";
inline constexpr const char* kRecordSocketVariable = "EMBER_RECORD_SOCKET";
inline constexpr const char* kRecordNoCudaVariable = "EMBER_RECORD_NO_CUDA";
inline constexpr const char* kRecordCudaMemoryVariable = "EMBER_RECORD_CUDA_MEMORY";
inline constexpr const char* kRecordQuietVariable = "EMBER_RECORD_QUIET";
inline constexpr const char* kRecordPythonCallSitesVariable = "EMBER_RECORD_PYTHON_CALL_SITES";
// Where `ember record` looks for libember_collector.so before its own install tree.
inline constexpr const char* kCollectorLibraryVariable = "EMBER_COLLECTOR_LIBRARY";
// How CUDA and NVTX load an injection library into an unmodified process.
inline constexpr const char* kCudaInjectionVariable = "CUDA_INJECTION64_PATH";
inline constexpr const char* kNvtxInjectionVariable = "NVTX_INJECTION64_PATH";

// The defaults, shared with SessionOptions (the C API's sessions) and `ember record`'s flags.
inline constexpr double kDefaultNvmlHz = 20.0;
inline constexpr double kDefaultCpuSampleHz = 0.0;

using EnvironmentVariable = std::pair<std::string, std::string>;
// Reads one variable: null when it is not set. std::getenv by default; tests pass a map.
using EnvironmentLookup = std::function<const char*(const char* name)>;

// The switches of a recording session: what it captures and how it behaves. Both ways
// of starting one carry them: `ember record` through the environment (RecordSettings
// below) and the C API's ember_collector_start (SessionOptions, session.h). A new
// switch is declared here once, and written and read in record_environment.cpp.
struct SessionSwitches {
    bool paused = false;                         // EMBER_RECORD_PAUSED: open the file, capture nothing yet
    double cpu_sample_hz = kDefaultCpuSampleHz;  // EMBER_RECORD_CPU_HZ (0 = off)
    double nvml_hz = kDefaultNvmlHz;             // EMBER_RECORD_NVML_HZ (0 = off)
    bool control_socket = true;                  // EMBER_RECORD_SOCKET: for `ember attach` (the C API: off)
    bool trace_cuda = true;                      // EMBER_RECORD_NO_CUDA, inverted
    // EMBER_RECORD_CUDA_MEMORY (`ember record --cuda-memory`): every device memory
    // allocation and free, and stream-ordered pools (CUPTI MEMORY2 and MEMORY_POOL
    // records -> memory_events).
    bool trace_cuda_memory = false;
    bool quiet = false;  // EMBER_RECORD_QUIET
    // EMBER_RECORD_PYTHON_CALL_SITES: in a CPython process, each CUDA API call carries its
    // Python stack (python_call_site.h).
    bool python_call_sites = true;

    bool operator==(const SessionSwitches&) const = default;
};

// What `ember record` asks of the library in the recorded process: where it writes, and
// the session's switches.
struct RecordSettings : SessionSwitches {
    std::string output;                          // EMBER_RECORD_OUTPUT: absolute FILE; empty: not recorded
    std::int64_t root_pid = 0;                   // EMBER_RECORD_ROOT_PID: the process ember record started
    ChildPolicy children = ChildPolicy::suffix;  // EMBER_RECORD_CHILDREN

    // Every variable above as NAME=value (flags "1"/"0", rates exact to the last bit).
    std::vector<EnvironmentVariable> to_environment() const;
    // The settings the variables describe; a variable absent or empty keeps its default,
    // a flag is on unless "0", a rate or pid that is not a number reads as 0.
    static RecordSettings from_environment(const EnvironmentLookup& lookup = std::getenv);

    bool operator==(const RecordSettings&) const = default;
};

}  // namespace ember::collector
