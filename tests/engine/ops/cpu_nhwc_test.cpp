// ops_cpu_nhwc_test.cpp: the channels-last (nhwc) CPU BatchNorm and pooling loops
// against the nchw path on the same values (converted with convert_layout_cpu):
// every op and direction, store and accumulate writes, f32/f64/f16/bf16, and odd
// shapes (C=1, C=3, H*W=1, overlapping and padded pooling windows).
#include "engine/ops/batchnorm.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/pooling.h"
#include "tests/engine/ops/test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace ember;
using namespace ember::ops;
using ember::test::HostTensor;

struct Shape4 {
    int64_t n, c, h, w;
};

std::string describe(DType dtype, const Shape4& s) {
    return std::string(dtype_name(dtype)) + " [" + std::to_string(s.n) + "," + std::to_string(s.c) + "," +
           std::to_string(s.h) + "," + std::to_string(s.w) + "]";
}

HostTensor make4(DType dtype, const Shape4& s, Layout layout) {
    return HostTensor(dtype, {s.n, s.c, s.h, s.w}, layout);
}

HostTensor to_nhwc(const HostTensor& nchw) {
    const Tensor& v = nchw.view;
    HostTensor out(v.dtype, {v.shape[0], v.shape[1], v.shape[2], v.shape[3]}, Layout::nhwc);
    convert_layout_cpu(nchw, out);
    return out;
}

HostTensor to_nchw(const HostTensor& nhwc) {
    const Tensor& v = nhwc.view;
    HostTensor out(v.dtype, {v.shape[0], v.shape[1], v.shape[2], v.shape[3]});
    convert_layout_cpu(nhwc, out);
    return out;
}

// Values in logical (n, c, h, w) order, for tensors convert_layout_cpu does not take (i32).
std::vector<double> logical_values(const HostTensor& t) {
    const Tensor& v = t.view;
    std::vector<double> out;
    for (int64_t n = 0; n < v.shape[0]; ++n)
        for (int64_t c = 0; c < v.shape[1]; ++c)
            for (int64_t h = 0; h < v.shape[2]; ++h)
                for (int64_t w = 0; w < v.shape[3]; ++w) out.push_back(t.get(v.offset4(n, c, h, w)));
    return out;
}

// f32 nchw sums in float lanes, nhwc in double; f16/bf16 round each stored value, so
// one-ulp differences in a few outputs are expected there; f64 agrees to rounding.
double tolerance(DType dtype) {
    if (dtype == DType::f64) return 1e-12;
    if (dtype == DType::f32) return 1e-6;
    return 4e-3;
}

void expect_close(const HostTensor& nhwc_result, const HostTensor& nchw_result, DType dtype, const std::string& what) {
    EXPECT_LT(test::relative_l2(test::values(nhwc_result), test::values(nchw_result)), tolerance(dtype)) << what;
}

const std::vector<DType> kDtypes = {DType::f32, DType::f64, DType::f16, DType::bf16};
const std::vector<Shape4> kBatchNormShapes = {{4, 3, 5, 6}, {3, 1, 4, 4}, {6, 3, 1, 1}, {2, 16, 7, 9}, {1, 5, 3, 2}};

// Runs `check(dtype, c, what)` for every dtype and every case; `what` names both.
template <typename Case, typename Check>
void for_each_dtype_and_case(const std::vector<Case>& cases, Check check) {
    for (DType dtype : kDtypes)
        for (const Case& c : cases) check(dtype, c, describe(dtype, c));
}

// Runs `check(dtype, c, write, what)` for every dtype, every case and both gradient
// modes; `what` names all three for the failure messages.
template <typename Case, typename Check>
void for_each_dtype_case_and_mode(const std::vector<Case>& cases, Check check) {
    for_each_dtype_and_case(cases, [&](DType dtype, const Case& c, const std::string& what) {
        for (GradWrite write : {GradWrite::store, GradWrite::accumulate})
            check(dtype, c, write, what + (write == GradWrite::store ? " store" : " accumulate"));
    });
}

// BatchNorm's inputs for shape `s` (x nchw), random from `rng` in this order: x in
// [-2, 3), gamma in [0.5, 1.5), beta and running_mean in [-1, 1), running_var in [0.5, 2).
struct BatchNormInputs {
    HostTensor x, gamma, beta, running_mean, running_var;
};

