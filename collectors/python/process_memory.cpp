// process_memory.cpp: process_vm_readv and the /proc readings of another process
// (process_memory.h).
#include "collectors/python/process_memory.h"

#include "common/os.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <sys/uio.h>
#include <unistd.h>

namespace ember::collector::python {

bool ProcessMemory::read(std::uint64_t address, void* out, std::size_t size) {
    if (size == 0) return true;
    iovec local{out, size};
    iovec remote{reinterpret_cast<void*>(address), size};
    ssize_t got = process_vm_readv(pid_, &local, 1, &remote, 1, 0);
    if (got == static_cast<ssize_t>(size)) return true;
    last_errno_ = got < 0 ? errno : EFAULT;
    return false;
}

bool ProcessMemory::read_cached(std::uint64_t address, void* out, std::size_t size) {
    unsigned char* target = static_cast<unsigned char*>(out);
    std::uint64_t at = address;
    std::size_t left = size;
    while (left > 0) {
        const std::uint64_t page = at & ~(kPage - 1);
        auto [found, inserted] = pages_.try_emplace(page);
        if (inserted) {
            found->second.resize(kPage);
            if (!read(page, found->second.data(), kPage)) found->second.clear();
        }
        if (found->second.empty()) return read(address, out, size);  // not readable as a whole page
        const std::size_t offset = static_cast<std::size_t>(at - page);
        const std::size_t take = std::min<std::size_t>(left, kPage - offset);
        std::memcpy(target, found->second.data() + offset, take);
        target += take;
        at += take;
        left -= take;
    }
    return true;
}

std::string read_proc_text(const std::string& path) {
    return os::read_file_text(path);
}

namespace {

// The first number after "Key:" in /proc/PID/status (-1 when absent).
long long status_field(const std::string& status, const std::string& key) {
    std::size_t at = status.find("\n" + key + ":");
    if (at == std::string::npos) return -1;
    return std::strtoll(status.c_str() + at + key.size() + 2, nullptr, 10);
}

bool have_cap_sys_ptrace() {
    const std::string status = read_proc_text("/proc/self/status");
    std::size_t at = status.find("\nCapEff:");
    if (at == std::string::npos) return false;
    unsigned long long capabilities = std::strtoull(status.c_str() + at + 8, nullptr, 16);
    constexpr int kCapSysPtrace = 19;
    return (capabilities >> kCapSysPtrace) & 1ull;
}

}  // namespace

std::string refusal_reason(pid_t pid, int error) {
    const std::string who = "process " + std::to_string(pid);
    if (error == ESRCH) return who + " does not exist (it exited?)";
    if (error == ENOSYS) return "process_vm_readv is not available on this kernel";
    if (error == EFAULT) return who + ": an address could not be read (the process changed under the reader)";
    const std::string status = read_proc_text("/proc/" + std::to_string(pid) + "/status");
    if (status.empty()) return who + " does not exist (no /proc/" + std::to_string(pid) + ")";
    const bool privileged = have_cap_sys_ptrace();
    const long long target_uid = status_field(status, "Uid");
    const long long own_uid = static_cast<long long>(getuid());
    const std::string call = std::string("process_vm_readv: ") + std::strerror(error);
    if (!privileged && target_uid >= 0 && target_uid != own_uid)
        return who + " runs as uid " + std::to_string(target_uid) + ", ember as uid " + std::to_string(own_uid) +
               ": ptrace rules allow reading another user's process only with CAP_SYS_PTRACE (run as that user or as "
               "root) (" +
               call + ")";
    const std::string scope_text = read_proc_text("/proc/sys/kernel/yama/ptrace_scope");
    const int scope = scope_text.empty() ? -1 : std::atoi(scope_text.c_str());
    if (scope == 3)
        return "/proc/sys/kernel/yama/ptrace_scope is 3: no process may read another's memory, whatever its "
               "privileges (" +
               call + ")";
    if (scope == 2 && !privileged)
        return "/proc/sys/kernel/yama/ptrace_scope is 2: only a process with CAP_SYS_PTRACE may read another's memory "
               "(run as root, or set it to 0) (" +
               call + ")";
    if (scope == 1 && !privileged)
        return "/proc/sys/kernel/yama/ptrace_scope is 1: only an ancestor of " + who +
               " (or a process with CAP_SYS_PTRACE) may read its memory; record it from the start (ember record -- CMD), "
               "run as root, or set ptrace_scope to 0 (" +
               call + ")";
    return who + ": reading its memory was refused although the uid matches and ptrace_scope allows it (" +
           (scope < 0 ? std::string("no yama") : "ptrace_scope " + std::to_string(scope)) +
           (privileged ? ", CAP_SYS_PTRACE held" : ", no CAP_SYS_PTRACE") +
           "): a seccomp filter (a container's default profile) or a security module refuses it, or the target is "
           "not dumpable (" +
           call + ")";
}

std::vector<pid_t> process_threads(pid_t pid) {
    std::vector<pid_t> threads;
    const std::string path = "/proc/" + std::to_string(pid) + "/task";
    DIR* directory = opendir(path.c_str());
    if (!directory) return threads;
    while (dirent* entry = readdir(directory)) {
        if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
        threads.push_back(static_cast<pid_t>(std::atoi(entry->d_name)));
    }
    closedir(directory);
    return threads;
}

char thread_state(pid_t pid, pid_t tid) {
    const std::string stat = read_proc_text("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/stat");
    // "TID (comm) S ...": comm may hold spaces and parentheses, the state follows the last ')'.
    std::size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size()) return '?';
    return stat[close + 2];
}

}  // namespace ember::collector::python
