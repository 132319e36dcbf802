// schedules.cpp: the closed forms of torch.optim.lr_scheduler, one small class each.
#include "engine/optim/schedules.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <stdexcept>

namespace ember::optim {

namespace {

[[noreturn]] void fail(const std::string& schedule, const std::string& field, const std::string& why) {
    throw std::invalid_argument("schedule " + schedule + ": '" + field + "' " + why);
}

class ConstantSchedule : public LrSchedule {
public:
    explicit ConstantSchedule(double base) : base_(base) {}
    double lr(int64_t) const override { return base_; }

private:
    double base_;
};

// StepLR: base * gamma^floor(step / step_size)
class StepSchedule : public LrSchedule {
public:
    StepSchedule(double base, int64_t step_size, double gamma) : base_(base), step_size_(step_size), gamma_(gamma) {}
    double lr(int64_t step) const override { return base_ * std::pow(gamma_, (double)(step / step_size_)); }

private:
    double base_;
    int64_t step_size_;
    double gamma_;
};

// MultiStepLR: base * gamma^(number of milestones <= step)
class MultiStepSchedule : public LrSchedule {
public:
    MultiStepSchedule(double base, std::vector<int64_t> milestones, double gamma)
        : base_(base), milestones_(std::move(milestones)), gamma_(gamma) {}
    double lr(int64_t step) const override {
        auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), step) - milestones_.begin();
        return base_ * std::pow(gamma_, (double)passed);
    }

private:
    double base_;
    std::vector<int64_t> milestones_;
    double gamma_;
};

// ExponentialLR: base * gamma^step
class ExponentialSchedule : public LrSchedule {
public:
    ExponentialSchedule(double base, double gamma) : base_(base), gamma_(gamma) {}
    double lr(int64_t step) const override { return base_ * std::pow(gamma_, (double)step); }

private:
    double base_;
    double gamma_;
};

// PolynomialLR: base * (1 - min(step, total) / total)^power
class PolynomialSchedule : public LrSchedule {
public:
    PolynomialSchedule(double base, int64_t total, double power) : base_(base), total_(total), power_(power) {}
    double lr(int64_t step) const override {
        double progress = (double)std::min(step, total_) / (double)total_;
        return base_ * std::pow(1.0 - progress, power_);
    }

private:
    double base_;
    int64_t total_;
    double power_;
};

// CosineAnnealingLR: eta_min + (base - eta_min) (1 + cos(pi step / t_max)) / 2
class CosineSchedule : public LrSchedule {
public:
    CosineSchedule(double base, int64_t t_max, double eta_min) : base_(base), t_max_(t_max), eta_min_(eta_min) {}
    double lr(int64_t step) const override {
        return eta_min_ + (base_ - eta_min_) * (1.0 + std::cos(std::numbers::pi * (double)step / (double)t_max_)) / 2.0;
    }

private:
    double base_;
    int64_t t_max_;
    double eta_min_;
};

// CosineAnnealingWarmRestarts: cosine over periods t_0, t_0 t_mult, t_0 t_mult^2, ...
class CosineRestartsSchedule : public LrSchedule {
public:
    CosineRestartsSchedule(double base, int64_t t_0, int64_t t_mult, double eta_min)
        : base_(base), t_0_(t_0), t_mult_(t_mult), eta_min_(eta_min) {}
    double lr(int64_t step) const override {
        // Walk the periods with integers (torch uses a logarithm; same answer, no rounding).
        int64_t period = t_0_;
        int64_t into = step;
        while (into >= period) {
            into -= period;
            period *= t_mult_;
        }
        return eta_min_ + (base_ - eta_min_) * (1.0 + std::cos(std::numbers::pi * (double)into / (double)period)) / 2.0;
    }

private:
    double base_;
    int64_t t_0_, t_mult_;
    double eta_min_;
};

// LinearLR: base * (start + (end - start) min(step, total) / total)
class LinearSchedule : public LrSchedule {
public:
    LinearSchedule(double base, double start, double end, int64_t total)
        : base_(base), start_(start), end_(end), total_(total) {}
    double lr(int64_t step) const override {
        return base_ * (start_ + (end_ - start_) * (double)std::min(step, total_) / (double)total_);
    }

private:
    double base_, start_, end_;
    int64_t total_;
};

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
        if (step > total_) throw std::out_of_range("schedule onecycle: step " + std::to_string(step) +
                                                   " is past total_steps " + std::to_string(total_));
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
    if (n == "constant") {
        schedule = std::make_unique<ConstantSchedule>(c.base_lr);
    } else if (n == "step") {
        if (c.step_size <= 0) fail(n, "step_size", "must be > 0");
        schedule = std::make_unique<StepSchedule>(c.base_lr, c.step_size, c.gamma);
    } else if (n == "multistep") {
        if (!std::is_sorted(c.milestones.begin(), c.milestones.end()))
            fail(n, "milestones", "must be increasing");
        schedule = std::make_unique<MultiStepSchedule>(c.base_lr, c.milestones, c.gamma);
    } else if (n == "exponential") {
        schedule = std::make_unique<ExponentialSchedule>(c.base_lr, c.gamma);
    } else if (n == "polynomial") {
        if (c.total_iters <= 0) fail(n, "total_iters", "must be > 0");
        schedule = std::make_unique<PolynomialSchedule>(c.base_lr, c.total_iters, c.power);
    } else if (n == "cosine") {
        if (c.t_max <= 0) fail(n, "t_max", "must be > 0");
        schedule = std::make_unique<CosineSchedule>(c.base_lr, c.t_max, c.eta_min);
    } else if (n == "cosine_restarts") {
        if (c.t_0 <= 0) fail(n, "t_0", "must be > 0");
        if (c.t_mult < 1) fail(n, "t_mult", "must be >= 1");
        schedule = std::make_unique<CosineRestartsSchedule>(c.base_lr, c.t_0, c.t_mult, c.eta_min);
    } else if (n == "linear") {
        if (!(c.start_factor > 0.0 && c.start_factor <= 1.0)) fail(n, "start_factor", "must be in (0, 1]");
        if (!(c.end_factor >= 0.0 && c.end_factor <= 1.0)) fail(n, "end_factor", "must be in [0, 1]");
        if (c.total_iters <= 0) fail(n, "total_iters", "must be > 0");
        schedule = std::make_unique<LinearSchedule>(c.base_lr, c.start_factor, c.end_factor, c.total_iters);
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
    auto warmup = std::make_unique<LinearSchedule>(c.base_lr, c.warmup_start_factor, 1.0, c.warmup_steps);
    return make_sequential_schedule(std::move(warmup), std::move(schedule), c.warmup_steps);
}

ReduceOnPlateau::ReduceOnPlateau(double initial_lr, PlateauConfig config) : config_(std::move(config)), lr_(initial_lr) {
    if (config_.mode != "min" && config_.mode != "max") fail("plateau", "mode", "must be min or max");
    if (config_.threshold_mode != "rel" && config_.threshold_mode != "abs")
        fail("plateau", "threshold_mode", "must be rel or abs");
    if (!(config_.factor < 1.0 && config_.factor >= 0.0)) fail("plateau", "factor", "must be in [0, 1)");
    if (config_.patience < 0) fail("plateau", "patience", "must be >= 0");
    if (config_.cooldown < 0) fail("plateau", "cooldown", "must be >= 0");
    best_ = config_.mode == "min" ? std::numeric_limits<double>::infinity()
                                  : -std::numeric_limits<double>::infinity();
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