BatchNormInputs random_batchnorm_inputs(DType dtype, const Shape4& s, std::mt19937& rng) {
    BatchNormInputs in{make4(dtype, s, Layout::nchw), HostTensor(dtype, {s.c}), HostTensor(dtype, {s.c}),
                       HostTensor(dtype, {s.c}), HostTensor(dtype, {s.c})};
    test::fill_random(in.x, rng, -2.0, 3.0);
    test::fill_random(in.gamma, rng, 0.5, 1.5);
    test::fill_random(in.beta, rng);
    test::fill_random(in.running_mean, rng);
    test::fill_random(in.running_var, rng, 0.5, 2.0);
    return in;
}

TEST(OpsCpuNhwc, BatchNormForwardTrainMatchesNchw) {
    for_each_dtype_and_case(kBatchNormShapes, [](DType dtype, const Shape4& s, const std::string& what) {
        std::mt19937 rng(11);
        const auto [x, gamma, beta, running_mean, running_var] = random_batchnorm_inputs(dtype, s, rng);
        HostTensor y = make4(dtype, s, Layout::nchw), mean(dtype, {s.c}), invstd(dtype, {s.c});
        HostTensor rm = running_mean, rv = running_var;
        batchnorm_forward_train_cpu(x, gamma, beta, y, rm, rv, mean, invstd, {});

        HostTensor x_last = to_nhwc(x), y_last = make4(dtype, s, Layout::nhwc);
        HostTensor mean_last(dtype, {s.c}), invstd_last(dtype, {s.c});
        HostTensor rm_last = running_mean, rv_last = running_var;
        batchnorm_forward_train_cpu(x_last, gamma, beta, y_last, rm_last, rv_last, mean_last, invstd_last, {});
        expect_close(to_nchw(y_last), y, dtype, what + " y");
        expect_close(mean_last, mean, dtype, what + " save_mean");
        expect_close(invstd_last, invstd, dtype, what + " save_invstd");
        expect_close(rm_last, rm, dtype, what + " running_mean");
        expect_close(rv_last, rv, dtype, what + " running_var");
    });
}

TEST(OpsCpuNhwc, BatchNormForwardEvalMatchesNchw) {
    for_each_dtype_and_case(kBatchNormShapes, [](DType dtype, const Shape4& s, const std::string& what) {
        std::mt19937 rng(12);
        const auto [x, gamma, beta, running_mean, running_var] = random_batchnorm_inputs(dtype, s, rng);
        HostTensor y = make4(dtype, s, Layout::nchw), y_last = make4(dtype, s, Layout::nhwc);
        batchnorm_forward_eval_cpu(x, gamma, beta, running_mean, running_var, y, {});
        batchnorm_forward_eval_cpu(to_nhwc(x), gamma, beta, running_mean, running_var, y_last, {});
        expect_close(to_nchw(y_last), y, dtype, what + " eval y");
    });
}

TEST(OpsCpuNhwc, BatchNormBackwardMatchesNchw) {
    for_each_dtype_case_and_mode(
        kBatchNormShapes, [](DType dtype, const Shape4& s, GradWrite write, const std::string& what) {
            std::mt19937 rng(13);
            HostTensor x = make4(dtype, s, Layout::nchw), dy = make4(dtype, s, Layout::nchw);
            HostTensor gamma(dtype, {s.c}), beta(dtype, {s.c});
            test::fill_normalization_inputs(x, dy, gamma, beta, rng);
            HostTensor y = make4(dtype, s, Layout::nchw), mean(dtype, {s.c}), invstd(dtype, {s.c});
            batchnorm_forward_train_cpu(x, gamma, beta, y, {}, {}, mean, invstd, {});
            // Gradient buffers start non-zero so accumulate is visible.
            HostTensor dx = make4(dtype, s, Layout::nchw), dgamma(dtype, {s.c}), dbeta(dtype, {s.c});
            test::fill_random(dx, rng);
            test::fill_random(dgamma, rng);
            test::fill_random(dbeta, rng);
            HostTensor dx_last = to_nhwc(dx), dgamma_last = dgamma, dbeta_last = dbeta;
            batchnorm_backward_cpu(x, dy, gamma, mean, invstd, dx, dgamma, dbeta, write, write);
            batchnorm_backward_cpu(to_nhwc(x), to_nhwc(dy), gamma, mean, invstd, dx_last, dgamma_last, dbeta_last,
                                   write, write);
            expect_close(to_nchw(dx_last), dx, dtype, what + " dx");
            expect_close(dgamma_last, dgamma, dtype, what + " dgamma");
            expect_close(dbeta_last, dbeta, dtype, what + " dbeta");

            // Parameter gradients only (dx undefined), as for a frozen input.
            HostTensor dgamma_only(dtype, {s.c}), dbeta_only(dtype, {s.c});
            batchnorm_backward_cpu(to_nhwc(x), to_nhwc(dy), gamma, mean, invstd, {}, dgamma_only, dbeta_only, write,
                                   GradWrite::store);
            HostTensor dgamma_ref(dtype, {s.c}), dbeta_ref(dtype, {s.c});
            batchnorm_backward_cpu(x, dy, gamma, mean, invstd, {}, dgamma_ref, dbeta_ref, write, GradWrite::store);
            expect_close(dgamma_only, dgamma_ref, dtype, what + " dgamma without dx");
            expect_close(dbeta_only, dbeta_ref, dtype, what + " dbeta without dx");
        });
}

