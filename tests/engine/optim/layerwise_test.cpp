// The layer-wise optimizers — LAMB (Apex FusedLAMB), LARS (Apex LARC around torch SGD)
// and NovoGrad (Apex FusedNovoGrad) — on the cpu backend against steps computed here in
// double, per-segment norms included.
#include "tests/engine/optim/optimizer_test_problem.h"

#include <cmath>

namespace ember::optim::test {
namespace {

const std::vector<std::pair<std::size_t, std::size_t>> kSegments = {{0, 3}, {3, 5}};

double segment_norm(const std::vector<double>& x, std::pair<std::size_t, std::size_t> range) {
    double sum = 0.0;
    for (std::size_t i = range.first; i < range.second; ++i) sum += x[i] * x[i];
    return std::sqrt(sum);
}

// Apex FusedLAMB:
//   global clipping: g /= max(1, |g|_all / max_grad_norm)
//   m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2
//   update = (m/bc1) / (sqrt(v/bc2) + eps) + wd p        (adam_w_mode)
//   or with g += wd p before the moments                  (L2 mode)
//   per tensor: ratio = lr |p| / |update| when wd != 0 and both norms are non-zero, else lr
//   p -= ratio update
std::vector<double> lamb_reference(double lr, double weight_decay, double max_grad_norm, bool adam_w_mode, int steps) {
    const double beta1 = 0.9, beta2 = 0.999, eps = 1e-6;
    std::vector<double> p = initial_params();
    std::vector<double> m(p.size(), 0.0), v(p.size(), 0.0), update(p.size(), 0.0);
    for (int s = 0; s < steps; ++s) {
        const int t = s + 1;
        std::vector<double> g = gradient_steps()[s];
        const double global = segment_norm(g, {0, g.size()});
        const double divisor = global > max_grad_norm ? global / max_grad_norm : 1.0;
        for (std::size_t i = 0; i < p.size(); ++i) {
            const double wd = decays(i) ? weight_decay : 0.0;
            double scaled = g[i] / divisor;
            if (!adam_w_mode) scaled += wd * p[i];
            m[i] = beta1 * m[i] + (1 - beta1) * scaled;
            v[i] = beta2 * v[i] + (1 - beta2) * scaled * scaled;
            update[i] = (m[i] / (1 - std::pow(beta1, t))) / (std::sqrt(v[i] / (1 - std::pow(beta2, t))) + eps);
            if (adam_w_mode) update[i] += wd * p[i];
        }
        for (std::size_t k = 0; k < kSegments.size(); ++k) {
            const double wd = decays(kSegments[k].first) ? weight_decay : 0.0;
            const double param_norm = segment_norm(p, kSegments[k]);
            const double update_norm = segment_norm(update, kSegments[k]);
            const double ratio = (wd != 0 && param_norm != 0 && update_norm != 0) ? lr * param_norm / update_norm : lr;
            for (std::size_t i = kSegments[k].first; i < kSegments[k].second; ++i) p[i] -= ratio * update[i];
        }
    }
    return p;
}

TEST(LambRule, DefaultsWithTrustRatio) {
    expect_params_near(run_cpu("lamb", {{"lr", 0.01}}, 3), lamb_reference(0.01, 0.01, 1.0, true, 3), 5e-6);
}

TEST(LambRule, GlobalGradientClippingAndLargeDecay) {
    Hyperparameters h = {{"lr", 0.01}, {"weight_decay", 0.3}, {"max_grad_norm", 0.3}};
    expect_params_near(run_cpu("lamb", h, 3), lamb_reference(0.01, 0.3, 0.3, true, 3), 5e-6);
}

TEST(LambRule, L2Mode) {
    Hyperparameters h = {{"lr", 0.01}, {"weight_decay", 0.1}, {"adam_w_mode", 0}};
    expect_params_near(run_cpu("lamb", h, 3), lamb_reference(0.01, 0.1, 1.0, false, 3), 5e-6);
}

// Apex LARC (scale mode) then torch SGD:
//   per tensor: a = tc |p| / (|g| + wd |p| + eps) when both norms are non-zero
//   (clip mode: a = min(a / lr, 1)); then g = (g + wd p) a
//   buf = g (first step) or momentum buf + (1 - dampening) g; p -= lr buf
std::vector<double> lars_reference(double lr, double momentum, double weight_decay, double trust, bool clip) {
    std::vector<double> p = initial_params();
    std::vector<double> buf(p.size(), 0.0);
    for (int s = 0; s < 3; ++s) {
        std::vector<double> g = gradient_steps()[s];
        for (const auto& range : kSegments) {
            const double wd = decays(range.first) ? weight_decay : 0.0;
            const double param_norm = segment_norm(p, range);
            const double grad_norm = segment_norm(g, range);
            double adaptive = trust * param_norm / (grad_norm + param_norm * wd + 1e-8);
            if (clip) adaptive = std::min(adaptive / lr, 1.0);
            for (std::size_t i = range.first; i < range.second; ++i) {
                double d = (g[i] + wd * p[i]) * adaptive;
                buf[i] = s == 0 ? d : momentum * buf[i] + d;
                p[i] -= lr * buf[i];
            }
        }
    }
    return p;
}

TEST(LarsRule, TrustRatioWithMomentumAndWeightDecay) {
    Hyperparameters h = {{"lr", 0.5}, {"momentum", 0.9}, {"weight_decay", 1e-2}, {"trust_coefficient", 0.02}};
    expect_params_near(run_cpu("lars", h, 3), lars_reference(0.5, 0.9, 1e-2, 0.02, false), 5e-6);
}

TEST(LarsRule, ClipMode) {
    Hyperparameters h = {{"lr", 0.5}, {"momentum", 0.9}, {"weight_decay", 1e-2}, {"clip", 1}};
    expect_params_near(run_cpu("lars", h, 3), lars_reference(0.5, 0.9, 1e-2, 0.02, true), 5e-6);
}

// Apex FusedNovoGrad (norm_type 2):
//   per tensor: n = |g|; v = n on the first step (unless init_zero), then
//   v = sqrt(b2 v^2 + (1-b2) n^2); denom = v / sqrt(1 - b2^t) + eps
//   default:            m = b1 m + (1-b1) g;             p -= lr ((m/bc1)/denom + wd p)
//   reg_inside_moment:  m = b1 m + (1-b1) (g/denom + wd p); p -= lr m/bc1
std::vector<double> novograd_reference(double lr, double weight_decay, bool reg_inside_moment, bool init_zero) {
    const double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
    std::vector<double> p = initial_params();
    std::vector<double> m(p.size(), 0.0);
    std::vector<double> v(kSegments.size(), 0.0);
    for (int s = 0; s < 3; ++s) {
        const int t = s + 1;
        const std::vector<double>& g = gradient_steps()[s];
        for (std::size_t k = 0; k < kSegments.size(); ++k) {
            const double norm = segment_norm(g, kSegments[k]);
            if (s == 0 && !init_zero) v[k] = norm;
            v[k] = std::sqrt(beta2 * v[k] * v[k] + (1 - beta2) * norm * norm);
            const double denom = v[k] / std::sqrt(1 - std::pow(beta2, t)) + eps;
            const double bc1 = 1 - std::pow(beta1, t);
            for (std::size_t i = kSegments[k].first; i < kSegments[k].second; ++i) {
                const double wd = decays(i) ? weight_decay : 0.0;
                if (reg_inside_moment) {
                    m[i] = beta1 * m[i] + (1 - beta1) * (g[i] / denom + wd * p[i]);
                    p[i] -= lr * m[i] / bc1;
                } else {
                    m[i] = beta1 * m[i] + (1 - beta1) * g[i];
                    p[i] -= lr * ((m[i] / bc1) / denom + wd * p[i]);
                }
            }
        }
    }
    return p;
}

TEST(NovogradRule, DefaultMomentMode) {
    Hyperparameters h = {{"lr", 0.01}, {"weight_decay", 0.1}};
    expect_params_near(run_cpu("novograd", h, 3), novograd_reference(0.01, 0.1, false, false), 5e-6);
}

TEST(NovogradRule, RegularisationInsideMomentAndZeroInit) {
    Hyperparameters h = {{"lr", 0.01}, {"weight_decay", 0.1}, {"reg_inside_moment", 1}, {"init_zero", 1}};
    expect_params_near(run_cpu("novograd", h, 3), novograd_reference(0.01, 0.1, true, true), 5e-6);
}

}  // namespace
}  // namespace ember::optim::test
