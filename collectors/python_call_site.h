// python_call_site.h: the Python stack that made a CUDA API call, as a `stacks` row.
//
// When the recorded process is CPython, every runtime/driver API call CUPTI reports
// carries the Python stack of the thread that made it (ApiEvent::stack_id), as
// `nsys --python-backtrace=cuda` and PyTorch's `with_stack` do; the analyses follow
// kernel -> correlation id -> API call -> stack to a Python call site.
//
// Why reading our own thread is safe: the callback runs on the thread that made the
// call, inside that call. Only the owner thread pushes and pops its Python frames, so
// the chain from its PyThreadState cannot change until the callback returns, GIL held
// or not (ctypes releases it around a foreign call). Reads still go through
// process_vm_readv on our own pid (python/process_memory.h), never a plain
// dereference: a stale thread state (a daemon thread after finalization) or a layout
// mistake gives stack 0, never a fault in the traced program.
//
// Cost: a call walks its thread's frame chain, (code object, instruction) per frame.
// The thread state and every frame where the thread's previous call had one are read
// in one process_vm_readv, frames near each other as one range (a loop calls from the
// same frames again and again); only frames elsewhere are read a page at a time. The chain is the key of a per-thread
// cache: the same call site as the thread's previous call costs the walk and one
// compare, a known one a hash lookup. Only a new chain is resolved to names and
// lines, by a snapshot of the process (python::PythonProcess, the reader `ember dump`
// uses), under a lock.
#pragma once

#include "collectors/python/process_memory.h"
#include "collectors/python/python_layout.h"
#include "collectors/python/python_reader.h"
#include "profiler/store/writer.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <sys/types.h>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace ember::collector {

// What one thread remembers between its calls. Owned by the calling thread (the
// CUPTI callback's thread-local state, reset with each session: stack ids belong to
// one file).
struct PythonCallSiteCache {
    std::unique_ptr<python::ProcessMemory> memory;  // pages of a walk that left the previous one's frames
    // The previous walk's frame addresses (innermost first, entry frames included) and
    // 3.11/3.12's _PyCFrame: read again, with the thread state, in one process_vm_readv.
    std::vector<std::uint64_t> frame_addresses;
    std::uint64_t cframe = 0;
    std::vector<unsigned char> prefetched;
    std::vector<std::uint64_t> sorted_addresses, walked_addresses;  // scratch, kept for their capacity
    std::vector<std::uint64_t> chain;       // this call's (code, instruction) pairs, innermost first
    std::vector<std::uint64_t> last_chain;  // the previous call's
    trace::StackId last_stack = 0;
    struct Entry {
        std::vector<std::uint64_t> chain;
        trace::StackId stack = 0;
    };
    std::unordered_map<std::uint64_t, Entry> known;  // by hash of the chain
};

class PythonCallSites {
  public:
    // Reads process `pid` (the collector passes its own) whose `_PyRuntime` is at
    // `runtime_address`; stacks become rows of `writer`. Throws python::PythonReadError
    // when it is not a readable CPython 3.8-3.13.
    PythonCallSites(pid_t pid, std::uint64_t runtime_address, store::TraceWriter& writer);

    // In-process: the interpreter of this process, or null (with `why`) when it is not
    // CPython or cannot be read. Looks `_PyRuntime` and the thread-state functions up
    // with dlsym, so a process without them costs one failed lookup.
    static std::unique_ptr<PythonCallSites> open_in_process(store::TraceWriter& writer, std::string& why);
    // In-process: the calling thread's PyThreadState (PyGILState_GetThisThreadState:
    // no GIL needed), 0 when the thread has none, the interpreter is not initialized
    // or is finalizing (thread states of daemon threads are freed then), or when this
    // object was not opened in-process.
    std::uint64_t current_thread_state() const;

    // The Python stack of the thread whose PyThreadState is at `thread_state`, as a
    // `stacks` row of `writer` (outermost frame first, frames `function`/`co_filename`/
    // line as the CPU samples name them); 0 when it has no Python frames or cannot be
    // read. The thread must not run Python code meanwhile (in-process: the caller).
    trace::StackId stack_of(std::uint64_t thread_state, PythonCallSiteCache& cache);

    const python::PythonVersion& version() const { return process_.version(); }
    // The kernel refused process_vm_readv on our own pid (EPERM, ENOSYS): no call site
    // is read any more (current_thread_state() gives 0).
    bool refused() const { return refused_.load(std::memory_order_relaxed); }

    struct Counts {
        std::uint64_t calls = 0;         // stack_of calls
        std::uint64_t same_as_last = 0;  // the thread's previous call site again
        std::uint64_t known = 0;         // found in the thread's cache
        std::uint64_t resolved = 0;      // read by a snapshot
        std::uint64_t unknown = 0;       // stack 0 (no frames, or unreadable)
    };
    Counts counts() const;

  private:
    // The (code, instruction) chain of a thread state; false when unreadable.
    bool read_chain(std::uint64_t thread_state, PythonCallSiteCache& cache, std::uint64_t& pthread_id);
    // The names and lines of the thread's stack, by a snapshot; 0 when it cannot be
    // read or has not `frame_count` frames.
    trace::StackId resolve(std::uint64_t pthread_id, std::size_t frame_count);

    using ThreadStateFunction = void* (*)();
    using FlagFunction = int (*)();
    ThreadStateFunction this_thread_state_ = nullptr;  // set by open_in_process
    FlagFunction is_initialized_ = nullptr;
    FlagFunction is_finalizing_ = nullptr;

    pid_t pid_;
    std::uint64_t runtime_;
    store::TraceWriter& writer_;
    python::PythonLayout layout_;
    mutable std::mutex mutex_;  // guards what follows
    python::PythonProcess process_;
    std::map<std::tuple<std::string, std::string, int>, trace::FrameId> frame_ids_;
    std::atomic<bool> refused_{false};
    std::atomic<std::uint64_t> calls_{0}, same_as_last_{0}, known_{0}, resolved_{0}, unknown_{0};
};

}  // namespace ember::collector
