// python_sampler_parts_test.cpp: the parts of the outside sampler that need no process.
// SampleTimer driven by a clock of the test's own (ticks on the period's grid within
// the jitter, missed ticks skipped and counted, the deadline); FrameInterner and
// ThreadNames against the calls a writer would get (each frame and thread written
// once, renames only at a check and only to a new, non-empty name).
#include "collectors/python/sample_interning.h"
#include "collectors/python/sample_timer.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace ember::collector::python {
namespace {

constexpr std::int64_t kMs = 1'000'000;

TEST(SampleTimer, PeriodOfARate) {
    EXPECT_EQ(SampleTimer::period_of(100.0), 10 * kMs);
    EXPECT_EQ(SampleTimer::period_of(250.0), 4 * kMs);
    EXPECT_EQ(SampleTimer::period_of(1.0), 1000 * kMs);
    EXPECT_EQ(SampleTimer::period_of(0.0), 10 * kMs);  // not positive: 100 Hz
    EXPECT_EQ(SampleTimer::period_of(-5.0), 10 * kMs);
}

TEST(SampleTimer, TicksLieOnThePeriodsGridWithinAFifthOfIt) {
    const std::int64_t start = 123'456'789, period = 10 * kMs;
    SampleTimer timer(period, start, 0);
    ASSERT_EQ(timer.at(start).kind, SampleTimer::Kind::tick);  // the first is due at once
    std::set<std::int64_t> offsets;
    for (std::int64_t k = 1; k <= 10000; ++k) {
        const std::int64_t due = timer.next_tick_ns();
        const std::int64_t offset = due - (start + k * period);
        ASSERT_LE(offset, period / 5) << "tick " << k;
        ASSERT_GE(offset, -period / 5) << "tick " << k;
        offsets.insert(offset);
        // Just before it is due the caller waits exactly the rest; at it, a tick.
        const SampleTimer::Step early = timer.at(due - 1);
        ASSERT_EQ(early.kind, SampleTimer::Kind::wait);
        ASSERT_EQ(early.wait_ns, 1);
        ASSERT_EQ(timer.at(due).kind, SampleTimer::Kind::tick);
    }
    EXPECT_EQ(timer.late_ticks(), 0);
    // The jitter moves the ticks (not one phase every time), both ways.
    EXPECT_GT(offsets.size(), 5000u);
    EXPECT_LT(*offsets.begin(), -period / 10);
    EXPECT_GT(*offsets.rbegin(), period / 10);
}

TEST(SampleTimer, AnOverrunSkipsTheMissedTicksAndCountsThem) {
    const std::int64_t start = 0, period = 10 * kMs;
    SampleTimer timer(period, start, 0);
    ASSERT_EQ(timer.at(start).kind, SampleTimer::Kind::tick);
    // The tick due near 10 ms is taken at 35 ms: those of 20 and 30 ms are skipped, and
    // the next lies near 40 ms, not at once (no burst).
    ASSERT_EQ(timer.at(35 * kMs).kind, SampleTimer::Kind::tick);
    EXPECT_EQ(timer.late_ticks(), 2);
    EXPECT_GE(timer.next_tick_ns(), 40 * kMs - period / 5);
    EXPECT_LE(timer.next_tick_ns(), 40 * kMs + period / 5);
    EXPECT_EQ(timer.at(35 * kMs + 1).kind, SampleTimer::Kind::wait);
    // On time again: nothing more counted.
    ASSERT_EQ(timer.at(timer.next_tick_ns()).kind, SampleTimer::Kind::tick);
    EXPECT_EQ(timer.late_ticks(), 2);
}

TEST(SampleTimer, StopsAtTheDeadlineAndNeverWithoutOne) {
    const std::int64_t start = 5 * kMs, period = 10 * kMs;
    SampleTimer bounded(period, start, 1000 * kMs);
    EXPECT_EQ(bounded.at(start).kind, SampleTimer::Kind::tick);
    EXPECT_NE(bounded.at(start + 1000 * kMs - 1).kind, SampleTimer::Kind::stop);
    EXPECT_EQ(bounded.at(start + 1000 * kMs).kind, SampleTimer::Kind::stop);
    SampleTimer unbounded(period, start, 0);
    EXPECT_EQ(unbounded.at(start).kind, SampleTimer::Kind::tick);
    EXPECT_EQ(unbounded.at(start + 1'000'000'000 * kMs).kind, SampleTimer::Kind::tick);  // 11 days on
}

TEST(SampleTimer, TheSameStartGivesTheSameTicks) {
    SampleTimer one(10 * kMs, 777, 0), two(10 * kMs, 777, 0), other(10 * kMs, 778, 0);
    int differ = 0;
    for (int tick = 0; tick < 100; ++tick) {
        one.at(one.next_tick_ns());
        two.at(two.next_tick_ns());
        other.at(other.next_tick_ns());
        ASSERT_EQ(one.next_tick_ns(), two.next_tick_ns());
        differ += (one.next_tick_ns() - 777) != (other.next_tick_ns() - 778);
    }
    EXPECT_GT(differ, 50);
}

MixedFrame python_frame(const std::string& function, const std::string& file, int line) {
    return {function, file, line, 0};
}

TEST(FrameInterner, WritesEachFrameOnceAndReturnsStacksOutermostFirst) {
    std::vector<MixedFrame> written;
    FrameInterner frames([&](const MixedFrame& frame) {
        written.push_back(frame);
        return static_cast<trace::FrameId>(100 + written.size());
    });
    const MixedFrame main = python_frame("<module>", "/w/train.py", 30);
    const MixedFrame step = python_frame("step", "/w/train.py", 12);
    const MixedFrame load = python_frame("load", "/w/data.py", 7);
    // Innermost first, as snapshots read them.
    EXPECT_EQ(frames.outermost_first({step, main}), (std::vector<trace::FrameId>{101, 102}));
    EXPECT_EQ(frames.outermost_first({load, step, main}), (std::vector<trace::FrameId>{101, 102, 103}));
    EXPECT_EQ(frames.outermost_first({step, main}), (std::vector<trace::FrameId>{101, 102}));
    ASSERT_EQ(written.size(), 3u);
    EXPECT_EQ(written[0].function, "<module>");
    EXPECT_EQ(written[2].function, "load");
    // Another line of the same function is another frame; so is a native frame (line
    // -1, its library as file) of the same name.
    EXPECT_EQ(frames.outermost_first({python_frame("step", "/w/train.py", 13), main}),
              (std::vector<trace::FrameId>{101, 104}));
    EXPECT_EQ(frames.outermost_first(std::vector<MixedFrame>{MixedFrame{"step", "/w/train.py", -1, 0x1234}}),
              (std::vector<trace::FrameId>{105}));
    EXPECT_EQ(frames.size(), 5u);
    EXPECT_TRUE(frames.outermost_first({}).empty());
}

struct ThreadCalls {
    std::vector<std::pair<pid_t, std::string>> registered;
    std::vector<std::pair<trace::ThreadId, std::string>> renamed;
    ThreadNames::Register register_thread = [this](pid_t tid, const std::string& name) {
        registered.emplace_back(tid, name);
        return static_cast<trace::ThreadId>(registered.size());
    };
    ThreadNames::Rename rename = [this](trace::ThreadId thread, const std::string& name) {
        renamed.emplace_back(thread, name);
    };
};

TEST(ThreadNames, RegistersEachThreadOnceAndRenamesOnlyAtACheck) {
    ThreadCalls calls;
    ThreadNames threads;
    std::string os_name = "python3";
    int name_reads = 0;
    auto name = [&] {
        ++name_reads;
        return os_name;
    };
    EXPECT_EQ(threads.thread(42, false, name, calls.register_thread, calls.rename), 1u);
    EXPECT_EQ(threads.thread(43, false, name, calls.register_thread, calls.rename), 2u);
    EXPECT_EQ(name_reads, 2);
    // Known and no check: the name is not even read.
    os_name = "worker";
    EXPECT_EQ(threads.thread(42, false, name, calls.register_thread, calls.rename), 1u);
    EXPECT_EQ(name_reads, 2);
    EXPECT_TRUE(calls.renamed.empty());
    // At a check: renamed once, to the new name.
    EXPECT_EQ(threads.thread(42, true, name, calls.register_thread, calls.rename), 1u);
    EXPECT_EQ(threads.thread(42, true, name, calls.register_thread, calls.rename), 1u);
    ASSERT_EQ(calls.renamed.size(), 1u);
    EXPECT_EQ(calls.renamed[0], (std::pair<trace::ThreadId, std::string>{1, "worker"}));
    // A name that cannot be read (the thread exiting) renames nothing.
    os_name = "";
    EXPECT_EQ(threads.thread(43, true, name, calls.register_thread, calls.rename), 2u);
    EXPECT_EQ(calls.renamed.size(), 1u);
    ASSERT_EQ(calls.registered.size(), 2u);
    EXPECT_EQ(calls.registered[0], (std::pair<pid_t, std::string>{42, "python3"}));
    EXPECT_EQ(calls.registered[1], (std::pair<pid_t, std::string>{43, "python3"}));
}

}  // namespace
}  // namespace ember::collector::python
