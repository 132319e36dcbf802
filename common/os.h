// os.h: the operating-system readings every room of ember needs — elapsed time on the
// steady clock, CLOCK_MONOTONIC and the wall clock in ns and the offset between them,
// the host name, a process's command line, thread names (the caller's and another
// thread's), the kernel's id of the calling thread, CPU time of the process and of the
// thread, fields of /proc/self/status, the load average, the CPUs of the affinity mask
// and the lines of /proc/PID/maps. Header-only and dependency-free, so the engine, the
// collectors, the trace library, the viewer and the benchmarks all share one copy
// (common/ is the one folder every room may include; it includes nothing of ember).
// tests/architecture/include_rules.sh fails on a clock_gettime, gethostname,
// pthread_getname_np or /proc/.../comm or cmdline read anywhere else, and on a
// std::chrono clock read in collectors/ or profiler/ (SteadyClock below is theirs).
#pragma once

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace ember::os {

using SteadyClock = std::chrono::steady_clock;

inline double seconds_between(SteadyClock::time_point start, SteadyClock::time_point end) {
    return std::chrono::duration<double>(end - start).count();
}
inline double seconds_since(SteadyClock::time_point start) {
    return seconds_between(start, SteadyClock::now());
}

inline std::int64_t clock_ns(clockid_t clock) {
    timespec now{};
    clock_gettime(clock, &now);
    return static_cast<std::int64_t>(now.tv_sec) * 1000000000ll + now.tv_nsec;
}

// CLOCK_MONOTONIC in ns: the time base of every trace ember records (~20-40 ns, vDSO).
inline std::int64_t monotonic_ns() {
    return clock_ns(CLOCK_MONOTONIC);
}

// The wall clock (CLOCK_REALTIME) in ns since the Unix epoch.
inline std::int64_t wall_ns() {
    return clock_ns(CLOCK_REALTIME);
}

// Wall time minus `now()` (a clock on CLOCK_MONOTONIC's base, in ns), for
// RunInfo::clock_offset_to_wall_ns: the wall clock is read between two readings of
// `now` and set against their midpoint, so the offset errs by at most half the time
// between them, whichever way the reads were scheduled.
template <typename Now>
std::int64_t wall_offset_ns(Now now) {
    const std::int64_t before = now();
    const std::int64_t wall = wall_ns();
    const std::int64_t after = now();
    return wall - (before + (after - before) / 2);
}
inline std::int64_t monotonic_wall_offset_ns() {
    return wall_offset_ns(monotonic_ns);
}

// This machine's host name; "" when it cannot be read.
inline std::string host_name() {
    char buffer[256] = {};
    return gethostname(buffer, sizeof buffer - 1) == 0 ? std::string(buffer) : std::string();
}

// The whole of a /proc file (or any file) as bytes; "" when it cannot be opened, and
// what was read before an error (a thread that exits under the read: ESRCH). Plain
// read(2), never a stream that could throw.
inline std::string read_file_text(const std::string& path) {
    std::string text;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return text;
    char buffer[4096];
    for (;;) {
        const ssize_t got = ::read(fd, buffer, sizeof buffer);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        text.append(buffer, static_cast<std::size_t>(got));
    }
    ::close(fd);
    return text;
}

inline std::string proc_path(pid_t pid, const char* file) {
    return "/proc/" + std::to_string(pid) + "/" + file;
}
inline std::string proc_path(pid_t pid, pid_t tid, const char* file) {
    return "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/" + file;
}

// A process's arguments, from /proc/PID/cmdline (NUL-separated); empty when the process
// is gone or is a kernel thread. An empty argument stays an empty string.
inline std::vector<std::string> command_line_arguments(pid_t pid) {
    std::string text = read_file_text(proc_path(pid, "cmdline"));
    std::vector<std::string> arguments;
    if (text.empty()) return arguments;
    if (text.back() != '\0') text.push_back('\0');  // a process that rewrote its arguments
    std::size_t begin = 0;
    for (std::size_t end; (end = text.find('\0', begin)) != std::string::npos; begin = end + 1)
        arguments.push_back(text.substr(begin, end - begin));
    return arguments;
}

// A process's command line as one text, its arguments joined by spaces (as ps shows
// it); "" when unreadable. Trailing NULs are dropped, inner ones become spaces.
inline std::string command_line(pid_t pid) {
    std::string text = read_file_text(proc_path(pid, "cmdline"));
    while (!text.empty() && text.back() == '\0') text.pop_back();
    for (char& c : text)
        if (c == '\0') c = ' ';
    return text;
}
inline std::string command_line() {
    return command_line(::getpid());
}

// The name of thread TID of process PID (/proc/PID/task/TID/comm, at most 15 bytes,
// pthread_setname_np's or prctl's, else the program's); "" when it cannot be read.
inline std::string thread_name(pid_t pid, pid_t tid) {
    std::string name = read_file_text(proc_path(pid, tid, "comm"));
    while (!name.empty() && (name.back() == '\n' || name.back() == '\r')) name.pop_back();
    return name;
}

// The calling thread's name (pthread_getname_np); "" when it cannot be read.
inline std::string thread_name() {
    char name[64] = {};
    return pthread_getname_np(pthread_self(), name, sizeof name) == 0 ? std::string(name) : std::string();
}

// The kernel's thread id (gettid), the id NVTX, CUPTI and /proc use for a thread.
inline std::int64_t thread_id() {
    return static_cast<std::int64_t>(::syscall(SYS_gettid));
}

// CPU time (user + system) of the whole process so far, all threads (0 if the clock
// is unavailable).
inline double process_cpu_seconds() {
    timespec now{};
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now) != 0) return 0.0;
    return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// CPU time of the calling thread so far (0 if the clock is unavailable).
