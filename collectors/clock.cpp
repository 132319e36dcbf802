// clock.cpp: calibration and re-anchoring of the collector's TSC clock (clock.h).
#include "collectors/clock.h"

#include "common/os.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ember::collector {

HostClock g_process_clock;

namespace {

constexpr std::int64_t kCalibrationNs = 10'000'000;
constexpr std::int64_t kCalibrationWindowTicks = 3'000;
// A re-anchoring measurement whose TSC reads lie further apart than this was
// interrupted (its midpoint could be off by half of it): refused.
constexpr std::int64_t kLongestMeasurementNs = 2'000;
// After a refused measurement, try again this much later.
constexpr std::int64_t kRetryNs = 1'000'000;
// Further behind CLOCK_MONOTONIC than this, the mapping jumps instead of slewing.
constexpr std::int64_t kJumpNs = 1'000'000;

bool has_flag(std::string_view flags, std::string_view flag) {
    std::size_t at = 0;
    while ((at = flags.find(flag, at)) != std::string_view::npos) {
        bool starts = at == 0 || flags[at - 1] == ' ' || flags[at - 1] == '\t';
        std::size_t after = at + flag.size();
        bool ends = after == flags.size() || flags[after] == ' ' || flags[after] == '\n' || flags[after] == '\t';
        if (starts && ends) return true;
        at = after;
    }
    return false;
}

// Ticks for `ns` at `rate` (ns per tick, 32 fraction bits).
std::int64_t ticks_for(std::int64_t ns, std::int64_t rate) {
    return static_cast<std::int64_t>((static_cast<WideInt>(ns) << 32) / rate);
}

void reset_lock_in_child() {
    g_process_clock.after_fork_in_child();
}

}  // namespace

HostClock::CrossCpuCheck HostClock::measure_cross_cpu(int attempts) const {
    CrossCpuCheck check;
    const std::vector<int> cpus = os::allowed_cpus();
    if (cpus.size() < 2 || sequence_.load() == 0) return check;  // one CPU, or no mapping yet
    // Up to 32 CPUs, spread over the list (a many-core machine's sockets are far apart
    // in the numbering), then the first again: its two readings bound the drift of the
    // mapping over the sweep.
    std::vector<int> sweep;
    const std::size_t count = std::min<std::size_t>(cpus.size(), 32);
    for (std::size_t i = 0; i < count; ++i) sweep.push_back(cpus[i * cpus.size() / count]);
    sweep.push_back(cpus[0]);
    std::vector<std::int64_t> errors(sweep.size(), 0), times(sweep.size(), 0);
    std::vector<bool> measured(sweep.size(), false);
    // One thread of its own walks the CPUs (the caller's affinity stays as it was).
    std::thread walker([&] {
        for (std::size_t i = 0; i < sweep.size(); ++i) {
            cpu_set_t mask;
            CPU_ZERO(&mask);
            CPU_SET(sweep[i], &mask);
            if (pthread_setaffinity_np(pthread_self(), sizeof(mask), &mask) != 0) continue;
            sched_yield();  // be on that CPU before the first reading
            // The tightest bracket of `attempts`: CLOCK_MONOTONIC against this CPU's TSC.
            const Measurement m = measure(attempts, 0);
            if (m.window_ticks > ticks_for(kLongestMeasurementNs, segments_[sequence_.load() % kSegments].rate.load()))
                continue;  // never an uninterrupted reading: no verdict for this CPU
            errors[i] = m.ns - time_at(m.tsc);
            times[i] = m.ns;
            measured[i] = true;
        }
    });
    walker.join();
    // The mapping's own drift over the sweep (a rate still being slewed: 300 ppm is
    // 300 ns a millisecond), from the first CPU's two visits, taken out linearly.
    const std::size_t last = sweep.size() - 1;
    if (measured[0] && measured[last] && times[last] > times[0]) {
        const double drift_per_ns = double(errors[last] - errors[0]) / double(times[last] - times[0]);
        for (std::size_t i = 1; i <= last; ++i)
            if (measured[i]) errors[i] -= static_cast<std::int64_t>(drift_per_ns * double(times[i] - times[0]));
    }
    std::int64_t lowest = INT64_MAX, highest = INT64_MIN;
    int lowest_cpu = -1, highest_cpu = -1;
    for (std::size_t i = 0; i < sweep.size(); ++i) {
        if (!measured[i]) {
            check.complete = false;
            continue;
        }
        check.cpus += i + 1 < sweep.size() ? 1 : 0;
        if (errors[i] < lowest) lowest = errors[i], lowest_cpu = sweep[i];
        if (errors[i] > highest) highest = errors[i], highest_cpu = sweep[i];
    }
    if (lowest_cpu < 0) return check;
    // The spread of the CPUs' offsets from CLOCK_MONOTONIC is how far one core's TSC
    // can read below another's at the same moment.
    check.worst_back_ns = highest - lowest;
    check.first_cpu = lowest_cpu;
    check.worst_cpu = highest_cpu;
    return check;
}

