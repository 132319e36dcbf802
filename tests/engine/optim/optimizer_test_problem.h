// optimizer_test_problem.h: a five-element problem in two segments (a "weight" that
// takes weight decay, a "bias" flagged no-weight-decay) and three gradient steps,
// shared by the hand-computed reference tests.
#pragma once

#include "engine/optim/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace ember::optim::test {

inline std::vector<ParameterSegment> two_segments() {
    return {{0, 3, 0, "weight"}, {3, 2, kSegmentNoWeightDecay, "bias"}};
}

inline const std::vector<double>& initial_params() {
    static const std::vector<double> p = {0.5, -1.2, 2.0, 0.3, -0.7};
    return p;
}

// Element 4's gradient shrinks after step 1, which makes AMSGrad's max matter.
inline const std::vector<std::vector<double>>& gradient_steps() {
    static const std::vector<std::vector<double>> g = {
        {0.1, -0.2, 0.3, 0.05, -0.4}, {-0.3, 0.1, 0.2, 0.5, 0.1}, {0.2, 0.2, -0.1, -0.2, 0.3}};
    return g;
}

// Weight decay applies to the first segment only.
inline bool decays(std::size_t i) {
    return i < 3;
}

// Runs `steps` steps of the cpu implementation and returns the parameters.
inline std::vector<float> run_cpu(const std::string& name, const Hyperparameters& hyperparameters, int steps) {
    auto optimizer = make_optimizer(name, hyperparameters, two_segments(), OptimizerBackend::cpu);
    std::vector<float> params(initial_params().begin(), initial_params().end());
    for (int s = 0; s < steps; ++s) {
        std::vector<float> grads(gradient_steps()[s].begin(), gradient_steps()[s].end());
        optimizer->step(params.data(), grads.data());
    }
    return params;
}

inline void expect_params_near(const std::vector<float>& actual, const std::vector<double>& expected,
                               double tolerance = 2e-6) {
    ASSERT_EQ(actual.size(), expected.size());
    for (std::size_t i = 0; i < actual.size(); ++i)
        EXPECT_NEAR(actual[i], expected[i], tolerance * std::max(1.0, std::fabs(expected[i]))) << "element " << i;
}

}  // namespace ember::optim::test
