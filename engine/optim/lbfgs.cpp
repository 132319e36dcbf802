// lbfgs.cpp: the L-BFGS iteration and strong-Wolfe line search (torch.optim.LBFGS's
// algorithm, rewritten over flat double vectors).
#include "engine/optim/lbfgs.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ember::optim {

namespace {

double dot(const std::vector<double>& a, const std::vector<double>& b) {
    double sum = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
    return sum;
}

double max_abs(const std::vector<double>& a) {
    double m = 0.0;
    for (double v : a) m = std::max(m, std::fabs(v));
    return m;
}

// Minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2), clamped to the bounds
// (default: the interval between the points); the midpoint when the cubic has none.
double cubic_interpolate(double x1, double f1, double g1, double x2, double f2, double g2, bool has_bounds = false,
                         double lower = 0.0, double upper = 0.0) {
    double xmin_bound = has_bounds ? lower : std::min(x1, x2);
    double xmax_bound = has_bounds ? upper : std::max(x1, x2);
    double d1 = g1 + g2 - 3.0 * (f1 - f2) / (x1 - x2);
    double d2_square = d1 * d1 - g1 * g2;
    if (d2_square >= 0.0) {
        double d2 = std::sqrt(d2_square);
        double min_pos = x1 <= x2 ? x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2.0 * d2))
                                  : x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2.0 * d2));
        return std::min(std::max(min_pos, xmin_bound), xmax_bound);
    }
    return (xmin_bound + xmax_bound) / 2.0;
}

}  // namespace

Lbfgs::Lbfgs(double lr, std::vector<ParameterSegment> segments, LbfgsSettings settings)
    : Optimizer("lbfgs", OptimizerKind::lbfgs, OptimizerBackend::cpu, lr, std::move(segments)), settings_(settings) {}

void Lbfgs::step(float*, const float*, const StepOptions&) {
    throw std::logic_error("lbfgs: step needs a closure that recomputes loss and gradients");
}

OptimizerState Lbfgs::export_state() const {
    throw std::logic_error("lbfgs: export_state is not supported (the curvature history is not exported)");
}

void Lbfgs::import_state(const OptimizerState&) {
    throw std::logic_error("lbfgs: import_state is not supported (the curvature history is not exported)");
}

double Lbfgs::evaluate_along(float* params, float* grads, const Closure& closure, const std::vector<double>& x,
                             double t, const std::vector<double>& d, std::vector<double>& gradient_out) {
    for (std::size_t i = 0; i < x.size(); ++i) params[i] = (float)(x[i] + t * d[i]);
    double loss = closure();
    ++function_evaluations_;
    gradient_out.assign(grads, grads + x.size());
    for (std::size_t i = 0; i < x.size(); ++i) params[i] = (float)x[i];
    return loss;
}

