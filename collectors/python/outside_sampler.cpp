// outside_sampler.cpp: `ember dump` and `ember record --pid` (outside_sampler.h).
#include "collectors/python/outside_sampler.h"

#include "collectors/python/native_stack.h"
#include "common/os.h"
#include "profiler/store/schema.h"
#include "profiler/store/writer.h"

#include <cerrno>
#include <csignal>
#include <ctime>
#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>
#include <thread>
#include <tuple>
#include <fcntl.h>
#include <string_view>
#include <sys/wait.h>
#include <unistd.h>

namespace ember::collector::python {

namespace {

std::int64_t clock_ns(clockid_t clock) {
    timespec now {};
    clock_gettime(clock, &now);
    return static_cast<std::int64_t>(now.tv_sec) * 1000000000ll + now.tv_nsec;
}

// /proc/PID/cmdline with spaces between the arguments.
std::string command_line(pid_t pid) {
    std::string text = read_proc_text("/proc/" + std::to_string(pid) + "/cmdline");
    while (!text.empty() && text.back() == '\0') text.pop_back();
    for (char& c : text)
        if (c == '\0') c = ' ';
    return text;
}

bool is_active(char state) { return state == 'R'; }

// Exited: no such process, or a zombie waiting for its parent (ember record's child).
bool process_gone(pid_t pid) {
    if (kill(pid, 0) != 0 && errno == ESRCH) return true;
    const char state = thread_state(pid, pid);
    return state == 'Z' || state == 'X' || (state == '?' && kill(pid, 0) != 0 && errno == ESRCH);
}

// After a failed read: an exiting process has lost its memory a moment before it shows
// as a zombie, so a failure is an exit when the process is gone within 100 ms.
bool process_going(pid_t pid) {
    for (int wait = 0; wait < 20; ++wait) {
        if (process_gone(pid)) return true;
        timespec pause{0, 5'000'000};
        nanosleep(&pause, nullptr);
    }
    return process_gone(pid);
}

}  // namespace

std::vector<pid_t> descendant_processes(pid_t pid) {
    std::vector<pid_t> found;
    std::vector<pid_t> parents{pid};
    for (std::size_t next = 0; next < parents.size() && parents.size() < 100000; ++next) {
        const std::string task = "/proc/" + std::to_string(parents[next]) + "/task/";
        for (pid_t tid : process_threads(parents[next])) {
            const std::string children = read_proc_text(task + std::to_string(tid) + "/children");
            const char* cursor = children.c_str();
            for (;;) {
                char* end = nullptr;
                const long child = std::strtol(cursor, &end, 10);
                if (end == cursor) break;
                cursor = end;
                if (child > 0 && std::find(parents.begin(), parents.end(), child) == parents.end()) {
                    parents.push_back(static_cast<pid_t>(child));
                    found.push_back(static_cast<pid_t>(child));
                }
            }
        }
    }
    return found;
}

namespace {

// "function (libfoo.so.1)" for a native frame, "function (file:line)" for a Python one.
void write_frame(std::ostream& out, const MixedFrame& frame) {
    out << "    " << frame.function << " (";
    if (frame.is_python()) out << frame.file << ":" << frame.line << ")\n";
    else out << (frame.file.empty() ? std::string("?") : frame.file.substr(frame.file.rfind('/') + 1)) << ")\n";
}

// The parent process of PID (/proc/PID/stat), 0 when unreadable.
pid_t parent_of(pid_t pid) {
    const std::string stat = read_proc_text("/proc/" + std::to_string(pid) + "/stat");
    const std::size_t close_paren = stat.rfind(')');
    return close_paren == std::string::npos ? 0 : static_cast<pid_t>(std::atol(stat.c_str() + std::min(stat.size(), close_paren + 4)));
}

// A thread that exits while --native holds it (ptrace) stays a zombie of ours, and
// its parent's wait (a shell's for the command it ran) blocks until we take that
// report: it is taken here for each thread of PID that was there at the stop. Not for
// PID itself when it is our own child (ember record's CMD): its exit status is
// ember record's to reap.
void release_exited_threads(pid_t pid, const std::vector<pid_t>& tids) {
    const bool own_child = parent_of(pid) == getpid();
    for (pid_t tid : tids) {
        if (tid == pid && own_child) continue;
        siginfo_t info{};
        waitid(P_PID, static_cast<id_t>(tid), &info, WEXITED | WNOHANG | __WALL);
    }
}

// --native on a process that is not CPython: every thread's native stack alone, as
// perf record takes it. The threads are stopped for the unwind, then named once they run
// again (as mixed_snapshot does). False (and `error`) when no thread could be stopped.
bool native_snapshot(pid_t pid, NativeUnwinder& unwinder, std::vector<MixedThread>& threads, std::string& error) {
    threads.clear();
    std::map<pid_t, std::vector<std::uint64_t>> addresses;
    const std::vector<pid_t> tids = process_threads(pid);
    bool stopped = false;
    {
        ThreadStop stop(pid);
        stopped = stop.stopped_count() > 0;
        if (!stopped)
            error = stop.error().empty() ? "no thread of process " + std::to_string(pid) + " could be stopped" : stop.error();
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

// Whether a PythonReadError says the process runs no CPython at all (rather than one
// that cannot be read yet or at all).
bool not_cpython(const PythonReadError& error) {
    return std::string_view(error.what()).find("is not a CPython process") != std::string_view::npos;
}

// `process` null: a process that is not CPython, dumped with --native (native stacks only).
void dump_one(pid_t pid, PythonProcess* process, std::ostream& out, bool native) {
    std::vector<MixedThread> threads;
    std::string error;
    // States before the snapshot: --native stops the threads, and one just let go may
    // show as running for a moment.
    std::map<pid_t, char> states;
    for (pid_t tid : process_threads(pid)) states[tid] = thread_state(pid, tid);
    if (!process) {
        NativeUnwinder unwinder(pid);
        if (!native_snapshot(pid, unwinder, threads, error)) throw PythonReadError("process " + std::to_string(pid) + ": " + error);
    } else if (native) {
        NativeUnwinder unwinder(pid);
        if (!mixed_snapshot(*process, unwinder, threads, error)) throw PythonReadError(error);
    } else {
        std::vector<PythonThread> python;
        if (!process->snapshot(python, error)) throw PythonReadError(error);
        for (const PythonThread& thread : python)
            threads.push_back({thread.tid, thread.thread_id, true, python_only(thread.frames), thread.name});
    }
    out << "Process " << pid << ": " << command_line(pid) << "\n";
    if (process) out << "Python v" << process->version().text() << " (" << process->binary() << ")\n";
    else out << "Native stacks only (not a CPython process)\n";
    for (const MixedThread& thread : threads) {
        const auto known = states.find(thread.tid);
        const char state = known != states.end() ? known->second : thread.tid ? thread_state(pid, thread.tid) : '?';
        out << "\nThread " << thread.tid << " (" << (is_active(state) ? "active" : "idle") << "): \""
            << (!thread.name.empty() ? thread.name : thread.tid ? thread_name(pid, thread.tid) : std::string("?")) << "\"\n";
        for (const MixedFrame& frame : thread.frames) write_frame(out, frame);
    }
}

}  // namespace

namespace {

// One process of a dump: its Python (or, with --native, mixed) stacks, or with --native
// its native stacks alone when it is not CPython. Throws PythonReadError.
void dump_process(pid_t pid, std::ostream& out, bool native) {
    std::unique_ptr<PythonProcess> process;
    try {
        process = std::make_unique<PythonProcess>(pid);
    } catch (const PythonReadError& error) {
        if (!native || !not_cpython(error)) throw;
    }
    dump_one(pid, process.get(), out, native);
}

}  // namespace

void write_dump(pid_t pid, std::ostream& out, bool subprocesses, bool native) {
    if (!subprocesses) {
        dump_process(pid, out, native);
        return;
    }
    std::string root_error;
    bool any = false;
    std::vector<pid_t> pids{pid};
    for (pid_t child : descendant_processes(pid)) pids.push_back(child);
    for (pid_t each : pids) {
        try {
            std::ostringstream text;
            dump_process(each, text, native);
            out << (any ? "\n" : "") << text.str();
            any = true;
        } catch (const PythonReadError& error) {
            if (each == pid) root_error = error.what();
            // a descendant that is not CPython (without --native), or exited meanwhile: left out
        }
    }
    if (!any) throw PythonReadError(root_error + (native ? " (and no process descending from it could be read)"
                                                         : " (and no CPython process descends from it)"));
}

namespace {

// A process not (yet) readable as CPython: tried again on later scans, less and less
// often, and afresh when it execs another program.
struct Pending {
    std::string executable;
    int failures = 0;
    std::int64_t next_scan = 0;
};

// One process being sampled. Each thread's /proc stat file stays open and is
// read again with pread for its state at every sample (one system call, not three),
// and its name is read again about once a second, not at every sample.
struct Target {
    std::unique_ptr<PythonProcess> process;    // null: not CPython, sampled with --native alone
    std::unique_ptr<NativeUnwinder> unwinder;  // --native
    Pending probe;                             // a native-only process: when to look for CPython in it again
    std::map<pid_t, trace::ThreadId> thread_ids;
    std::map<pid_t, std::string> thread_names;
    std::map<pid_t, int> stat_files;
    std::map<pid_t, char> states;  // --native: each thread's state before the stop
    Target() = default;
    Target(Target&&) = default;
    ~Target() {
        for (const auto& [tid, fd] : stat_files)
            if (fd >= 0) close(fd);
    }
    // 'R' running or runnable, another letter idle, '?' unreadable.
    char state(pid_t pid, pid_t tid) {
        auto [found, inserted] = stat_files.try_emplace(tid, -1);
        if (inserted) {
            const std::string path = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/stat";
            found->second = open(path.c_str(), O_RDONLY | O_CLOEXEC);
        }
        if (found->second < 0) return thread_state(pid, tid);
        char text[1024];
        const ssize_t length = pread(found->second, text, sizeof text - 1, 0);
        if (length <= 0) {  // the thread exited (its file reads as an error): forget it
            close(found->second);
            stat_files.erase(found);
            return '?';
        }
        const std::string_view stat(text, static_cast<std::size_t>(length));
        const std::size_t close_paren = stat.rfind(')');
        return close_paren == std::string_view::npos || close_paren + 2 >= stat.size() ? '?' : stat[close_paren + 2];
    }
};

std::string executable_of(pid_t pid) {
    char path[4096] = {};
    const ssize_t length = readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), path, sizeof path - 1);
    return length > 0 ? std::string(path, static_cast<std::size_t>(length)) : std::string();
}

}  // namespace

OutsideRecordResult record_python_process(const OutsideRecordOptions& options) {
    std::map<pid_t, Target> targets;
    std::map<pid_t, Pending> pending;
    std::vector<PythonThread> threads;
    std::string error;
    if (options.wait_for_python) {
        pending[options.pid] = {};
    } else {
        // Throws before the file is created.
        std::unique_ptr<PythonProcess> process;
        try {
            process = std::make_unique<PythonProcess>(options.pid);
        } catch (const PythonReadError& refused) {
            if (!options.native || !not_cpython(refused)) throw;
        }
        if (process && !process->snapshot(threads, error)) throw PythonReadError(error);
        Target& target = targets[options.pid];
        if (options.native) target.unwinder = std::make_unique<NativeUnwinder>(options.pid);
        if (!process) {  // its native stacks alone: they must be readable now
            std::vector<MixedThread> probe;
            if (!native_snapshot(options.pid, *target.unwinder, probe, error))
                throw PythonReadError("process " + std::to_string(options.pid) + ": " + error);
            target.probe.executable = executable_of(options.pid);
        }
        target.process = std::move(process);
    }

    const std::int64_t period_ns = static_cast<std::int64_t>(1e9 / (options.hz > 0 ? options.hz : 100.0));
    const std::int64_t start = clock_ns(CLOCK_MONOTONIC);
    std::unique_ptr<store::TraceWriter> writer;
    std::map<std::tuple<std::string, std::string, int>, trace::FrameId> frame_ids;
    std::vector<trace::FrameId> stack;
    OutsideRecordResult result;

    // The file opens with the first process found (CPython, or any with --native).
    bool python_version_known = false;
    auto note_python = [&](PythonProcess& process) {
        if (python_version_known) return;
        writer->set_metadata("python_version", process.version().text());
        python_version_known = true;
    };
    auto open_writer = [&]() {
        trace::RunInfo run;
        run.command_line = command_line(options.pid);
        run.host = os::host_name();
        run.pid = options.pid;
        run.clock_name = "CLOCK_MONOTONIC";
        run.clock_offset_to_wall_ns = clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_MONOTONIC);
        run.start_ns = start;
        store::WriterOptions writer_options;
        writer_options.overflow = store::OverflowPolicy::block;  // the sampler is ours to slow, not the target
        writer = std::make_unique<store::TraceWriter>(options.output, run, writer_options);
        writer->set_metadata(store::metadata_key::cpu_sample_period_ns, std::to_string(period_ns));
        writer->set_metadata("python_sampling", options.native ? "outside (process_vm_readv), native stacks (ptrace, libdw)"
                                                               : "outside (process_vm_readv)");
    };
    auto adopt = [&](pid_t pid, Target& target) {
        if (!writer) open_writer();
        if (target.process) note_python(*target.process);
        else result.native_only.push_back(pid);
        writer->register_process({pid, thread_name(pid, pid)});
        result.processes.push_back(pid);
    };
    if (!targets.empty()) adopt(options.pid, targets.begin()->second);

