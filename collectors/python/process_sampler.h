// process_sampler.h: the parts of the outside sampler (outside_sampler.h) that look at
// processes. SampledProcess is one process being sampled: its snapshot at a tick
// (Python, mixed or native stacks), its threads' states and trace threads.
// ProcessDiscovery finds the processes to sample: PID, and with `subprocesses` its
// descendants, each once it is (or execs) CPython, or at once with `native`. Neither
// writes the trace: the writer loop (outside_sampler.cpp) does.
#pragma once

#include "collectors/python/native_stack.h"
#include "collectors/python/outside_sampler.h"
#include "collectors/python/sample_interning.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <sys/types.h>
#include <vector>

namespace ember::collector::python {

// 'R' (running or runnable) is active; any other state is idle.
inline bool is_active(char state) {
    return state == 'R';
}

// Exited: no such process, or a zombie waiting for its parent (ember record's child).
bool process_gone(pid_t pid);

// After a failed read: an exiting process has lost its memory a moment before it shows
// as a zombie, so a failure is an exit when the process is gone within 100 ms.
bool process_going(pid_t pid);

// Whether a PythonReadError says the process runs no CPython at all (rather than one
// that cannot be read yet or at all).
bool not_cpython(const PythonReadError& error);

// The program PID runs (/proc/PID/exe), "" when unreadable.
std::string executable_of(pid_t pid);

// A thread that exits while --native holds it (ptrace) stays a zombie of ours, and
// its parent's wait (a shell's for the command it ran) blocks until we take that
// report: it is taken here for each thread of PID that was there at the stop. Not for
// PID itself when it is our own child (ember record's CMD): its exit status is
// ember record's to reap.
void release_exited_threads(pid_t pid, const std::vector<pid_t>& tids);

// --native on a process that is not CPython: every thread's native stack alone, as
// perf record takes it. The threads are stopped for the unwind, then named once they run
// again (as mixed_snapshot does). False (and `error`) when no thread could be stopped.
bool native_snapshot(pid_t pid, NativeUnwinder& unwinder, std::vector<MixedThread>& threads, std::string& error);

// A process not (yet) readable as CPython: tried again on later scans, less and less
// often, and afresh when it execs another program.
struct Pending {
    std::string executable;
    int failures = 0;
    std::int64_t next_scan = 0;
};

// One process being sampled. Each thread's /proc stat file stays open and is read
// again with pread for its state at every sample (one system call, not three).
class SampledProcess {
  public:
    std::unique_ptr<PythonProcess> process;    // null: not CPython, sampled with --native alone
    std::unique_ptr<NativeUnwinder> unwinder;  // --native
    Pending probe;                             // a native-only process: when to look for CPython in it again
    ThreadNames threads;                       // its trace threads

    SampledProcess() = default;
    SampledProcess(SampledProcess&&) = default;
    ~SampledProcess();

    // 'R' running or runnable, another letter idle, '?' unreadable.
    char state(pid_t pid, pid_t tid);

    // One tick's stacks: mixed with --native (a Python-only snapshot when the threads
    // could not be stopped this time, counted in `counts`), else the Python frames alone
    // (a thread torn under the reader left out and counted); native frames alone for a
    // process that is not CPython. With --native each thread's state is read before
    // the stop (one just let go may show as running for a moment). False (and `error`)
    // when nothing could be read.
    bool snapshot(pid_t pid, std::vector<MixedThread>& out, std::string& error, OutsideRecordResult& counts);

    // The state thread TID shows in this tick's sample: the one read before the stop
    // with --native, else read now.
    char sample_state(pid_t pid, pid_t tid);

  private:
    std::map<pid_t, int> stat_files_;
    std::map<pid_t, char> states_;  // --native: each thread's state before the stop
    std::vector<PythonThread> python_;
};

class ProcessDiscovery {
  public:
    // What discovery reports: a process adopted for sampling, and a native-only one
    // that turned out to be CPython.
    using Adopt = std::function<void(pid_t, SampledProcess&)>;
    using BecamePython = std::function<void(pid_t, PythonProcess&)>;

    // Scans about every 50 ms of ticks of `period_ns`.
    ProcessDiscovery(const OutsideRecordOptions& options, std::int64_t period_ns);

    // The first process, options.pid: with wait_for_python it is pending, else it is
    // read now (and sampled, not adopted: the caller adopts it once its file may open).
    // Throws PythonReadError when it cannot be read.
    void start();

    void on_adopt(Adopt adopt) { adopt_ = std::move(adopt); }
    void on_python(BecamePython became_python) { became_python_ = std::move(became_python); }

    // At every tick: every scan period, when there may be something to find, new
    // descendants and pending processes that may have become CPython.
    void tick();

    std::map<pid_t, SampledProcess>& targets() { return targets_; }

  private:
    void scan();
    void scan_pending();
    void probe_native_only();
    std::unique_ptr<PythonProcess> try_python(pid_t pid, Pending& state);

    const OutsideRecordOptions& options_;
    std::int64_t scan_every_;
    std::int64_t scans_ = 0;
    std::int64_t ticks_ = 0;
    std::map<pid_t, SampledProcess> targets_;
    std::map<pid_t, Pending> pending_;
    Adopt adopt_;
    BecamePython became_python_;
};

}  // namespace ember::collector::python
