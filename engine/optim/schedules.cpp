// schedules.cpp: torch.optim.lr_scheduler's schedules: the closed forms as formulas in
// make_schedule, OneCycleLR and the sequence (warm-up, then a schedule) as classes.
#include "engine/optim/schedules.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <stdexcept>

namespace ember::optim {

namespace {

[[noreturn]] void fail(const std::string& schedule, const std::string& field, const std::string& why) {
    throw std::invalid_argument("schedule " + schedule + ": '" + field + "' " + why);
}

// A schedule with a closed form in the step: the formula, its parameters captured.
class ClosedFormSchedule : public LrSchedule {
  public:
    explicit ClosedFormSchedule(std::function<double(int64_t)> formula) : formula_(std::move(formula)) {}
    double lr(int64_t step) const override { return formula_(step); }

  private:
    std::function<double(int64_t)> formula_;
};

template <class Formula>
std::unique_ptr<LrSchedule> closed_form(Formula formula) {
    return std::make_unique<ClosedFormSchedule>(std::move(formula));
}

// Cosine annealing from base to eta_min over `period` steps, `into` steps in.
double cosine_annealed(double base, double eta_min, int64_t into, int64_t period) {
    return eta_min + (base - eta_min) * (1.0 + std::cos(std::numbers::pi * (double)into / (double)period)) / 2.0;
}

// LinearLR: base * (start + (end - start) min(step, total) / total)
std::unique_ptr<LrSchedule> linear_schedule(double base, double start, double end, int64_t total) {
    return closed_form(
        [=](int64_t step) { return base * (start + (end - start) * (double)std::min(step, total) / (double)total); });
}

// OneCycleLR: warm from max_lr/div_factor to max_lr over pct_start of the steps, then
// anneal to initial/final_div_factor (three_phase: back to initial first).
class OneCycleSchedule : public LrSchedule {
  public:
    OneCycleSchedule(const ScheduleConfig& c) : total_(c.total_steps), cosine_(c.anneal_strategy == "cos") {
        const double max_lr = c.max_lr > 0.0 ? c.max_lr : c.base_lr;
        const double initial = max_lr / c.div_factor;
        const double minimum = initial / c.final_div_factor;
        const double total = (double)c.total_steps;
        if (c.three_phase) {
            phases_ = {{c.pct_start * total - 1.0, initial, max_lr},
                       {2.0 * c.pct_start * total - 2.0, max_lr, initial},
                       {total - 1.0, initial, minimum}};
        } else {
            phases_ = {{c.pct_start * total - 1.0, initial, max_lr}, {total - 1.0, max_lr, minimum}};
        }
    }
    double lr(int64_t step) const override {
        if (step > total_)
            throw std::out_of_range("schedule onecycle: step " + std::to_string(step) + " is past total_steps " +
                                    std::to_string(total_));
        double start_step = 0.0;
        for (std::size_t i = 0; i < phases_.size(); ++i) {
            const Phase& phase = phases_[i];
            if ((double)step <= phase.end_step || i + 1 == phases_.size()) {
                double pct = ((double)step - start_step) / (phase.end_step - start_step);
                return anneal(phase.start_lr, phase.end_lr, pct);
            }
            start_step = phase.end_step;
        }
        return phases_.back().end_lr;
    }

  private:
    struct Phase {
        double end_step, start_lr, end_lr;
    };
    double anneal(double start, double end, double pct) const {
        if (cosine_) return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1.0);
        return (end - start) * pct + start;
    }
    int64_t total_;
    bool cosine_;
    std::vector<Phase> phases_;
};

class SequentialSchedule : public LrSchedule {
  public:
    SequentialSchedule(std::unique_ptr<LrSchedule> first, std::unique_ptr<LrSchedule> second, int64_t milestone)
        : first_(std::move(first)), second_(std::move(second)), milestone_(milestone) {}
    double lr(int64_t step) const override {
        return step < milestone_ ? first_->lr(step) : second_->lr(step - milestone_);
    }

  private:
    std::unique_ptr<LrSchedule> first_, second_;
    int64_t milestone_;
};

}  // namespace

std::unique_ptr<LrSchedule> make_sequential_schedule(std::unique_ptr<LrSchedule> first,
                                                     std::unique_ptr<LrSchedule> second, int64_t milestone) {
    if (milestone < 0) fail("sequential", "milestone", "must be >= 0");
    return std::make_unique<SequentialSchedule>(std::move(first), std::move(second), milestone);
}

