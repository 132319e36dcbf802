// Finite-difference gradient checks, in double, of every CPU backward op: the loss is
// L = sum(w * y) for a random w, so dL/dy = w is fed to backward and its results are
// compared with central differences of L.
#include "engine/ops/activation.h"
#include "engine/ops/batchnorm.h"
#include "engine/ops/conv.h"
#include "engine/ops/dropout.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/embedding.h"
#include "engine/ops/gemm.h"
#include "engine/ops/layernorm.h"
#include "engine/ops/pooling.h"
#include "engine/ops/softmax_cross_entropy.h"
#include "tests/engine/ops/test_util.h"

#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <utility>

namespace {

using namespace ember;
using namespace ember::ops;
using ember::test::finite_difference_error;
using ember::test::HostTensor;
using ember::test::weighted_sum;

constexpr DType f64 = DType::f64;
constexpr double kTolerance = 1e-7;

// Central differences of L = sum(weights * y), where `forward` writes y, against each
// (input, analytic gradient) pair.
void expect_gradients(const std::function<void()>& forward, const HostTensor& y, const HostTensor& weights,
                      std::initializer_list<std::pair<HostTensor*, const HostTensor*>> checks) {
    auto loss = [&] {
        forward();
        return weighted_sum(y, weights);
    };
    int index = 0;
    for (auto [input, analytic] : checks)
        EXPECT_LT(finite_difference_error(*input, loss, *analytic), kTolerance) << "input " << index++;
}

TEST(GradCheck, LinearWithBias) {
    std::mt19937 rng(1);
    HostTensor x(f64, {5, 7}), w(f64, {4, 7}), b(f64, {4}), y(f64, {5, 4}), dy(f64, {5, 4});
    for (HostTensor* t : {&x, &w, &b, &dy}) test::fill_random(*t, rng);
    HostTensor dx(f64, {5, 7}), dw(f64, {4, 7}), db(f64, {4});
    linear_backward_cpu(x, w, dy, dx, dw, db, GradWrite::store, GradWrite::store);
    expect_gradients([&] { linear_forward_cpu(x, w, b, y); }, y, dy, {{&x, &dx}, {&w, &dw}, {&b, &db}});
}

TEST(GradCheck, LinearWithGeluEpilogue) {
    std::mt19937 rng(2);
    HostTensor x(f64, {3, 6}), w(f64, {5, 6}), b(f64, {5}), y(f64, {3, 5}), pre(f64, {3, 5}), dy(f64, {3, 5});
    for (HostTensor* t : {&x, &w, &b, &dy}) test::fill_random(*t, rng);
    linear_forward_cpu(x, w, b, y, true, pre);
    HostTensor dpre(f64, {3, 5}), dx(f64, {3, 6}), dw(f64, {5, 6}), db(f64, {5});
    gelu_backward_cpu(pre, dy, dpre, GradWrite::store);
    linear_backward_cpu(x, w, dpre, dx, dw, db, GradWrite::store, GradWrite::store);
    expect_gradients([&] { linear_forward_cpu(x, w, b, y, true); }, y, dy, {{&x, &dx}, {&w, &dw}, {&b, &db}});
}

TEST(GradCheck, GemmTransposes) {
    std::mt19937 rng(3);
    // C[4,3] = A^T B^T with A [5,4], B [3,5]; gradients: dA = B^T dC^T ... checked numerically
    // against dA = (dC B)^T computed by gemm itself.
    HostTensor a(f64, {5, 4}), b(f64, {3, 5}), c(f64, {4, 3}), dc(f64, {4, 3});
    for (HostTensor* t : {&a, &b, &dc}) test::fill_random(*t, rng);
    GemmArgs args;
    args.transpose_a = args.transpose_b = true;
    HostTensor da(f64, {5, 4});
    GemmArgs grad_args;  // dA[5,4] = B^T[5,3] dC^T[3,4]
    grad_args.transpose_a = grad_args.transpose_b = true;
    gemm_cpu(b, dc, da, grad_args);
    expect_gradients([&] { gemm_cpu(a, b, c, args); }, c, dc, {{&a, &da}});
}

void conv_gradcheck(Layout layout, const Conv2dParams& params) {
    std::mt19937 rng(4);
    const int64_t N = 2, C = 3, H = 6, W = 5, K = 4, R = 3, S = 2;
    const int64_t P = conv_output_size(H, R, params.stride_h, params.pad_h, params.dilation_h);
    const int64_t Q = conv_output_size(W, S, params.stride_w, params.pad_w, params.dilation_w);
    HostTensor x(f64, {N, C, H, W}, layout), w(f64, {K, C, R, S}, layout), b(f64, {K}), y(f64, {N, K, P, Q}, layout),
        dy(f64, {N, K, P, Q}, layout);
    for (HostTensor* t : {&x, &w, &b, &dy}) test::fill_random(*t, rng);
    HostTensor dx(f64, {N, C, H, W}, layout), dw(f64, {K, C, R, S}, layout), db(f64, {K});
    conv2d_backward_data_cpu(w, dy, dx, params, GradWrite::store);
    conv2d_backward_filter_cpu(x, dy, dw, params, GradWrite::store);
    conv2d_backward_bias_cpu(dy, db, GradWrite::store);
    expect_gradients([&] { conv2d_forward_cpu(x, w, b, y, params); }, y, dy, {{&x, &dx}, {&w, &dw}, {&b, &db}});
}

TEST(GradCheck, Conv2dNchw) {
    conv_gradcheck(Layout::nchw, {});
}
TEST(GradCheck, Conv2dNchwStridePadDilation) {
    conv_gradcheck(Layout::nchw, {.stride_h = 2, .pad_h = 1, .pad_w = 1, .dilation_w = 2});
}
TEST(GradCheck, Conv2dNhwcStridePad) {
    conv_gradcheck(Layout::nhwc, {.stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1});
}

void batchnorm_gradcheck(HostTensor x) {
    std::mt19937 rng(5);
    const int64_t C = x.view.shape[1];
    test::fill_random(x, rng, -2.0, 3.0);
    HostTensor gamma(f64, {C}), beta(f64, {C}), mean(f64, {C}), invstd(f64, {C});
    test::fill_random(gamma, rng, 0.5, 1.5);
    test::fill_random(beta, rng);
    HostTensor y = x, dy = x, dx = x;
    test::fill_random(dy, rng);
    HostTensor dgamma(f64, {C}), dbeta(f64, {C});
    batchnorm_forward_train_cpu(x, gamma, beta, y, {}, {}, mean, invstd, {});
    batchnorm_backward_cpu(x, dy, gamma, mean, invstd, dx, dgamma, dbeta, GradWrite::store, GradWrite::store);
    expect_gradients([&] { batchnorm_forward_train_cpu(x, gamma, beta, y, {}, {}, mean, invstd, {}); }, y, dy,
                     {{&x, &dx}, {&gamma, &dgamma}, {&beta, &dbeta}});
}

TEST(GradCheck, BatchNorm2dNchw) {
    batchnorm_gradcheck(HostTensor(f64, {3, 2, 3, 4}));
}
TEST(GradCheck, BatchNorm2dNhwc) {
    batchnorm_gradcheck(HostTensor(f64, {3, 2, 3, 4}, Layout::nhwc));
}
TEST(GradCheck, BatchNorm1d) {
    batchnorm_gradcheck(HostTensor(f64, {6, 5}));
}

TEST(GradCheck, ReluAndGelu) {
    std::mt19937 rng(6);
    HostTensor x(f64, {4, 9}), y(f64, {4, 9}), dy(f64, {4, 9}), dx(f64, {4, 9});
    test::fill_random(x, rng, -3.0, 3.0);
    test::fill_random(dy, rng);
    relu_forward_cpu(x, y);
    relu_backward_cpu(y, dy, dx, GradWrite::store);
    expect_gradients([&] { relu_forward_cpu(x, y); }, y, dy, {{&x, &dx}});
    gelu_backward_cpu(x, dy, dx, GradWrite::store);
    expect_gradients([&] { gelu_forward_cpu(x, y); }, y, dy, {{&x, &dx}});
}

TEST(GradCheck, MaxAndAvgPool) {
    std::mt19937 rng(7);
    for (Layout layout : {Layout::nchw, Layout::nhwc}) {
        const Pool2dParams p{.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1};
        HostTensor x(f64, {2, 3, 7, 6}, layout), y(f64, {2, 3, 4, 3}, layout), dy(f64, {2, 3, 4, 3}, layout),
            dx(f64, {2, 3, 7, 6}, layout);
        HostTensor argmax(DType::i32, {2, 3, 4, 3}, layout);
        test::fill_random(x, rng);
        test::fill_random(dy, rng);
        maxpool2d_forward_cpu(x, y, argmax, p);
        maxpool2d_backward_cpu(dy, argmax, dx, p, GradWrite::store);
        expect_gradients([&] { maxpool2d_forward_cpu(x, y, argmax, p); }, y, dy, {{&x, &dx}});
        avgpool2d_backward_cpu(dy, dx, p, GradWrite::store);
        expect_gradients([&] { avgpool2d_forward_cpu(x, y, p); }, y, dy, {{&x, &dx}});
    }
}

TEST(GradCheck, Dropout) {
    std::mt19937 rng(8);
    HostTensor x(f64, {50}), y(f64, {50}), dy(f64, {50}), dx(f64, {50});
    HostTensor mask(DType::u8, {50});
    test::fill_random(x, rng);
    test::fill_random(dy, rng);
    DropoutParams p;
    p.p = 0.3f;
    p.seed = 99;
    dropout_forward_cpu(x, y, mask, p);
    dropout_backward_cpu(dy, mask, dx, p.p, GradWrite::store);
    expect_gradients([&] { dropout_forward_cpu(x, y, mask, p); }, y, dy, {{&x, &dx}});
}

TEST(GradCheck, SoftmaxCrossEntropy) {
    std::mt19937 rng(9);
    HostTensor logits(f64, {4, 7}), losses(f64, {4}), dlogits(f64, {4, 7});
    HostTensor targets(DType::i32, {4});
    test::fill_random(logits, rng, -3.0, 3.0);
    for (int i = 0; i < 4; ++i) targets.set(i, (i * 3) % 7);
    const float grad_scale = 0.25f;  // mean over 4 rows
    softmax_cross_entropy_cpu(logits, targets, losses, dlogits, grad_scale);
    auto loss = [&] {
        softmax_cross_entropy_cpu(logits, targets, losses, {}, grad_scale);
        double total = 0.0;
        for (int i = 0; i < 4; ++i) total += losses.get(i);
        return total * grad_scale;
    };
    EXPECT_LT(finite_difference_error(logits, loss, dlogits), kTolerance);
}

TEST(GradCheck, LayerNorm) {
    std::mt19937 rng(10);
    HostTensor x(f64, {2, 3, 8}), y(f64, {2, 3, 8}), dy(f64, {2, 3, 8}), dx(f64, {2, 3, 8});
    HostTensor gamma(f64, {8}), beta(f64, {8}), mean(f64, {6}), rstd(f64, {6});
    HostTensor dgamma(f64, {8}), dbeta(f64, {8});
    for (HostTensor* t : {&x, &dy, &beta}) test::fill_random(*t, rng);
    test::fill_random(gamma, rng, 0.5, 1.5);
    layernorm_forward_cpu(x, gamma, beta, y, mean, rstd);
    layernorm_backward_cpu(x, dy, gamma, mean, rstd, dx, dgamma, dbeta, GradWrite::store, GradWrite::store);
    expect_gradients([&] { layernorm_forward_cpu(x, gamma, beta, y, mean, rstd); }, y, dy,
                     {{&x, &dx}, {&gamma, &dgamma}, {&beta, &dbeta}});
}

// The unfused chain with f64 scratch (as the f64 gradient checks of nn run it).
TEST(GradCheck, LayerNormUnfused) {
    std::mt19937 rng(14);
    HostTensor x(f64, {2, 3, 8}), y(f64, {2, 3, 8}), dy(f64, {2, 3, 8}), dx(f64, {2, 3, 8});
    HostTensor gamma(f64, {8}), beta(f64, {8}), mean(f64, {6}), rstd(f64, {6});
    HostTensor dgamma(f64, {8}), dbeta(f64, {8});
    HostTensor forward_scratch(f64, {layernorm_forward_unfused_scratch(6, 8)});
    HostTensor backward_scratch(f64, {layernorm_backward_unfused_scratch(6, 8)});
    for (HostTensor* t : {&x, &dy, &beta}) test::fill_random(*t, rng);
    test::fill_random(gamma, rng, 0.5, 1.5);
    layernorm_forward_unfused_cpu(x, gamma, beta, y, mean, rstd, forward_scratch);
    layernorm_backward_unfused_cpu(x, dy, gamma, mean, rstd, dx, dgamma, dbeta, backward_scratch, GradWrite::store,
                                   GradWrite::store);
    expect_gradients([&] { layernorm_forward_unfused_cpu(x, gamma, beta, y, mean, rstd, forward_scratch); }, y, dy,
                     {{&x, &dx}, {&gamma, &dgamma}, {&beta, &dbeta}});
}

TEST(GradCheck, Embedding) {
    std::mt19937 rng(11);
    HostTensor ids(DType::i32, {6}), table(f64, {5, 3}), out(f64, {6, 3}), dout(f64, {6, 3});
    HostTensor dtable(f64, {5, 3});
    const int id_values[6] = {0, 3, 3, 1, 4, 3};  // repeated ids must add up
    for (int i = 0; i < 6; ++i) ids.set(i, id_values[i]);
    test::fill_random(table, rng);
    test::fill_random(dout, rng);
    embedding_backward_cpu(ids, dout, dtable, GradWrite::store);
    expect_gradients([&] { embedding_forward_cpu(ids, table, out); }, out, dout, {{&table, &dtable}});
}

TEST(GradCheck, ResidualAdd) {
    std::mt19937 rng(12);
    HostTensor a(f64, {10}), b(f64, {10}), out(f64, {10}), dout(f64, {10}), da(f64, {10});
    for (HostTensor* t : {&a, &b, &dout}) test::fill_random(*t, rng);
    accumulate_grad_cpu(dout, da, GradWrite::store);
    expect_gradients([&] { add_cpu(a, b, out); }, out, dout, {{&a, &da}, {&b, &da}});
}

}  // namespace
