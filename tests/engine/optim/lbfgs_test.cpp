// L-BFGS on problems with known minima: a badly scaled quadratic (fixed step and strong
// Wolfe) and the Rosenbrock function (strong Wolfe), which it must solve.
#include "engine/optim/optimizer.h"
#include "engine/optim/lbfgs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

namespace ember::optim {
namespace {

// f(x) = sum_i 0.5 a_i (x_i - c_i)^2 with a_i from 1 to 10.
struct Quadratic {
    std::vector<double> a = {1.0, 2.0, 5.0, 10.0};
    std::vector<double> c = {1.0, -2.0, 0.5, 3.0};
    double operator()(const float* x, float* g) const {
        double f = 0.0;
        for (std::size_t i = 0; i < a.size(); ++i) {
            f += 0.5 * a[i] * (x[i] - c[i]) * (x[i] - c[i]);
            g[i] = (float)(a[i] * (x[i] - c[i]));
        }
        return f;
    }
};

std::vector<ParameterSegment> one_segment(std::size_t n) {
    return {{0, n, 0, "x"}};
}

TEST(Lbfgs, QuadraticWithFixedStep) {
    Quadratic q;
    auto optimizer = make_optimizer("lbfgs", {{"lr", 0.1}, {"max_iter", 200}}, one_segment(4), OptimizerBackend::cpu);
    std::vector<float> x(4, 0.0f), g(4);
    optimizer->step(x.data(), g.data(), [&] { return q(x.data(), g.data()); });
    for (std::size_t i = 0; i < 4; ++i) EXPECT_NEAR(x[i], q.c[i], 1e-4) << "x" << i;
}

TEST(Lbfgs, QuadraticWithStrongWolfeInFewEvaluations) {
    Quadratic q;
    auto optimizer =
        make_optimizer("lbfgs", {{"strong_wolfe", 1}, {"max_iter", 50}}, one_segment(4), OptimizerBackend::cpu);
    std::vector<float> x(4, 0.0f), g(4);
    optimizer->step(x.data(), g.data(), [&] { return q(x.data(), g.data()); });
    for (std::size_t i = 0; i < 4; ++i) EXPECT_NEAR(x[i], q.c[i], 1e-4) << "x" << i;
    // A quasi-Newton method on a 4-d quadratic needs few evaluations.
    EXPECT_LT(static_cast<Lbfgs&>(*optimizer).function_evaluations(), 40);
}

TEST(Lbfgs, RosenbrockWithStrongWolfe) {
    // f = (1 - x)^2 + 100 (y - x^2)^2, minimum at (1, 1), start at (-1.5, 2).
    auto rosenbrock = [](const float* p, float* g) {
        const double x = p[0], y = p[1];
        g[0] = (float)(-2.0 * (1 - x) - 400.0 * x * (y - x * x));
        g[1] = (float)(200.0 * (y - x * x));
        return (1 - x) * (1 - x) + 100.0 * (y - x * x) * (y - x * x);
    };
    auto optimizer = make_optimizer("lbfgs", {{"strong_wolfe", 1}, {"max_iter", 100}, {"history_size", 10}},
                                    one_segment(2), OptimizerBackend::cpu);
    std::vector<float> p = {-1.5f, 2.0f}, g(2);
    double first = 0.0;
    for (int s = 0; s < 5; ++s) {
        double loss = optimizer->step(p.data(), g.data(), [&] { return rosenbrock(p.data(), g.data()); });
        if (s == 0) first = loss;
    }
    EXPECT_GT(first, 1.0);
    EXPECT_NEAR(p[0], 1.0, 1e-3);
    EXPECT_NEAR(p[1], 1.0, 2e-3);
}

TEST(Lbfgs, StepWithoutClosureIsAnError) {
    auto optimizer = make_optimizer("lbfgs", {}, one_segment(2), OptimizerBackend::cpu);
    std::vector<float> p(2), g(2);
    EXPECT_THROW(optimizer->step(p.data(), g.data()), std::logic_error);
}

}  // namespace
}  // namespace ember::optim
