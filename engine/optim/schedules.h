// schedules.h: learning-rate schedules as pure functions of the step, with the closed
// forms of torch.optim.lr_scheduler (StepLR, MultiStepLR, ExponentialLR, PolynomialLR,
// CosineAnnealingLR, CosineAnnealingWarmRestarts, LinearLR, OneCycleLR), a "warm-up
// then X" composition (SequentialLR with one milestone) and the stateful
// ReduceLROnPlateau. `step` counts scheduler steps from 0 (torch's last_epoch): the lr
// used for the first optimizer step is lr(0).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ember::optim {

class LrSchedule {
  public:
    virtual ~LrSchedule() = default;
    virtual double lr(int64_t step) const = 0;
};

// Everything make_schedule reads; fields not used by a schedule are ignored.
// Defaults are torch's.
struct ScheduleConfig {
    std::string name = "constant";  // constant, step, multistep, exponential, polynomial,
                                    // cosine, cosine_restarts, linear, onecycle
    double base_lr = 1e-3;
    double gamma = 0.1;                   // step, multistep, exponential
    int64_t step_size = 1;                // step
    std::vector<int64_t> milestones;      // multistep (increasing)
    int64_t total_iters = 5;              // polynomial, linear
    double power = 1.0;                   // polynomial
    int64_t t_max = 1;                    // cosine
    double eta_min = 0.0;                 // cosine, cosine_restarts
    int64_t t_0 = 1;                      // cosine_restarts
    int64_t t_mult = 1;                   // cosine_restarts
    double start_factor = 1.0 / 3.0;      // linear
    double end_factor = 1.0;              // linear
    double max_lr = 0.0;                  // onecycle (0: base_lr)
    int64_t total_steps = 0;              // onecycle
    double pct_start = 0.3;               // onecycle
    std::string anneal_strategy = "cos";  // onecycle: cos or linear
    double div_factor = 25.0;             // onecycle
    double final_div_factor = 1e4;        // onecycle
    bool three_phase = false;             // onecycle
    // Warm-up before the schedule: LinearLR(warmup_start_factor -> 1) for warmup_steps,
    // then the schedule restarted at its step 0. 0 = none.
    int64_t warmup_steps = 0;
    double warmup_start_factor = 0.0;
};

// Throws std::invalid_argument naming the field for an unknown name or a bad value.
std::unique_ptr<LrSchedule> make_schedule(const ScheduleConfig& config);

// SequentialLR with one milestone: first(step) before it, second(step - milestone) after.
std::unique_ptr<LrSchedule> make_sequential_schedule(std::unique_ptr<LrSchedule> first,
                                                     std::unique_ptr<LrSchedule> second, int64_t milestone);

// torch.optim.lr_scheduler.ReduceLROnPlateau: feed it the metric once per epoch.
struct PlateauConfig {
    std::string mode = "min";  // min or max
    double factor = 0.1;       // must be < 1
    int64_t patience = 10;
    double threshold = 1e-4;
    std::string threshold_mode = "rel";  // rel or abs
    int64_t cooldown = 0;
    double min_lr = 0.0;
    double eps = 1e-8;
};

class ReduceOnPlateau {
  public:
    ReduceOnPlateau(double initial_lr, PlateauConfig config);  // throws naming the field
    // Records one metric; returns the lr to use from now on.
    double step(double metric);
    double lr() const { return lr_; }
    int64_t bad_epochs() const { return bad_epochs_; }

  private:
    bool is_better(double value) const;

    PlateauConfig config_;
    double lr_;
    double best_;
    int64_t bad_epochs_ = 0;
    int64_t cooldown_counter_ = 0;
};

}  // namespace ember::optim