    // Every ~50 ms: new descendants, and pending processes that may have become CPython.
    const std::int64_t scan_every = std::max<std::int64_t>(1, static_cast<std::int64_t>(50'000'000 / period_ns));
    std::int64_t scans = 0;
    // Reads PID as CPython: the process, or null when it is not CPython (yet), which
    // `state` counts, so that it is tried again 1, 2, 4 ... 64 scans later (12 tries
    // for one program image). Without --native, a process that cannot be read yet
    // counts the same.
    auto try_python = [&](pid_t pid, Pending& state) -> std::unique_ptr<PythonProcess> {
        try {
            auto process = std::make_unique<PythonProcess>(pid);
            std::vector<PythonThread> probe;
            std::string probe_error;
            if (!process->snapshot(probe, probe_error)) throw PythonReadError(probe_error);
            return process;
        } catch (const PythonReadError& refused) {
            ++state.failures;
            state.next_scan = scans + (std::int64_t{1} << std::min(state.failures, 6));
            // With --native a process that runs no CPython is sampled at once (null);
            // one that may still become readable (libpython not mapped yet) waits.
            if (!options.native || !not_cpython(refused)) throw;
            return nullptr;
        }
    };
    auto scan = [&]() {
        ++scans;
        if (options.subprocesses)
            for (pid_t child : descendant_processes(options.pid))
                if (!targets.count(child) && !pending.count(child)) pending[child] = {};
        for (auto it = pending.begin(); it != pending.end();) {
            const pid_t pid = it->first;
            Pending& state = it->second;
            if (kill(pid, 0) != 0 && errno == ESRCH && pid != options.pid) {
                it = pending.erase(it);
                continue;
            }
            const std::string executable = executable_of(pid);
            if (executable != state.executable) {  // exec'd another program: try afresh
                state.executable = executable;
                state.failures = 0;
                state.next_scan = scans;
            }
            // Up to 12 tries, 1, 2, 4, ... 64 scans apart, for one program image.
            if (state.failures >= 12 || scans < state.next_scan) {
                ++it;
                continue;
            }
            std::unique_ptr<PythonProcess> process;
            std::unique_ptr<NativeUnwinder> unwinder;
            try {
                process = try_python(pid, state);
                if (options.native) unwinder = std::make_unique<NativeUnwinder>(pid);
            } catch (const PythonReadError&) {  // not readable (yet), or gone
                ++it;
                continue;
            }
            Target& target = targets[pid];
            target.process = std::move(process);
            target.unwinder = std::move(unwinder);
            target.probe = state;
            adopt(pid, target);
            it = pending.erase(it);
        }
        // Native-only processes: one that execs (a shell's exec, a launcher) may turn
        // out to be CPython, and is unwound afresh in its new image either way.
        for (auto& [pid, target] : targets) {
            if (target.process) continue;
            const std::string executable = executable_of(pid);
            if (executable.empty()) continue;  // exiting: the tick finds it gone
            if (executable != target.probe.executable) {
                target.probe = {executable, 0, scans};
                try {
                    target.unwinder = std::make_unique<NativeUnwinder>(pid);
                } catch (const PythonReadError&) {
                    continue;  // gone meanwhile
                }
            }
            if (target.probe.failures >= 12 || scans < target.probe.next_scan) continue;
            std::unique_ptr<PythonProcess> process;
            try {
                process = try_python(pid, target.probe);
            } catch (const PythonReadError&) {
                continue;  // CPython, perhaps, but not readable yet: tried again later
            }
            if (!process) continue;
            note_python(*process);
            target.process = std::move(process);
            result.native_only.erase(std::remove(result.native_only.begin(), result.native_only.end(), pid),
                                     result.native_only.end());
        }
    };

