// process_sampler.cpp: one process sampled from outside, and the discovery of the
// processes to sample (process_sampler.h).
#include "collectors/python/process_sampler.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <fcntl.h>
#include <string_view>
#include <sys/wait.h>
#include <unistd.h>

namespace ember::collector::python {

bool process_gone(pid_t pid) {
    if (kill(pid, 0) != 0 && errno == ESRCH) return true;
    const char state = thread_state(pid, pid);
    return state == 'Z' || state == 'X' || (state == '?' && kill(pid, 0) != 0 && errno == ESRCH);
}

bool process_going(pid_t pid) {
    for (int wait = 0; wait < 20; ++wait) {
        if (process_gone(pid)) return true;
        timespec pause{0, 5'000'000};
        nanosleep(&pause, nullptr);
    }
    return process_gone(pid);
}

bool not_cpython(const PythonReadError& error) {
    return std::string_view(error.what()).find("is not a CPython process") != std::string_view::npos;
}

std::string executable_of(pid_t pid) {
    char path[4096] = {};
    const ssize_t length = readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), path, sizeof path - 1);
    return length > 0 ? std::string(path, static_cast<std::size_t>(length)) : std::string();
}

namespace {

// The parent process of PID (/proc/PID/stat), 0 when unreadable.
pid_t parent_of(pid_t pid) {
    const std::string stat = read_proc_text("/proc/" + std::to_string(pid) + "/stat");
    const std::size_t close_paren = stat.rfind(')');
    return close_paren == std::string::npos
               ? 0
               : static_cast<pid_t>(std::atol(stat.c_str() + std::min(stat.size(), close_paren + 4)));
}

}  // namespace

void release_exited_threads(pid_t pid, const std::vector<pid_t>& tids) {
    const bool own_child = parent_of(pid) == getpid();
    for (pid_t tid : tids) {
        if (tid == pid && own_child) continue;
        siginfo_t info{};
        waitid(P_PID, static_cast<id_t>(tid), &info, WEXITED | WNOHANG | __WALL);
    }
}

bool native_snapshot(pid_t pid, NativeUnwinder& unwinder, std::vector<MixedThread>& threads, std::string& error) {
    threads.clear();
    std::map<pid_t, std::vector<std::uint64_t>> addresses;
    const std::vector<pid_t> tids = process_threads(pid);
    bool stopped = false;
    {
        ThreadStop stop(pid);
        stopped = stop.stopped_count() > 0;
        if (!stopped)
            error = stop.error().empty() ? "no thread of process " + std::to_string(pid) + " could be stopped"
                                         : stop.error();
        std::string ignored;  // a thread that cannot be unwound is left out of this sample
        for (pid_t tid : stop.stopped_threads()) unwinder.unwind_addresses(tid, addresses[tid], ignored);
    }
    release_exited_threads(pid, tids);
    if (!stopped) return false;
    std::vector<NativeFrame> frames;
    for (const auto& [tid, thread_addresses] : addresses) {
        if (thread_addresses.empty()) continue;
        frames.clear();
        for (std::uint64_t address : thread_addresses) frames.push_back(unwinder.name(address));
        threads.push_back({tid, 0, false, merge_stacks({}, frames), {}});
    }
    return true;
}

// ---------------------------------------------------------------------------
// SampledProcess

SampledProcess::~SampledProcess() {
    for (const auto& [tid, fd] : stat_files_)
        if (fd >= 0) close(fd);
}

char SampledProcess::state(pid_t pid, pid_t tid) {
    auto [found, inserted] = stat_files_.try_emplace(tid, -1);
    if (inserted) {
        const std::string path = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/stat";
        found->second = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    }
    if (found->second < 0) return thread_state(pid, tid);
    char text[1024];
    const ssize_t length = pread(found->second, text, sizeof text - 1, 0);
    if (length <= 0) {  // the thread exited (its file reads as an error): forget it
        close(found->second);
        stat_files_.erase(found);
        return '?';
    }
    const std::string_view stat(text, static_cast<std::size_t>(length));
    const std::size_t close_paren = stat.rfind(')');
    return close_paren == std::string_view::npos || close_paren + 2 >= stat.size() ? '?' : stat[close_paren + 2];
}

bool SampledProcess::snapshot(pid_t pid, std::vector<MixedThread>& out, std::string& error,
                              OutsideRecordResult& counts) {
    if (unwinder) {
        states_.clear();
        for (pid_t tid : process_threads(pid)) states_[tid] = state(pid, tid);
    }
    std::string native_error;
    if (!process) return native_snapshot(pid, *unwinder, out, error);
    if (unwinder) {
        const std::vector<pid_t> tids = process_threads(pid);
        const bool mixed = mixed_snapshot(*process, *unwinder, out, error);
        release_exited_threads(pid, tids);
        if (mixed) return true;
        native_error = error;
    }
    out.clear();
    if (!process->snapshot(python_, error)) return false;  // gone (the stop failed for that too)
    if (unwinder) {
        ++counts.native_failures;
        if (counts.native_error.empty()) counts.native_error = native_error;
    }
    for (const PythonThread& thread : python_) {
        if (thread.tid == 0) {
            ++counts.torn_threads;
            continue;
        }
        out.push_back({thread.tid, thread.thread_id, true, python_only(thread.frames), thread.name});
    }
    return true;
}

