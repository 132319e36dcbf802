// nn_test_util.h: helpers shared by the engine/nn tests: seeded host tensors, a
// harness that runs one layer on the CPU backend in f64, and central differences.
#pragma once

#include "engine/nn/layer.h"
#include "engine/nn/model.h"
#include "engine/nn/parameters.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <vector>

namespace ember::nn::test {

inline std::vector<double> random_values(std::size_t n, uint64_t seed, double spread = 1.0) {
    SplitMix64 rng(seed);
    std::vector<double> v(n);
    for (double& x : v) x = (2.0 * rng.uniform01() - 1.0) * spread;
    return v;
}

inline Tensor host_tensor(std::vector<double>& values, std::initializer_list<int64_t> shape) {
    return make_tensor(values.data(), DType::f64, shape);
}

// Central difference of f with respect to value, restored afterwards.
inline double central_difference(double& value, const std::function<double()>& f, double step = 1e-6) {
    const double saved = value;
    value = saved + step;
    const double plus = f();
    value = saved - step;
    const double minus = f();
    value = saved;
    return (plus - minus) / (2.0 * step);
}

inline void expect_close(double analytic, double numeric, const std::string& what) {
    const double tolerance = 1e-6 * std::max(1.0, std::abs(numeric));
    EXPECT_NEAR(analytic, numeric, tolerance) << what;
}

// One layer on the CPU backend with f64 parameters and activations.
class LayerHarness {
  public:
    explicit LayerHarness(std::unique_ptr<Layer> layer, uint64_t seed = 7) : layer_(std::move(layer)) {
        layer_->register_parameters(store_);
        store_.allocate(Device::cpu, DType::f64, DType::f32);
        store_.initialize(seed);
        // Perturb constant inits (BN/LN gamma = 1, beta = 0) so every term is exercised.
        double* params = static_cast<double*>(store_.master().data());
        std::vector<double> noise = random_values(store_.flat_length(), seed + 1, 0.3);
        for (std::size_t i = 0; i < store_.flat_length(); ++i) params[i] += noise[i];
        ctx_.backend = Device::cpu;
        ctx_.pool = &pool_;
        ctx_.parameters = &store_;
        ctx_.activation_dtype = DType::f64;
        ctx_.training = true;
        ctx_.parameter_write = ops::GradWrite::store;
        ctx_.dropout_seed = 99;
    }

    Layer& layer() { return *layer_; }
    RunContext& context() { return ctx_; }
    ParameterStore& store() { return store_; }
    double* parameters() { return static_cast<double*>(store_.master().data()); }
    double* gradients() { return static_cast<double*>(store_.gradients().data()); }

    // sum(y * weights) for the fixed projection `weights` (sized on first use).
    double objective(const Tensor& x) {
        pool_.reset();
        Tensor y = layer_->forward(ctx_, x);
        if (projection_.empty()) projection_ = random_values(static_cast<std::size_t>(y.numel()), 1234);
        double sum = 0.0;
        for (int64_t i = 0; i < y.numel(); ++i) sum += load_as_double(y.data, y.dtype, i) * projection_[i];
        return sum;
    }

    // Analytic gradients: returns dx (host copy); parameter gradients land in gradients().
    std::vector<double> analytic(const Tensor& x) {
        objective(x);
        pool_.reset();
        Tensor y = layer_->forward(ctx_, x);
        Tensor dy = make_tensor(projection_.data(), DType::f64, y.rank, y.shape);
        Tensor dx = layer_->backward(ctx_, dy, true);
        std::vector<double> out(static_cast<std::size_t>(x.numel()));
        for (int64_t i = 0; i < x.numel(); ++i) out[i] = load_as_double(dx.data, dx.dtype, i);
        return out;
    }

    // Compares every input and parameter gradient with central differences.
    void check(std::vector<double>& input, const Tensor& x) {
        std::vector<double> dx = analytic(x);
        std::vector<double> dparams(gradients(), gradients() + store_.flat_length());
        for (std::size_t i = 0; i < input.size(); ++i)
            expect_close(dx[i], central_difference(input[i], [&] { return objective(x); }),
                         layer_->name() + " input " + std::to_string(i));
        for (const ParameterEntry& e : store_.parameters())
            for (std::size_t i = 0; i < e.length; ++i)
                expect_close(dparams[e.offset + i],
                             central_difference(parameters()[e.offset + i], [&] { return objective(x); }),
                             e.name + "[" + std::to_string(i) + "]");
    }

  private:
    std::unique_ptr<Layer> layer_;
    ParameterStore store_;
    ActivationPool pool_{Device::cpu, 1u << 22, "test activations"};
    RunContext ctx_;
    std::vector<double> projection_;
};

}  // namespace ember::nn::test
