// Adam, AdamW (coupled vs decoupled weight decay), AMSGrad, NAdam and AdaMax on the cpu
// backend against steps computed here in double from torch.optim's documented rules.
#include "tests/engine/optim/optimizer_test_problem.h"

#include <algorithm>
#include <cmath>

namespace ember::optim::test {
namespace {

// Step s's gradient of element i with weight decay applied the way torch.optim does:
// decoupled (AdamW) shrinks p first, coupled (Adam) adds wd p to the gradient.
double decayed_gradient(std::vector<double>& p, std::size_t i, int s, double lr, double weight_decay, bool decoupled) {
    double g = gradient_steps()[s][i];
    const double wd = decays(i) ? weight_decay : 0.0;
    if (decoupled)
        p[i] *= 1.0 - lr * wd;
    else
        g += wd * p[i];
    return g;
}

// torch.optim.Adam / AdamW:
//   AdamW: p *= 1 - lr wd;   Adam: g += wd p
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  amsgrad: vmax = max(vmax, v)
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
std::vector<double> adam_reference(double lr, double beta1, double beta2, double eps, double weight_decay,
                                   bool decoupled, bool amsgrad, int steps) {
    std::vector<double> p = initial_params();
    std::vector<double> m(p.size(), 0.0), v(p.size(), 0.0), vmax(p.size(), 0.0);
    for (int s = 0; s < steps; ++s) {
        const int t = s + 1;
        for (std::size_t i = 0; i < p.size(); ++i) {
            const double g = decayed_gradient(p, i, s, lr, weight_decay, decoupled);
            m[i] = beta1 * m[i] + (1 - beta1) * g;
            v[i] = beta2 * v[i] + (1 - beta2) * g * g;
            double second = v[i];
            if (amsgrad) {
                vmax[i] = std::max(vmax[i], v[i]);
                second = vmax[i];
            }
            const double denom = std::sqrt(second) / std::sqrt(1 - std::pow(beta2, t)) + eps;
            p[i] -= lr / (1 - std::pow(beta1, t)) * m[i] / denom;
        }
    }
    return p;
}

TEST(AdamRule, FirstStepMovesEachElementByLr) {
    // Step 1: m/(1-b1) = g and sqrt(v/(1-b2)) = |g|, so p -= lr sign(g) (eps aside).
    auto p = run_cpu("adam", {{"lr", 0.01}}, 1);
    EXPECT_NEAR(p[0], 0.5 - 0.01, 1e-6);
    EXPECT_NEAR(p[1], -1.2 + 0.01, 1e-6);
}

TEST(AdamRule, ThreeSteps) {
    Hyperparameters h = {{"lr", 0.01}, {"beta1", 0.8}, {"beta2", 0.95}};
    expect_params_near(run_cpu("adam", h, 3), adam_reference(0.01, 0.8, 0.95, 1e-8, 0, false, false, 3));
}

TEST(AdamRule, CoupledVersusDecoupledWeightDecay) {
    Hyperparameters h = {{"lr", 0.01}, {"weight_decay", 0.5}};
    auto coupled = run_cpu("adam", h, 3);
    auto decoupled = run_cpu("adamw", h, 3);
    expect_params_near(coupled, adam_reference(0.01, 0.9, 0.999, 1e-8, 0.5, false, false, 3));
    expect_params_near(decoupled, adam_reference(0.01, 0.9, 0.999, 1e-8, 0.5, true, false, 3));
    EXPECT_GT(std::fabs(coupled[2] - decoupled[2]), 1e-4);
    // The bias segment takes no decay: there both agree with plain Adam.
    auto plain = adam_reference(0.01, 0.9, 0.999, 1e-8, 0, false, false, 3);
    EXPECT_NEAR(coupled[3], plain[3], 1e-6);
    EXPECT_NEAR(decoupled[4], plain[4], 1e-6);
}

TEST(AdamRule, AdamwDefaultWeightDecayIsOneHundredth) {
    expect_params_near(run_cpu("adamw", {{"lr", 0.01}}, 3),
                       adam_reference(0.01, 0.9, 0.999, 1e-8, 0.01, true, false, 3));
}

TEST(AdamRule, Amsgrad) {
    Hyperparameters h = {{"lr", 0.01}, {"beta2", 0.5}, {"amsgrad", 1}};
    auto p = run_cpu("adam", h, 3);
    expect_params_near(p, adam_reference(0.01, 0.9, 0.5, 1e-8, 0, false, true, 3));
    auto without = adam_reference(0.01, 0.9, 0.5, 1e-8, 0, false, false, 3);
    EXPECT_GT(std::fabs(p[4] - without[4]), 1e-5);  // element 4's v shrank: the max matters
    Hyperparameters hw = {{"lr", 0.01}, {"beta2", 0.5}, {"amsgrad", 1}, {"weight_decay", 0.1}};
    expect_params_near(run_cpu("adamw", hw, 3), adam_reference(0.01, 0.9, 0.5, 1e-8, 0.1, true, true, 3));
}

// torch.optim.NAdam:
//   mu_t = b1 (1 - 0.5 * 0.96^(t psi));  mu_product *= mu_t
//   m, v as Adam; denom = sqrt(v / (1 - b2^t)) + eps
//   p -= lr (1 - mu_t) / (1 - mu_product) * g / denom
//   p -= lr mu_{t+1} / (1 - mu_product mu_{t+1}) * m / denom
std::vector<double> nadam_reference(double lr, double beta1, double beta2, double eps, double weight_decay, double psi,
                                    bool decoupled) {
    std::vector<double> p = initial_params();
    std::vector<double> m(p.size(), 0.0), v(p.size(), 0.0);
    double mu_product = 1.0;
    for (int s = 0; s < 3; ++s) {
        const int t = s + 1;
        const double mu = beta1 * (1 - 0.5 * std::pow(0.96, t * psi));
        const double mu_next = beta1 * (1 - 0.5 * std::pow(0.96, (t + 1) * psi));
        mu_product *= mu;
        for (std::size_t i = 0; i < p.size(); ++i) {
            const double g = decayed_gradient(p, i, s, lr, weight_decay, decoupled);
            m[i] = beta1 * m[i] + (1 - beta1) * g;
            v[i] = beta2 * v[i] + (1 - beta2) * g * g;
            const double denom = std::sqrt(v[i] / (1 - std::pow(beta2, t))) + eps;
            p[i] -= lr * (1 - mu) / (1 - mu_product) * g / denom;
            p[i] -= lr * mu_next / (1 - mu_product * mu_next) * m[i] / denom;
        }
    }
    return p;
}

TEST(NadamRule, ThreeSteps) {
    expect_params_near(run_cpu("nadam", {{"lr", 0.01}}, 3), nadam_reference(0.01, 0.9, 0.999, 1e-8, 0, 4e-3, false),
                       5e-6);
}

TEST(NadamRule, CoupledAndDecoupledWeightDecay) {
    Hyperparameters h = {{"lr", 0.01}, {"weight_decay", 0.2}, {"momentum_decay", 0.01}};
    expect_params_near(run_cpu("nadam", h, 3), nadam_reference(0.01, 0.9, 0.999, 1e-8, 0.2, 0.01, false), 5e-6);
    h["decoupled_weight_decay"] = 1;
    expect_params_near(run_cpu("nadam", h, 3), nadam_reference(0.01, 0.9, 0.999, 1e-8, 0.2, 0.01, true), 5e-6);
}

// torch.optim.Adamax: m = b1 m + (1-b1) g; u = max(b2 u, |g| + eps);
// p -= lr / (1 - b1^t) * m / u.
TEST(AdamaxRule, ThreeStepsWithWeightDecay) {
    const double lr = 0.02, beta1 = 0.9, beta2 = 0.99, eps = 1e-8, weight_decay = 0.1;
    std::vector<double> p = initial_params();
    std::vector<double> m(p.size(), 0.0), u(p.size(), 0.0);
    for (int s = 0; s < 3; ++s)
        for (std::size_t i = 0; i < p.size(); ++i) {
            double g = gradient_steps()[s][i] + (decays(i) ? weight_decay * p[i] : 0.0);
            m[i] = beta1 * m[i] + (1 - beta1) * g;
            u[i] = std::max(beta2 * u[i], std::fabs(g) + eps);
            p[i] -= lr / (1 - std::pow(beta1, s + 1)) * m[i] / u[i];
        }
    Hyperparameters h = {{"lr", lr}, {"beta2", beta2}, {"weight_decay", weight_decay}};
    expect_params_near(run_cpu("adamax", h, 3), p);
}

}  // namespace
}  // namespace ember::optim::test
