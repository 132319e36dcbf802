// session.cpp: opening and closing a recording session, the environment contract
// with `ember record`, thread and counter registration.
#include "collectors/session.h"
#include "common/os.h"

#include "collectors/control_socket.h"
#include "collectors/cpu_sampler.h"
#include "collectors/cupti_collector.h"
#include "collectors/nvml_sampler.h"
#include "collectors/nvtx_injection.h"
#include "collectors/python_call_site.h"
#include "profiler/store/writer_hooks.h"

#include <chrono>
#include <condition_variable>
#include <cerrno>
#include <csignal>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <thread>

#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ember::collector {

namespace {

std::atomic<Session*> g_session{nullptr};
std::mutex g_lifecycle_mutex;
std::atomic<std::uint32_t> g_next_generation{1};

const char* environment(const char* name) {
    const char* value = std::getenv(name);
    return value && *value ? value : nullptr;
}

std::optional<int> first_integer_environment(std::initializer_list<const char*> names) {
    for (const char* name : names)
        if (const char* value = environment(name)) return std::atoi(value);
    return std::nullopt;
}

}  // namespace

// ---------------------------------------------------------------------------
// [SECTION] Environment contract with `ember record`
// ---------------------------------------------------------------------------

RecordEnvironment read_record_environment() {
    const RecordSettings settings = RecordSettings::from_environment();
    RecordEnvironment result;
    result.output = settings.output;
    result.root_pid = settings.root_pid;
    result.children = settings.children;
    for (const char* name : {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}) {
        if (const char* value = environment(name)) {
            result.rank = std::atoi(value);
            result.rank_variable = name;
            break;
        }
    }
    result.world_size =
        first_integer_environment({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}).value_or(1);
    return result;
}

std::optional<std::string> resolve_output_path(const RecordEnvironment& environment, std::int64_t pid) {
    if (environment.output.empty()) return std::nullopt;
    std::string stem = environment.output;
    if (stem.size() > 3 && stem.compare(stem.size() - 3, 3, ".db") == 0) stem.resize(stem.size() - 3);
    if (environment.rank && environment.world_size > 1)
        return stem + ".rank" + std::to_string(*environment.rank) + ".db";
    if (environment.root_pid == 0 || environment.root_pid == pid) return environment.output;
    if (environment.children == ChildPolicy::skip) return std::nullopt;
    return stem + ".pid" + std::to_string(pid) + ".db";
}

std::optional<SessionOptions> options_from_environment() {
    RecordEnvironment record = read_record_environment();
    std::optional<std::string> path = resolve_output_path(record, ::getpid());
    if (!path) return std::nullopt;
    SessionOptions options;
    options.path = *path;
    options.injected = true;
    static_cast<SessionSwitches&>(options) = RecordSettings::from_environment();  // every switch, as written
    return options;
}

// ---------------------------------------------------------------------------
// [SECTION] Session
// ---------------------------------------------------------------------------

struct Session::Components {
    bool cupti_running = false;
    std::unique_ptr<PythonCallSites> python_call_sites;
    std::unique_ptr<NvmlSampler> nvml;
    std::unique_ptr<CpuSampler> cpu;
    std::unique_ptr<ControlServer> control;
    // Periodic CUPTI flush so GPU records reach the file within the commit interval.
    std::thread flusher;
    std::mutex flusher_mutex;
    std::condition_variable flusher_wake;
    bool flusher_stop = false;
    std::uint64_t signal_epoch_at_start = 0;  // the producers' flush epoch when the flusher began
    // Reads the TSC clock every 50 ms so it re-anchors on schedule even while the
    // program records nothing (else the first reading after a long quiet spell would
    // extrapolate the last segment across it).
    std::thread clock_keeper;
    std::mutex clock_keeper_mutex;
    std::condition_variable clock_keeper_wake;
    bool clock_keeper_stop = false;
};