char SampledProcess::sample_state(pid_t pid, pid_t tid) {
    char before_stop = 0;
    if (unwinder)
        if (auto known = states_.find(tid); known != states_.end()) before_stop = known->second;
    return before_stop ? before_stop : state(pid, tid);
}

// ---------------------------------------------------------------------------
// ProcessDiscovery

ProcessDiscovery::ProcessDiscovery(const OutsideRecordOptions& options, std::int64_t period_ns)
    : options_(options), scan_every_(std::max<std::int64_t>(1, static_cast<std::int64_t>(50'000'000 / period_ns))) {}

void ProcessDiscovery::start() {
    const pid_t pid = options_.pid;
    if (options_.wait_for_python) {
        pending_[pid] = {};
        return;
    }
    std::unique_ptr<PythonProcess> process;
    try {
        process = std::make_unique<PythonProcess>(pid);
    } catch (const PythonReadError& refused) {
        if (!options_.native || !not_cpython(refused)) throw;
    }
    std::string error;
    std::vector<PythonThread> threads;
    if (process && !process->snapshot(threads, error)) throw PythonReadError(error);
    SampledProcess& target = targets_[pid];
    if (options_.native) target.unwinder = std::make_unique<NativeUnwinder>(pid);
    if (!process) {  // its native stacks alone: they must be readable now
        std::vector<MixedThread> probe;
        if (!native_snapshot(pid, *target.unwinder, probe, error))
            throw PythonReadError("process " + std::to_string(pid) + ": " + error);
        target.probe.executable = executable_of(pid);
    }
    target.process = std::move(process);
}

void ProcessDiscovery::tick() {
    // (--native: a native-only process may exec CPython)
    if ((options_.subprocesses || options_.native || !pending_.empty()) && ticks_++ % scan_every_ == 0) scan();
}

// Reads PID as CPython: the process, or null when it is not CPython (yet), which
// `state` counts, so that it is tried again 1, 2, 4 ... 64 scans later (12 tries for
// one program image). Without --native, a process that cannot be read yet counts the
// same.
std::unique_ptr<PythonProcess> ProcessDiscovery::try_python(pid_t pid, Pending& state) {
    try {
        auto process = std::make_unique<PythonProcess>(pid);
        std::vector<PythonThread> probe;
        std::string probe_error;
        if (!process->snapshot(probe, probe_error)) throw PythonReadError(probe_error);
        return process;
    } catch (const PythonReadError& refused) {
        ++state.failures;
        state.next_scan = scans_ + (std::int64_t{1} << std::min(state.failures, 6));
        // With --native a process that runs no CPython is sampled at once (null);
        // one that may still become readable (libpython not mapped yet) waits.
        if (!options_.native || !not_cpython(refused)) throw;
        return nullptr;
    }
}

void ProcessDiscovery::scan() {
    ++scans_;
    if (options_.subprocesses)
        for (pid_t child : descendant_processes(options_.pid))
            if (!targets_.count(child) && !pending_.count(child)) pending_[child] = {};
    scan_pending();
    probe_native_only();
}

void ProcessDiscovery::scan_pending() {
    for (auto it = pending_.begin(); it != pending_.end();) {
        const pid_t pid = it->first;
        Pending& state = it->second;
        if (kill(pid, 0) != 0 && errno == ESRCH && pid != options_.pid) {
            it = pending_.erase(it);
            continue;
        }
        const std::string executable = executable_of(pid);
        if (executable != state.executable) {  // exec'd another program: try afresh
            state.executable = executable;
            state.failures = 0;
            state.next_scan = scans_;
        }
        // Up to 12 tries, 1, 2, 4, ... 64 scans apart, for one program image.
        if (state.failures >= 12 || scans_ < state.next_scan) {
            ++it;
            continue;
        }
        std::unique_ptr<PythonProcess> process;
        std::unique_ptr<NativeUnwinder> unwinder;
        try {
            process = try_python(pid, state);
            if (options_.native) unwinder = std::make_unique<NativeUnwinder>(pid);
        } catch (const PythonReadError&) {  // not readable (yet), or gone
            ++it;
            continue;
        }
        SampledProcess& target = targets_[pid];
        target.process = std::move(process);
        target.unwinder = std::move(unwinder);
        target.probe = state;
        adopt_(pid, target);
        it = pending_.erase(it);
    }
}

// Native-only processes: one that execs (a shell's exec, a launcher) may turn out to
// be CPython, and is unwound afresh in its new image either way.
void ProcessDiscovery::probe_native_only() {
    for (auto& [pid, target] : targets_) {
        if (target.process) continue;
        const std::string executable = executable_of(pid);
        if (executable.empty()) continue;  // exiting: the tick finds it gone
        if (executable != target.probe.executable) {
            target.probe = {executable, 0, scans_};
            try {
                target.unwinder = std::make_unique<NativeUnwinder>(pid);
            } catch (const PythonReadError&) {
                continue;  // gone meanwhile
            }
        }
        if (target.probe.failures >= 12 || scans_ < target.probe.next_scan) continue;
        std::unique_ptr<PythonProcess> process;
        try {
            process = try_python(pid, target.probe);
        } catch (const PythonReadError&) {
            continue;  // CPython, perhaps, but not readable yet: tried again later
        }
        if (!process) continue;
        became_python_(pid, *process);
        target.process = std::move(process);
    }
}

}  // namespace ember::collector::python
