// session.h: one recording session of the collector: the open trace file, what is
// being captured, and the parts that feed it (NVTX handlers, CUPTI, NVML, CPU
// sampler, control socket). At most one session is open per process.
//
// Event producers reach the session through current_session(), an atomic pointer:
// null when nothing records, so an unrecorded NVTX call costs one load. Sessions are
// never freed (a producer on another thread may still hold the pointer when one
// stops); closing a session closes its file and leaves a small husk behind.
#pragma once

#include "collectors/clock.h"
#include "collectors/record_environment.h"
#include "profiler/store/writer.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ember::collector {

class PythonCallSites;

// A session's options: the file, the switches (record_environment.h: the ones `ember
// record` passes too, declared once there), and what only the C API sets.
struct SessionOptions : SessionSwitches {
    // The C API listens for `ember attach` only when asked (ember_collector_options).
    SessionOptions() { control_socket = false; }

    std::string path;
    bool trace_nvtx = true;
    bool injected = false;  // started by `ember record` (environment), not by the C API
};

// How the process that loaded the library learns it is being recorded: the
// environment `ember record` sets (record_environment.h), and the rank a launcher
// gave it. options_from_environment: nullopt when not recorded (no output file, or a
// child process under --children=skip).
struct RecordEnvironment {
    std::string output;                          // RecordSettings::output
    std::int64_t root_pid = 0;                   // RecordSettings::root_pid: the process `ember record` started
    ChildPolicy children = ChildPolicy::suffix;  // RecordSettings::children
    std::optional<int> rank;                     // RANK / OMPI_COMM_WORLD_RANK / PMI_RANK / SLURM_PROCID
    std::string rank_variable;                   // the one of those that gave it
    int world_size = 1;                          // WORLD_SIZE / OMPI_COMM_WORLD_SIZE / PMI_SIZE / SLURM_NTASKS
};
RecordEnvironment read_record_environment();
std::optional<SessionOptions> options_from_environment();

// The file a process writes: the base path for the root process; for others
// "FILE.pid<N>.db" (a trailing ".db" of FILE dropped first), nullopt under skip.
// With a rank in a multi-rank job every process writes "FILE.rank<R>.db".
std::optional<std::string> resolve_output_path(const RecordEnvironment& environment, std::int64_t pid);

class Session {
  public:
    explicit Session(const SessionOptions& options);
    ~Session();

    store::TraceWriter& writer() { return *writer_; }
    const SessionOptions& options() const { return options_; }
    // Distinguishes sessions for per-thread caches (ids are per file).
    std::uint32_t generation() const { return generation_; }

    bool capturing() const { return capturing_.load(std::memory_order_relaxed); }
    void set_capturing(bool on);
    // Whether capture was on at `time` (GPU records arrive late, after a pause may
    // have begun; they are kept when they started inside a capture window).
    bool captured_at(trace::TimeNs time) const;

    // The calling thread's id in this file (registered once per thread).
    trace::ThreadId this_thread();
    // Any thread of the process by OS tid (CPU samples are drained on another thread).
    trace::ThreadId thread_for_tid(std::int64_t tid);
    // nvtxNameOsThread: names any thread of the process by OS tid.
    void name_os_thread(std::int64_t tid, std::string_view name);

    // A block of `count` fresh range ids, [first, first + count). NVTX threads take ids
    // in blocks so that opening a range touches no shared atomic; ids are unique in
    // the file, not dense. Nothing else may use TraceWriter::next_range_id() for
    // this file.
    trace::RangeId reserve_range_ids(std::uint64_t count) {
        return next_range_id_.fetch_add(count, std::memory_order_relaxed);
    }

    // A counter track by name (NVTX counters, NVML series), registered on first use.
    trace::CounterId counter(std::string_view name, std::string_view unit, trace::DeviceId device);

    // One line on stderr, prefixed "ember collector:", unless quiet.
    void say(const std::string& line) const;

    // The Python stacks of CUDA API calls: null when the process is not CPython (or it
    // cannot be read, or the option is off). Opened before CUPTI starts.
    PythonCallSites* python_call_sites() const { return python_call_sites_; }

    std::uint64_t cupti_dropped() const { return cupti_dropped_.load(); }
    void add_cupti_dropped(std::uint64_t count) { cupti_dropped_.fetch_add(count); }

    // Starts the parts (CUPTI, NVML, CPU sampler, socket); stop() ends them and closes
    // the file. Both are called by the functions below, never twice.
    void start_components();
    void stop();

  private:
    SessionOptions options_;
    std::unique_ptr<store::TraceWriter> writer_;
    std::uint32_t generation_;
    std::atomic<bool> capturing_{false};
    mutable std::mutex windows_mutex_;
    std::vector<std::pair<trace::TimeNs, trace::TimeNs>> capture_windows_;  // [on, off); off = max while on
    std::atomic<std::uint64_t> cupti_dropped_{0};
    std::atomic<trace::RangeId> next_range_id_{1};
    std::mutex threads_mutex_;
    std::unordered_map<std::int64_t, trace::ThreadId> threads_by_tid_;
    std::unordered_map<std::int64_t, std::string> pending_thread_names_;
    std::mutex counters_mutex_;
    std::unordered_map<std::string, trace::CounterId> counters_;
    bool stopped_ = false;
    PythonCallSites* python_call_sites_ = nullptr;  // owned by components_
    struct Components;                              // session.cpp: CUPTI, NVML, CPU sampler, control socket, flusher
    std::unique_ptr<Components> components_;
};

// The open session, or null.
Session* current_session();
inline Session* capturing_session() {
    Session* session = current_session();
    return session && session->capturing() ? session : nullptr;
}

// Opens a session (the C API and the injected start both come here). Throws
// std::runtime_error when one is open or the file cannot be created.
Session& start_session(const SessionOptions& options);
// Closes the open session, if any. Returns false and fills `error` on failure.
bool stop_session(std::string* error);
// Injected mode: starts a session from the environment once per process, if
// `ember record` asked for one. Safe to call from every entry point.
void start_session_from_environment_once();

}  // namespace ember::collector
