// process_memory.h: reading another process's memory from outside, with
// process_vm_readv: no ptrace attach, no stop, nothing written. The kernel allows it
// under ptrace's rules (PTRACE_MODE_ATTACH_REALCREDS): the same user (and a target that
// is not setuid / not made undumpable), kernel.yama.ptrace_scope (1: only an ancestor;
// 2: only CAP_SYS_PTRACE; 3: nobody), or CAP_SYS_PTRACE; a seccomp filter can refuse the
// call outright. When it is refused, refusal_reason() names the rule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <sys/types.h>
#include <unordered_map>
#include <vector>

namespace ember::collector::python {

class ProcessMemory {
  public:
    explicit ProcessMemory(pid_t pid) : pid_(pid) {}

    pid_t pid() const { return pid_; }

    // Reads `size` bytes at `address` of the process; false (and errno kept in
    // last_errno()) when any byte could not be read.
    bool read(std::uint64_t address, void* out, std::size_t size);
    template <typename T>
    bool read_value(std::uint64_t address, T& out) {
        return read(address, &out, sizeof(T));
    }
    bool read_pointer(std::uint64_t address, std::uint64_t& out) { return read_value(address, out); }

    int last_errno() const { return last_errno_; }

    // Reads through a cache of whole 4 KiB pages, kept until forget_pages(): the frames,
    // code objects and thread states one snapshot walks sit close together (3.11's frames
    // in one stack chunk, a recursion's code object again and again), so a snapshot costs
    // one system call a page instead of one or two a frame. A page that cannot be read
    // whole falls back to read().
    bool read_cached(std::uint64_t address, void* out, std::size_t size);
    void forget_pages() { pages_.clear(); }

  private:
    static constexpr std::uint64_t kPage = 4096;
    pid_t pid_;
    int last_errno_ = 0;
    std::unordered_map<std::uint64_t, std::vector<unsigned char>> pages_;  // page address -> bytes (empty: unreadable)
};

// Why reading PID's memory was refused (errno from process_vm_readv), naming the rule:
// "process 42 runs as uid 0, ember as uid 1000: ptrace rules allow reading another
// user's process only with CAP_SYS_PTRACE", or the ptrace_scope value and what it means,
// or a seccomp filter / security module when none of those explains it.
std::string refusal_reason(pid_t pid, int error);

// A whole /proc/PID/... file as text ("" when unreadable).
std::string read_proc_text(const std::string& path);

// The OS thread ids of PID (/proc/PID/task).
std::vector<pid_t> process_threads(pid_t pid);

// From /proc/PID/task/TID/stat's state field: 'R' (running or runnable) is active,
// anything else (S sleeping, D disk wait, T stopped, ...) idle. '?' when unreadable.
char thread_state(pid_t pid, pid_t tid);

}  // namespace ember::collector::python
