// CPU reference ops against hand-computed values and published formulas; store vs
// accumulate gradient writes; f16/bf16 emulation; layouts; argument checking.
#include "engine/ops/activation.h"
#include "engine/ops/dispatch.h"
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

#include <cmath>
#include <functional>

namespace {

using namespace ember;
using namespace ember::ops;
using ember::test::f32;
using ember::test::HostTensor;

TEST(OpsCpu, ConvKnownValues) {
    HostTensor x(f32, {1, 1, 3, 3}), w(f32, {1, 1, 2, 2}), b(f32, {1}), y(f32, {1, 1, 2, 2});
    for (int i = 0; i < 9; ++i) x.set(i, i + 1);
    w.set(0, 1);
    w.set(3, -1);  // y[p][q] = x[p][q] - x[p+1][q+1] = -4
    b.set(0, 1);
    conv2d_forward_cpu(x, w, b, y, {});
    for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(y.get(i), -3.0f);
    // Padding 1: the corner output sees only x[0][0] under the -1 tap.
    HostTensor y_padded(f32, {1, 1, 4, 4});
    Conv2dParams p;
    p.pad_h = p.pad_w = 1;
    conv2d_forward_cpu(x, w, {}, y_padded, p);
    EXPECT_FLOAT_EQ(y_padded.get(0), -1.0f);
    EXPECT_FLOAT_EQ(y_padded.get(15), 9.0f);
}

TEST(OpsCpu, ConvNhwcMatchesNchw) {
    std::mt19937 rng(1);
    Conv2dParams p;
    p.stride_h = 2;
    p.pad_h = p.pad_w = 1;
    HostTensor x(f32, {2, 5, 8, 7}), w(f32, {6, 5, 3, 3}), y(f32, {2, 6, 4, 7});
    test::fill_random(x, rng);
    test::fill_random(w, rng);
    conv2d_forward_cpu(x, w, {}, y, p);
    HostTensor x_last(f32, {2, 5, 8, 7}, Layout::nhwc), w_last(f32, {6, 5, 3, 3}, Layout::nhwc),
        y_last(f32, {2, 6, 4, 7}, Layout::nhwc), y_back(f32, {2, 6, 4, 7});
    convert_layout_cpu(x, x_last);
    convert_layout_cpu(w, w_last);
    conv2d_forward_cpu(x_last, w_last, {}, y_last, p);
    convert_layout_cpu(y_last, y_back);
    EXPECT_LT(test::relative_l2(test::values(y_back), test::values(y)), 1e-6);
    EXPECT_NE(test::values(y_last), test::values(y));  // memory order really differs
}

TEST(OpsCpu, GemmKnownValuesAndEpilogues) {
    HostTensor a(f32, {2, 2}), b(f32, {2, 2}), c(f32, {2, 2}), bias(f32, {2}), pre(f32, {2, 2});
    const float av[] = {1, 2, 3, 4}, bv[] = {5, 6, 7, 8};
    for (int i = 0; i < 4; ++i) {
        a.set(i, av[i]);
        b.set(i, bv[i]);
    }
    gemm_cpu(a, b, c);
    EXPECT_FLOAT_EQ(c.get(0), 19);
    EXPECT_FLOAT_EQ(c.get(1), 22);
    EXPECT_FLOAT_EQ(c.get(2), 43);
    EXPECT_FLOAT_EQ(c.get(3), 50);
    GemmArgs transposed;
    transposed.transpose_a = true;  // A^T B = [[26,30],[38,44]]
    gemm_cpu(a, b, c, transposed);
    EXPECT_FLOAT_EQ(c.get(0), 26);
    EXPECT_FLOAT_EQ(c.get(3), 44);
    bias.set(0, -19);
    bias.set(1, -21);
    GemmArgs gelu;
    gelu.epilogue = Epilogue::bias_gelu;
    gelu.bias = bias;
    gelu.pre_activation = pre;
    gemm_cpu(a, b, c, gelu);
    EXPECT_FLOAT_EQ(pre.get(0), 0.0f);
    EXPECT_FLOAT_EQ(pre.get(1), 1.0f);
    EXPECT_FLOAT_EQ(c.get(0), 0.0f);
    EXPECT_NEAR(c.get(1), 0.8411920, 1e-6);  // tanh-GELU(1)
    // beta accumulates into C before the epilogue.
    HostTensor ones(f32, {2, 2});
    test::fill_value(ones, 1.0);
    GemmArgs accumulate;
    accumulate.beta = 1.0f;
    gemm_cpu(a, b, ones, accumulate);
    EXPECT_FLOAT_EQ(ones.get(0), 20);
}

TEST(OpsCpu, LowPrecisionGemmAccumulatesInFp32) {
    std::mt19937 rng(2);
    for (DType low : {DType::bf16, DType::f16}) {
        HostTensor a(low, {16, 64}), b(low, {64, 8}), c_low(low, {16, 8}), c32(f32, {16, 8});
        test::fill_random(a, rng);
        test::fill_random(b, rng);
        gemm_cpu(a, b, c32);
        gemm_cpu(a, b, c_low);
        for (int64_t r = 0; r < 16; ++r)
            for (int64_t col = 0; col < 8; ++col) {
                double exact = 0.0;  // the product of the rounded inputs, in double
                for (int64_t k = 0; k < 64; ++k) exact += a.get(r * 64 + k) * b.get(k * 8 + col);
                EXPECT_NEAR(c32.get(r * 8 + col), exact, 1e-5);
                // A low-precision C is the fp32 result rounded once.
                EXPECT_EQ(c_low.get(r * 8 + col), round_to_dtype(static_cast<float>(c32.get(r * 8 + col)), low));
            }
    }
}

TEST(OpsCpu, BatchNormRunningStatisticsAndEval) {
    HostTensor x(f32, {4, 1}), y(f32, {4, 1}), gamma(f32, {1}), beta(f32, {1});
    HostTensor running_mean(f32, {1}), running_var(f32, {1}), mean(f32, {1}), invstd(f32, {1});
    for (int i = 0; i < 4; ++i) x.set(i, i + 1);
    gamma.set(0, 2);
    beta.set(0, 1);
    running_var.set(0, 1);
    BatchNormParams p;
    batchnorm_forward_train_cpu(x, gamma, beta, y, running_mean, running_var, mean, invstd, p);
    EXPECT_FLOAT_EQ(mean.get(0), 2.5f);
    EXPECT_NEAR(invstd.get(0), 1.0 / std::sqrt(1.25 + 1e-5), 1e-6);
    EXPECT_NEAR(running_mean.get(0), 0.25, 1e-7);
    EXPECT_NEAR(running_var.get(0), 0.9 + 0.1 * (5.0 / 3.0), 1e-6);  // unbiased variance
    EXPECT_NEAR(y.get(0), 2 * (1 - 2.5) / std::sqrt(1.25 + 1e-5) + 1, 1e-5);
    batchnorm_forward_eval_cpu(x, gamma, beta, running_mean, running_var, y, p);
    EXPECT_NEAR(y.get(3), 2 * (4 - 0.25) / std::sqrt(running_var.get(0) + 1e-5) + 1, 1e-5);
}

TEST(OpsCpu, PoolingKnownValues) {
    HostTensor x(f32, {1, 1, 4, 4}), y(f32, {1, 1, 2, 2}), argmax(DType::i32, {1, 1, 2, 2});
    for (int i = 0; i < 16; ++i) x.set(i, i + 1);
    maxpool2d_forward_cpu(x, y, argmax, {});
    const int expected_max[] = {6, 8, 14, 16}, expected_index[] = {5, 7, 13, 15};
    for (int i = 0; i < 4; ++i) {
        EXPECT_FLOAT_EQ(y.get(i), expected_max[i]);
        EXPECT_EQ(argmax.get(i), expected_index[i]);
    }
    avgpool2d_forward_cpu(x, y, {});
    EXPECT_FLOAT_EQ(y.get(0), (1 + 2 + 5 + 6) / 4.0f);
    // Global average pooling: kernel = input size.
    Pool2dParams global;
    global.kernel_h = global.kernel_w = global.stride_h = global.stride_w = 4;
    HostTensor pooled(f32, {1, 1, 1, 1});
    avgpool2d_forward_cpu(x, pooled, global);
    EXPECT_FLOAT_EQ(pooled.get(0), 8.5f);
}

TEST(OpsCpu, SoftmaxCrossEntropyKnownValues) {
    HostTensor logits(f32, {2, 4}), losses(f32, {2}), dlogits(f32, {2, 4});
    HostTensor targets(DType::i32, {2});
    targets.set(0, 2);
    targets.set(1, 0);
    for (int v = 0; v < 4; ++v) logits.set(4 + v, v == 0 ? 1000.0 : 0.0);  // huge logit: no overflow
    softmax_cross_entropy_cpu(logits, targets, losses, dlogits, 0.5f);
    EXPECT_NEAR(losses.get(0), std::log(4.0), 1e-6);  // uniform logits
    EXPECT_NEAR(losses.get(1), 0.0, 1e-6);
    EXPECT_NEAR(dlogits.get(0), 0.5 * 0.25, 1e-7);
    EXPECT_NEAR(dlogits.get(2), 0.5 * (0.25 - 1), 1e-7);
    EXPECT_NEAR(mean_loss(losses), std::log(4.0) / 2, 1e-6);
    targets.set(1, 4);
    EXPECT_THROW(softmax_cross_entropy_cpu(logits, targets, losses, dlogits, 1.0f), std::invalid_argument);
}

TEST(OpsCpu, LayerNormKnownValues) {
    HostTensor x(f32, {1, 4}), y(f32, {1, 4}), gamma(f32, {4}), beta(f32, {4}), mean(f32, {1}), rstd(f32, {1});
    for (int i = 0; i < 4; ++i) {
        x.set(i, i + 1);
        gamma.set(i, 1);
    }
    beta.set(3, 10);
    layernorm_forward_cpu(x, gamma, beta, y, mean, rstd);
    EXPECT_FLOAT_EQ(mean.get(0), 2.5f);
    EXPECT_NEAR(rstd.get(0), 1 / std::sqrt(1.25 + 1e-5), 1e-6);
    EXPECT_NEAR(y.get(0), -1.5 / std::sqrt(1.25 + 1e-5), 1e-5);
    EXPECT_NEAR(y.get(3), 1.5 / std::sqrt(1.25 + 1e-5) + 10, 1e-5);
}

TEST(OpsCpu, DropoutMaskIsSeededAndUnbiased) {
    const int64_t n = 200000;
    HostTensor x(f32, {n}), y(f32, {n}), mask(DType::u8, {n}), mask_again(DType::u8, {n});
    test::fill_value(x, 2.0);
    DropoutParams p;
    p.p = 0.25f;
    p.seed = 7;
    dropout_forward_cpu(x, y, mask, p);
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i) {
        kept += mask.get(i) != 0;
        EXPECT_FLOAT_EQ(y.get(i), mask.get(i) ? 2.0f / 0.75f : 0.0f);
    }
    EXPECT_NEAR(double(kept) / n, 0.75, 0.005);  // ~10 standard deviations
    dropout_forward_cpu(x, y, mask_again, p);
    EXPECT_EQ(mask.storage, mask_again.storage);
    p.offset = n;
    dropout_forward_cpu(x, y, mask_again, p);
    EXPECT_NE(mask.storage, mask_again.storage);
}

