// os.h: the few operating-system readings every room of ember needs — elapsed time
// on the steady clock, the host name, the kernel's id of the calling thread, CPU time
// of the process and of the thread, fields of /proc/self/status, the load average, the CPUs of the
// affinity mask and the lines of /proc/PID/maps. Header-only
// and dependency-free, so the engine, the collectors, the trace library, the viewer
// and the benchmarks all share one copy (common/ is the one folder every room may
// include; it includes nothing of ember).
#pragma once

#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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
inline double seconds_since(SteadyClock::time_point start) { return seconds_between(start, SteadyClock::now()); }

// This machine's host name; "" when it cannot be read.
inline std::string host_name() {
    char buffer[256] = {};
    return gethostname(buffer, sizeof buffer - 1) == 0 ? std::string(buffer) : std::string();
}

// The kernel's thread id (gettid), the id NVTX, CUPTI and /proc use for a thread.
inline std::int64_t thread_id() { return static_cast<std::int64_t>(::syscall(SYS_gettid)); }

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
inline long peak_rss_kib() { return proc_status_kib("VmHWM"); }

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

}  // namespace ember::os
