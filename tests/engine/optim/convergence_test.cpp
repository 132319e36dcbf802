// Every optimizer trains a small softmax classifier (3 classes, 2 features + bias;
// forward and backward written out here) on a separable synthetic set: the cross-entropy
// must fall well below its starting value. Weights and biases are two segments, the
// bias flagged no-weight-decay, as the trainer lays them out.
#include "engine/optim/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <ostream>
#include <random>
#include <vector>

namespace ember::optim {
namespace {

constexpr int kClasses = 3;
constexpr int kFeatures = 2;
constexpr int kSamples = 90;
// Flat layout: weights [kClasses x kFeatures] then biases [kClasses].
constexpr std::size_t kParameterCount = kClasses * kFeatures + kClasses;

struct DataSet {
    std::vector<float> x;  // kSamples x kFeatures
    std::vector<int> label;
};

DataSet make_clusters() {
    // Three clusters around well-separated centres.
    const float centres[kClasses][kFeatures] = {{2.0f, 0.0f}, {-1.0f, 1.7f}, {-1.0f, -1.7f}};
    std::mt19937 rng(7);
    std::normal_distribution<float> noise(0.0f, 0.3f);
    DataSet d;
    for (int n = 0; n < kSamples; ++n) {
        int c = n % kClasses;
        d.label.push_back(c);
        for (int f = 0; f < kFeatures; ++f) d.x.push_back(centres[c][f] + noise(rng));
    }
    return d;
}

// Mean softmax cross-entropy; writes d loss / d params into grads.
double loss_and_gradient(const DataSet& d, const float* params, float* grads) {
    std::fill(grads, grads + kParameterCount, 0.0f);
    const float* weights = params;
    const float* biases = params + kClasses * kFeatures;
    double loss = 0.0;
    for (int n = 0; n < kSamples; ++n) {
        double logits[kClasses];
        double largest = -1e300;
        for (int c = 0; c < kClasses; ++c) {
            logits[c] = biases[c];
            for (int f = 0; f < kFeatures; ++f) logits[c] += weights[c * kFeatures + f] * d.x[n * kFeatures + f];
            largest = std::max(largest, logits[c]);
        }
        double sum = 0.0;
        for (int c = 0; c < kClasses; ++c) sum += std::exp(logits[c] - largest);
        loss += -(logits[d.label[n]] - largest - std::log(sum));
        for (int c = 0; c < kClasses; ++c) {
            // dL/dlogit = softmax - onehot, averaged over the batch.
            double delta = (std::exp(logits[c] - largest) / sum - (c == d.label[n] ? 1.0 : 0.0)) / kSamples;
            for (int f = 0; f < kFeatures; ++f) grads[c * kFeatures + f] += (float)(delta * d.x[n * kFeatures + f]);
            grads[kClasses * kFeatures + c] += (float)delta;
        }
    }
    return loss / kSamples;
}

struct Case {
    const char* name;
    Hyperparameters hyperparameters;
};

// gtest prints the parameter in test listings: the name is enough.
void PrintTo(const Case& c, std::ostream* os) {
    *os << c.name;
}

class Convergence : public ::testing::TestWithParam<Case> {};

TEST_P(Convergence, LossFallsByMoreThanHalf) {
    const Case& c = GetParam();
    DataSet data = make_clusters();
    std::vector<ParameterSegment> segments = {{0, kClasses * kFeatures, 0, "weight"},
                                              {kClasses * kFeatures, kClasses, kSegmentNoWeightDecay, "bias"}};
    auto optimizer = make_optimizer(c.name, c.hyperparameters, segments, OptimizerBackend::cpu);
    // Small non-zero start (LARS/LAMB scale by the parameter norm).
    std::vector<float> params(kParameterCount);
    std::mt19937 rng(3);
    std::normal_distribution<float> init(0.0f, 0.1f);
    for (auto& p : params) p = init(rng);
    std::vector<float> grads(kParameterCount);

    const double initial = loss_and_gradient(data, params.data(), grads.data());
    const int steps = c.name == std::string("lbfgs") ? 5 : 100;
    for (int s = 0; s < steps; ++s)
        optimizer->step(params.data(), grads.data(),
                        [&] { return loss_and_gradient(data, params.data(), grads.data()); });
    const double final_loss = loss_and_gradient(data, params.data(), grads.data());
    std::printf("%-9s %3d steps: cross-entropy %.4f -> %.4f\n", c.name, steps, initial, final_loss);
    EXPECT_LT(final_loss, 0.5 * initial) << c.name << ": " << initial << " -> " << final_loss;
    EXPECT_LT(final_loss, 0.3) << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    EveryOptimizer, Convergence,
    ::testing::Values(Case{"sgd", {{"lr", 0.5}, {"momentum", 0.9}}}, Case{"adagrad", {{"lr", 0.5}}},
                      Case{"adadelta", {{"lr", 50.0}}}, Case{"rmsprop", {{"lr", 0.05}}}, Case{"adam", {{"lr", 0.1}}},
                      Case{"adamw", {{"lr", 0.1}}}, Case{"nadam", {{"lr", 0.1}}}, Case{"adamax", {{"lr", 0.2}}},
                      Case{"lamb", {{"lr", 0.1}}}, Case{"lars", {{"lr", 5.0}, {"trust_coefficient", 0.1}}},
                      Case{"novograd", {{"lr", 0.1}}}, Case{"lbfgs", {{"lr", 1.0}, {"strong_wolfe", 1}}}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace ember::optim