TEST(OpsCpu, UnfusedGeluMatchesFused) {
    std::mt19937 rng(3);
    HostTensor x(f32, {1000}), fused(f32, {1000}), unfused(f32, {1000}), scratch(f32, {1000});
    test::fill_random(x, rng, -5.0, 5.0);
    gelu_forward_cpu(x, fused);
    gelu_forward_unfused_cpu(x, unfused, scratch);
    EXPECT_LT(test::relative_l2(test::values(unfused), test::values(fused)), 1e-6);
}

// The unfused chain (intermediates rounded to f32) against the fused op: forward,
// backward with and without dx, store and accumulate, f32 and bf16 activations.
TEST(OpsCpu, UnfusedLayerNormMatchesFused) {
    std::mt19937 rng(13);
    for (DType t : {f32, DType::bf16}) {
        for (int64_t C : {48, 768}) {
            const int64_t rows = 34;
            const std::string what = std::string(dtype_name(t)) + " C=" + std::to_string(C);
            const double tolerance = t == f32 ? 1e-6 : 1e-2;
            HostTensor x(t, {2, 17, C}), dy(t, {2, 17, C}), gamma(f32, {C}), beta(f32, {C});
            test::fill_normalization_inputs(x, dy, gamma, beta, rng);
            HostTensor y(t, {2, 17, C}), mean(f32, {rows}), rstd(f32, {rows});
            HostTensor y_unfused(t, {2, 17, C}), mean_unfused(f32, {rows}), rstd_unfused(f32, {rows});
            HostTensor forward_scratch(f32, {layernorm_forward_unfused_scratch(rows, C)});
            HostTensor backward_scratch(f32, {layernorm_backward_unfused_scratch(rows, C)});
            layernorm_forward_cpu(x, gamma, beta, y, mean, rstd);
            layernorm_forward_unfused_cpu(x, gamma, beta, y_unfused, mean_unfused, rstd_unfused, forward_scratch);
            EXPECT_LT(test::relative_l2(test::values(mean_unfused), test::values(mean)), 1e-6) << what;
            EXPECT_LT(test::relative_l2(test::values(rstd_unfused), test::values(rstd)), 1e-6) << what;
            EXPECT_LT(test::relative_l2(test::values(y_unfused), test::values(y)), tolerance) << what;

            HostTensor dx(t, {2, 17, C}), dgamma(f32, {C}), dbeta(f32, {C});
            HostTensor dx_unfused(t, {2, 17, C}), dgamma_unfused(f32, {C}), dbeta_unfused(f32, {C});
            layernorm_backward_cpu(x, dy, gamma, mean, rstd, dx, dgamma, dbeta, GradWrite::store, GradWrite::store);
            layernorm_backward_unfused_cpu(x, dy, gamma, mean, rstd, dx_unfused, dgamma_unfused, dbeta_unfused,
                                           backward_scratch, GradWrite::store, GradWrite::store);
            EXPECT_LT(test::relative_l2(test::values(dx_unfused), test::values(dx)), t == f32 ? 1e-5 : 1e-2) << what;
            EXPECT_LT(test::relative_l2(test::values(dgamma_unfused), test::values(dgamma)), 1e-6) << what;
            EXPECT_LT(test::relative_l2(test::values(dbeta_unfused), test::values(dbeta)), 1e-6) << what;
            // Without dx only the parameter gradients are written.
            HostTensor dgamma_only(f32, {C}), dbeta_only(f32, {C});
            layernorm_backward_unfused_cpu(x, dy, gamma, mean, rstd, {}, dgamma_only, dbeta_only, backward_scratch,
                                           GradWrite::store, GradWrite::store);
            EXPECT_EQ(test::values(dgamma_only), test::values(dgamma_unfused)) << what;
            EXPECT_EQ(test::values(dbeta_only), test::values(dbeta_unfused)) << what;
        }
    }
    HostTensor too_small(f32, {10});
    HostTensor x(f32, {4, 6}), y(f32, {4, 6}), gamma(f32, {6}), beta(f32, {6}), mean(f32, {4}), rstd(f32, {4});
    EXPECT_THROW(layernorm_forward_unfused_cpu(x, gamma, beta, y, mean, rstd, too_small), std::invalid_argument);
    EXPECT_THROW(layernorm_backward_unfused_cpu(x, y, gamma, mean, rstd, y, gamma, beta, too_small, GradWrite::store,
                                                GradWrite::store),
                 std::invalid_argument);
}

