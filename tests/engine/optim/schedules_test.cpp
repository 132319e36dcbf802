// LR schedules against torch.optim.lr_scheduler's closed forms, computed here, and a
// few values worked out by hand.
#include "engine/optim/schedules.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <stdexcept>
#include <vector>

namespace ember::optim {
namespace {

constexpr double kPi = std::numbers::pi;

ScheduleConfig config(const char* name, double base_lr = 0.1) {
    ScheduleConfig c;
    c.name = name;
    c.base_lr = base_lr;
    return c;
}

// The schedule `c` describes gives expected[t] at step t, t = 0, 1, ...
void expect_lrs(const ScheduleConfig& c, const std::vector<double>& expected) {
    auto s = make_schedule(c);
    for (int t = 0; t < int(expected.size()); ++t) EXPECT_NEAR(s->lr(t), expected[t], 1e-15) << "step " << t;
}

TEST(Schedules, StepLr) {
    ScheduleConfig c = config("step");
    c.step_size = 3;
    c.gamma = 0.5;
    expect_lrs(c, {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025});
}

TEST(Schedules, MultiStepLr) {
    ScheduleConfig c = config("multistep");
    c.milestones = {2, 5};
    c.gamma = 0.1;
    expect_lrs(c, {0.1, 0.1, 0.01, 0.01, 0.01, 0.001, 0.001});
}

TEST(Schedules, ExponentialLr) {
    ScheduleConfig c = config("exponential");
    c.gamma = 0.9;
    auto s = make_schedule(c);
    for (int t = 0; t < 5; ++t) EXPECT_NEAR(s->lr(t), 0.1 * std::pow(0.9, t), 1e-15);
}

TEST(Schedules, PolynomialLr) {
    ScheduleConfig c = config("polynomial");
    c.total_iters = 4;
    c.power = 2.0;
    // 0.1 (1 - t/4)^2, then 0 after total_iters
    expect_lrs(c, {0.1, 0.05625, 0.025, 0.00625, 0.0, 0.0});
}

TEST(Schedules, CosineAnnealing) {
    ScheduleConfig c = config("cosine");
    c.t_max = 10;
    c.eta_min = 0.001;
    auto s = make_schedule(c);
    for (int t = 0; t <= 10; ++t)
        EXPECT_NEAR(s->lr(t), 0.001 + (0.1 - 0.001) * (1 + std::cos(kPi * t / 10)) / 2, 1e-15);
    EXPECT_NEAR(s->lr(5), (0.1 + 0.001) / 2, 1e-15);
    EXPECT_NEAR(s->lr(10), 0.001, 1e-15);
}

TEST(Schedules, CosineWarmRestarts) {
    ScheduleConfig c = config("cosine_restarts");
    c.t_0 = 2;
    c.t_mult = 2;
    c.eta_min = 0.0;
    auto s = make_schedule(c);
    // Periods [0,2) [2,6) [6,14): T_cur restarts at 2 and 6.
    auto cosine = [](double t_cur, double t_i) { return 0.1 * (1 + std::cos(kPi * t_cur / t_i)) / 2; };
    const double expected[] = {cosine(0, 2), cosine(1, 2), cosine(0, 4), cosine(1, 4),
                               cosine(2, 4), cosine(3, 4), cosine(0, 8), cosine(7, 8)};
    const int steps[] = {0, 1, 2, 3, 4, 5, 6, 13};
    for (int k = 0; k < 8; ++k) EXPECT_NEAR(s->lr(steps[k]), expected[k], 1e-15) << "step " << steps[k];

    c.t_mult = 1;
    c.t_0 = 3;
    auto periodic = make_schedule(c);
    EXPECT_NEAR(periodic->lr(4), cosine(1, 3), 1e-15);
}

TEST(Schedules, LinearWarmup) {
    ScheduleConfig c = config("linear");
    auto s = make_schedule(c);  // torch defaults: 1/3 -> 1 over 5 steps
    for (int t = 0; t < 8; ++t) EXPECT_NEAR(s->lr(t), 0.1 * (1.0 / 3 + (1 - 1.0 / 3) * std::min(t, 5) / 5.0), 1e-15);
}

TEST(Schedules, OneCycleTwoPhaseCosine) {
    ScheduleConfig c = config("onecycle");
    c.max_lr = 1.0;
    c.total_steps = 100;
    auto s = make_schedule(c);
    const double initial = 1.0 / 25, minimum = initial / 1e4;
    auto cos_anneal = [](double start, double end, double pct) {
        return end + (start - end) / 2 * (std::cos(kPi * pct) + 1);
    };
    // Phase ends at pct_start * total - 1 = 29 and total - 1 = 99.
    EXPECT_NEAR(s->lr(0), initial, 1e-15);
    EXPECT_NEAR(s->lr(10), cos_anneal(initial, 1.0, 10.0 / 29), 1e-12);
    EXPECT_NEAR(s->lr(29), 1.0, 1e-15);
    EXPECT_NEAR(s->lr(60), cos_anneal(1.0, minimum, (60.0 - 29) / 70), 1e-12);
    EXPECT_NEAR(s->lr(99), minimum, 1e-15);
    EXPECT_THROW(s->lr(101), std::out_of_range);
}

TEST(Schedules, OneCycleThreePhaseLinear) {
    ScheduleConfig c = config("onecycle");
    c.max_lr = 0.5;
    c.total_steps = 20;
    c.pct_start = 0.25;
    c.three_phase = true;
    c.anneal_strategy = "linear";
    auto s = make_schedule(c);
    const double initial = 0.5 / 25, minimum = initial / 1e4;
    // Phase ends: 0.25*20-1 = 4, 2*0.25*20-2 = 8, 19.
    EXPECT_NEAR(s->lr(2), initial + (0.5 - initial) * 0.5, 1e-15);
    EXPECT_NEAR(s->lr(4), 0.5, 1e-15);
    EXPECT_NEAR(s->lr(6), 0.5 + (initial - 0.5) * 0.5, 1e-15);
    EXPECT_NEAR(s->lr(8), initial, 1e-15);
    EXPECT_NEAR(s->lr(19), minimum, 1e-15);
}

TEST(Schedules, WarmupThenCosine) {
    ScheduleConfig c = config("cosine");
    c.t_max = 10;
    c.warmup_steps = 4;
    c.warmup_start_factor = 0.0;
    auto s = make_schedule(c);
    EXPECT_NEAR(s->lr(0), 0.0, 1e-15);
    EXPECT_NEAR(s->lr(2), 0.05, 1e-15);
    EXPECT_NEAR(s->lr(4), 0.1, 1e-15);  // cosine restarted at its step 0
    EXPECT_NEAR(s->lr(9), 0.1 * (1 + std::cos(kPi * 5 / 10)) / 2, 1e-15);
}

TEST(Schedules, ErrorsNameTheField) {
    ScheduleConfig c = config("cosine");
    c.t_max = 0;
    try {
        make_schedule(c);
        FAIL() << "t_max = 0 accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("t_max"), std::string::npos);
    }
    EXPECT_THROW(make_schedule(config("triangle")), std::invalid_argument);
    PlateauConfig p;
    p.factor = 1.5;
    EXPECT_THROW(ReduceOnPlateau(0.1, p), std::invalid_argument);
}

TEST(Schedules, ReduceOnPlateauPatienceCooldownMinLr) {
    PlateauConfig p;
    p.patience = 1;
    p.factor = 0.5;
    p.cooldown = 1;
    p.min_lr = 0.03;
    ReduceOnPlateau plateau(0.1, p);
    EXPECT_DOUBLE_EQ(plateau.step(1.0), 0.1);            // best = 1
    EXPECT_DOUBLE_EQ(plateau.step(1.0), 0.1);            // 1 bad epoch (not > patience)
    EXPECT_DOUBLE_EQ(plateau.step(0.99995), 0.1 * 0.5);  // within rel threshold 1e-4: bad #2 -> reduce
    EXPECT_DOUBLE_EQ(plateau.step(1.0), 0.05);           // cooldown swallows this bad epoch
    EXPECT_DOUBLE_EQ(plateau.step(1.0), 0.05);           // bad #1
    EXPECT_DOUBLE_EQ(plateau.step(1.0), 0.03);           // bad #2 -> 0.025 clamped to min_lr
    EXPECT_DOUBLE_EQ(plateau.step(0.5), 0.03);           // improvement
}

TEST(Schedules, ReduceOnPlateauMaxModeAbsoluteThreshold) {
    PlateauConfig p;
    p.mode = "max";
    p.threshold_mode = "abs";
    p.threshold = 0.1;
    p.patience = 0;
    ReduceOnPlateau plateau(1.0, p);
    EXPECT_DOUBLE_EQ(plateau.step(0.5), 1.0);   // better than -inf
    EXPECT_DOUBLE_EQ(plateau.step(0.55), 0.1);  // not better by 0.1: reduce at once
    EXPECT_DOUBLE_EQ(plateau.step(0.7), 0.1);   // better
}

}  // namespace
}  // namespace ember::optim
