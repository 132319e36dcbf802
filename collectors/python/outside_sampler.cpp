// outside_sampler.cpp: `ember dump` and `ember record --pid` (outside_sampler.h). The
// recording is three parts: when to sample (SampleTimer, sample_timer.h), what each
// process shows (SampledProcess and ProcessDiscovery, process_sampler.h), and the
// writer loop below (TraceOutput, sample_until_done).
#include "collectors/python/outside_sampler.h"

#include "collectors/python/native_stack.h"
#include "collectors/python/process_sampler.h"
#include "collectors/python/sample_interning.h"
#include "collectors/python/sample_timer.h"
#include "common/os.h"
#include "profiler/store/schema.h"
#include "profiler/store/writer.h"

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace ember::collector::python {

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
    if (frame.is_python())
        out << frame.file << ":" << frame.line << ")\n";
    else
        out << (frame.file.empty() ? std::string("?") : frame.file.substr(frame.file.rfind('/') + 1)) << ")\n";
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
        if (!native_snapshot(pid, unwinder, threads, error))
            throw PythonReadError("process " + std::to_string(pid) + ": " + error);
    } else if (native) {
        NativeUnwinder unwinder(pid);
        if (!mixed_snapshot(*process, unwinder, threads, error)) throw PythonReadError(error);
    } else {
        std::vector<PythonThread> python;
        if (!process->snapshot(python, error)) throw PythonReadError(error);
        for (const PythonThread& thread : python)
            threads.push_back({thread.tid, thread.thread_id, true, python_only(thread.frames), thread.name});
    }
    out << "Process " << pid << ": " << os::command_line(pid) << "\n";
    if (process)
        out << "Python v" << process->version().text() << " (" << process->binary() << ")\n";
    else
        out << "Native stacks only (not a CPython process)\n";
    for (const MixedThread& thread : threads) {
        const auto known = states.find(thread.tid);
        const char state = known != states.end() ? known->second : thread.tid ? thread_state(pid, thread.tid) : '?';
        out << "\nThread " << thread.tid << " (" << (is_active(state) ? "active" : "idle") << "): \""
            << (!thread.name.empty() ? thread.name
                : thread.tid         ? os::thread_name(pid, thread.tid)
                                     : std::string("?"))
            << "\"\n";
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
    if (!any)
        throw PythonReadError(root_error + (native ? " (and no process descending from it could be read)"
                                                   : " (and no CPython process descends from it)"));
}

namespace {

// The writer's life for `ember record --pid`: the file opens with the first process
// adopted (CPython, or any with --native), takes every process's samples, and is
// closed at the end. Frames and threads are written once each (sample_interning.h).
class TraceOutput {
  public:
    TraceOutput(const OutsideRecordOptions& options, std::int64_t start_ns, std::int64_t period_ns,
                OutsideRecordResult& result)
        : options_(options),
          start_ns_(start_ns),
          period_ns_(period_ns),
          result_(result),
          frames_([this](const MixedFrame& frame) {
              return writer_->intern_frame(frame.function, frame.file, 0, frame.line);
          }) {}

    // A process to sample from now on.
    void adopt(pid_t pid, SampledProcess& target) {
        if (!writer_) open();
        if (target.process)
            note_python(*target.process);
        else
            result_.native_only.push_back(pid);
        writer_->register_process({pid, os::thread_name(pid, pid)});
        result_.processes.push_back(pid);
    }

    // A process sampled for its native stacks alone turned out to be CPython.
    void became_python(pid_t pid, PythonProcess& process) {
        note_python(process);
        result_.native_only.erase(std::remove(result_.native_only.begin(), result_.native_only.end(), pid),
                                  result_.native_only.end());
    }

    // One tick's stacks of process PID, taken at `time_ns`; with `rename_check`, threads
    // whose name changed are renamed.
    void write(pid_t pid, SampledProcess& target, const std::vector<MixedThread>& threads, std::int64_t time_ns,
               bool rename_check) {
        const ThreadNames::Register register_thread = [this, pid](pid_t tid, const std::string& name) {
            return writer_->register_thread({0, pid, tid, name});
        };
        const ThreadNames::Rename rename = [this](trace::ThreadId thread, const std::string& name) {
            writer_->set_thread_name(thread, name);
        };
        for (const MixedThread& thread : threads) {
            // threading.Thread.name where the thread has one, else the OS name.
            auto name = [&] { return !thread.name.empty() ? thread.name : os::thread_name(pid, thread.tid); };
            trace::StackSample sample;
            sample.time_ns = time_ns;
            sample.thread_id = target.threads.thread(thread.tid, rename_check, name, register_thread, rename);
            sample.stack_id = writer_->intern_stack(frames_.outermost_first(thread.frames));
            sample.idle = !is_active(target.sample_state(pid, thread.tid));
            writer_->record_stack_sample(sample);
            ++result_.samples;
            if (sample.idle) ++result_.idle_samples;
        }
    }

    // Ends the file (when one was opened) at `stop_ns`.
    void close(std::int64_t stop_ns) {
        if (!writer_) return;
        writer_->set_end_time(stop_ns);
        writer_->close();
    }

