// SGD, Adagrad, Adadelta and RMSprop on the cpu backend against steps computed here in
// double from torch.optim's documented update rules (docs/optimizers.md).
#include "tests/engine/optim/optimizer_test_problem.h"

#include <cmath>

namespace ember::optim::test {
namespace {

// torch.optim.SGD: g += wd p; buf = g (first step) or momentum buf + (1 - dampening) g;
// g = nesterov ? g + momentum buf : buf; p -= lr g.
std::vector<double> sgd_reference(double lr, double momentum, double dampening, double weight_decay, bool nesterov,
                                  bool maximize, int steps) {
    std::vector<double> p = initial_params();
    std::vector<double> buf(p.size(), 0.0);
    for (int s = 0; s < steps; ++s) {
        for (std::size_t i = 0; i < p.size(); ++i) {
            double g = gradient_steps()[s][i];
            if (maximize) g = -g;
            if (decays(i)) g += weight_decay * p[i];
            if (momentum != 0.0) {
                buf[i] = s == 0 ? g : momentum * buf[i] + (1.0 - dampening) * g;
                g = nesterov ? g + momentum * buf[i] : buf[i];
            }
            p[i] -= lr * g;
        }
    }
    return p;
}

TEST(SgdRule, PlainStepIsLrTimesGradient) {
    // First element by hand: 0.5 - 0.1 * 0.1 = 0.49
    auto p = run_cpu("sgd", {{"lr", 0.1}}, 1);
    EXPECT_NEAR(p[0], 0.49, 1e-7);
    expect_params_near(run_cpu("sgd", {{"lr", 0.1}}, 3), sgd_reference(0.1, 0, 0, 0, false, false, 3));
}

TEST(SgdRule, MomentumWithDampeningAndWeightDecay) {
    Hyperparameters h = {{"lr", 0.05}, {"momentum", 0.9}, {"dampening", 0.2}, {"weight_decay", 0.1}};
    expect_params_near(run_cpu("sgd", h, 3), sgd_reference(0.05, 0.9, 0.2, 0.1, false, false, 3));
}

TEST(SgdRule, Nesterov) {
    Hyperparameters h = {{"lr", 0.05}, {"momentum", 0.8}, {"nesterov", 1}, {"weight_decay", 0.01}};
    auto p = run_cpu("sgd", h, 3);
    expect_params_near(p, sgd_reference(0.05, 0.8, 0, 0.01, true, false, 3));
    // And it differs from classical momentum.
    auto classical = sgd_reference(0.05, 0.8, 0, 0.01, false, false, 3);
    EXPECT_GT(std::fabs(p[0] - classical[0]), 1e-4);
}

TEST(SgdRule, Maximize) {
    Hyperparameters h = {{"lr", 0.1}, {"momentum", 0.5}, {"maximize", 1}};
    expect_params_near(run_cpu("sgd", h, 2), sgd_reference(0.1, 0.5, 0, 0, false, true, 2));
}

// torch.optim.Adagrad: g += wd p; clr = lr / (1 + (t-1) lr_decay); sum += g^2;
// p -= clr g / (sqrt(sum) + eps).
TEST(AdagradRule, LrDecayInitialAccumulatorAndWeightDecay) {
    const double lr = 0.1, lr_decay = 0.05, initial = 0.2, weight_decay = 0.03, eps = 1e-10;
    std::vector<double> p = initial_params();
    std::vector<double> sum(p.size(), initial);
    for (int s = 0; s < 3; ++s) {
        const double clr = lr / (1.0 + s * lr_decay);
        for (std::size_t i = 0; i < p.size(); ++i) {
            double g = gradient_steps()[s][i] + (decays(i) ? weight_decay * p[i] : 0.0);
            sum[i] += g * g;
            p[i] -= clr * g / (std::sqrt(sum[i]) + eps);
        }
    }
    Hyperparameters h = {
        {"lr", lr}, {"lr_decay", lr_decay}, {"initial_accumulator_value", initial}, {"weight_decay", weight_decay}};
    expect_params_near(run_cpu("adagrad", h, 3), p);
}

// torch.optim.Adadelta: v = rho v + (1-rho) g^2; delta = sqrt(u + eps)/sqrt(v + eps) g;
// u = rho u + (1-rho) delta^2; p -= lr delta.
TEST(AdadeltaRule, ThreeStepsWithWeightDecay) {
    const double lr = 0.5, rho = 0.8, eps = 1e-6, weight_decay = 0.1;
    std::vector<double> p = initial_params();
    std::vector<double> v(p.size(), 0.0), u(p.size(), 0.0);
    for (int s = 0; s < 3; ++s)
        for (std::size_t i = 0; i < p.size(); ++i) {
            double g = gradient_steps()[s][i] + (decays(i) ? weight_decay * p[i] : 0.0);
            v[i] = rho * v[i] + (1 - rho) * g * g;
            double delta = std::sqrt(u[i] + eps) / std::sqrt(v[i] + eps) * g;
            u[i] = rho * u[i] + (1 - rho) * delta * delta;
            p[i] -= lr * delta;
        }
    Hyperparameters h = {{"lr", lr}, {"rho", rho}, {"weight_decay", weight_decay}};
    expect_params_near(run_cpu("adadelta", h, 3), p);
}

// torch.optim.RMSprop: v = alpha v + (1-alpha) g^2; centered: ga = alpha ga + (1-alpha) g,
// avg = sqrt(v - ga^2) + eps, else sqrt(v) + eps; momentum: b = m b + g/avg, p -= lr b;
// otherwise p -= lr g/avg.
std::vector<double> rmsprop_reference(double lr, double alpha, double eps, double weight_decay, double momentum,
                                      bool centered) {
    std::vector<double> p = initial_params();
    std::vector<double> v(p.size(), 0.0), grad_avg(p.size(), 0.0), buf(p.size(), 0.0);
    for (int s = 0; s < 3; ++s)
        for (std::size_t i = 0; i < p.size(); ++i) {
            double g = gradient_steps()[s][i] + (decays(i) ? weight_decay * p[i] : 0.0);
            v[i] = alpha * v[i] + (1 - alpha) * g * g;
            double avg;
            if (centered) {
                grad_avg[i] = alpha * grad_avg[i] + (1 - alpha) * g;
                avg = std::sqrt(v[i] - grad_avg[i] * grad_avg[i]) + eps;
            } else {
                avg = std::sqrt(v[i]) + eps;
            }
            if (momentum > 0) {
                buf[i] = momentum * buf[i] + g / avg;
                p[i] -= lr * buf[i];
            } else {
                p[i] -= lr * g / avg;
            }
        }
    return p;
}

TEST(RmspropRule, Plain) {
    Hyperparameters h = {{"lr", 0.01}, {"alpha", 0.9}};
    expect_params_near(run_cpu("rmsprop", h, 3), rmsprop_reference(0.01, 0.9, 1e-8, 0, 0, false));
}

TEST(RmspropRule, CenteredWithMomentumAndWeightDecay) {
    Hyperparameters h = {{"lr", 0.01}, {"alpha", 0.9}, {"centered", 1}, {"momentum", 0.7}, {"weight_decay", 0.05}};
    auto p = run_cpu("rmsprop", h, 3);
    expect_params_near(p, rmsprop_reference(0.01, 0.9, 1e-8, 0.05, 0.7, true), 1e-5);
    auto uncentered = rmsprop_reference(0.01, 0.9, 1e-8, 0.05, 0.7, false);
    EXPECT_GT(std::fabs(p[1] - uncentered[1]), 1e-4);
}

}  // namespace
}  // namespace ember::optim::test