// f32 activations take plain-pointer loops in both layouts (nchw planes, nhwc rows);
// f64 copies take the double paths. Both directions and eval must agree.
TEST(OpsCpuNhwc, BatchNormFloat32LoopsMatchDouble) {
    using test::widen;
    auto expect_match = [](const HostTensor& fast, const HostTensor& wide, const std::string& what) {
        EXPECT_LT(test::relative_l2(test::values(fast), test::values(wide)), 1e-6) << what;
    };
    for (Layout layout : {Layout::nchw, Layout::nhwc})
        for (const Shape4& s : kBatchNormShapes) {
            const std::string what = std::string(layout_name(layout)) + " " + describe(DType::f32, s);
            std::mt19937 rng(15);
            HostTensor x = make4(DType::f32, s, layout), dy = make4(DType::f32, s, layout);
            HostTensor gamma(DType::f32, {s.c}), beta(DType::f32, {s.c});
            HostTensor running_mean(DType::f32, {s.c}), running_var(DType::f32, {s.c});
            test::fill_normalization_inputs(x, dy, gamma, beta, rng);
            test::fill_random(running_var, rng, 0.5, 2.0);
            HostTensor x64 = widen(x), dy64 = widen(dy), gamma64 = widen(gamma), beta64 = widen(beta);
            HostTensor rm64 = widen(running_mean), rv64 = widen(running_var);
            HostTensor y = make4(DType::f32, s, layout), mean(DType::f32, {s.c}), invstd(DType::f32, {s.c});
            HostTensor y64 = widen(y), mean64 = widen(mean), invstd64 = widen(invstd);
            batchnorm_forward_train_cpu(x, gamma, beta, y, running_mean, running_var, mean, invstd, {});
            batchnorm_forward_train_cpu(x64, gamma64, beta64, y64, rm64, rv64, mean64, invstd64, {});
            expect_match(y, y64, what + " train y");
            expect_match(running_var, rv64, what + " running_var");
            HostTensor dx = make4(DType::f32, s, layout), dgamma(DType::f32, {s.c}), dbeta(DType::f32, {s.c});
            HostTensor dx64 = widen(dx), dgamma64 = widen(dgamma), dbeta64 = widen(dbeta);
            batchnorm_backward_cpu(x, dy, gamma, mean, invstd, dx, dgamma, dbeta, GradWrite::store, GradWrite::store);
            batchnorm_backward_cpu(x64, dy64, gamma64, mean64, invstd64, dx64, dgamma64, dbeta64, GradWrite::store,
                                   GradWrite::store);
            expect_match(dx, dx64, what + " dx");
            expect_match(dgamma, dgamma64, what + " dgamma");
            expect_match(dbeta, dbeta64, what + " dbeta");
            batchnorm_forward_eval_cpu(x, gamma, beta, running_mean, running_var, y, {});
            batchnorm_forward_eval_cpu(x64, gamma64, beta64, rm64, rv64, y64, {});
            expect_match(y, y64, what + " eval y");
        }
}