TEST(OpsCpu, CastAndLayoutRoundTrips) {
    std::mt19937 rng(4);
    HostTensor x(f32, {2, 3, 4, 5}), x_bf16(DType::bf16, {2, 3, 4, 5}), back(f32, {2, 3, 4, 5});
    test::fill_random(x, rng);
    cast_cpu(x, x_bf16);
    cast_cpu(x_bf16, back);
    for (int64_t i = 0; i < x.numel(); ++i)
        EXPECT_EQ(back.get(i), round_to_dtype(static_cast<float>(x.get(i)), DType::bf16));
    HostTensor last(f32, {2, 3, 4, 5}, Layout::nhwc), again(f32, {2, 3, 4, 5});
    convert_layout_cpu(x, last);
    EXPECT_EQ(last.get(1), x.get(20));  // (0,1,0,0) sits next to (0,0,0,0) channels-last
    convert_layout_cpu(last, again);
    EXPECT_EQ(test::values(again), test::values(x));
    scale_cpu(again, 2.0f);
    EXPECT_FLOAT_EQ(again.get(7), 2 * x.get(7));
    fill_cpu(again, 3.0f);
    EXPECT_FLOAT_EQ(again.get(100), 3.0f);
}

// Runs a backward op in store mode and in accumulate mode over a prefilled output:
// accumulate must give prefill + stored result, element by element.
void expect_accumulates(HostTensor& output, const std::function<void(GradWrite)>& backward) {
    backward(GradWrite::store);
    std::vector<double> stored = test::values(output);
    test::fill_value(output, 0.5);
    backward(GradWrite::accumulate);
    for (int64_t i = 0; i < output.numel(); ++i) ASSERT_NEAR(output.get(i), stored[i] + 0.5, 1e-5) << i;
    test::fill_value(output, 123.0);  // store must not read what was there
    backward(GradWrite::store);
    for (int64_t i = 0; i < output.numel(); ++i) ASSERT_NEAR(output.get(i), stored[i], 1e-6) << i;
}