Session::Session(const SessionOptions& options)
    : options_(options), generation_(g_next_generation.fetch_add(1)), components_(std::make_unique<Components>()) {
    trace::RunInfo run;
    run.command_line = os::command_line();
    run.host = os::host_name();
    run.pid = ::getpid();
    RecordEnvironment record = read_record_environment();
    if (record.rank && record.world_size > 1) {
        run.rank = *record.rank;
        run.world_size = record.world_size;
        run.rank_source = record.rank_variable + " environment";
    }
    start_process_clock();
    if (*g_process_clock.fallback_reason() != '\0')
        say(std::string("clock: CLOCK_MONOTONIC, not the TSC: ") + g_process_clock.fallback_reason());
    run.clock_name = clock_name();
    run.clock_offset_to_wall_ns = clock_offset_to_wall_ns();
    run.start_ns = now_ns();
    store::WriterOptions writer_options;
    writer_options.overflow = store::OverflowPolicy::drop;  // never stall the recorded program
    writer_options.commit_interval = std::chrono::milliseconds(200);
    // The session's own exit hook closes the writer (after the last CUPTI flush), and
    // a fork()ed child, which forgets the session, must not close its parent's file.
    writer_options.close_at_exit = false;
    writer_ = std::make_unique<store::TraceWriter>(options_.path, run, writer_options);
    writer_->register_process({run.pid, os::thread_name(::getpid(), ::getpid())});
    capturing_.store(!options_.paused);
    // Capture windows begin at 0 so GPU work queued before the file opened is kept.
    if (!options_.paused) capture_windows_.emplace_back(0, std::numeric_limits<trace::TimeNs>::max());
}

Session::~Session() = default;

void Session::say(const std::string& line) const {
    if (!options_.quiet) std::fprintf(stderr, "ember collector: %s\n", line.c_str());
}

void Session::set_capturing(bool on) {
    std::lock_guard lock(windows_mutex_);
    bool was = capturing_.exchange(on);
    if (was == on) return;
    trace::TimeNs now = now_ns();
    if (on)
        capture_windows_.emplace_back(now, std::numeric_limits<trace::TimeNs>::max());
    else if (!capture_windows_.empty())
        capture_windows_.back().second = now;
    say(on ? "capture started" : "capture stopped");
}

bool Session::captured_at(trace::TimeNs time) const {
    std::lock_guard lock(windows_mutex_);
    for (auto window = capture_windows_.rbegin(); window != capture_windows_.rend(); ++window)
        if (time >= window->first && time < window->second) return true;
    return false;
}

trace::ThreadId Session::this_thread() {
    thread_local std::uint32_t cached_generation = 0;
    thread_local trace::ThreadId cached_thread = 0;
    if (cached_generation == generation_) return cached_thread;
    std::int64_t tid = os::thread_id();
    std::string pending_name;
    trace::ThreadId thread = 0;
    {
        std::lock_guard lock(threads_mutex_);
        auto known = threads_by_tid_.find(tid);  // registered earlier by the CPU sampler
        thread = known != threads_by_tid_.end() ? known->second : writer_->current_thread();
        threads_by_tid_[tid] = thread;
        auto pending = pending_thread_names_.find(tid);
        if (pending != pending_thread_names_.end()) {
            pending_name = pending->second;
            pending_thread_names_.erase(pending);
        }
    }
    if (!pending_name.empty()) writer_->set_thread_name(thread, pending_name);
    cached_generation = generation_;
    cached_thread = thread;
    return thread;
}

trace::ThreadId Session::thread_for_tid(std::int64_t tid) {
    std::lock_guard lock(threads_mutex_);
    auto known = threads_by_tid_.find(tid);
    if (known != threads_by_tid_.end()) return known->second;
    trace::ThreadInfo info;
    info.pid = ::getpid();
    info.tid = tid;
    auto pending = pending_thread_names_.find(tid);
    if (pending != pending_thread_names_.end()) {
        info.name = pending->second;
        pending_thread_names_.erase(pending);
    } else {
        info.name = os::thread_name(info.pid, static_cast<pid_t>(tid));
    }
    trace::ThreadId thread = writer_->register_thread(info);
    threads_by_tid_.emplace(tid, thread);
    return thread;
}

void Session::name_os_thread(std::int64_t tid, std::string_view name) {
    if (tid == os::thread_id()) {
        writer_->set_thread_name(this_thread(), name);
        return;
    }
    std::lock_guard lock(threads_mutex_);
    auto known = threads_by_tid_.find(tid);
    if (known != threads_by_tid_.end())
        writer_->set_thread_name(known->second, name);
    else
        pending_thread_names_[tid] = std::string(name);  // applied when that thread first records
}