  private:
    void open() {
        trace::RunInfo run;
        run.command_line = os::command_line(options_.pid);
        run.host = os::host_name();
        run.pid = options_.pid;
        run.clock_name = "CLOCK_MONOTONIC";
        run.clock_offset_to_wall_ns = os::monotonic_wall_offset_ns();
        run.start_ns = start_ns_;
        store::WriterOptions writer_options;
        writer_options.overflow = store::OverflowPolicy::block;  // the sampler is ours to slow, not the target
        writer_ = std::make_unique<store::TraceWriter>(options_.output, run, writer_options);
        writer_->set_metadata(store::metadata_key::cpu_sample_period_ns, std::to_string(period_ns_));
        writer_->set_metadata("python_sampling", options_.native
                                                     ? "outside (process_vm_readv), native stacks (ptrace, libdw)"
                                                     : "outside (process_vm_readv)");
    }

    void note_python(PythonProcess& process) {
        if (python_version_known_) return;
        writer_->set_metadata("python_version", process.version().text());
        python_version_known_ = true;
    }

    const OutsideRecordOptions& options_;
    std::int64_t start_ns_;
    std::int64_t period_ns_;
    OutsideRecordResult& result_;
    std::unique_ptr<store::TraceWriter> writer_;
    FrameInterner frames_;
    bool python_version_known_ = false;
};

void sleep_ns(std::int64_t wait) {
    timespec pause{static_cast<time_t>(wait / 1000000000ll), static_cast<long>(wait % 1000000000ll)};
    nanosleep(&pause, nullptr);
}

// One tick: every target's stacks at `time_ns`, written. A target that cannot be read
// is dropped when it exited (or, a descendant, exec'd another program); PID itself
// failing while it runs ends the recording with result.error. Sets `root_gone` when
// PID was dropped.
void sample_targets(pid_t root, std::map<pid_t, SampledProcess>& targets, TraceOutput& output, std::int64_t time_ns,
                    bool rename_check, OutsideRecordResult& result, bool& root_gone) {
    std::vector<MixedThread> sampled;
    std::string error;
    for (auto it = targets.begin(); it != targets.end();) {
        const pid_t pid = it->first;
        SampledProcess& target = it->second;
        if (!target.snapshot(pid, sampled, error, result)) {
            if (pid != root || process_going(pid)) {
                if (pid == root) root_gone = true;
                it = targets.erase(it);
                continue;
            }
            result.error = "process " + std::to_string(pid) + ": " + error;
            return;
        }
        output.write(pid, target, sampled, time_ns, rename_check);
        ++it;
    }
}

// The writer loop: a snapshot of every target at each tick of `timer` until the
// duration passes, `stop` is set, PID exits or cannot be read.
void sample_until_done(const OutsideRecordOptions& options, SampleTimer& timer, ProcessDiscovery& discovery,
                       TraceOutput& output, std::int64_t start_ns, OutsideRecordResult& result) {
    std::int64_t last_rename_check = start_ns;
    for (;;) {
        if (options.stop && options.stop->load()) return;
        const SampleTimer::Step step = timer.at(os::monotonic_ns());
        if (step.kind == SampleTimer::Kind::stop) return;
        if (step.kind == SampleTimer::Kind::wait) {
            sleep_ns(step.wait_ns);
            continue;
        }
        discovery.tick();
        if (discovery.targets().empty()) {
            if (process_gone(options.pid)) {
                result.process_exited = true;
                return;
            }
            continue;
        }
        const std::int64_t time = os::monotonic_ns();
        const bool rename_check = time - last_rename_check >= 1'000'000'000;
        if (rename_check) last_rename_check = time;
        bool root_gone = false;
        sample_targets(options.pid, discovery.targets(), output, time, rename_check, result, root_gone);
        if (!result.error.empty()) return;
        ++result.snapshots;
        if (root_gone || process_gone(options.pid)) {
            result.process_exited = true;
            return;
        }
    }
}

}  // namespace

OutsideRecordResult record_python_process(const OutsideRecordOptions& options) {
    ProcessDiscovery discovery(options, SampleTimer::period_of(options.hz));
    discovery.start();  // throws before the file is created
    const std::int64_t start = os::monotonic_ns();
    SampleTimer timer(SampleTimer::period_of(options.hz), start, options.duration.count());
    OutsideRecordResult result;
    TraceOutput output(options, start, timer.period_ns(), result);
    discovery.on_adopt([&](pid_t pid, SampledProcess& target) { output.adopt(pid, target); });
    discovery.on_python([&](pid_t pid, PythonProcess& process) { output.became_python(pid, process); });
    if (!discovery.targets().empty()) output.adopt(options.pid, discovery.targets().begin()->second);

    sample_until_done(options, timer, discovery, output, start, result);
    const std::int64_t stop = os::monotonic_ns();
    result.seconds = static_cast<double>(stop - start) / 1e9;
    result.late_ticks = timer.late_ticks();
    output.close(stop);
    return result;
}

}  // namespace ember::collector::python
