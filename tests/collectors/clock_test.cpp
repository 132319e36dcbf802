// clock_test.cpp: the collector's clock (collectors/clock.h) against CLOCK_MONOTONIC,
// the time base it promises: the TSC mapping stays within a few microseconds of it
// over more than a second of re-anchoring, never goes back on one thread (and across
// two threads by no more than the bound it promises from the cores' measured
// disagreement; it refuses the TSC, or falls back while running, where the cores
// disagree too much), absorbs a deliberately wrong
// calibration, keeps re-anchoring in a quiet session, and the fallback reads
// CLOCK_MONOTONIC itself.
#include "collectors/clock.h"
#include "collectors/session.h"
#include "tests/collectors/host_session.h"
#include "tests/support/read_file.h"
#include "tests/support/temp_path.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace ember::collector {
namespace {

constexpr std::int64_t kToleranceNs = 5'000;

bool this_machine_has_invariant_tsc() {
    return cpuinfo_says_tsc_invariant(test_support::read_file("/proc/cpuinfo"));
}

struct Agreement {
    int samples = 0;
    std::int64_t worst_error_ns = 0;  // |clock - CLOCK_MONOTONIC|, bracket midpoint
    bool monotone = true;
};

// Reads `clock` between two CLOCK_MONOTONIC reads for `seconds`, from `settle_seconds`
// on, ignoring brackets wider than 2 µs (the thread was preempted between the reads).
Agreement compare_with_monotonic(HostClock& clock, double seconds, double settle_seconds = 0.0) {
    Agreement agreement;
    std::int64_t begin = os::monotonic_ns();
    std::int64_t end = begin + static_cast<std::int64_t>(seconds * 1e9);
    std::int64_t settled = begin + static_cast<std::int64_t>(settle_seconds * 1e9);
    std::int64_t previous = clock.now_ns();
    for (;;) {
        std::int64_t before = os::monotonic_ns();
        std::int64_t value = clock.now_ns();
        std::int64_t after = os::monotonic_ns();
        if (value < previous) agreement.monotone = false;
        previous = value;
        if (after >= end) break;
        if (after - before > 2'000 || before < settled) continue;
        std::int64_t error = value - (before + (after - before) / 2);
        agreement.worst_error_ns = std::max(agreement.worst_error_ns, error < 0 ? -error : error);
        agreement.samples += 1;
        // Not a tight spin: ~20k samples a second is plenty and leaves the core to others.
        for (int pause = 0; pause < 200; ++pause) asm volatile("" ::: "memory");
    }
    return agreement;
}

TEST(CollectorClock, CpuinfoFlagsDecideWhetherTheTscIsInvariant) {
    EXPECT_TRUE(cpuinfo_says_tsc_invariant("processor\t: 0\nflags\t\t: fpu tsc constant_tsc nonstop_tsc rdtscp\n"));
    EXPECT_TRUE(cpuinfo_says_tsc_invariant("flags\t: nonstop_tsc constant_tsc"));
    EXPECT_FALSE(cpuinfo_says_tsc_invariant("flags\t\t: fpu tsc constant_tsc rdtscp\n"));
    EXPECT_FALSE(cpuinfo_says_tsc_invariant("flags\t\t: fpu tsc nonstop_tsc\n"));
    // Whole flags only, from the flags line only.
    EXPECT_FALSE(cpuinfo_says_tsc_invariant("flags\t\t: xconstant_tsc nonstop_tscx\n"));
    EXPECT_FALSE(cpuinfo_says_tsc_invariant("bugs\t\t: constant_tsc nonstop_tsc\nflags\t\t: fpu\n"));
    EXPECT_FALSE(cpuinfo_says_tsc_invariant(""));
}

TEST(CollectorClock, TscClockStaysOnClockMonotonicForASecond) {
    if (!this_machine_has_invariant_tsc()) GTEST_SKIP() << "no invariant TSC here (the fallback is tested below)";
    HostClock clock;
    ASSERT_EQ(clock.start(ClockSource::tsc, 100'000'000), ClockSource::tsc);
    EXPECT_STREQ(clock.name(), "CLOCK_MONOTONIC (TSC)");
    Agreement agreement = compare_with_monotonic(clock, 1.2);
    EXPECT_TRUE(agreement.monotone);
    EXPECT_GT(agreement.samples, 1000);
    EXPECT_LE(agreement.worst_error_ns, kToleranceNs);
    EXPECT_GE(clock.reanchors(), 8u);  // one segment per 100 ms (plus the first)
    std::printf("worst |TSC clock - CLOCK_MONOTONIC| over 1.2 s: %lld ns (%d samples, %llu segments, %llu refused)\n",
                static_cast<long long>(agreement.worst_error_ns), agreement.samples,
                static_cast<unsigned long long>(clock.reanchors()),
                static_cast<unsigned long long>(clock.refused_measurements()));
}

TEST(CollectorClock, ReanchoringAbsorbsAWrongCalibration) {
    if (!this_machine_has_invariant_tsc()) GTEST_SKIP() << "no invariant TSC here";
    HostClock clock;
    // 300 ppm fast: 30 µs off after the first 100 ms period unless re-anchoring slews it back.
    ASSERT_EQ(clock.start(ClockSource::tsc, 100'000'000, 300.0), ClockSource::tsc);
    Agreement agreement = compare_with_monotonic(clock, 1.0, 0.5);
    EXPECT_TRUE(agreement.monotone);
    EXPECT_GT(agreement.samples, 100);
    EXPECT_LE(agreement.worst_error_ns, kToleranceNs);
}

// Ping-pong: each side reads the clock after seeing the other's reading, and the worst
// step back from the other thread's reading is returned (same_thread_monotone: never
// back on one thread).
struct PingPong {
    std::int64_t worst_step_back = 0;
    int backwards = 0, readings = 0;
    bool same_thread_monotone = true;
};
PingPong ping_pong(HostClock& clock, int rounds) {
    std::atomic<std::int64_t> last{0};
    std::atomic<int> turn{0};
    std::atomic<int> backwards{0};
    std::atomic<std::int64_t> worst_step_back{0};
    std::atomic<bool> same_thread_monotone{true};
    auto player = [&](int me) {
        std::int64_t mine = 0;
        for (int round = 0; round < rounds; ++round) {
            while (turn.load(std::memory_order_acquire) != me) std::this_thread::yield();
            std::int64_t now = clock.now_ns();
            if (now < mine) same_thread_monotone.store(false);
            mine = now;
            std::int64_t previous = last.load(std::memory_order_relaxed);
            if (now < previous) {
                backwards.fetch_add(1);
                worst_step_back.store(std::max(worst_step_back.load(), previous - now));
            }
            last.store(std::max(now, previous), std::memory_order_relaxed);
            turn.store(1 - me, std::memory_order_release);
        }
    };
    std::thread other(player, 1);
    player(0);
    other.join();
    return {worst_step_back.load(), backwards.load(), 2 * rounds, same_thread_monotone.load()};
}

// The promise the clock makes on this machine, whichever source it chose: a reading
// taken after seeing another thread's reading lies below it by at most
// cross_thread_bound_ns() (0 on CLOCK_MONOTONIC; on the TSC twice the cores'
// disagreement measured at start, plus an unfenced read's reordering).
TEST(CollectorClock, FromOneThreadToAnotherTimeGoesBackAtMostByWhatTheClockPromises) {
    if (!this_machine_has_invariant_tsc()) GTEST_SKIP() << "no invariant TSC here";
    HostClock clock;
    const ClockSource source = clock.start(ClockSource::tsc, 10'000'000);  // many re-anchors
    std::printf("clock: %s, cores' TSCs disagree by up to %lld ns, promise across threads %lld ns%s%s\n", clock.name(),
                static_cast<long long>(clock.cross_cpu_back_ns()),
                static_cast<long long>(clock.cross_thread_bound_ns()), source == ClockSource::tsc ? "" : "; ",
                clock.fallback_reason());
    const PingPong seen = ping_pong(clock, 100000);
    EXPECT_TRUE(seen.same_thread_monotone);
    EXPECT_LE(seen.worst_step_back, clock.cross_thread_bound_ns())
        << seen.backwards << " of " << seen.readings << " readings went back; " << clock.name();
    std::printf("%d of %d cross-thread readings below the other thread's last (worst %lld ns)\n", seen.backwards,
                seen.readings, static_cast<long long>(seen.worst_step_back));
}

// The TSC is used only where the cores agree: the source follows the measured
// disagreement, and the measurement itself is sound (each pair pinned, bounded in time).
TEST(CollectorClock, TheCoresDisagreementDecidesTheSource) {
    if (!this_machine_has_invariant_tsc()) GTEST_SKIP() << "no invariant TSC here";
    HostClock clock;
    const ClockSource source = clock.start(ClockSource::tsc);
    if (source == ClockSource::tsc) {
        EXPECT_LE(clock.cross_cpu_back_ns(), HostClock::kMaxCrossCpuBackNs);
        EXPECT_STREQ(clock.fallback_reason(), "");
    } else {
        EXPECT_GT(clock.cross_cpu_back_ns(), HostClock::kMaxCrossCpuBackNs);
        EXPECT_NE(std::string(clock.fallback_reason()).find("disagree by"), std::string::npos);
    }
    const HostClock::CrossCpuCheck check = clock.measure_cross_cpu();
    EXPECT_GE(check.worst_back_ns, 0);
    std::printf("%d CPUs measured, their TSCs %lld ns apart%s\n", check.cpus,
                static_cast<long long>(check.worst_back_ns), check.complete ? "" : " (not every CPU gave a reading)");
}

// Below zero every machine's disagreement is too much: the clock refuses the TSC at
// start, and a running TSC clock falls back without stepping back in time.
TEST(CollectorClock, FallsBackToClockMonotonicWhenTheCoresDisagree) {
    if (!this_machine_has_invariant_tsc()) GTEST_SKIP() << "no invariant TSC here";
    HostClock refused;
    EXPECT_EQ(refused.start(ClockSource::tsc, 100'000'000, 0.0, -1), ClockSource::monotonic);
    EXPECT_NE(std::string(refused.fallback_reason()).find("disagree by"), std::string::npos);
    EXPECT_EQ(refused.cross_thread_bound_ns(), 0);

    HostClock clock;
    if (clock.start(ClockSource::tsc) != ClockSource::tsc) GTEST_SKIP() << clock.fallback_reason();
    std::int64_t before = clock.now_ns();
    EXPECT_FALSE(clock.recheck_cross_cpu(std::int64_t{1} << 40));  // agreement within any limit
    EXPECT_EQ(clock.source(), ClockSource::tsc);
    before = std::max(before, clock.now_ns());
    EXPECT_TRUE(clock.recheck_cross_cpu(-1));
    EXPECT_EQ(clock.source(), ClockSource::monotonic);
    EXPECT_STREQ(clock.name(), "CLOCK_MONOTONIC");
    const std::int64_t after = clock.now_ns();
    EXPECT_GE(after, before);
    // Still CLOCK_MONOTONIC's rate, within the few µs the TSC mapping had drifted.
    const std::int64_t offset = clock.now_ns() - os::monotonic_ns();
    EXPECT_GE(offset, -kToleranceNs);
    EXPECT_LE(offset, kToleranceNs);
    const PingPong seen = ping_pong(clock, 20000);
    EXPECT_TRUE(seen.same_thread_monotone);
    EXPECT_LE(seen.worst_step_back, clock.cross_thread_bound_ns());
}

TEST(CollectorClock, ASessionKeepsReanchoringWhileTheProgramIsQuiet) {
    if (!this_machine_has_invariant_tsc()) GTEST_SKIP() << "no invariant TSC here";
    const SessionOptions options =
        test::host_session_options(test_support::unique_temp_path("ember_clock_quiet", ".db").string());
    start_session(options);
    if (g_process_clock.source() != ClockSource::tsc) {
        stop_session(nullptr);
        GTEST_SKIP() << "EMBER_CLOCK=monotonic in the environment";
    }
    // Nothing in this process reads the clock for 450 ms but the session's keeper.
    std::uint64_t before = g_process_clock.reanchors();
    std::this_thread::sleep_for(std::chrono::milliseconds(450));
    std::uint64_t after = g_process_clock.reanchors();
    std::string error;
    EXPECT_TRUE(stop_session(&error)) << error;
    EXPECT_GE(after - before, 3u);  // a 100 ms period
    std::remove(options.path.c_str());
}

TEST(CollectorClock, FallbackReadsClockMonotonic) {
    HostClock clock;
    EXPECT_EQ(clock.start(ClockSource::monotonic), ClockSource::monotonic);
    EXPECT_STREQ(clock.name(), "CLOCK_MONOTONIC");
    for (int sample = 0; sample < 1000; ++sample) {
        std::int64_t before = os::monotonic_ns();
        std::int64_t value = clock.now_ns();
        std::int64_t after = os::monotonic_ns();
        ASSERT_LE(before, value);
        ASSERT_LE(value, after);
    }
}

TEST(CollectorClock, EmberClockMonotonicKeepsTheProcessOnClockGettime) {
    // The process clock starts once per process (another test here started it): the
    // "threadsafe" style runs the statement in a freshly executed copy of this test.
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            setenv("EMBER_CLOCK", "monotonic", 1);
            start_process_clock();
            std::exit(std::string(clock_name()) == "CLOCK_MONOTONIC" ? 0 : 3);
        },
        ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace ember::collector