trace::CounterId Session::counter(std::string_view name, std::string_view unit, trace::DeviceId device) {
    std::string key = std::string(name) + '\x1f' + std::to_string(device);
    std::lock_guard lock(counters_mutex_);
    auto found = counters_.find(key);
    if (found != counters_.end()) return found->second;
    trace::CounterId id = writer_->register_counter({0, std::string(name), std::string(unit), device});
    counters_.emplace(std::move(key), id);
    return id;
}

void Session::start_components() {
    Components& parts = *components_;
    if (g_process_clock.source() == ClockSource::tsc) {
        parts.clock_keeper = std::thread([this] {
            sigset_t blocked;  // signals are for the program's threads
            sigfillset(&blocked);
            pthread_sigmask(SIG_BLOCK, &blocked, nullptr);
            Components& keeper_parts = *components_;
            std::unique_lock lock(keeper_parts.clock_keeper_mutex);
            // Every 5 s the cores' TSCs are compared again (~1 ms of one thread's time):
            // a hypervisor that moves a vCPU may change its offset.
            for (int wakeups = 1; !keeper_parts.clock_keeper_stop; ++wakeups) {
                keeper_parts.clock_keeper_wake.wait_for(lock, std::chrono::milliseconds(50));
                now_ns();
                if (wakeups % 100 == 0 && g_process_clock.recheck_cross_cpu())
                    say(std::string("clock: CLOCK_MONOTONIC from now on: ") + g_process_clock.fallback_reason());
            }
        });
    }
    if (options_.trace_cuda && options_.python_call_sites) {
        std::string why;
        parts.python_call_sites = PythonCallSites::open_in_process(*writer_, why);
        python_call_sites_ = parts.python_call_sites.get();
        if (python_call_sites_)
            say("Python " + python_call_sites_->version().text() + ": every CUDA API call carries its Python stack");
        else if (why.rfind("not a CPython process", 0) != 0)
            say("no Python stacks for CUDA API calls: " + why);
    }
    if (options_.trace_cuda) parts.cupti_running = cupti_start(*this);
    if (parts.cupti_running) {
        parts.signal_epoch_at_start = store::signal_flush_epoch(store::FlushStage::producers);
        store::add_signal_flush_participant(store::FlushStage::producers);
        parts.flusher = std::thread([this] {
            // SIGINT/SIGTERM while CUPTI runs: GPU records still in CUPTI's buffers must
            // reach the writer before it commits and the signal takes effect. The trace
            // store's one handler asks this thread first (FlushStage::producers), then
            // the writers; signals go to other threads, so this one is free to answer.
            store::block_flush_signals_in_this_thread();
            Components& flusher_parts = *components_;
            std::unique_lock lock(flusher_parts.flusher_mutex);
            auto last_flush = os::SteadyClock::now();
            std::uint64_t handled_epoch = flusher_parts.signal_epoch_at_start;
            while (!flusher_parts.flusher_stop) {
                // Short waits so a signal's flush request is served within ~10 ms.
                flusher_parts.flusher_wake.wait_for(lock, std::chrono::milliseconds(10));
                if (flusher_parts.flusher_stop) break;
                const std::uint64_t epoch = store::signal_flush_epoch(store::FlushStage::producers);
                const bool signalled = epoch != handled_epoch;
                bool periodic = os::SteadyClock::now() - last_flush >= std::chrono::milliseconds(100);
                if (!signalled && !periodic) continue;
                lock.unlock();
                cupti_flush(signalled);
                last_flush = os::SteadyClock::now();
                if (signalled) {
                    handled_epoch = epoch;
                    store::acknowledge_signal_flush(store::FlushStage::producers);
                }
                lock.lock();
            }
            // A request that raced with the stop: answer it so the handler does not wait.
            if (store::signal_flush_epoch(store::FlushStage::producers) != handled_epoch)
                store::acknowledge_signal_flush(store::FlushStage::producers);
        });
    }
    if (options_.nvml_hz > 0) {
        parts.nvml = std::make_unique<NvmlSampler>();
        if (!parts.nvml->start(*this, options_.nvml_hz)) parts.nvml.reset();
    }
    if (options_.cpu_sample_hz > 0) {
        parts.cpu = std::make_unique<CpuSampler>();
        if (!parts.cpu->start(*this, options_.cpu_sample_hz)) parts.cpu.reset();
    }
    if (options_.control_socket) {
        parts.control = std::make_unique<ControlServer>();
        std::string error;
        if (!parts.control->start(*this, &error)) {
            say("control socket disabled: " + error);
            parts.control.reset();
        }
    }
}