inline double thread_cpu_seconds() {
    timespec now{};
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now) != 0) return 0.0;
    return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// A "<field>: N kB" line of /proc/self/status in KiB, e.g. "VmRSS" (resident now) or
// "VmHWM" (peak resident); 0 when the file or the field cannot be read.
inline long proc_status_kib(const char* field) {
    std::FILE* file = std::fopen("/proc/self/status", "r");
    if (!file) return 0;
    const std::string format = std::string(field) + ": %ld kB";
    char line[256];
    long kib = 0;
    while (std::fgets(line, sizeof(line), file))
        if (std::sscanf(line, format.c_str(), &kib) == 1) break;
    std::fclose(file);
    return kib;
}
inline long peak_rss_kib() {
    return proc_status_kib("VmHWM");
}

// "1.23 0.98 0.50 (1, 5, 15 min)" from /proc/loadavg, or "unknown": other work on the
// machine skews wall-clock measurements, so benchmarks print it beside their numbers.
inline std::string load_average() {
    std::FILE* file = std::fopen("/proc/loadavg", "r");
    if (!file) return "unknown";
    double one = 0, five = 0, fifteen = 0;
    const int got = std::fscanf(file, "%lf %lf %lf", &one, &five, &fifteen);
    std::fclose(file);
    if (got != 3) return "unknown";
    char text[64];
    std::snprintf(text, sizeof(text), "%.2f %.2f %.2f (1, 5, 15 min)", one, five, fifteen);
    return text;
}

// The CPUs the calling thread may run on (its affinity mask: mpirun and taskset narrow
// it), in ascending order; empty when the kernel does not say.
inline std::vector<int> allowed_cpus() {
    std::vector<int> cpus;
    cpu_set_t mask;
    CPU_ZERO(&mask);
    if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return cpus;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
        if (CPU_ISSET(cpu, &mask)) cpus.push_back(cpu);
    return cpus;
}

// One line of /proc/PID/maps: "start-end perms offset dev inode [path]".
struct MapsLine {
    std::uint64_t start = 0, end = 0, offset = 0;
    std::string permissions, path;  // path: empty for anonymous memory
};
inline bool parse_maps_line(const std::string& line, MapsLine& out) {
    std::istringstream fields(line);
    std::string range, offset, device, inode;
    if (!(fields >> range >> out.permissions >> offset >> device >> inode)) return false;
    out.path.clear();  // anonymous memory has none, and a failed getline leaves the old one
    std::getline(fields >> std::ws, out.path);
    const std::size_t dash = range.find('-');
    if (dash == std::string::npos) return false;
    out.start = std::strtoull(range.c_str(), nullptr, 16);
    out.end = std::strtoull(range.c_str() + dash + 1, nullptr, 16);
    out.offset = std::strtoull(offset.c_str(), nullptr, 16);
    return true;
}
// Calls visit(const MapsLine&) for each line of a maps file (/proc/PID/maps) that parses.
template <typename Visit>
void for_each_maps_line(const std::string& maps_path, Visit&& visit) {
    std::istringstream maps(read_file_text(maps_path));
    std::string line;
    MapsLine entry;
    while (std::getline(maps, line))
        if (parse_maps_line(line, entry)) visit(static_cast<const MapsLine&>(entry));
}
// A mapping of a file's machine code: executable, and backed by a file (not anonymous
// memory, not [vdso]).
inline bool is_file_code(const MapsLine& line) {
    return line.permissions.size() >= 3 && line.permissions[2] == 'x' && !line.path.empty() && line.path[0] == '/';
}

}  // namespace ember::os
