// sample_timer.h: when the outside sampler (outside_sampler.h) takes its snapshots.
// Ticks lie on a grid of the period, each moved by up to a fifth of it at random: the
// mean rate is the asked one, and a program that repeats itself in step with the period
// (a training loop of 100 ms at 100 Hz) is not seen in the same phase every time. A
// snapshot that overran its period skips the ticks it missed instead of bursting, and
// counts them as late. The timer reads no clock: the caller passes the time, so a test
// drives it with a clock of its own.
#pragma once

#include <cstdint>
#include <limits>

namespace ember::collector::python {

class SampleTimer {
  public:
    // The period of `hz` snapshots a second (100 Hz when `hz` is not positive).
    static std::int64_t period_of(double hz) { return static_cast<std::int64_t>(1e9 / (hz > 0 ? hz : 100.0)); }

    // The first tick is due at `start_ns`; with `duration_ns` > 0 no tick is due from
    // start_ns + duration_ns on.
    SampleTimer(std::int64_t period_ns, std::int64_t start_ns, std::int64_t duration_ns)
        : period_ns_(period_ns),
          deadline_ns_(duration_ns > 0 ? start_ns + duration_ns : std::numeric_limits<std::int64_t>::max()),
          grid_ns_(start_ns),
          next_tick_ns_(start_ns),
          random_(0x9e3779b97f4a7c15ull ^ static_cast<std::uint64_t>(start_ns)) {}

    enum class Kind { stop, wait, tick };
    struct Step {
        Kind kind = Kind::stop;
        std::int64_t wait_ns = 0;  // Kind::wait: how long until the next tick
    };

    // What to do at `now_ns`: stop (the deadline passed), wait, or take a tick now (the
    // one after it is then scheduled, past any the caller missed).
    Step at(std::int64_t now_ns) {
        if (now_ns >= deadline_ns_) return {Kind::stop, 0};
        if (now_ns < next_tick_ns_) return {Kind::wait, next_tick_ns_ - now_ns};
        grid_ns_ += period_ns_;
        if (grid_ns_ <= now_ns) {
            const std::int64_t missed = (now_ns - grid_ns_) / period_ns_ + 1;
            late_ticks_ += missed;
            grid_ns_ += missed * period_ns_;
        }
        next_tick_ns_ = grid_ns_ + jitter();
        return {Kind::tick, 0};
    }

    std::int64_t period_ns() const { return period_ns_; }
    std::int64_t next_tick_ns() const { return next_tick_ns_; }
    std::int64_t late_ticks() const { return late_ticks_; }  // ticks skipped because a snapshot overran

  private:
    // Uniform in [-period/5, period/5] (xorshift64: the same sequence for the same start).
    std::int64_t jitter() {
        random_ ^= random_ << 13;
        random_ ^= random_ >> 7;
        random_ ^= random_ << 17;
        const std::int64_t span = period_ns_ / 5;
        return span > 0 ? static_cast<std::int64_t>(random_ % static_cast<std::uint64_t>(2 * span + 1)) - span : 0;
    }

    std::int64_t period_ns_;
    std::int64_t deadline_ns_;
    std::int64_t grid_ns_;
    std::int64_t next_tick_ns_;
    std::int64_t late_ticks_ = 0;
    std::uint64_t random_;
};

}  // namespace ember::collector::python
