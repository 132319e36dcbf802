// CPU GELU against the published formula evaluated in double precision, and its
// derivative against central finite differences.
#include "engine/ops/gelu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace {

double gelu_reference(double x) {
    const double k = std::sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

TEST(GeluCpu, MatchesFormulaInDouble) {
    std::mt19937 rng(1234);
    std::normal_distribution<float> dist(0.0f, 3.0f);
    std::vector<float> x(4096), y(x.size());
    for (auto& v : x) v = dist(rng);
    ember::ops::gelu_forward_cpu(x.data(), y.data(), x.size());
    for (size_t i = 0; i < x.size(); ++i)
        EXPECT_NEAR(y[i], gelu_reference(x[i]), 1e-5 * (1.0 + std::fabs(x[i]))) << "x=" << x[i];
}

TEST(GeluCpu, KnownValues) {
    EXPECT_FLOAT_EQ(ember::ops::gelu_tanh(0.0f), 0.0f);
    EXPECT_NEAR(ember::ops::gelu_tanh(1.0f), 0.8411920, 1e-6);  // published tanh-GELU(1)
    EXPECT_NEAR(ember::ops::gelu_tanh(-1.0f), -0.1588080, 1e-6);
    EXPECT_NEAR(ember::ops::gelu_tanh(10.0f), 10.0f, 1e-5);
}

TEST(GeluCpu, GradientMatchesFiniteDifferences) {
    const double h = 1e-5;
    for (double x = -6.0; x <= 6.0; x += 0.125) {
        double fd = (gelu_reference(x + h) - gelu_reference(x - h)) / (2 * h);
        EXPECT_NEAR(ember::ops::gelu_tanh_grad(static_cast<float>(x)), fd, 2e-5) << "x=" << x;
    }
}

TEST(GeluCpu, BackwardScalesUpstreamGradient) {
    std::vector<float> x = {-2.0f, -0.5f, 0.0f, 0.5f, 2.0f};
    std::vector<float> g = {1.0f, 2.0f, 3.0f, -1.0f, 0.5f};
    std::vector<float> dx(x.size());
    ember::ops::gelu_backward_cpu(x.data(), g.data(), dx.data(), x.size());
    for (size_t i = 0; i < x.size(); ++i) EXPECT_FLOAT_EQ(dx[i], g[i] * ember::ops::gelu_tanh_grad(x[i]));
}

}  // namespace