TEST(OpsCpu, StoreAndAccumulateModes) {
    std::mt19937 rng(5);
    HostTensor x(f32, {2, 3, 6, 6}), w(f32, {4, 3, 3, 3}), dy(f32, {2, 4, 4, 4});
    for (HostTensor* t : {&x, &w, &dy}) test::fill_random(*t, rng);
    HostTensor dx(f32, {2, 3, 6, 6}), dw(f32, {4, 3, 3, 3}), db(f32, {4});
    expect_accumulates(dx, [&](GradWrite m) { conv2d_backward_data_cpu(w, dy, dx, {}, m); });
    expect_accumulates(dw, [&](GradWrite m) { conv2d_backward_filter_cpu(x, dy, dw, {}, m); });
    expect_accumulates(db, [&](GradWrite m) { conv2d_backward_bias_cpu(dy, db, m); });

    HostTensor lx(f32, {5, 3}), lw(f32, {2, 3}), ldy(f32, {5, 2});
    for (HostTensor* t : {&lx, &lw, &ldy}) test::fill_random(*t, rng);
    HostTensor ldx(f32, {5, 3}), ldw(f32, {2, 3}), ldb(f32, {2});
    expect_accumulates(ldx, [&](GradWrite m) { linear_backward_cpu(lx, lw, ldy, ldx, {}, {}, m, m); });
    expect_accumulates(ldw, [&](GradWrite m) { linear_backward_cpu(lx, lw, ldy, {}, ldw, {}, m, m); });
    expect_accumulates(ldb, [&](GradWrite m) { linear_backward_cpu(lx, lw, ldy, {}, {}, ldb, m, m); });

    HostTensor gamma(f32, {3}), mean(f32, {3}), invstd(f32, {3}), y(f32, {2, 3, 6, 6}), beta(f32, {3});
    test::fill_value(gamma, 1.5);
    batchnorm_forward_train_cpu(x, gamma, beta, y, {}, {}, mean, invstd, {});
    HostTensor bdx(f32, {2, 3, 6, 6}), dgamma(f32, {3}), dbeta(f32, {3}), bdy(f32, {2, 3, 6, 6});
    test::fill_random(bdy, rng);
    expect_accumulates(bdx, [&](GradWrite m) {
        batchnorm_backward_cpu(x, bdy, gamma, mean, invstd, bdx, dgamma, dbeta, m, GradWrite::store);
    });
    expect_accumulates(dgamma, [&](GradWrite m) {
        batchnorm_backward_cpu(x, bdy, gamma, mean, invstd, {}, dgamma, dbeta, GradWrite::store, m);
    });

    HostTensor pool_dy(f32, {2, 3, 3, 3}), argmax(DType::i32, {2, 3, 3, 3}), pooled(f32, {2, 3, 3, 3});
    test::fill_random(pool_dy, rng);
    maxpool2d_forward_cpu(x, pooled, argmax, {});
    expect_accumulates(dx, [&](GradWrite m) { maxpool2d_backward_cpu(pool_dy, argmax, dx, {}, m); });
    expect_accumulates(dx, [&](GradWrite m) { avgpool2d_backward_cpu(pool_dy, dx, {}, m); });
    expect_accumulates(dx, [&](GradWrite m) { relu_backward_cpu(x, bdy, dx, m); });
    expect_accumulates(dx, [&](GradWrite m) { gelu_backward_cpu(x, bdy, dx, m); });
    expect_accumulates(dx, [&](GradWrite m) { accumulate_grad_cpu(bdy, dx, m); });
    HostTensor mask(DType::u8, {2, 3, 6, 6});
    DropoutParams dp;
    dropout_forward_cpu(x, y, mask, dp);
    expect_accumulates(dx, [&](GradWrite m) { dropout_backward_cpu(bdy, mask, dx, dp.p, m); });

    HostTensor ln_x(f32, {4, 6}), ln_dy(f32, {4, 6}), ln_g(f32, {6}), ln_b(f32, {6}), ln_y(f32, {4, 6});
    HostTensor ln_mean(f32, {4}), ln_rstd(f32, {4}), ln_dx(f32, {4, 6}), ln_dg(f32, {6}), ln_db(f32, {6});
    for (HostTensor* t : {&ln_x, &ln_dy, &ln_g}) test::fill_random(*t, rng);
    layernorm_forward_cpu(ln_x, ln_g, ln_b, ln_y, ln_mean, ln_rstd);
    expect_accumulates(ln_dx, [&](GradWrite m) {
        layernorm_backward_cpu(ln_x, ln_dy, ln_g, ln_mean, ln_rstd, ln_dx, ln_dg, ln_db, m, GradWrite::store);
    });
    expect_accumulates(ln_db, [&](GradWrite m) {
        layernorm_backward_cpu(ln_x, ln_dy, ln_g, ln_mean, ln_rstd, {}, ln_dg, ln_db, GradWrite::store, m);
    });
    HostTensor ln_scratch(f32, {layernorm_backward_unfused_scratch(4, 6)});
    expect_accumulates(ln_dx, [&](GradWrite m) {
        layernorm_backward_unfused_cpu(ln_x, ln_dy, ln_g, ln_mean, ln_rstd, ln_dx, ln_dg, ln_db, ln_scratch, m,
                                       GradWrite::store);
    });
    expect_accumulates(ln_dg, [&](GradWrite m) {
        layernorm_backward_unfused_cpu(ln_x, ln_dy, ln_g, ln_mean, ln_rstd, {}, ln_dg, ln_db, ln_scratch,
                                       GradWrite::store, m);
    });
    expect_accumulates(ln_db, [&](GradWrite m) {
        layernorm_backward_unfused_cpu(ln_x, ln_dy, ln_g, ln_mean, ln_rstd, ln_dx, ln_dg, ln_db, ln_scratch,
                                       GradWrite::store, m);
    });

    HostTensor ids(DType::i32, {3}), dout(f32, {3, 6}), dtable(f32, {4, 6});
    ids.set(0, 1);
    ids.set(1, 1);
    ids.set(2, 3);
    test::fill_random(dout, rng);
    expect_accumulates(dtable, [&](GradWrite m) { embedding_backward_cpu(ids, dout, dtable, m); });
}