void Session::stop() {
    if (stopped_) return;
    stopped_ = true;
    Components& parts = *components_;
    if (parts.control) parts.control->stop();
    // New signals stop waiting for this flusher; one already under way is still answered.
    if (parts.flusher.joinable()) store::remove_signal_flush_participant(store::FlushStage::producers);
    if (parts.flusher.joinable()) {
        {
            std::lock_guard lock(parts.flusher_mutex);
            parts.flusher_stop = true;
        }
        parts.flusher_wake.notify_all();
        parts.flusher.join();
    }
    if (parts.cupti_running) cupti_stop();  // forced flush: every GPU record reaches the writer
    if (python_call_sites_) {
        const PythonCallSites::Counts counts = python_call_sites_->counts();
        say("Python stacks of " + std::to_string(counts.calls) +
            " CUDA API calls: " + std::to_string(counts.same_as_last + counts.known) +
            " from a call site seen before, " + std::to_string(counts.resolved) + " read anew, " +
            std::to_string(counts.unknown) + " without one (no Python frames on the thread, or unreadable)" +
            (python_call_sites_->refused() ? "; process_vm_readv was refused, so the rest had none" : ""));
    }
    if (parts.cpu) parts.cpu->stop();
    if (parts.nvml) parts.nvml->stop();
    if (parts.clock_keeper.joinable()) {
        {
            std::lock_guard lock(parts.clock_keeper_mutex);
            parts.clock_keeper_stop = true;
        }
        parts.clock_keeper_wake.notify_all();
        parts.clock_keeper.join();
    }
    capturing_.store(false);
    writer_->set_end_time(now_ns());
    writer_->close();
}

// ---------------------------------------------------------------------------
// [SECTION] Lifecycle
// ---------------------------------------------------------------------------

Session* current_session() {
    return g_session.load(std::memory_order_acquire);
}

namespace {

// A child made by fork() without exec has the parent's session but none of its
// threads: it must not record into (or, at exit, try to close) the parent's file.
void forget_session_in_forked_child() {
    g_session.store(nullptr, std::memory_order_release);
}

void stop_session_at_exit() {
    std::string error;
    if (!stop_session(&error)) std::fprintf(stderr, "ember collector: %s\n", error.c_str());
}

}  // namespace

Session& start_session(const SessionOptions& options) {
    std::lock_guard lock(g_lifecycle_mutex);
    if (g_session.load())
        throw std::runtime_error("a recording session is already open (" + g_session.load()->options().path + ")");
    auto* session = new Session(options);  // never freed: see session.h
    g_session.store(session, std::memory_order_release);
    nvtx_session_started(*session);  // after publishing: a name given meanwhile is not missed
    // Registered after the writer's own exit hook, so it runs first: GPU records
    // still in CUPTI's buffers reach the writer before it closes.
    static bool exit_hook =
        (std::atexit(stop_session_at_exit), pthread_atfork(nullptr, nullptr, forget_session_in_forked_child), true);
    (void)exit_hook;
    session->start_components();
    session->say("recording to " + options.path + (options.paused ? " (paused)" : ""));
    return *session;
}

bool stop_session(std::string* error) {
    std::lock_guard lock(g_lifecycle_mutex);
    Session* session = g_session.load();
    if (!session) return true;
    try {
        session->stop();
    } catch (const std::exception& failure) {
        g_session.store(nullptr, std::memory_order_release);
        if (error) *error = failure.what();
        return false;
    }
    g_session.store(nullptr, std::memory_order_release);
    return true;
}

void start_session_from_environment_once() {
    // Starting CUPTI may initialize the driver, which calls InitializeInjection on
    // this thread again: that nested call must not wait for the outer one.
    thread_local bool starting = false;
    if (starting) return;
    starting = true;
    static std::once_flag once;
    std::call_once(once, [] {
        std::optional<SessionOptions> options = options_from_environment();
        if (!options || current_session()) return;
        try {
            start_session(*options);
        } catch (const std::exception& failure) {
            std::fprintf(stderr, "ember collector: not recording: %s\n", failure.what());
        }
    });
    starting = false;
}

}  // namespace ember::collector
