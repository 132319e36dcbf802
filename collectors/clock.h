// clock.h: the collector's one clock. NVTX ranges, CUDA API calls, CPU samples,
// NVML samples and (through CUPTI's timestamp callback) GPU activity all read
// now_ns(), so a kernel lies on the same time axis as the API call that launched it.
//
// The time base is CLOCK_MONOTONIC. Reading it costs ~18-40 ns (vDSO), and an NVTX
// push+pop reads it twice, so where the CPU's time-stamp counter is invariant
// (constant_tsc and nonstop_tsc: one rate, never stops, the same on every core)
// now_ns() reads the TSC (~8 ns) and maps it onto CLOCK_MONOTONIC:
//
//   time = anchor_ns + (tsc - anchor_tsc) * rate
//
// The rate is calibrated against CLOCK_MONOTONIC when the clock starts and the mapping
// is re-anchored every reanchor period (100 ms): the caller that finds the period
// over measures CLOCK_MONOTONIC again, and the next segment starts where the last one
// ends (continuous, so time never goes back) with a slope that closes the measured
// error over one period. Values therefore stay within a few microseconds of
// CLOCK_MONOTONIC and follow its NTP rate adjustments, which is what keeps ranks'
// files mergeable. Without an invariant TSC, or with EMBER_CLOCK=monotonic in the
// environment, now_ns() is clock_gettime(CLOCK_MONOTONIC).
//
// Async-signal-safe and lock-free on the read side (the CPU sampler's SIGPROF handler
// reads it): segments live in a small ring published by a sequence number, so a
// reader never waits for a writer, even one it interrupted.
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>
#include <string_view>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define EMBER_COLLECTOR_HAS_TSC 1
#else
#define EMBER_COLLECTOR_HAS_TSC 0
#endif

namespace ember::collector {

// Products of a tick count and a 32.32 fixed-point rate need 128 bits.
__extension__ using WideInt = __int128;

inline std::int64_t monotonic_now_ns() {
    timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return std::int64_t(now.tv_sec) * 1000000000 + now.tv_nsec;
}

inline std::int64_t read_tsc() {
#if EMBER_COLLECTOR_HAS_TSC
    return static_cast<std::int64_t>(__rdtsc());
#else
    return 0;
#endif
}

// True when /proc/cpuinfo text lists both constant_tsc and nonstop_tsc in its flags.
bool cpuinfo_says_tsc_invariant(std::string_view cpuinfo);

enum class ClockSource : std::uint32_t {
    monotonic,  // clock_gettime(CLOCK_MONOTONIC) on every read
    tsc,        // the TSC mapped onto CLOCK_MONOTONIC (see above)
};

class HostClock {
public:
    // One segment of the TSC -> CLOCK_MONOTONIC mapping.
    struct Segment {
        std::atomic<std::int64_t> tsc{0};    // where the segment begins
        std::atomic<std::int64_t> ns{0};     // its time there
        std::atomic<std::int64_t> rate{0};   // ns per tick, fixed point (32 fraction bits)
        std::atomic<std::int64_t> end_tsc{0};  // re-anchor when a read passes this
    };
    static constexpr int kSegments = 8;

    constexpr HostClock() = default;

    // Starts the TSC mapping (calibration sleeps ~10 ms) when `wanted` is tsc and the
    // TSC is usable; otherwise, or when calibration looks wrong, stays on
    // CLOCK_MONOTONIC. Returns the source in use. `initial_rate_error_ppm` skews the
    // calibrated rate on purpose (tests: re-anchoring must absorb it).
    ClockSource start(ClockSource wanted, std::int64_t reanchor_period_ns = 100'000'000,
                      double initial_rate_error_ppm = 0.0);
    ClockSource source() const { return source_.load(std::memory_order_acquire); }
    // "CLOCK_MONOTONIC" or "CLOCK_MONOTONIC (TSC)" for RunInfo::clock_name.
    const char* name() const;