// f32 nchw tensors take plain-pointer fast paths (BN, pooling, ReLU, conv output);
// they must agree with the generic path, exercised here through f64 copies.
TEST(OpsCpu, Float32FastPathsMatchGenericPath) {
    std::mt19937 rng(7);
    HostTensor x(f32, {3, 4, 6, 8}), dy(f32, {3, 4, 6, 8}), gamma(f32, {4}), beta(f32, {4});
    test::fill_normalization_inputs(x, dy, gamma, beta, rng);
    using test::widen;
    auto expect_match = [](const HostTensor& fast, const HostTensor& generic, const char* what) {
        EXPECT_LT(test::relative_l2(test::values(fast), test::values(generic)), 1e-6) << what;
    };
    HostTensor x64 = widen(x), dy64 = widen(dy), gamma64 = widen(gamma), beta64 = widen(beta);
    HostTensor y(f32, {3, 4, 6, 8}), mean(f32, {4}), invstd(f32, {4}), rm(f32, {4}), rv(f32, {4});
    HostTensor y64 = widen(y), mean64 = widen(mean), invstd64 = widen(invstd), rm64 = widen(rm), rv64 = widen(rv);
    batchnorm_forward_train_cpu(x, gamma, beta, y, rm, rv, mean, invstd, {});
    batchnorm_forward_train_cpu(x64, gamma64, beta64, y64, rm64, rv64, mean64, invstd64, {});
    expect_match(y, y64, "batchnorm y");
    expect_match(rv, rv64, "batchnorm running_var");
    HostTensor dx(f32, {3, 4, 6, 8}), dg(f32, {4}), db(f32, {4});
    HostTensor dx64 = widen(dx), dg64 = widen(dg), db64 = widen(db);
    batchnorm_backward_cpu(x, dy, gamma, mean, invstd, dx, dg, db, GradWrite::store, GradWrite::store);
    batchnorm_backward_cpu(x64, dy64, gamma64, mean64, invstd64, dx64, dg64, db64, GradWrite::store, GradWrite::store);
    expect_match(dx, dx64, "batchnorm dx");
    expect_match(dg, dg64, "batchnorm dgamma");
    expect_match(db, db64, "batchnorm dbeta");

    Pool2dParams p;
    p.kernel_h = p.kernel_w = 3;
    p.pad_h = p.pad_w = 1;
    HostTensor pooled(f32, {3, 4, 3, 4}), argmax(DType::i32, {3, 4, 3, 4}), pooled64 = widen(pooled);
    HostTensor argmax64 = argmax;
    maxpool2d_forward_cpu(x, pooled, argmax, p);
    maxpool2d_forward_cpu(x64, pooled64, argmax64, p);
    expect_match(pooled, pooled64, "maxpool");
    EXPECT_EQ(argmax.storage, argmax64.storage);
    HostTensor pdy(f32, {3, 4, 3, 4});
    test::fill_random(pdy, rng);
    HostTensor pdy64 = widen(pdy);
    maxpool2d_backward_cpu(pdy, argmax, dx, p, GradWrite::store);
    maxpool2d_backward_cpu(pdy64, argmax64, dx64, p, GradWrite::store);
    expect_match(dx, dx64, "maxpool backward");

    relu_forward_cpu(x, y);
    relu_forward_cpu(x64, y64);
    expect_match(y, y64, "relu");
    relu_backward_cpu(y, dy, dx, GradWrite::accumulate);
    relu_backward_cpu(y64, dy64, dx64, GradWrite::accumulate);
    expect_match(dx, dx64, "relu backward");
}

