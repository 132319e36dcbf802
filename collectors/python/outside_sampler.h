// outside_sampler.h: `ember dump --pid` and `ember record --pid` — the Python stacks of
// a running process, read from outside through PythonProcess (python_reader.h). The
// process is neither stopped nor written to and goes on when the sampler stops.
#pragma once

#include "collectors/python/python_reader.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <sys/types.h>
#include <vector>

namespace ember::collector::python {

// Every Python thread's stack, once, in py-spy's words:
//   Process 4242: python3 work.py
//   Python v3.11.7 (/usr/bin/python3.11)
//
//   Thread 4242 (active): "python3"
//       spin (/home/me/work.py:12)
//       <module> (/home/me/work.py:30)
// A thread's name is its threading.Thread.name when threading started it, else the
// OS's (/proc/PID/task/TID/comm). Throws PythonReadError when the process cannot be
// read. With `subprocesses`, every
// CPython process descended from PID follows, each under its own "Process" line;
// descendants that are not CPython (a shell, a native launcher) are left out, and PID
// itself may be one of those as long as some descendant is CPython.
//
// With `native`, each thread's stack is its mixed stack (native_stack.h): the process's
// threads are stopped for the moment of the unwind (ptrace), native frames printed as
// "function (library)", and threads without Python (OpenMP workers) are shown too.
// A process that is not CPython is then dumped too, its native stacks alone, under
// "Native stacks only (not a CPython process)" instead of the Python line (with
// `subprocesses`, every process of the tree is).
void write_dump(pid_t pid, std::ostream& out, bool subprocesses = false, bool native = false);

// The processes descended from PID (children, their children, ...), from
// /proc/PID/task/TID/children; PID itself not included. Parents before children.
std::vector<pid_t> descendant_processes(pid_t pid);

struct OutsideRecordOptions {
    pid_t pid = 0;
    std::string output;                       // trace file to write (replaced)
    double hz = 100.0;                        // snapshots per second of wall time
    std::chrono::nanoseconds duration{0};     // 0: until `stop` or the process exits
    const std::atomic<bool>* stop = nullptr;  // set from elsewhere (a signal) to end early
    // Follow the processes PID starts (DataLoader workers, multiprocessing, torchrun's
    // ranks): /proc is scanned for descendants about every 50 ms, and each one that is
    // (or later execs) CPython is sampled too, as a process of its own in the trace.
    bool subprocesses = false;
    // PID may not be CPython yet (ember record -- CMD: the child has not exec'd, or has
    // not mapped libpython): it is tried again as the scan runs, and a PID that never
    // turns out to be CPython yields no file and no error (result.processes == 0).
    // Without it, a PID that cannot be read throws at once.
    bool wait_for_python = false;
    // Mixed stacks (native_stack.h): at every tick the threads of each process are
    // stopped (ptrace) while their native stacks are unwound, and resumed; the samples
    // hold native frames (line -1, the library as module) around the Python ones, and
    // the threads without Python too. Off: the process is never stopped.
    // A process that is not CPython (PID, or with `subprocesses` a descendant) is then
    // sampled too, its native stacks alone, as perf record would: any program can be
    // recorded. It is looked at again for CPython now and then, and when it execs.
    bool native = false;
};

struct OutsideRecordResult {
    std::int64_t snapshots = 0;  // taken
    std::int64_t samples = 0;    // thread stacks written (active and idle)
    std::int64_t idle_samples = 0;
    std::int64_t torn_threads = 0;     // a thread's stack changed under the reader: left out once
    std::int64_t late_ticks = 0;       // ticks skipped because a snapshot overran its period
    std::int64_t native_failures = 0;  // --native: snapshots whose threads could not be stopped (Python frames only)
    std::string native_error;          // the first such failure's reason
    double seconds = 0.0;              // recording length
    bool process_exited = false;
    std::vector<pid_t> processes;    // the processes sampled (PID first when it was one)
    std::vector<pid_t> native_only;  // --native: those of them that are not CPython (native stacks alone)
    std::string error;               // why it stopped early ("" otherwise)
};

// Samples PID's Python stacks into a trace until the duration passes, `stop` is set or
// the process exits (with `subprocesses`, those of its CPython descendants too; the file
// is created when the first CPython process is found; with `native`, any process): each sample is one thread's stack at
// one instant, with the OS thread, its name (threading.Thread.name, else the OS name), and whether it was running
// (/proc/PID/task/TID/stat state R) or idle. Frames are Python frames (function, co_filename, line). Throws
// PythonReadError when the process cannot be read at all (nothing is written then).
OutsideRecordResult record_python_process(const OutsideRecordOptions& options);

}  // namespace ember::collector::python