bool HostClock::cores_disagree(std::int64_t max_back_ns) {
    const CrossCpuCheck check = measure_cross_cpu();
    if (check.worst_back_ns > cross_cpu_back_ns_.load()) cross_cpu_back_ns_.store(check.worst_back_ns);
    if (check.worst_back_ns <= max_back_ns) return false;
    std::snprintf(fallback_reason_, sizeof(fallback_reason_),
                  "the TSCs of CPUs %d and %d disagree by %lld ns (over %lld ns reorders threads' events)",
                  check.first_cpu, check.worst_cpu, static_cast<long long>(check.worst_back_ns),
                  static_cast<long long>(max_back_ns));
    return true;
}

bool HostClock::recheck_cross_cpu(std::int64_t max_cross_cpu_back_ns) {
    if (source() != ClockSource::tsc || !cores_disagree(max_cross_cpu_back_ns)) return false;
    // Go on from where the TSC mapping is now: CLOCK_MONOTONIC plus the distance, never
    // below a value already handed out.
    const std::int64_t tsc_time = time_at(read_tsc());
    const std::int64_t monotonic = os::monotonic_ns();
    monotonic_offset_ns_.store(std::max<std::int64_t>(0, tsc_time - monotonic), std::memory_order_relaxed);
    source_.store(ClockSource::monotonic, std::memory_order_release);
    return true;
}

bool cpuinfo_says_tsc_invariant(std::string_view cpuinfo) {
    // The first "flags" line: every core of one machine reports the same ones.
    std::size_t line_start = 0;
    while (line_start < cpuinfo.size()) {
        std::size_t line_end = cpuinfo.find('\n', line_start);
        if (line_end == std::string_view::npos) line_end = cpuinfo.size();
        std::string_view line = cpuinfo.substr(line_start, line_end - line_start);
        if (line.substr(0, 5) == "flags") {
            std::size_t colon = line.find(':');
            if (colon == std::string_view::npos) return false;
            std::string_view flags = line.substr(colon + 1);
            return has_flag(flags, "constant_tsc") && has_flag(flags, "nonstop_tsc");
        }
        line_start = line_end + 1;
    }
    return false;
}

HostClock::Measurement HostClock::measure(int attempts, std::int64_t good_enough_ticks) {
    Measurement best;
    best.window_ticks = INT64_MAX;
    for (int attempt = 0; attempt < 100 && (attempt < attempts || best.window_ticks > good_enough_ticks); ++attempt) {
        std::int64_t before = read_tsc();
        std::int64_t ns = os::monotonic_ns();
        std::int64_t after = read_tsc();
        if (after - before < best.window_ticks) {
            best.window_ticks = after - before;
            best.tsc = before + (after - before) / 2;
            best.ns = ns;
        }
    }
    return best;
}

void HostClock::publish(std::int64_t tsc, std::int64_t ns, std::int64_t rate, std::int64_t end_tsc) {
    std::uint64_t next = sequence_.load(std::memory_order_relaxed) + 1;
    Segment& segment = segments_[next % kSegments];
    // Readers that might still read this slot see a sequence kSegments - 1 ahead and retry.
    std::atomic_thread_fence(std::memory_order_release);
    segment.tsc.store(tsc, std::memory_order_relaxed);
    segment.ns.store(ns, std::memory_order_relaxed);
    segment.rate.store(rate, std::memory_order_relaxed);
    segment.end_tsc.store(end_tsc, std::memory_order_relaxed);
    sequence_.store(next, std::memory_order_release);
}