// BatchNorm on (N,C) activations takes the same row loops: check against the
// formula directly (mean/variance over the batch, biased variance in the output).
TEST(OpsCpuNhwc, BatchNormRank2MatchesFormula) {
    for (DType dtype : {DType::f64, DType::f32}) {
        const double tol = dtype == DType::f64 ? 1e-12 : 1e-5;
        std::mt19937 rng(14);
        const int64_t N = 7, C = 3;
        HostTensor x(dtype, {N, C}), gamma(dtype, {C}), beta(dtype, {C});
        test::fill_random(x, rng, -2.0, 3.0);
        test::fill_random(gamma, rng, 0.5, 1.5);
        test::fill_random(beta, rng);
        HostTensor y(dtype, {N, C}), mean(dtype, {C}), invstd(dtype, {C});
        BatchNormParams params;
        batchnorm_forward_train_cpu(x, gamma, beta, y, {}, {}, mean, invstd, params);
        for (int64_t c = 0; c < C; ++c) {
            double sum = 0.0, squares = 0.0;
            for (int64_t n = 0; n < N; ++n) sum += x.get(n * C + c);
            const double m = sum / N;
            for (int64_t n = 0; n < N; ++n) squares += (x.get(n * C + c) - m) * (x.get(n * C + c) - m);
            const double inv = 1.0 / std::sqrt(squares / N + params.eps);
            EXPECT_NEAR(mean.get(c), m, tol) << dtype_name(dtype);
            EXPECT_NEAR(invstd.get(c), inv, tol * inv) << dtype_name(dtype);
            for (int64_t n = 0; n < N; ++n)
                EXPECT_NEAR(y.get(n * C + c), (x.get(n * C + c) - m) * inv * gamma.get(c) + beta.get(c), tol)
                    << dtype_name(dtype);
        }
    }
}

struct PoolCase {
    Shape4 input;
    Pool2dParams params;
};

// Pool2dParams in its field order: kernel h, w, stride h, w, padding h, w.
Pool2dParams pool(int kernel_h, int kernel_w, int stride_h, int stride_w, int pad_h, int pad_w) {
    return {kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w};
}

const std::vector<PoolCase> kPoolCases = {
    {{2, 3, 8, 8}, pool(2, 2, 2, 2, 0, 0)},   // the CNN's pooling
    {{3, 1, 7, 9}, pool(3, 3, 2, 2, 1, 1)},   // C=1, overlapping padded windows
    {{2, 5, 6, 7}, pool(3, 2, 1, 2, 0, 1)},   // stride != kernel, odd sizes
    {{4, 3, 1, 1}, pool(1, 1, 1, 1, 0, 0)},   // H*W=1
    {{2, 4, 5, 5}, pool(5, 5, 1, 1, 0, 0)},   // global pooling
    {{1, 16, 9, 6}, pool(2, 3, 3, 2, 1, 1)},  // windows that skip rows
};

std::string describe(DType dtype, const PoolCase& pc) {
    const Pool2dParams& p = pc.params;
    return describe(dtype, pc.input) + " k" + std::to_string(p.kernel_h) + "x" + std::to_string(p.kernel_w) + " s" +
           std::to_string(p.stride_h) + "x" + std::to_string(p.stride_w) + " p" + std::to_string(p.pad_h) + "x" +
           std::to_string(p.pad_w);
}

Shape4 pooled_shape(const PoolCase& pc) {
    const Shape4& s = pc.input;
    const Pool2dParams& p = pc.params;
    return {s.n, s.c, (s.h + 2 * p.pad_h - p.kernel_h) / p.stride_h + 1,
            (s.w + 2 * p.pad_w - p.kernel_w) / p.stride_w + 1};
}

// The case's input, nchw, random from `rng`.
HostTensor random_pool_input(DType dtype, const PoolCase& pc, std::mt19937& rng) {
    HostTensor x = make4(dtype, pc.input, Layout::nchw);
    test::fill_random(x, rng);
    return x;
}

