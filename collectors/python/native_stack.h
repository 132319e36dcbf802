// native_stack.h: mixed stacks for `ember record --native` and `ember dump --native`:
// each thread's native stack, unwound from outside, with the Python frames put where
// the interpreter ran them, as py-spy --native shows them.
//
// ThreadStop stops the threads of a process for one sample (PTRACE_SEIZE, then
// PTRACE_INTERRUPT: no SIGSTOP is sent, so the program sees nothing but the pause) and
// detaches from all of them when it goes out of scope, passing on any signal that
// arrived meanwhile. Should ember die while they are stopped, the kernel detaches them.
// NativeUnwinder unwinds a stopped thread with elfutils' libdw (the .eh_frame CFI of
// each mapped file, so Debian's stripped libraries unwind too), names each address
// from the ELF symbol tables (elf_symbols.h: .symtab, .dynsym, a separate debug file;
// C++ names demangled) or the process's perf map for JIT code (perf_map.h).
// merge_stacks() replaces each native frame of the eval loop
// (_PyEval_EvalFrameDefault) by the Python frames that call ran (PythonFrame::entry
// tells where one call's frames end).
//
// Everything here must run on one thread: ptrace requests come from the thread that
// seized.
#pragma once

#include "collectors/python/python_reader.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace ember::collector::python {

struct NativeFrame {
    std::uint64_t address = 0;  // the instruction (a return address less one above the innermost frame)
    std::string function;       // demangled; "0x..." when no symbol covers the address
    std::string module;         // the mapped file; "" for anonymous memory (JIT code)
};

// One frame of a mixed stack: a Python frame (line >= 0, file = co_filename) or a
// native one (line -1, file = the mapped file, address).
struct MixedFrame {
    std::string function;
    std::string file;
    int line = -1;
    std::uint64_t address = 0;
    bool is_python() const { return line >= 0; }
};

// The interpreter's eval loop: "_PyEval_EvalFrameDefault" and its compiler-split parts
// ("_PyEval_EvalFrameDefault.cold").
bool is_eval_frame(std::string_view function);

// Both stacks innermost first. Each eval-loop frame of `native` is replaced by the next
// group of Python frames (up to and including the next `entry` frame); an eval frame
// with no group left is dropped, and groups left over (a native unwind that stopped
// short) go at the outer end.
std::vector<MixedFrame> merge_stacks(const std::vector<PythonFrame>& python, const std::vector<NativeFrame>& native);

// The threads of a process, stopped while this lives.
class ThreadStop {
  public:
    // Seizes and interrupts every thread of PID, then waits up to `wait` for them to
    // stop. Threads that could not be seized (exited, or refused) are left running; when
    // none could be seized, error() says why (naming the ptrace rule on EPERM).
    ThreadStop(pid_t pid, std::chrono::milliseconds wait = std::chrono::milliseconds(100));
    ~ThreadStop();  // detaches every thread (waiting for one still on its way to the stop)
    ThreadStop(const ThreadStop&) = delete;
    ThreadStop& operator=(const ThreadStop&) = delete;

    bool stopped(pid_t tid) const;
    std::size_t stopped_count() const;
    const std::vector<pid_t>& stopped_threads() const { return stopped_; }
    const std::string& error() const { return error_; }

  private:
    struct Seized {
        pid_t tid = 0;
        bool stopped = false;
        bool gone = false;
        int signal = 0;  // a signal that arrived while it was held: passed on at detach
    };
    bool poll(Seized& thread);
    pid_t pid_;
    std::vector<Seized> seized_;
    std::vector<pid_t> stopped_;
    std::string error_;
};

class NativeUnwinder {
  public:
    // Throws PythonReadError when libdw cannot take the process (gone, not 64-bit x86).
    explicit NativeUnwinder(pid_t pid);
    ~NativeUnwinder();
    NativeUnwinder(const NativeUnwinder&) = delete;
    NativeUnwinder& operator=(const NativeUnwinder&) = delete;

    // The native stack of `tid`, a thread held by a ThreadStop, innermost first (at most
    // 512 frames). False with `error` when not even the first frame could be read.
    bool unwind(pid_t tid, std::vector<NativeFrame>& frames, std::string& error);
    // The same in two steps, so that the threads can run again before the naming:
    // the instruction addresses (while the thread is held), then each one's name.
    bool unwind_addresses(pid_t tid, std::vector<std::uint64_t>& addresses, std::string& error);
    NativeFrame name(std::uint64_t address);

    struct State;  // native_stack.cpp

  private:
    std::unique_ptr<State> state_;
};

struct MixedThread {
    pid_t tid = 0;
    std::uint64_t thread_id = 0;  // threading.get_ident(); 0 for a thread with no Python state
    bool has_python = false;
    std::vector<MixedFrame> frames;  // innermost first
    std::string name;                // threading.Thread.name ("" when none: the OS name applies)
};

// One mixed sample of every thread: stops the process's threads, reads the Python
// stacks, unwinds each stopped thread, resumes them all, and merges. Threads without
// a Python thread state (OpenMP workers, I/O threads) come with their native stack
// alone. False (and `error`) when the process could not be read or stopped at all.
bool mixed_snapshot(PythonProcess& process, NativeUnwinder& unwinder, std::vector<MixedThread>& threads,
                    std::string& error);

// Python frames alone, as mixed frames (line >= 0).
std::vector<MixedFrame> python_only(const std::vector<PythonFrame>& python);

}  // namespace ember::collector::python