    std::int64_t now_ns() {
#if EMBER_COLLECTOR_HAS_TSC
        if (source_.load(std::memory_order_relaxed) == ClockSource::tsc) {
            for (;;) {
                std::uint64_t sequence = sequence_.load(std::memory_order_acquire);
                const Segment& segment = segments_[sequence % kSegments];
                std::int64_t segment_tsc = segment.tsc.load(std::memory_order_relaxed);
                std::int64_t segment_ns = segment.ns.load(std::memory_order_relaxed);
                std::int64_t rate = segment.rate.load(std::memory_order_relaxed);
                std::int64_t end_tsc = segment.end_tsc.load(std::memory_order_relaxed);
                std::int64_t tsc = read_tsc();
                std::atomic_thread_fence(std::memory_order_acquire);
                // A segment published meanwhile: read again. (Its slot was intact —
                // the writer fills a slot kSegments publications later — but a reader
                // delayed between the loads and the TSC read must not extrapolate an
                // old segment past its successor's start.) Never waits on a writer.
                if (sequence_.load(std::memory_order_relaxed) != sequence) continue;
                if (tsc > end_tsc) return reanchor_and_read(tsc);
                return segment_ns + static_cast<std::int64_t>((static_cast<WideInt>(tsc - segment_tsc) * rate) >> 32);
            }
        }
#endif
        return monotonic_now_ns();
    }

    // Times a re-anchoring measurement was refused because CLOCK_MONOTONIC and the
    // TSC could not be read close together (the thread was preempted), and times the
    // mapping was found more than 1 ms behind and jumped forward.
    std::uint64_t refused_measurements() const { return refused_measurements_.load(); }
    std::uint64_t forward_jumps() const { return forward_jumps_.load(); }
    std::uint64_t reanchors() const { return sequence_.load(); }
    // A fork()ed child may inherit the re-anchoring lock held by a thread it lacks.
    void after_fork_in_child() { reanchor_lock_.store(false); }

private:
    struct Measurement {
        std::int64_t tsc = 0;
        std::int64_t ns = 0;
        std::int64_t window_ticks = 0;  // TSC ticks between the two reads bracketing ns
    };
    // CLOCK_MONOTONIC bracketed by two TSC reads: the tightest of at least
    // `attempts` brackets, going on (up to 100) while none is narrower than
    // `good_enough_ticks`.
    static Measurement measure(int attempts, std::int64_t good_enough_ticks);
    std::int64_t reanchor_and_read(std::int64_t tsc);
    std::int64_t time_at(std::int64_t tsc) const;
    void publish(std::int64_t tsc, std::int64_t ns, std::int64_t rate, std::int64_t end_tsc);

    std::atomic<ClockSource> source_{ClockSource::monotonic};
    std::atomic<std::uint64_t> sequence_{0};
    Segment segments_[kSegments];
    // Re-anchoring state, touched only by the holder of reanchor_lock_.
    std::atomic<bool> reanchor_lock_{false};
    std::int64_t period_ns_ = 0;
    std::int64_t last_tsc_ = 0;  // the previous CLOCK_MONOTONIC measurement
    std::int64_t last_ns_ = 0;
    std::atomic<std::uint64_t> refused_measurements_{0};
    std::atomic<std::uint64_t> forward_jumps_{0};
};

// The process's clock, read by every collector timestamp.
extern HostClock g_process_clock;

// Starts g_process_clock once per process: the TSC when /proc/cpuinfo says it is
// invariant and EMBER_CLOCK is not "monotonic". The session calls it before its first
// timestamp; until then now_ns() reads CLOCK_MONOTONIC (the same time base).
void start_process_clock();

inline std::int64_t now_ns() { return g_process_clock.now_ns(); }

inline const char* clock_name() { return g_process_clock.name(); }

// Wall time minus now_ns(), for RunInfo::clock_offset_to_wall_ns.
inline std::int64_t clock_offset_to_wall_ns() {
    timespec wall;
    std::int64_t before = now_ns();
    clock_gettime(CLOCK_REALTIME, &wall);
    std::int64_t after = now_ns();
    return std::int64_t(wall.tv_sec) * 1000000000 + wall.tv_nsec - (before + (after - before) / 2);
}

}  // namespace ember::collector
