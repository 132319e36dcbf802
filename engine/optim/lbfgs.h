// lbfgs.h: L-BFGS for small full-batch problems, following torch.optim.LBFGS: a
// closure recomputes loss and gradients; each step() runs up to max_iter iterations
// with the two-loop recursion over the last history_size curvature pairs, with a fixed
// step (lr) or a strong-Wolfe line search (cubic interpolation, as torch does).
// cpu only; all segments form one vector (no per-tensor flags, as in torch).
#pragma once

#include "engine/optim/optimizer.h"

#include <deque>
#include <vector>

namespace ember::optim {

struct LbfgsSettings {
    int max_iter = 20;
    int max_eval = 25;  // torch: max_iter * 5 / 4
    double tolerance_grad = 1e-7;
    double tolerance_change = 1e-9;
    int history_size = 100;
    bool strong_wolfe = false;
};

class Lbfgs : public Optimizer {
  public:
    Lbfgs(double lr, std::vector<ParameterSegment> segments, LbfgsSettings settings);

    // Without a closure there is nothing L-BFGS can do: throws std::logic_error.
    void step(float* params, const float* grads, const StepOptions& options = {}) override;
    // Returns the loss of the first closure evaluation, as torch does.
    double step(float* params, float* grads, const Closure& closure, const StepOptions& options = {}) override;

    OptimizerState export_state() const override;
    void import_state(const OptimizerState& state) override;

    int function_evaluations() const { return function_evaluations_; }

  private:
    // Loss and gradient at x + t d (parameters restored to x afterwards).
    double evaluate_along(float* params, float* grads, const Closure& closure, const std::vector<double>& x, double t,
                          const std::vector<double>& d, std::vector<double>& gradient_out);
    // torch's _strong_wolfe: returns the loss at the accepted step; updates t, gradient.
    double strong_wolfe(float* params, float* grads, const Closure& closure, const std::vector<double>& x, double& t,
                        const std::vector<double>& d, double loss, std::vector<double>& gradient, double gtd,
                        int& evaluations);

    LbfgsSettings settings_;
    // State kept between steps, as in torch: direction, step, history, previous gradient.
    std::vector<double> direction_;
    double step_length_ = 0.0;
    std::deque<std::vector<double>> old_directions_;  // y = g_k - g_{k-1}
    std::deque<std::vector<double>> old_steps_;       // s = t d
    std::deque<double> rho_;                          // 1 / y.s
    double hessian_diagonal_ = 1.0;
    std::vector<double> previous_gradient_;
    double previous_loss_ = 0.0;
    int64_t iterations_ = 0;
    int function_evaluations_ = 0;
};

}  // namespace ember::optim