// `backward(dy, dx, layout)` on nchw tensors and on their nhwc copies gives the same dx;
// dx starts from the same random values in both, so accumulate mode shows.
void expect_pool_backward_matches(DType dtype, const PoolCase& pc, std::mt19937& rng, const std::string& what,
                                  const std::function<void(const HostTensor&, HostTensor&, Layout)>& backward) {
    HostTensor dy = make4(dtype, pooled_shape(pc), Layout::nchw), dx = make4(dtype, pc.input, Layout::nchw);
    test::fill_random(dy, rng);
    test::fill_random(dx, rng);
    HostTensor dx_last = to_nhwc(dx);
    backward(dy, dx, Layout::nchw);
    backward(to_nhwc(dy), dx_last, Layout::nhwc);
    expect_close(to_nchw(dx_last), dx, dtype, what + " dx");
}

TEST(OpsCpuNhwc, MaxPoolMatchesNchw) {
    for_each_dtype_case_and_mode(kPoolCases, [](DType dtype, const PoolCase& pc, GradWrite write,
                                                const std::string& what) {
        const Shape4 out = pooled_shape(pc);
        std::mt19937 rng(21);
        HostTensor x = random_pool_input(dtype, pc, rng);
        x.set(0, x.get(1));  // a tie: the first in scan order must win in both layouts
        HostTensor y = make4(dtype, out, Layout::nchw), argmax = make4(DType::i32, out, Layout::nchw);
        HostTensor y_last = make4(dtype, out, Layout::nhwc);
        HostTensor argmax_last = make4(DType::i32, out, Layout::nhwc);
        maxpool2d_forward_cpu(x, y, argmax, pc.params);
        maxpool2d_forward_cpu(to_nhwc(x), y_last, argmax_last, pc.params);
        // Max pooling copies input values: exact in every dtype.
        EXPECT_EQ(test::values(to_nchw(y_last)), test::values(y)) << what;
        EXPECT_EQ(logical_values(argmax_last), test::values(argmax)) << what << " argmax";

        expect_pool_backward_matches(dtype, pc, rng, what, [&](const HostTensor& dy, HostTensor& dx, Layout layout) {
            maxpool2d_backward_cpu(dy, layout == Layout::nchw ? argmax : argmax_last, dx, pc.params, write);
        });
    });
}

TEST(OpsCpuNhwc, AvgPoolMatchesNchw) {
    for_each_dtype_case_and_mode(
        kPoolCases, [](DType dtype, const PoolCase& pc, GradWrite write, const std::string& what) {
            const Shape4 out = pooled_shape(pc);
            std::mt19937 rng(22);
            HostTensor x = random_pool_input(dtype, pc, rng);
            HostTensor y = make4(dtype, out, Layout::nchw), y_last = make4(dtype, out, Layout::nhwc);
            avgpool2d_forward_cpu(x, y, pc.params);
            avgpool2d_forward_cpu(to_nhwc(x), y_last, pc.params);
            expect_close(to_nchw(y_last), y, dtype, what + " y");

            expect_pool_backward_matches(dtype, pc, rng, what, [&](const HostTensor& dy, HostTensor& dx, Layout) {
                avgpool2d_backward_cpu(dy, dx, pc.params, write);
            });
        });
}

// A window that lies entirely in the padding gives 0 and index -1 in both layouts.
TEST(OpsCpuNhwc, MaxPoolEmptyWindowMatchesNchw) {
    const PoolCase pc{{1, 3, 2, 2}, pool(1, 1, 2, 2, 1, 1)};
    const Shape4 out = pooled_shape(pc);
    std::mt19937 rng(23);
    HostTensor x = make4(DType::f32, pc.input, Layout::nchw);
    test::fill_random(x, rng, 1.0, 2.0);
    HostTensor y = make4(DType::f32, out, Layout::nchw), argmax = make4(DType::i32, out, Layout::nchw);
    HostTensor y_last = make4(DType::f32, out, Layout::nhwc), argmax_last = make4(DType::i32, out, Layout::nhwc);
    maxpool2d_forward_cpu(x, y, argmax, pc.params);
    maxpool2d_forward_cpu(to_nhwc(x), y_last, argmax_last, pc.params);
    EXPECT_EQ(argmax.get(0), -1.0);
    EXPECT_EQ(y.get(0), 0.0);
    EXPECT_EQ(test::values(to_nchw(y_last)), test::values(y));
    EXPECT_EQ(logical_values(argmax_last), test::values(argmax));
}

}  // namespace