    // One tick's stacks of a target: mixed with --native (a Python-only snapshot when its
    // threads could not be stopped this time), else the Python frames alone; native
    // frames alone for a process that is not CPython.
    std::vector<MixedThread> sampled;
    auto take_snapshot = [&](pid_t pid, Target& target, std::vector<MixedThread>& out) {
        std::string native_error;
        if (!target.process) return native_snapshot(pid, *target.unwinder, out, error);
        if (target.unwinder) {
            const std::vector<pid_t> tids = process_threads(pid);
            const bool mixed = mixed_snapshot(*target.process, *target.unwinder, out, error);
            release_exited_threads(pid, tids);
            if (mixed) return true;
            native_error = error;
        }
        out.clear();
        if (!target.process->snapshot(threads, error)) return false;  // gone (the stop failed for that too)
        if (target.unwinder) {
            ++result.native_failures;
            if (result.native_error.empty()) result.native_error = native_error;
        }
        for (const PythonThread& thread : threads) {
            if (thread.tid == 0) {
                ++result.torn_threads;
                continue;
            }
            out.push_back({thread.tid, thread.thread_id, true, python_only(thread.frames), thread.name});
        }
        return true;
    };

    const std::int64_t end = options.duration.count() > 0 ? start + options.duration.count() : INT64_MAX;
    // Ticks lie on a grid of the period, each moved by up to a fifth of it at random:
    // the mean rate is the asked one, and a program that repeats itself in step with
    // the period (a training loop of 100 ms at 100 Hz) is not seen in the same phase
    // every time.
    std::int64_t grid = start;
    std::int64_t next_tick = start;
    std::int64_t ticks = 0;
    std::int64_t last_rename_check = start;
    std::uint64_t random = 0x9e3779b97f4a7c15ull ^ static_cast<std::uint64_t>(start);
    auto jitter = [&]() {
        random ^= random << 13;
        random ^= random >> 7;
        random ^= random << 17;
        const std::int64_t span = period_ns / 5;
        return span > 0 ? static_cast<std::int64_t>(random % static_cast<std::uint64_t>(2 * span + 1)) - span : 0;
    };
    for (;;) {
        if (options.stop && options.stop->load()) break;
        const std::int64_t now = clock_ns(CLOCK_MONOTONIC);
        if (now >= end) break;
        if (now < next_tick) {
            const std::int64_t wait = next_tick - now;
            timespec pause{static_cast<time_t>(wait / 1000000000ll), static_cast<long>(wait % 1000000000ll)};
            nanosleep(&pause, nullptr);
            continue;
        }
        // A snapshot that overran its period skips the ticks it missed instead of bursting.
        grid += period_ns;
        if (grid <= now) {
            const std::int64_t missed = (now - grid) / period_ns + 1;
            result.late_ticks += missed;
            grid += missed * period_ns;
        }
        next_tick = grid + jitter();
        // (--native: a native-only process may exec CPython)
        if ((options.subprocesses || options.native || !pending.empty()) && ticks++ % scan_every == 0) scan();
        if (targets.empty()) {
            if (process_gone(options.pid)) {
                result.process_exited = true;
                break;
            }
            continue;
        }
        const std::int64_t time = clock_ns(CLOCK_MONOTONIC);
        const bool rename_check = time - last_rename_check >= 1'000'000'000;
        if (rename_check) last_rename_check = time;
        bool root_gone = false;
        for (auto it = targets.begin(); it != targets.end();) {
            const pid_t pid = it->first;
            Target& target = it->second;
            // With --native, the states are read before the threads are stopped (one just
            // let go may show as running for a moment).
            if (target.unwinder) {
                target.states.clear();
                for (pid_t tid : process_threads(pid)) target.states[tid] = target.state(pid, tid);
            }
            if (!take_snapshot(pid, target, sampled)) {
                if (pid != options.pid || process_going(pid)) {
                    // exited, or a descendant that exec'd another program: no longer sampled
                    if (pid == options.pid) root_gone = true;
                    it = targets.erase(it);
                    continue;
                }
                result.error = "process " + std::to_string(pid) + ": " + error;
                break;
            }
            for (MixedThread& thread : sampled) {
                // threading.Thread.name where the thread has one, else the OS name.
                auto name_of = [&] { return !thread.name.empty() ? thread.name : thread_name(pid, thread.tid); };
                auto known = target.thread_ids.find(thread.tid);
                if (known == target.thread_ids.end()) {
                    const std::string name = name_of();
                    known = target.thread_ids.emplace(thread.tid, writer->register_thread({0, pid, thread.tid, name})).first;
                    target.thread_names[thread.tid] = name;
                } else if (rename_check) {  // a thread renames itself now and then, not every 10 ms
                    const std::string name = name_of();
                    if (!name.empty() && name != target.thread_names[thread.tid]) {
                        writer->set_thread_name(known->second, name);
                        target.thread_names[thread.tid] = name;
                    }
                }
                stack.clear();
                for (auto frame = thread.frames.rbegin(); frame != thread.frames.rend(); ++frame) {
                    auto key = std::make_tuple(frame->function, frame->file, frame->line);
                    auto found = frame_ids.find(key);
                    if (found == frame_ids.end())  // native frames: line -1, the library as module
                        found = frame_ids.emplace(std::move(key), writer->intern_frame(frame->function, frame->file, 0, frame->line)).first;
                    stack.push_back(found->second);
                }
                trace::StackSample sample;
                sample.time_ns = time;
                sample.thread_id = known->second;
                sample.stack_id = writer->intern_stack(stack);
                char state = 0;
                if (target.unwinder)
                    if (auto known = target.states.find(thread.tid); known != target.states.end()) state = known->second;
                sample.idle = !is_active(state ? state : target.state(pid, thread.tid));
                writer->record_stack_sample(sample);
                ++result.samples;
                if (sample.idle) ++result.idle_samples;
            }
            ++it;
        }
        if (!result.error.empty()) break;
        ++result.snapshots;
        if (root_gone || process_gone(options.pid)) {
            result.process_exited = true;
            break;
        }
    }
    const std::int64_t stop = clock_ns(CLOCK_MONOTONIC);
    result.seconds = static_cast<double>(stop - start) / 1e9;
    if (writer) {
        writer->set_end_time(stop);
        writer->close();
    }
    return result;
}

}  // namespace ember::collector::python
