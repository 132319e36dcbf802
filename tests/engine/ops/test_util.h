// ops_test_util.h: host buffers that own their memory and hand out Tensor views,
// random fills, and the finite-difference gradient check used by the op tests.
#pragma once

#include "engine/core/host_tensor.h"
#include "engine/core/tensor.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace ember::test {

using ember::fill_random;
using ember::fill_value;
using ember::HostTensor;

// The dtype most op tests run in.
constexpr DType f32 = DType::f32;

// The inputs of a normalisation's forward and backward (BatchNorm, LayerNorm), drawn in
// this order: x in [-2, 3), dy in [-1, 1), gamma in [0.5, 1.5) (away from 0), beta in [-1, 1).
inline void fill_normalization_inputs(HostTensor& x, HostTensor& dy, HostTensor& gamma, HostTensor& beta,
                                      std::mt19937& rng) {
    fill_random(x, rng, -2.0, 3.0);
    fill_random(dy, rng);
    fill_random(gamma, rng, 0.5, 1.5);
    fill_random(beta, rng);
}

// sum_i weights[i] * y[i]: the scalar whose gradient wrt y is `weights`.
inline double weighted_sum(const HostTensor& y, const HostTensor& weights) {
    double s = 0.0;
    for (int64_t i = 0; i < y.numel(); ++i) s += y.get(i) * weights.get(i);
    return s;
}

// Central differences of `loss` with respect to every element of `input` (f64),
// compared with `analytic`. Returns the largest |numeric - analytic| divided by
// max(1, largest |numeric|).
inline double finite_difference_error(HostTensor& input, const std::function<double()>& loss,
                                      const HostTensor& analytic, double step = 1e-6) {
    double worst = 0.0, scale = 1.0;
    std::vector<double> numeric(static_cast<std::size_t>(input.numel()));
    for (int64_t i = 0; i < input.numel(); ++i) {
        const double saved = input.get(i);
        input.set(i, saved + step);
        const double plus = loss();
        input.set(i, saved - step);
        const double minus = loss();
        input.set(i, saved);
        numeric[i] = (plus - minus) / (2 * step);
        scale = std::max(scale, std::fabs(numeric[i]));
    }
    for (int64_t i = 0; i < input.numel(); ++i) worst = std::max(worst, std::fabs(numeric[i] - analytic.get(i)));
    return worst / scale;
}

// Relative L2 error ||a - b|| / ||b||.
inline double relative_l2(const std::vector<double>& a, const std::vector<double>& b) {
    double err = 0.0, ref = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        err += (a[i] - b[i]) * (a[i] - b[i]);
        ref += b[i] * b[i];
    }
    return ref == 0.0 ? std::sqrt(err) : std::sqrt(err / ref);
}

inline std::vector<double> values(const HostTensor& t) {
    std::vector<double> v(static_cast<std::size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.get(i);
    return v;
}

// An f64 copy of `t` (same shape and layout): f32 tensors take the CPU ops' plain-pointer
// fast paths, f64 copies the generic ones, the reference those fast paths must meet.
inline HostTensor widen(const HostTensor& t) {
    HostTensor wide(DType::f64, std::vector<int64_t>(t.view.shape, t.view.shape + t.view.rank), t.view.layout);
    for (int64_t i = 0; i < t.numel(); ++i) wide.set(i, t.get(i));
    return wide;
}

}  // namespace ember::test