std::int64_t HostClock::time_at(std::int64_t tsc) const {
    for (;;) {
        std::uint64_t sequence = sequence_.load(std::memory_order_acquire);
        const Segment& segment = segments_[sequence % kSegments];
        std::int64_t segment_tsc = segment.tsc.load(std::memory_order_relaxed);
        std::int64_t segment_ns = segment.ns.load(std::memory_order_relaxed);
        std::int64_t rate = segment.rate.load(std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (sequence_.load(std::memory_order_relaxed) != sequence) continue;
        return segment_ns + static_cast<std::int64_t>((static_cast<WideInt>(tsc - segment_tsc) * rate) >> 32);
    }
}

ClockSource HostClock::start(ClockSource wanted, std::int64_t reanchor_period_ns, double initial_rate_error_ppm,
                             std::int64_t max_cross_cpu_back_ns) {
    if (source() == ClockSource::tsc) return ClockSource::tsc;
    if (wanted != ClockSource::tsc || !EMBER_COLLECTOR_HAS_TSC) return ClockSource::monotonic;
    // The rate is not known yet, so brackets are judged in ticks: under 3000 (1 µs at
    // 3 GHz) is a clock read that was not interrupted. An error e in a bracket's
    // midpoint skews the rate by e / kCalibrationNs until re-anchoring corrects it.
    Measurement first = measure(5, kCalibrationWindowTicks);
    std::this_thread::sleep_for(std::chrono::nanoseconds(kCalibrationNs));
    Measurement second = measure(5, kCalibrationWindowTicks);
    if (first.window_ticks > kCalibrationWindowTicks || second.window_ticks > kCalibrationWindowTicks)
        return ClockSource::monotonic;  // never an uninterrupted read in 100: no clock to trust
    std::int64_t elapsed_ticks = second.tsc - first.tsc;
    std::int64_t elapsed_ns = second.ns - first.ns;
    if (elapsed_ticks <= 0 || elapsed_ns <= 0) return ClockSource::monotonic;
    std::int64_t rate = static_cast<std::int64_t>((static_cast<WideInt>(elapsed_ns) << 32) / elapsed_ticks);
    // A TSC between 100 MHz and 20 GHz; anything else is not a clock to trust.
    double ns_per_tick = static_cast<double>(rate) / 4294967296.0;
    if (ns_per_tick < 0.05 || ns_per_tick > 10.0) return ClockSource::monotonic;
    rate = static_cast<std::int64_t>(static_cast<double>(rate) * (1.0 + initial_rate_error_ppm * 1e-6));
    period_ns_ = reanchor_period_ns;
    last_tsc_ = second.tsc;
    last_ns_ = second.ns;
    publish(second.tsc, second.ns, rate, second.tsc + ticks_for(period_ns_, rate));
    // The cores must agree before threads' events may be ordered by their TSC reads.
    if (cores_disagree(max_cross_cpu_back_ns)) return ClockSource::monotonic;
    source_.store(ClockSource::tsc, std::memory_order_release);
    return ClockSource::tsc;
}

const char* HostClock::name() const {
    return source() == ClockSource::tsc ? "CLOCK_MONOTONIC (TSC)" : "CLOCK_MONOTONIC";
}

std::int64_t HostClock::reanchor_and_read(std::int64_t tsc) {
    // One thread re-anchors; the others go on with the current segment (a few µs
    // past its end is harmless). No waiting: this may run inside a signal handler.
    if (!reanchor_lock_.exchange(true, std::memory_order_acquire)) {
        const Segment& current = segments_[sequence_.load(std::memory_order_relaxed) % kSegments];
        std::int64_t current_rate = current.rate.load(std::memory_order_relaxed);
        Measurement now = measure(3, INT64_MAX);
        if (now.window_ticks > ticks_for(kLongestMeasurementNs, current_rate) || now.tsc <= last_tsc_) {
            refused_measurements_.fetch_add(1, std::memory_order_relaxed);
            publish(current.tsc.load(std::memory_order_relaxed), current.ns.load(std::memory_order_relaxed),
                    current_rate, now.tsc + ticks_for(kRetryNs, current_rate));
        } else {
            // CLOCK_MONOTONIC's rate over the last period (it follows NTP's adjustments).
            std::int64_t measured_rate =
                static_cast<std::int64_t>((static_cast<WideInt>(now.ns - last_ns_) << 32) / (now.tsc - last_tsc_));
            if (measured_rate <= 0) measured_rate = current_rate;
            std::int64_t ours = time_at(now.tsc);
            std::int64_t error = now.ns - ours;  // > 0: the mapping runs behind
            std::int64_t start_ns = ours;
            std::int64_t slope = measured_rate;
            if (error > kJumpNs) {
                // Far behind (the TSC stopped or slowed): jump forward, never back.
                start_ns = now.ns;
                forward_jumps_.fetch_add(1, std::memory_order_relaxed);
            } else {
                // Close the error over the next period: at most half as fast or 1.5x.
                std::int64_t correction = std::clamp(error, -period_ns_ / 2, period_ns_ / 2);
                slope = static_cast<std::int64_t>(static_cast<WideInt>(measured_rate) * (period_ns_ + correction) /
                                                  period_ns_);
            }
            publish(now.tsc, start_ns, slope, now.tsc + ticks_for(period_ns_, measured_rate));
            last_tsc_ = now.tsc;
            last_ns_ = now.ns;
        }
        reanchor_lock_.store(false, std::memory_order_release);
    }
    return time_at(tsc);
}

void start_process_clock() {
    static std::once_flag once;
    std::call_once(once, [] {
        ClockSource wanted = ClockSource::monotonic;
        const char* choice = std::getenv("EMBER_CLOCK");
        if (!choice || std::strcmp(choice, "monotonic") != 0) {
            std::ifstream cpuinfo("/proc/cpuinfo");
            std::string line;
            while (std::getline(cpuinfo, line)) {
                if (line.rfind("flags", 0) != 0) continue;
                if (cpuinfo_says_tsc_invariant(line)) wanted = ClockSource::tsc;
                break;
            }
        }
        g_process_clock.start(wanted);
        pthread_atfork(nullptr, nullptr, reset_lock_in_child);
    });
}

}  // namespace ember::collector