std::unique_ptr<LrSchedule> make_schedule(const ScheduleConfig& c) {
    const std::string& n = c.name;
    if (!(c.base_lr >= 0.0)) fail(n, "base_lr", "must be >= 0");
    std::unique_ptr<LrSchedule> schedule;
    const double base = c.base_lr;
    if (n == "constant") {
        schedule = closed_form([=](int64_t) { return base; });
    } else if (n == "step") {  // StepLR: base * gamma^floor(step / step_size)
        if (c.step_size <= 0) fail(n, "step_size", "must be > 0");
        schedule = closed_form([base, step_size = c.step_size, gamma = c.gamma](int64_t step) {
            return base * std::pow(gamma, (double)(step / step_size));
        });
    } else if (n == "multistep") {  // MultiStepLR: base * gamma^(number of milestones <= step)
        if (!std::is_sorted(c.milestones.begin(), c.milestones.end())) fail(n, "milestones", "must be increasing");
        schedule = closed_form([base, milestones = c.milestones, gamma = c.gamma](int64_t step) {
            auto passed = std::upper_bound(milestones.begin(), milestones.end(), step) - milestones.begin();
            return base * std::pow(gamma, (double)passed);
        });
    } else if (n == "exponential") {  // ExponentialLR: base * gamma^step
        schedule = closed_form([base, gamma = c.gamma](int64_t step) { return base * std::pow(gamma, (double)step); });
    } else if (n == "polynomial") {  // PolynomialLR: base * (1 - min(step, total) / total)^power
        if (c.total_iters <= 0) fail(n, "total_iters", "must be > 0");
        schedule = closed_form([base, total = c.total_iters, power = c.power](int64_t step) {
            return base * std::pow(1.0 - (double)std::min(step, total) / (double)total, power);
        });
    } else if (n == "cosine") {  // CosineAnnealingLR
        if (c.t_max <= 0) fail(n, "t_max", "must be > 0");
        schedule = closed_form([base, t_max = c.t_max, eta_min = c.eta_min](int64_t step) {
            return cosine_annealed(base, eta_min, step, t_max);
        });
    } else if (n == "cosine_restarts") {  // CosineAnnealingWarmRestarts: periods t_0, t_0 t_mult, ...
        if (c.t_0 <= 0) fail(n, "t_0", "must be > 0");
        if (c.t_mult < 1) fail(n, "t_mult", "must be >= 1");
        schedule = closed_form([base, t_0 = c.t_0, t_mult = c.t_mult, eta_min = c.eta_min](int64_t step) {
            // Walk the periods with integers (torch uses a logarithm; same answer, no rounding).
            int64_t period = t_0;
            int64_t into = step;
            while (into >= period) {
                into -= period;
                period *= t_mult;
            }
            return cosine_annealed(base, eta_min, into, period);
        });
    } else if (n == "linear") {
        if (!(c.start_factor > 0.0 && c.start_factor <= 1.0)) fail(n, "start_factor", "must be in (0, 1]");
        if (!(c.end_factor >= 0.0 && c.end_factor <= 1.0)) fail(n, "end_factor", "must be in [0, 1]");
        if (c.total_iters <= 0) fail(n, "total_iters", "must be > 0");
        schedule = linear_schedule(base, c.start_factor, c.end_factor, c.total_iters);
    } else if (n == "onecycle") {
        if (c.total_steps <= 0) fail(n, "total_steps", "must be > 0");
        if (!(c.pct_start >= 0.0 && c.pct_start <= 1.0)) fail(n, "pct_start", "must be in [0, 1]");
        if (c.anneal_strategy != "cos" && c.anneal_strategy != "linear")
            fail(n, "anneal_strategy", "is '" + c.anneal_strategy + "', must be cos or linear");
        if (!(c.div_factor > 0.0)) fail(n, "div_factor", "must be > 0");
        if (!(c.final_div_factor > 0.0)) fail(n, "final_div_factor", "must be > 0");
        schedule = std::make_unique<OneCycleSchedule>(c);
    } else {
        throw std::invalid_argument("schedule: unknown name '" + n +
                                    "' (constant, step, multistep, exponential, polynomial, cosine, "
                                    "cosine_restarts, linear, onecycle)");
    }
    if (c.warmup_steps < 0) fail(n, "warmup_steps", "must be >= 0");
    if (c.warmup_steps == 0) return schedule;
    // torch's LinearLR rejects a zero start factor; a warm-up from 0 is common and the
    // formula is well defined, so we allow [0, 1].
    if (!(c.warmup_start_factor >= 0.0 && c.warmup_start_factor <= 1.0))
        fail(n, "warmup_start_factor", "must be in [0, 1]");
    auto warmup = linear_schedule(c.base_lr, c.warmup_start_factor, 1.0, c.warmup_steps);
    return make_sequential_schedule(std::move(warmup), std::move(schedule), c.warmup_steps);
}

ReduceOnPlateau::ReduceOnPlateau(double initial_lr, PlateauConfig config)
    : config_(std::move(config)), lr_(initial_lr) {
    if (config_.mode != "min" && config_.mode != "max") fail("plateau", "mode", "must be min or max");
    if (config_.threshold_mode != "rel" && config_.threshold_mode != "abs")
        fail("plateau", "threshold_mode", "must be rel or abs");
    if (!(config_.factor < 1.0 && config_.factor >= 0.0)) fail("plateau", "factor", "must be in [0, 1)");
    if (config_.patience < 0) fail("plateau", "patience", "must be >= 0");
    if (config_.cooldown < 0) fail("plateau", "cooldown", "must be >= 0");
    best_ = config_.mode == "min" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
}

bool ReduceOnPlateau::is_better(double value) const {
    const bool relative = config_.threshold_mode == "rel";
    if (config_.mode == "min")
        return relative ? value < best_ * (1.0 - config_.threshold) : value < best_ - config_.threshold;
    return relative ? value > best_ * (config_.threshold + 1.0) : value > best_ + config_.threshold;
}

double ReduceOnPlateau::step(double metric) {
    if (is_better(metric)) {
        best_ = metric;
        bad_epochs_ = 0;
    } else {
        ++bad_epochs_;
    }
    if (cooldown_counter_ > 0) {
        --cooldown_counter_;
        bad_epochs_ = 0;
    }
    if (bad_epochs_ > config_.patience) {
        const double reduced = std::max(lr_ * config_.factor, config_.min_lr);
        if (lr_ - reduced > config_.eps) lr_ = reduced;
        cooldown_counter_ = config_.cooldown;
        bad_epochs_ = 0;
    }
    return lr_;
}

}  // namespace ember::optim