TEST(OpsCpu, FlattenFeedsLinear) {
    std::mt19937 rng(6);
    HostTensor x(f32, {2, 3, 2, 2}), w(f32, {5, 12}), y(f32, {2, 5});
    test::fill_random(x, rng);
    test::fill_random(w, rng);
    linear_forward_cpu(flatten(x), w, {}, y);
    double expected = 0.0;
    for (int k = 0; k < 12; ++k) expected += x.get(12 + k) * w.get(3 * 12 + k);
    EXPECT_NEAR(y.get(5 + 3), expected, 1e-5);
}

TEST(OpsCpu, DispatchRunsTheCpuTwin) {
    HostTensor x(f32, {4}), y(f32, {4});
    x.set(0, -1.0);
    x.set(1, 2.0);
    const OpContext cpu{};
    relu_forward(cpu, x, y);
    EXPECT_EQ(y.get(0), 0.0);
    EXPECT_EQ(y.get(1), 2.0);
    fill(cpu, y, 5.0f);
    EXPECT_EQ(y.get(3), 5.0);
    HostTensor rows(f32, {2, 2}), normalized(f32, {2, 2}), gamma(f32, {2}), beta(f32, {2});
    HostTensor mean(f32, {2}), rstd(f32, {2}), scratch(f32, {layernorm_forward_unfused_scratch(2, 2)});
    for (int i = 0; i < 4; ++i) rows.set(i, i);
    fill(cpu, gamma, 1.0f);
    layernorm_forward_unfused(cpu, rows, gamma, beta, normalized, mean, rstd, scratch);
    EXPECT_NEAR(normalized.get(3), 1.0 / std::sqrt(1.0 + 4e-5), 1e-6);  // (3 - 2.5) / sqrt(0.25 + eps)
    const OpContext missing_context{Device::cuda, nullptr};
    EXPECT_THROW(relu_forward(missing_context, x, y), std::invalid_argument);
}

TEST(OpsCpu, RejectsMismatchedArguments) {
    HostTensor x(f32, {2, 3, 6, 6}), w(f32, {4, 2, 3, 3}), y(f32, {2, 4, 4, 4});
    try {
        conv2d_forward_cpu(x, w, {}, y, {});
        FAIL() << "expected invalid_argument";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("conv2d_forward_cpu"), std::string::npos) << e.what();
    }
    HostTensor a(f32, {2, 3}), b(f32, {4, 5}), c(f32, {2, 5});
    EXPECT_THROW(gemm_cpu(a, b, c), std::invalid_argument);
    HostTensor i32(DType::i32, {2, 3});
    EXPECT_THROW(relu_forward_cpu(i32, a), std::invalid_argument);
}

}  // namespace