double Lbfgs::strong_wolfe(float* params, float* grads, const Closure& closure, const std::vector<double>& x, double& t,
                           const std::vector<double>& d, double loss, std::vector<double>& gradient, double gtd,
                           int& evaluations) {
    const double c1 = 1e-4, c2 = 0.9;
    const int max_line_search = 25;
    const double d_norm = max_abs(d);

    std::vector<double> g_new;
    double f_new = evaluate_along(params, grads, closure, x, t, d, g_new);
    evaluations = 1;
    double gtd_new = dot(g_new, d);

    double t_prev = 0.0, f_prev = loss, gtd_prev = gtd;
    std::vector<double> g_prev = gradient;
    bool done = false;
    int iteration = 0;
    // Bracket: positions, losses, gradients, directional derivatives (1 or 2 entries).
    std::vector<double> bracket, bracket_f, bracket_gtd;
    std::vector<std::vector<double>> bracket_g;

    while (iteration < max_line_search) {
        if (f_new > loss + c1 * t * gtd || (iteration > 1 && f_new >= f_prev)) {
            bracket = {t_prev, t};
            bracket_f = {f_prev, f_new};
            bracket_g = {g_prev, g_new};
            bracket_gtd = {gtd_prev, gtd_new};
            break;
        }
        if (std::fabs(gtd_new) <= -c2 * gtd) {
            bracket = {t};
            bracket_f = {f_new};
            bracket_g = {g_new};
            bracket_gtd = {gtd_new};
            done = true;
            break;
        }
        if (gtd_new >= 0.0) {
            bracket = {t_prev, t};
            bracket_f = {f_prev, f_new};
            bracket_g = {g_prev, g_new};
            bracket_gtd = {gtd_prev, gtd_new};
            break;
        }
        // Extrapolate between 1.01 t and 10 t.
        double min_step = t + 0.01 * (t - t_prev);
        double max_step = t * 10.0;
        double previous_t = t;
        t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, true, min_step, max_step);
        t_prev = previous_t;
        f_prev = f_new;
        g_prev = g_new;
        gtd_prev = gtd_new;
        f_new = evaluate_along(params, grads, closure, x, t, d, g_new);
        ++evaluations;
        gtd_new = dot(g_new, d);
        ++iteration;
    }
    if (iteration == max_line_search) {
        bracket = {0.0, t};
        bracket_f = {loss, f_new};
        bracket_g = {gradient, g_new};
        bracket_gtd = {gtd, gtd_new};
    }

    // Zoom: shrink the bracket until the strong Wolfe conditions hold.
    bool insufficient_progress = false;
    int low = bracket_f.front() <= bracket_f.back() ? 0 : 1;
    int high = bracket.size() > 1 ? 1 - low : 0;
    while (!done && iteration < max_line_search) {
        if (std::fabs(bracket[1] - bracket[0]) * d_norm < settings_.tolerance_change) break;
        t = cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1]);
        const double upper = std::max(bracket[0], bracket[1]);
        const double lower = std::min(bracket[0], bracket[1]);
        const double eps = 0.1 * (upper - lower);
        if (std::min(upper - t, t - lower) < eps) {
            if (insufficient_progress || t >= upper || t <= lower) {
                t = std::fabs(t - upper) < std::fabs(t - lower) ? upper - eps : lower + eps;
                insufficient_progress = false;
            } else {
                insufficient_progress = true;
            }
        } else {
            insufficient_progress = false;
        }
        f_new = evaluate_along(params, grads, closure, x, t, d, g_new);
        ++evaluations;
        gtd_new = dot(g_new, d);
        ++iteration;

        if (f_new > loss + c1 * t * gtd || f_new >= bracket_f[low]) {
            bracket[high] = t;
            bracket_f[high] = f_new;
            bracket_g[high] = g_new;
            bracket_gtd[high] = gtd_new;
            low = bracket_f[0] <= bracket_f[1] ? 0 : 1;
            high = 1 - low;
        } else {
            if (std::fabs(gtd_new) <= -c2 * gtd) {
                done = true;
            } else if (gtd_new * (bracket[high] - bracket[low]) >= 0.0) {
                bracket[high] = bracket[low];
                bracket_f[high] = bracket_f[low];
                bracket_g[high] = bracket_g[low];
                bracket_gtd[high] = bracket_gtd[low];
            }
            bracket[low] = t;
            bracket_f[low] = f_new;
            bracket_g[low] = g_new;
            bracket_gtd[low] = gtd_new;
        }
    }
    t = bracket[low];
    gradient = bracket_g[low];
    return bracket_f[low];
}

