// outside_sampler.cpp: `ember dump` and `ember record --pid` (outside_sampler.h).
#include "collectors/python/outside_sampler.h"

#include "profiler/store/writer.h"

#include <cerrno>
#include <csignal>
#include <ctime>
#include <map>
#include <thread>
#include <tuple>
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

std::string host_name() {
    char buffer[256] = {};
    return gethostname(buffer, sizeof buffer - 1) == 0 ? std::string(buffer) : std::string();
}

bool is_active(char state) { return state == 'R'; }

// Exited: no such process, or a zombie waiting for its parent (ember record's child).
bool process_gone(pid_t pid) {
    if (kill(pid, 0) != 0 && errno == ESRCH) return true;
    const char state = thread_state(pid, pid);
    return state == 'Z' || state == 'X' || state == '?';
}

}  // namespace

void write_dump(pid_t pid, std::ostream& out) {
    PythonProcess process(pid);
    std::vector<PythonThread> threads;
    std::string error;
    if (!process.snapshot(threads, error)) throw PythonReadError(error);
    out << "Process " << pid << ": " << command_line(pid) << "\n";
    out << "Python v" << process.version().text() << " (" << process.binary() << ")\n";
    for (const PythonThread& thread : threads) {
        const char state = thread.tid ? thread_state(pid, thread.tid) : '?';
        out << "\nThread " << thread.tid << " (" << (is_active(state) ? "active" : "idle") << "): \""
            << (thread.tid ? thread_name(pid, thread.tid) : std::string("?")) << "\"\n";
        for (const PythonFrame& frame : thread.frames)
            out << "    " << frame.function << " (" << frame.file << ":" << frame.line << ")\n";
    }
}

OutsideRecordResult record_python_process(const OutsideRecordOptions& options) {
    PythonProcess process(options.pid);  // throws before the file is created
    std::vector<PythonThread> threads;
    std::string error;
    if (!process.snapshot(threads, error)) throw PythonReadError(error);

    const std::int64_t period_ns = static_cast<std::int64_t>(1e9 / (options.hz > 0 ? options.hz : 100.0));
    trace::RunInfo run;
    run.command_line = command_line(options.pid);
    run.host = host_name();
    run.pid = options.pid;
    run.clock_name = "CLOCK_MONOTONIC";
    run.clock_offset_to_wall_ns = clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_MONOTONIC);
    run.start_ns = clock_ns(CLOCK_MONOTONIC);
    store::WriterOptions writer_options;
    writer_options.overflow = store::OverflowPolicy::block;  // the sampler is ours to slow, not the target
    store::TraceWriter writer(options.output, run, writer_options);
    writer.register_process({options.pid, thread_name(options.pid, options.pid)});
    writer.set_metadata("cpu_sample_period_ns", std::to_string(period_ns));
    writer.set_metadata("python_version", process.version().text());
    writer.set_metadata("python_sampling", "outside (process_vm_readv)");

    std::map<pid_t, trace::ThreadId> thread_ids;
    std::map<pid_t, std::string> thread_names;
    std::map<std::tuple<std::string, std::string, int>, trace::FrameId> frame_ids;
    std::vector<trace::FrameId> stack;

    OutsideRecordResult result;
    const std::int64_t start = run.start_ns;
    const std::int64_t end = options.duration.count() > 0 ? start + options.duration.count() : INT64_MAX;
    // Ticks lie on a grid of the period, each moved by up to a fifth of it at random:
    // the mean rate is the asked one, and a program that repeats itself in step with
    // the period (a training loop of 100 ms at 100 Hz) is not seen in the same phase
    // every time.
    std::int64_t grid = start;
    std::int64_t next_tick = start;
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
        const std::int64_t time = clock_ns(CLOCK_MONOTONIC);
        if (!process.snapshot(threads, error)) {
            if (process_gone(options.pid)) {
                result.process_exited = true;
            } else {
                result.error = error;
            }
            break;
        }
        ++result.snapshots;
        for (PythonThread& thread : threads) {
            if (thread.tid == 0) {
                ++result.torn_threads;
                continue;
            }
            auto known = thread_ids.find(thread.tid);
            std::string name = thread_name(options.pid, thread.tid);
            if (known == thread_ids.end()) {
                known = thread_ids.emplace(thread.tid, writer.register_thread({0, options.pid, thread.tid, name})).first;
                thread_names[thread.tid] = name;
            } else if (!name.empty() && name != thread_names[thread.tid]) {
                writer.set_thread_name(known->second, name);
                thread_names[thread.tid] = name;
            }
            stack.clear();
            for (auto frame = thread.frames.rbegin(); frame != thread.frames.rend(); ++frame) {
                auto key = std::make_tuple(frame->function, frame->file, frame->line);
                auto found = frame_ids.find(key);
                if (found == frame_ids.end())
                    found = frame_ids.emplace(std::move(key), writer.intern_frame(frame->function, frame->file, 0, frame->line)).first;
                stack.push_back(found->second);
            }
            trace::StackSample sample;
            sample.time_ns = time;
            sample.thread_id = known->second;
            sample.stack_id = writer.intern_stack(stack);
            sample.idle = !is_active(thread_state(options.pid, thread.tid));
            writer.record_stack_sample(sample);
            ++result.samples;
            if (sample.idle) ++result.idle_samples;
        }
        if (process_gone(options.pid)) {
            result.process_exited = true;
            break;
        }
    }
    const std::int64_t stop = clock_ns(CLOCK_MONOTONIC);
    result.seconds = static_cast<double>(stop - start) / 1e9;
    writer.set_end_time(stop);
    writer.close();
    return result;
}

}  // namespace ember::collector::python
