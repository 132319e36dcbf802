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
// Throws PythonReadError when the process cannot be read.
void write_dump(pid_t pid, std::ostream& out);

struct OutsideRecordOptions {
    pid_t pid = 0;
    std::string output;             // trace file to write (replaced)
    double hz = 100.0;              // snapshots per second of wall time
    std::chrono::nanoseconds duration{0};  // 0: until `stop` or the process exits
    const std::atomic<bool>* stop = nullptr;  // set from elsewhere (a signal) to end early
};

struct OutsideRecordResult {
    std::int64_t snapshots = 0;        // taken
    std::int64_t samples = 0;          // thread stacks written (active and idle)
    std::int64_t idle_samples = 0;
    std::int64_t torn_threads = 0;     // a thread's stack changed under the reader: left out once
    std::int64_t late_ticks = 0;       // ticks skipped because a snapshot overran its period
    double seconds = 0.0;              // recording length
    bool process_exited = false;
    std::string error;                 // why it stopped early ("" otherwise)
};

// Samples PID's Python stacks into a trace until the duration passes, `stop` is set or
// the process exits: each sample is one thread's stack at one instant, with the OS
// thread, its name, and whether it was running (/proc/PID/task/TID/stat state R) or
// idle. Frames are Python frames (function, co_filename, line). Throws PythonReadError
// when the process cannot be read at all (nothing is written then).
OutsideRecordResult record_python_process(const OutsideRecordOptions& options);

}  // namespace ember::collector::python