double Lbfgs::step(float* params, float* grads, const Closure& closure, const StepOptions&) {
    const std::size_t n = parameter_count_;
    const double lr = lr_;
    ++step_count_;
    last_step_launches_ = 0;

    double original_loss = closure();
    double loss = original_loss;
    int current_evaluations = 1;
    ++function_evaluations_;
    std::vector<double> gradient(grads, grads + n);
    if (max_abs(gradient) <= settings_.tolerance_grad) return original_loss;

    int iteration = 0;
    while (iteration < settings_.max_iter) {
        ++iteration;
        ++iterations_;
        if (iterations_ == 1) {
            direction_.assign(n, 0.0);
            for (std::size_t i = 0; i < n; ++i) direction_[i] = -gradient[i];
            old_directions_.clear();
            old_steps_.clear();
            rho_.clear();
            hessian_diagonal_ = 1.0;
        } else {
            // New curvature pair, kept only when y.s is clearly positive.
            std::vector<double> y(n), s(n);
            for (std::size_t i = 0; i < n; ++i) {
                y[i] = gradient[i] - previous_gradient_[i];
                s[i] = direction_[i] * step_length_;
            }
            const double ys = dot(y, s);
            if (ys > 1e-10) {
                if ((int)old_directions_.size() == settings_.history_size) {
                    old_directions_.pop_front();
                    old_steps_.pop_front();
                    rho_.pop_front();
                }
                hessian_diagonal_ = ys / dot(y, y);
                old_directions_.push_back(std::move(y));
                old_steps_.push_back(std::move(s));
                rho_.push_back(1.0 / ys);
            }
            // Two-loop recursion: direction = -H g.
            const std::size_t history = old_directions_.size();
            std::vector<double> alpha(history);
            std::vector<double> q(n);
            for (std::size_t i = 0; i < n; ++i) q[i] = -gradient[i];
            for (std::size_t k = history; k-- > 0;) {
                alpha[k] = dot(old_steps_[k], q) * rho_[k];
                for (std::size_t i = 0; i < n; ++i) q[i] -= alpha[k] * old_directions_[k][i];
            }
            for (std::size_t i = 0; i < n; ++i) direction_[i] = q[i] * hessian_diagonal_;
            for (std::size_t k = 0; k < history; ++k) {
                const double beta = dot(old_directions_[k], direction_) * rho_[k];
                for (std::size_t i = 0; i < n; ++i) direction_[i] += old_steps_[k][i] * (alpha[k] - beta);
            }
        }
        previous_gradient_ = gradient;
        previous_loss_ = loss;

        // First iteration ever: a step no longer than lr / |g|_1.
        if (iterations_ == 1) {
            double l1 = 0.0;
            for (double g : gradient) l1 += std::fabs(g);
            step_length_ = std::min(1.0, 1.0 / l1) * lr;
        } else {
            step_length_ = lr;
        }
        const double gtd = dot(gradient, direction_);
        if (gtd > -settings_.tolerance_change) break;  // not a descent direction

        int line_search_evaluations = 0;
        bool optimal = false;
        if (settings_.strong_wolfe) {
            std::vector<double> x(params, params + n);
            loss = strong_wolfe(params, grads, closure, x, step_length_, direction_, loss, gradient, gtd,
                                line_search_evaluations);
            for (std::size_t i = 0; i < n; ++i) params[i] = (float)(x[i] + step_length_ * direction_[i]);
            optimal = max_abs(gradient) <= settings_.tolerance_grad;
        } else {
            for (std::size_t i = 0; i < n; ++i) params[i] = (float)(params[i] + step_length_ * direction_[i]);
            if (iteration != settings_.max_iter) {
                loss = closure();
                ++function_evaluations_;
                gradient.assign(grads, grads + n);
                optimal = max_abs(gradient) <= settings_.tolerance_grad;
                line_search_evaluations = 1;
            }
        }
        current_evaluations += line_search_evaluations;

        if (iteration == settings_.max_iter) break;
        if (current_evaluations >= settings_.max_eval) break;
        if (optimal) break;
        if (max_abs(direction_) * std::fabs(step_length_) <= settings_.tolerance_change) break;
        if (std::fabs(loss - previous_loss_) < settings_.tolerance_change) break;
    }
    return original_loss;
}

}  // namespace ember::optim
