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
// Across threads the TSC is only as good as the agreement of the cores' counters. On
// bare metal they are synchronized to a few ns; in a virtual machine each vCPU's TSC is
// the host's plus an offset the hypervisor sets, and those can disagree by a microsecond
// or more (1.2 µs seen on a KVM guest), enough to put an event that happened later on
// another thread before its cause. So the clock measures how far the cores' counters
// disagree (each CPU's offset from CLOCK_MONOTONIC, measure_cross_cpu) when it starts
// and again every few seconds while a session runs, and
// stays on, or falls back to, CLOCK_MONOTONIC (which the kernel keeps ordered across
// CPUs) when that exceeds kMaxCrossCpuBackNs. cross_thread_bound_ns() is the promise
// the clock then makes: a reading taken after another thread's reading (after seeing
// it) lies below it by at most that much.
//
// Async-signal-safe and lock-free on the read side (the CPU sampler's SIGPROF handler
// reads it): segments live in a small ring published by a sequence number, so a
// reader never waits for a writer, even one it interrupted.
#pragma once

#include "common/os.h"

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
        std::atomic<std::int64_t> tsc{0};      // where the segment begins
        std::atomic<std::int64_t> ns{0};       // its time there
        std::atomic<std::int64_t> rate{0};     // ns per tick, fixed point (32 fraction bits)
        std::atomic<std::int64_t> end_tsc{0};  // re-anchor when a read passes this
    };
    static constexpr int kSegments = 8;

    // Past this cross-CPU disagreement the TSC is not used (see above). An unfenced
    // RDTSC may itself run ahead of the load that ordered it by a few tens of ns, so a
    // disagreement this small cannot be told from that, and a thread handing work to
    // another takes longer than this (a cache-line transfer and a wake-up) in any case.
    static constexpr std::int64_t kMaxCrossCpuBackNs = 300;

    // How far the cores' TSCs disagree: a thread of its own visits each allowed CPU (up
    // to 32, spread over them) and takes the tightest of `attempts` brackets of
    // CLOCK_MONOTONIC between two TSC reads there, which gives that CPU's offset from
    // the mapping; the spread of the offsets is the disagreement (to within a bracket,
    // ~20-50 ns). One thread at a time, so it works on a busy machine too. `complete` is
    // false when a CPU could not be visited or never gave an uninterrupted bracket.
    struct CrossCpuCheck {
        std::int64_t worst_back_ns = 0;
        int first_cpu = -1, worst_cpu = -1;  // the CPUs furthest apart
        int cpus = 0;                        // CPUs measured
        bool complete = true;
    };
    CrossCpuCheck measure_cross_cpu(int attempts = 100) const;  // measure() takes at most 100

    // Starts the TSC mapping (calibration sleeps ~10 ms) when `wanted` is tsc and the
    // TSC is usable; otherwise, or when calibration looks wrong, stays on
    // CLOCK_MONOTONIC. Returns the source in use. `initial_rate_error_ppm` skews the
    // calibrated rate on purpose (tests: re-anchoring must absorb it).
    // `max_cross_cpu_back_ns` is the disagreement past which the TSC is refused (tests
    // set it below zero to take the fallback on any machine).
    ClockSource start(ClockSource wanted, std::int64_t reanchor_period_ns = 100'000'000,
                      double initial_rate_error_ppm = 0.0, std::int64_t max_cross_cpu_back_ns = kMaxCrossCpuBackNs);
    ClockSource source() const { return source_.load(std::memory_order_acquire); }
    // "CLOCK_MONOTONIC" or "CLOCK_MONOTONIC (TSC)" for RunInfo::clock_name.
    const char* name() const;
    // Why the TSC is not in use ("" when it is, or was never wanted).
    const char* fallback_reason() const { return fallback_reason_; }
    // The largest cross-CPU disagreement measured so far (ns; 0 before any measurement).
    std::int64_t cross_cpu_back_ns() const { return cross_cpu_back_ns_.load(std::memory_order_relaxed); }
    // The clock's promise across threads: a reading taken after seeing another thread's
    // reading lies below it by at most this many ns. CLOCK_MONOTONIC: 0. The TSC: twice
    // the disagreement measured (it is sampled, not proven) plus kOutOfOrderReadNs: the
    // read is unfenced (a fence would cost ~8 ns a read), so the CPU may execute it
    // before the load that saw the other thread's reading completes, earlier by at most
    // that load's latency, a cache line from another socket (well under 1 µs).
    static constexpr std::int64_t kOutOfOrderReadNs = 1000;
    std::int64_t cross_thread_bound_ns() const {
        return source() == ClockSource::tsc ? 2 * cross_cpu_back_ns() + kOutOfOrderReadNs : 0;
    }
    // Measures the cross-CPU disagreement again (the session's clock keeper, every few
    // seconds: a hypervisor may move a vCPU and change its TSC offset) and falls back to
    // CLOCK_MONOTONIC, continuing from the TSC time so nothing goes back, when it now
    // exceeds kMaxCrossCpuBackNs. Returns true when it fell back.
    bool recheck_cross_cpu(std::int64_t max_cross_cpu_back_ns = kMaxCrossCpuBackNs);

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
        return os::monotonic_ns() + monotonic_offset_ns_.load(std::memory_order_relaxed);
    }

    // Times a re-anchoring measurement was refused because CLOCK_MONOTONIC and the
    // TSC could not be read close together (the thread was preempted), and times the
    // mapping was found more than 1 ms behind and jumped forward.
    std::uint64_t refused_measurements() const {
        return refused_measurements_.load();
    }
    std::uint64_t forward_jumps() const {
        return forward_jumps_.load();
    }
    std::uint64_t reanchors() const {
        return sequence_.load();
    }
    // A fork()ed child may inherit the re-anchoring lock held by a thread it lacks.
    void after_fork_in_child() {
        reanchor_lock_.store(false);
    }

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
    // Measures the cores' disagreement, keeps the largest seen, and when it exceeds
    // `max_back_ns` writes why into fallback_reason_ and returns true.
    bool cores_disagree(std::int64_t max_back_ns);
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
    std::atomic<std::int64_t> cross_cpu_back_ns_{0};
    // Added to CLOCK_MONOTONIC after a fallback from the TSC, so time goes on from where
    // the TSC mapping left it (a few µs at most) instead of stepping back.
    std::atomic<std::int64_t> monotonic_offset_ns_{0};
    char fallback_reason_[160] = {};
};

// The process's clock, read by every collector timestamp.
extern HostClock g_process_clock;

// Starts g_process_clock once per process: the TSC when /proc/cpuinfo says it is
// invariant and EMBER_CLOCK is not "monotonic". The session calls it before its first
// timestamp; until then now_ns() reads CLOCK_MONOTONIC (the same time base).
void start_process_clock();

inline std::int64_t now_ns() {
    return g_process_clock.now_ns();
}

inline const char* clock_name() {
    return g_process_clock.name();
}

// Wall time minus now_ns(), for RunInfo::clock_offset_to_wall_ns (the midpoint read of
// os::wall_offset_ns).
inline std::int64_t clock_offset_to_wall_ns() {
    return os::wall_offset_ns(now_ns);
}

}  // namespace ember::collector
