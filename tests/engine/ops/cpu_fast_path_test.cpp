// The CPU fast paths (oneDNN primitives, threaded loops; engine/cpu/implementation.h)
// against the reference loops they stand in for, op by op: odd shapes, strides, padding
// and dilation, both layouts, with and without bias, GradWrite::store and ::accumulate.
// Outputs start as NaN (store) or as the same random values (accumulate) in both runs.
//
// Tolerances (f32):
//   - oneDNN convolutions and GEMMs (Match::close): relative L2 error <= 2e-6, and no
//     element further than 2e-5 x the largest |reference| value from the reference.
//     Both sides accumulate in f32 in different orders; neither is exact.
//   - every other fast path (Match::exact): bit for bit. Those are the reference loops
//     split over threads into slices that write disjoint outputs, with each reduction
//     kept whole in one thread, in its order and in double.
#include "engine/cpu/implementation.h"
#include "engine/cpu/parallel.h"
#include "engine/ops/activation.h"
#include "engine/ops/attention.h"
#include "engine/ops/batchnorm.h"
#include "engine/ops/conv.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/gemm.h"
#include "engine/ops/layernorm.h"
#include "engine/ops/pooling.h"
#include "tests/engine/ops/test_util.h"

#include <gtest/gtest.h>

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

namespace {

using namespace ember;
using namespace ember::ops;
using cpu::OpImplementation;
using cpu::ScopedOpImplementation;
using test::f32;
using test::HostTensor;

constexpr double kRelativeL2 = 2e-6;
constexpr double kElementwise = 2e-5;

void fill_nan(HostTensor& t) {
    test::fill_value(t, std::numeric_limits<double>::quiet_NaN());
}

enum class Match { close, exact };

// Three threads on any machine: slices of unequal length, more threads than this
// machine's two cores, the split exercised even on one core.
class ThreeThreads : public ::testing::Environment {
  public:
    void SetUp() override { cpu::set_compute_threads(3); }
};
const auto* const kThreeThreads = ::testing::AddGlobalTestEnvironment(new ThreeThreads);

// Runs `op` on `outputs` once with the reference and once with the fast path, from the
// same starting values, and compares every output.
void expect_fast_matches_reference(std::vector<HostTensor*> outputs, GradWrite write, const std::function<void()>& op,
                                   const std::string& what, Match match = Match::close) {
    std::mt19937 rng(11);
    for (HostTensor* t : outputs) {
        if (write == GradWrite::store)
            fill_nan(*t);
        else
            test::fill_random(*t, rng);
    }
    std::vector<HostTensor> start;
    for (HostTensor* t : outputs) start.push_back(*t);
    {
        ScopedOpImplementation reference(OpImplementation::reference);
        op();
    }
    std::vector<HostTensor> reference;
    for (std::size_t i = 0; i < outputs.size(); ++i) {
        reference.push_back(*outputs[i]);
        *outputs[i] = start[i];
    }
    {
        ScopedOpImplementation fast(OpImplementation::fast);
        op();
    }
    for (std::size_t i = 0; i < outputs.size(); ++i) {
        if (match == Match::exact) {
            EXPECT_EQ(outputs[i]->storage, reference[i].storage) << what << ", output " << i << " differs";
            continue;
        }
        const std::vector<double> got = test::values(*outputs[i]), want = test::values(reference[i]);
        double largest = 0.0, worst = 0.0;
        for (double v : want) largest = std::max(largest, std::fabs(v));
        for (std::size_t j = 0; j < got.size(); ++j) {
            ASSERT_FALSE(std::isnan(got[j])) << what << ", output " << i << ": element " << j << " not written";
            worst = std::max(worst, std::fabs(got[j] - want[j]));
        }
        EXPECT_LE(test::relative_l2(got, want), kRelativeL2) << what << ", output " << i;
        EXPECT_LE(worst, kElementwise * std::max(1.0, largest)) << what << ", output " << i;
    }
}

// expect_fast_matches_reference in both gradient modes: `op(write)` storing, then
// accumulating, named "<what> (store)" and "<what> (accumulate)".
void expect_fast_matches_reference_in_both_modes(const std::vector<HostTensor*>& outputs,
                                                 const std::function<void(GradWrite)>& op, const std::string& what,
                                                 Match match = Match::close) {
    for (GradWrite write : {GradWrite::store, GradWrite::accumulate})
        expect_fast_matches_reference(
            outputs, write, [&] { op(write); }, what + (write == GradWrite::store ? " (store)" : " (accumulate)"),
            match);
}

struct ConvCase {
    int64_t n, c, h, w, k, r, s;
    int stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
};

std::string describe(const ConvCase& k, Layout layout) {
    return "conv N" + std::to_string(k.n) + " C" + std::to_string(k.c) + " " + std::to_string(k.h) + "x" +
           std::to_string(k.w) + " K" + std::to_string(k.k) + " " + std::to_string(k.r) + "x" + std::to_string(k.s) +
           " stride " + std::to_string(k.stride_h) + "x" + std::to_string(k.stride_w) + " pad " +
           std::to_string(k.pad_h) + "x" + std::to_string(k.pad_w) + " dilation " + std::to_string(k.dilation_h) + "x" +
           std::to_string(k.dilation_w) + (layout == Layout::nhwc ? " nhwc" : " nchw");
}

// The models' convolutions (stem, 3x3 stride 1 and 2, 1x1 projection, 7x7 patches) and
// odd ones: channel counts off the 16-wide blocks, non-square images, asymmetric
// stride/padding, dilation, a kernel larger than the padding leaves room for.
const ConvCase kConvCases[] = {
    {2, 1, 28, 28, 16, 3, 3, 1, 1, 1, 1, 1, 1},
    {2, 16, 14, 14, 16, 3, 3, 1, 1, 1, 1, 1, 1},
    {3, 16, 14, 14, 32, 3, 3, 2, 2, 1, 1, 1, 1},
    {2, 16, 14, 14, 32, 1, 1, 2, 2, 0, 0, 1, 1},
    {2, 1, 28, 28, 64, 7, 7, 7, 7, 0, 0, 1, 1},
    {1, 3, 7, 9, 5, 3, 3, 1, 1, 1, 1, 1, 1},
    {3, 17, 13, 11, 33, 3, 3, 2, 1, 1, 2, 1, 1},
    {2, 5, 12, 10, 7, 5, 3, 3, 2, 2, 1, 1, 1},
    {2, 20, 9, 9, 18, 3, 3, 1, 1, 2, 2, 2, 2},
    {1, 32, 8, 8, 16, 1, 1, 1, 1, 0, 0, 1, 1},
    {2, 4, 6, 6, 3, 4, 4, 2, 2, 1, 0, 1, 1},
    {2, 3, 7, 7, 4, 2, 2, 2, 2, 0, 0, 1, 1},
    // 1x1 with a stride, fewer channels than oneDNN's blocks (8 on AVX2, 16 on AVX-512):
    // ResNet's 4->8 shortcut at batch 8, 8 and 12 channels, padding, one axis strided.
    {8, 4, 28, 28, 8, 1, 1, 2, 2, 0, 0, 1, 1},
    {2, 4, 14, 14, 8, 1, 1, 2, 2, 0, 0, 1, 1},
    {4, 8, 16, 16, 16, 1, 1, 2, 2, 0, 0, 1, 1},
    {16, 12, 64, 64, 16, 1, 1, 2, 2, 0, 0, 1, 1},
    {2, 3, 9, 9, 5, 1, 1, 2, 2, 0, 0, 1, 1},
    {2, 6, 9, 10, 16, 1, 1, 2, 3, 1, 2, 1, 1},
    {2, 5, 8, 9, 8, 1, 1, 1, 2, 0, 0, 1, 1},
    {2, 7, 6, 6, 9, 1, 1, 1, 1, 1, 1, 1, 1},
};

TEST(CpuFastPath, ConvolutionMatchesReference) {
    for (const ConvCase& k : kConvCases)
        for (Layout layout : {Layout::nchw, Layout::nhwc}) {
            SCOPED_TRACE(describe(k, layout));
            const Conv2dParams params{k.stride_h, k.stride_w, k.pad_h, k.pad_w, k.dilation_h, k.dilation_w};
            const int64_t p = conv_output_size(k.h, k.r, k.stride_h, k.pad_h, k.dilation_h);
            const int64_t q = conv_output_size(k.w, k.s, k.stride_w, k.pad_w, k.dilation_w);
            std::mt19937 rng(5);
            HostTensor x(f32, {k.n, k.c, k.h, k.w}, layout), weight(f32, {k.k, k.c, k.r, k.s}, layout);
            HostTensor bias(f32, {k.k}), dy(f32, {k.n, k.k, p, q}, layout);
            HostTensor y(f32, {k.n, k.k, p, q}, layout), dx(f32, {k.n, k.c, k.h, k.w}, layout);
            HostTensor dweight(f32, {k.k, k.c, k.r, k.s}, layout), dbias(f32, {k.k});
            for (HostTensor* t : {&x, &weight, &bias, &dy}) test::fill_random(*t, rng);
            const std::string what = describe(k, layout);
            expect_fast_matches_reference(
                {&y}, GradWrite::store, [&] { conv2d_forward_cpu(x, weight, {}, y, params); }, what + " forward");
            expect_fast_matches_reference(
                {&y}, GradWrite::store, [&] { conv2d_forward_cpu(x, weight, bias, y, params); },
                what + " forward + bias");
            for (GradWrite write : {GradWrite::store, GradWrite::accumulate}) {
                const std::string mode = write == GradWrite::store ? " (store)" : " (accumulate)";
                expect_fast_matches_reference(
                    {&dx}, write, [&] { conv2d_backward_data_cpu(weight, dy, dx, params, write); },
                    what + " backward data" + mode);
                expect_fast_matches_reference(
                    {&dweight}, write, [&] { conv2d_backward_filter_cpu(x, dy, dweight, params, write); },
                    what + " backward filter" + mode);
                expect_fast_matches_reference(
                    {&dbias}, write, [&] { conv2d_backward_bias_cpu(dy, dbias, write); },
                    what + " backward bias" + mode);
            }
        }
}

TEST(CpuFastPath, GemmMatchesReference) {
    struct Case {
        int64_t m, n, k;
        bool transpose_a, transpose_b;
        float alpha, beta;
    };
    const Case cases[] = {{128, 512, 784, false, true, 1.0f, 0.0f}, {7, 13, 5, false, false, 1.0f, 0.0f},
                          {33, 17, 65, true, false, 0.5f, 1.0f},    {1, 1, 1, true, true, 2.0f, -1.0f},
                          {64, 10, 256, false, true, 1.0f, 1.0f},   {300, 192, 64, false, false, 0.25f, 0.0f}};
    for (const Case& k : cases)
        for (Epilogue epilogue : {Epilogue::none, Epilogue::bias, Epilogue::bias_gelu}) {
            const std::string what = "gemm " + std::to_string(k.m) + "x" + std::to_string(k.n) + "x" +
                                     std::to_string(k.k) + (k.transpose_a ? " A^T" : "") +
                                     (k.transpose_b ? " B^T" : "") + " epilogue " +
                                     std::to_string(static_cast<int>(epilogue));
            SCOPED_TRACE(what);
            std::mt19937 rng(4);
            HostTensor a(f32, k.transpose_a ? std::vector<int64_t>{k.k, k.m} : std::vector<int64_t>{k.m, k.k});
            HostTensor b(f32, k.transpose_b ? std::vector<int64_t>{k.n, k.k} : std::vector<int64_t>{k.k, k.n});
            HostTensor bias(f32, {k.n}), c(f32, {k.m, k.n}), pre(f32, {k.m, k.n});
            for (HostTensor* t : {&a, &b, &bias}) test::fill_random(*t, rng);
            GemmArgs args;
            args.transpose_a = k.transpose_a;
            args.transpose_b = k.transpose_b;
            args.alpha = k.alpha;
            args.beta = epilogue == Epilogue::none ? k.beta : 0.0f;
            args.epilogue = epilogue;
            if (epilogue != Epilogue::none) args.bias = bias;
            if (epilogue == Epilogue::bias_gelu) args.pre_activation = pre;
            const GradWrite start = args.beta != 0.0f ? GradWrite::accumulate : GradWrite::store;
            std::vector<HostTensor*> outputs{&c};
            if (epilogue == Epilogue::bias_gelu) outputs.push_back(&pre);
            expect_fast_matches_reference(
                outputs, start, [&] { gemm_cpu(a, b, c, args); }, what);
        }
}

TEST(CpuFastPath, LinearBackwardAndBiasGradientMatchReference) {
    for (GradWrite write : {GradWrite::store, GradWrite::accumulate})
        for (auto [rows, in, out] :
             {std::tuple<int64_t, int64_t, int64_t>{128, 784, 512}, {9, 7, 130}, {2048, 64, 192}}) {
            const std::string what = "linear backward " + std::to_string(rows) + "x" + std::to_string(in) + "->" +
                                     std::to_string(out) + (write == GradWrite::store ? " (store)" : " (accumulate)");
            SCOPED_TRACE(what);
            std::mt19937 rng(8);
            HostTensor x(f32, {rows, in}), weight(f32, {out, in}), dy(f32, {rows, out});
            HostTensor dx(f32, {rows, in}), dweight(f32, {out, in}), dbias(f32, {out});
            for (HostTensor* t : {&x, &weight, &dy}) test::fill_random(*t, rng);
            expect_fast_matches_reference(
                {&dx, &dweight, &dbias}, write,
                [&] { linear_backward_cpu(x, weight, dy, dx, dweight, dbias, write, write); }, what);
        }
}

TEST(CpuFastPath, BatchedGemmMatchesReference) {
    for (bool transpose_a : {false, true})
        for (bool transpose_b : {false, true})
            for (auto [count, m, n, k] :
                 {std::tuple<int64_t, int64_t, int64_t, int64_t>{512, 16, 16, 16}, {3, 5, 7, 9}, {64, 49, 16, 49}}) {
                const std::string what = "batched gemm " + std::to_string(count) + " x " + std::to_string(m) + "x" +
                                         std::to_string(n) + "x" + std::to_string(k) + (transpose_a ? " A^T" : "") +
                                         (transpose_b ? " B^T" : "");
                SCOPED_TRACE(what);
                std::mt19937 rng(12);
                HostTensor a(f32, {count, m, k}), b(f32, {count, k, n}), c(f32, {count, m, n});
                test::fill_random(a, rng);
                test::fill_random(b, rng);
                const BatchedGemmShape shape{count, m, n, k, transpose_a, transpose_b, 0.25f};
                expect_fast_matches_reference(
                    {&c}, GradWrite::store, [&] { batched_gemm_cpu(a, b, c, shape); }, what);
            }
}

// Activation shapes: the models' (nchw and nhwc), odd ones, and (N, C) rows.
struct ActivationCase {
    std::vector<int64_t> shape;
    Layout layout;
};

std::string describe(const ActivationCase& k) {
    std::string text = "[";
    for (std::size_t i = 0; i < k.shape.size(); ++i) {
        if (i > 0) text += ',';
        text += std::to_string(k.shape[i]);
    }
    text += ']';
    if (k.layout == Layout::nhwc) text += " nhwc";
    return text;
}

const ActivationCase kActivationCases[] = {
    {{128, 16, 28, 28}, Layout::nchw}, {{64, 64, 7, 7}, Layout::nchw},
    {{3, 17, 5, 7}, Layout::nchw},     {{2, 1, 9, 9}, Layout::nchw},
    {{5, 3, 1, 1}, Layout::nchw},      {{32, 16, 28, 28}, Layout::nhwc},
    {{3, 17, 5, 7}, Layout::nhwc},     {{4, 40, 3, 3}, Layout::nhwc},
    {{128, 128}, Layout::nchw},        {{7, 3}, Layout::nchw},
};

TEST(CpuFastPath, BatchNormMatchesReferenceBitForBit) {
    for (const ActivationCase& k : kActivationCases)
        for (bool running : {true, false}) {
            const std::string what = "batchnorm " + describe(k) + (running ? " + running statistics" : "");
            SCOPED_TRACE(what);
            const int64_t C = k.shape[1];
            std::mt19937 rng(21);
            HostTensor x(f32, k.shape, k.layout), dy(f32, k.shape, k.layout), y(f32, k.shape, k.layout);
            HostTensor dx(f32, k.shape, k.layout), gamma(f32, {C}), beta(f32, {C}), mean(f32, {C}), invstd(f32, {C});
            HostTensor running_mean(f32, {C}), running_var(f32, {C}), dgamma(f32, {C}), dbeta(f32, {C});
            test::fill_normalization_inputs(x, dy, gamma, beta, rng);
            const BatchNormParams params;
            if (running) {
                expect_fast_matches_reference(
                    {&y, &mean, &invstd, &running_mean, &running_var}, GradWrite::accumulate,
                    [&] {
                        batchnorm_forward_train_cpu(x, gamma, beta, y, running_mean, running_var, mean, invstd, params);
                    },
                    what + " forward", Match::exact);
            } else {
                expect_fast_matches_reference(
                    {&y, &mean, &invstd}, GradWrite::store,
                    [&] { batchnorm_forward_train_cpu(x, gamma, beta, y, {}, {}, mean, invstd, params); },
                    what + " forward", Match::exact);
            }
            batchnorm_forward_train_cpu(x, gamma, beta, y, {}, {}, mean, invstd, params);
            test::fill_random(running_var, rng, 0.5, 2.0);
            expect_fast_matches_reference(
                {&y}, GradWrite::store,
                [&] { batchnorm_forward_eval_cpu(x, gamma, beta, mean, running_var, y, params); }, what + " eval",
                Match::exact);
            expect_fast_matches_reference_in_both_modes(
                {&dx, &dgamma, &dbeta},
                [&](GradWrite write) {
                    batchnorm_backward_cpu(x, dy, gamma, mean, invstd, dx, dgamma, dbeta, write, write);
                },
                what + " backward", Match::exact);
        }
}

TEST(CpuFastPath, ElementwiseOpsMatchReferenceBitForBit) {
    for (const ActivationCase& k : kActivationCases) {
        const std::string what = describe(k);
        SCOPED_TRACE(what);
        std::mt19937 rng(22);
        HostTensor x(f32, k.shape, k.layout), other(f32, k.shape, k.layout), y(f32, k.shape, k.layout);
        HostTensor dy(f32, k.shape, k.layout), dx(f32, k.shape, k.layout);
        for (HostTensor* t : {&x, &other, &dy}) test::fill_random(*t, rng, -3.0, 3.0);
        expect_fast_matches_reference(
            {&y}, GradWrite::store, [&] { relu_forward_cpu(x, y); }, what + " relu", Match::exact);
        expect_fast_matches_reference(
            {&y}, GradWrite::store, [&] { gelu_forward_cpu(x, y); }, what + " gelu", Match::exact);
        expect_fast_matches_reference(
            {&y}, GradWrite::store, [&] { add_cpu(x, other, y); }, what + " add", Match::exact);
        for (GradWrite write : {GradWrite::store, GradWrite::accumulate}) {
            const std::string mode = write == GradWrite::store ? " (store)" : " (accumulate)";
            expect_fast_matches_reference(
                {&dx}, write, [&] { relu_backward_cpu(x, dy, dx, write); }, what + " relu backward" + mode,
                Match::exact);
            expect_fast_matches_reference(
                {&dx}, write, [&] { gelu_backward_cpu(x, dy, dx, write); }, what + " gelu backward" + mode,
                Match::exact);
            expect_fast_matches_reference(
                {&dx}, write, [&] { accumulate_grad_cpu(dy, dx, write); }, what + " accumulate_grad" + mode,
                Match::exact);
        }
        expect_fast_matches_reference(
            {&y}, GradWrite::accumulate, [&] { scale_cpu(y, 0.3f); }, what + " scale", Match::exact);
        expect_fast_matches_reference(
            {&y}, GradWrite::store, [&] { fill_cpu(y, 1.5f); }, what + " fill", Match::exact);
        if (k.shape.size() == 4) {
            HostTensor converted(f32, k.shape, k.layout == Layout::nhwc ? Layout::nchw : Layout::nhwc);
            expect_fast_matches_reference(
                {&converted}, GradWrite::store, [&] { convert_layout_cpu(x, converted); }, what + " convert_layout",
                Match::exact);
        }
    }
}

TEST(CpuFastPath, PoolingMatchesReferenceBitForBit) {
    struct PoolCase {
        int64_t n, c, h, w;
        Pool2dParams params;
    };
    Pool2dParams two;  // 2x2 stride 2 (the CNN's)
    Pool2dParams overlapping;
    overlapping.kernel_h = overlapping.kernel_w = 3;
    overlapping.stride_h = 2;
    overlapping.stride_w = 1;
    overlapping.pad_h = overlapping.pad_w = 1;
    Pool2dParams whole;  // a global pool over 7x7
    whole.kernel_h = whole.kernel_w = whole.stride_h = whole.stride_w = 7;
    const PoolCase cases[] = {
        {128, 32, 28, 28, two}, {3, 5, 9, 7, two}, {2, 17, 9, 8, overlapping}, {4, 64, 7, 7, whole}};
    for (const PoolCase& k : cases)
        for (Layout layout : {Layout::nchw, Layout::nhwc}) {
            const Pool2dParams& p = k.params;
            const int64_t P = (k.h + 2 * p.pad_h - p.kernel_h) / p.stride_h + 1;
            const int64_t Q = (k.w + 2 * p.pad_w - p.kernel_w) / p.stride_w + 1;
            const std::string what = "pool " + describe(ActivationCase{{k.n, k.c, k.h, k.w}, layout}) + " kernel " +
                                     std::to_string(p.kernel_h) + "x" + std::to_string(p.kernel_w) + " stride " +
                                     std::to_string(p.stride_h) + "x" + std::to_string(p.stride_w) + " pad " +
                                     std::to_string(p.pad_h);
            SCOPED_TRACE(what);
            std::mt19937 rng(23);
            HostTensor x(f32, {k.n, k.c, k.h, k.w}, layout), dx(f32, {k.n, k.c, k.h, k.w}, layout);
            HostTensor y(f32, {k.n, k.c, P, Q}, layout), dy(f32, {k.n, k.c, P, Q}, layout);
            HostTensor argmax(DType::i32, {k.n, k.c, P, Q}, layout);
            test::fill_random(x, rng);
            test::fill_random(dy, rng);
            expect_fast_matches_reference(
                {&y, &argmax}, GradWrite::store, [&] { maxpool2d_forward_cpu(x, y, argmax, p); }, what + " max forward",
                Match::exact);
            maxpool2d_forward_cpu(x, y, argmax, p);
            for (GradWrite write : {GradWrite::store, GradWrite::accumulate}) {
                const std::string mode = write == GradWrite::store ? " (store)" : " (accumulate)";
                expect_fast_matches_reference(
                    {&dx}, write, [&] { maxpool2d_backward_cpu(dy, argmax, dx, p, write); },
                    what + " max backward" + mode, Match::exact);
                expect_fast_matches_reference(
                    {&dx}, write, [&] { avgpool2d_backward_cpu(dy, dx, p, write); }, what + " average backward" + mode,
                    Match::exact);
            }
            expect_fast_matches_reference(
                {&y}, GradWrite::store, [&] { avgpool2d_forward_cpu(x, y, p); }, what + " average forward",
                Match::exact);
        }
}

TEST(CpuFastPath, AttentionHelpersAndLayerNormMatchReferenceBitForBit) {
    for (auto [batch, tokens, heads, head_dim] :
         {std::tuple<int64_t, int64_t, int64_t, int64_t>{128, 16, 4, 16}, {3, 5, 2, 7}, {1, 1, 1, 1}}) {
        const std::string what = "attention batch " + std::to_string(batch) + " tokens " + std::to_string(tokens) +
                                 " heads " + std::to_string(heads) + " x " + std::to_string(head_dim);
        SCOPED_TRACE(what);
        const int64_t stack = batch * heads, dim = heads * head_dim, rows = batch * tokens;
        std::mt19937 rng(24);
        HostTensor qkv(f32, {rows, 3 * dim}), merged(f32, {rows, dim}), head(f32, {stack, tokens, head_dim});
        HostTensor scores(f32, {stack * tokens, tokens}), p(f32, {stack * tokens, tokens});
        HostTensor dp(f32, {stack * tokens, tokens}), ds(f32, {stack * tokens, tokens});
        for (HostTensor* t : {&qkv, &head, &scores, &dp}) test::fill_random(*t, rng, -4.0, 4.0);
        for (int part = 0; part < 3; ++part) {
            const HeadLayout layout{batch, tokens, heads, head_dim, 3, part};
            expect_fast_matches_reference(
                {&head}, GradWrite::store, [&] { move_heads_cpu(qkv, head, layout, true); },
                what + " to heads, part " + std::to_string(part), Match::exact);
            expect_fast_matches_reference(
                {&qkv}, GradWrite::accumulate, [&] { move_heads_cpu(qkv, head, layout, false); },
                what + " to rows, part " + std::to_string(part), Match::exact);
        }
        expect_fast_matches_reference(
            {&merged}, GradWrite::store,
            [&] {
                move_heads_cpu(merged, head, HeadLayout{batch, tokens, heads, head_dim, 1, 0}, false);
            },
            what + " merge", Match::exact);
        expect_fast_matches_reference(
            {&p}, GradWrite::store, [&] { softmax_rows_cpu(scores, p); }, what + " softmax", Match::exact);
        softmax_rows_cpu(scores, p);
        expect_fast_matches_reference(
            {&ds}, GradWrite::store, [&] { softmax_rows_backward_cpu(p, dp, ds, 0.25f); }, what + " softmax backward",
            Match::exact);

        HostTensor x(f32, {rows, dim}), y(f32, {rows, dim}), dy(f32, {rows, dim}), dx(f32, {rows, dim});
        HostTensor gamma(f32, {dim}), beta(f32, {dim}), mean(f32, {rows}), rstd(f32, {rows});
        HostTensor dgamma(f32, {dim}), dbeta(f32, {dim});
        for (HostTensor* t : {&x, &dy, &beta}) test::fill_random(*t, rng, -2.0, 2.0);
        test::fill_random(gamma, rng, 0.5, 1.5);
        expect_fast_matches_reference(
            {&y, &mean, &rstd}, GradWrite::store, [&] { layernorm_forward_cpu(x, gamma, beta, y, mean, rstd, 1e-5f); },
            what + " layernorm forward", Match::exact);
        layernorm_forward_cpu(x, gamma, beta, y, mean, rstd, 1e-5f);
        expect_fast_matches_reference_in_both_modes(
            {&dx, &dgamma, &dbeta},
            [&](GradWrite write) { layernorm_backward_cpu(x, dy, gamma, mean, rstd, dx, dgamma, dbeta, write, write); },
            what + " layernorm backward", Match::exact);
    }
}

TEST(CpuFastPath, ReferenceSwitchSelectsThePlainLoops) {
    // Run through the switch, the reference must reproduce its own direct call bit for bit.
    std::mt19937 rng(3);
    HostTensor x(f32, {2, 3, 9, 9}), weight(f32, {4, 3, 3, 3}), direct(f32, {2, 4, 7, 7}), switched(f32, {2, 4, 7, 7});
    test::fill_random(x, rng);
    test::fill_random(weight, rng);
    conv2d_forward_reference_cpu(x, weight, {}, direct, {});
    {
        ScopedOpImplementation reference(OpImplementation::reference);
        EXPECT_EQ(cpu::op_implementation(), OpImplementation::reference);
        conv2d_forward_cpu(x, weight, {}, switched, {});
    }
    EXPECT_EQ(direct.storage, switched.storage);
}

TEST(CpuFastPath, RepeatedCallsReuseTheirPlansAndGiveIdenticalResults) {
    // Same shape twice (a cached plan), with other shapes in between: bit-identical.
    std::mt19937 rng(9);
    const Conv2dParams params{.pad_h = 1, .pad_w = 1};
    HostTensor x(f32, {4, 16, 10, 10}), weight(f32, {8, 16, 3, 3}), first(f32, {4, 8, 10, 10}),
        second(f32, {4, 8, 10, 10});
    test::fill_random(x, rng);
    test::fill_random(weight, rng);
    conv2d_forward_cpu(x, weight, {}, first, params);
    HostTensor other_x(f32, {1, 3, 5, 5}), other_w(f32, {2, 3, 3, 3}), other_y(f32, {1, 2, 5, 5});
    conv2d_forward_cpu(other_x, other_w, {}, other_y, params);
    conv2d_forward_cpu(x, weight, {}, second, params);
    EXPECT_EQ(first.storage, second.storage);
}

// A sampling profiler's SIGPROF lands on threads in the middle of oneDNN's JIT kernels.
// A signal frame pushed onto such a thread's own stack corrupted the kernel's data (and
// then the heap); the fast path gives each of its threads an alternate signal stack, so
// a handler installed with SA_ONSTACK (as the collector's is) leaves results intact.
std::atomic<int> g_profiling_signals{0};
void count_profiling_signal(int) {
    g_profiling_signals.fetch_add(1, std::memory_order_relaxed);
}

TEST(CpuFastPath, ResultsSurviveAProfilingSignalStorm) {
    std::mt19937 rng(21);
    HostTensor a(f32, {128, 784}), b(f32, {512, 784}), want(f32, {128, 512}), got(f32, {128, 512});
    test::fill_random(a, rng);
    test::fill_random(b, rng);
    GemmArgs args;
    args.transpose_b = true;
    const Conv2dParams params{.pad_h = 1, .pad_w = 1};
    HostTensor x(f32, {8, 16, 14, 14}), weight(f32, {32, 16, 3, 3}), conv_want(f32, {8, 32, 14, 14}),
        conv_got(f32, {8, 32, 14, 14});
    test::fill_random(x, rng);
    test::fill_random(weight, rng);
    ScopedOpImplementation fast(OpImplementation::fast);
    gemm_cpu(a, b, want, args);
    conv2d_forward_cpu(x, weight, {}, conv_want, params);

    struct sigaction action {
    }, previous{};
    action.sa_handler = count_profiling_signal;
    action.sa_flags = SA_RESTART | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    ASSERT_EQ(sigaction(SIGPROF, &action, &previous), 0);
    sigevent event{};
    event.sigev_notify = SIGEV_SIGNAL;
    event.sigev_signo = SIGPROF;
    timer_t timer;
    ASSERT_EQ(timer_create(CLOCK_PROCESS_CPUTIME_ID, &event, &timer), 0);
    itimerspec every{};
    // 20 kHz of CPU time asked; the kernel delivers at its tick (a few hundred per CPU second).
    every.it_interval.tv_nsec = 50'000;
    every.it_value = every.it_interval;
    timer_settime(timer, 0, &every, nullptr);
    // Until 200 signals have landed (about a CPU second), whatever the kernel's tick.
    for (int round = 0; g_profiling_signals.load() < 200 && round < 20'000; ++round) {
        gemm_cpu(a, b, got, args);
        conv2d_forward_cpu(x, weight, {}, conv_got, params);
        ASSERT_EQ(got.storage, want.storage) << "gemm result changed under SIGPROF, round " << round;
        ASSERT_EQ(conv_got.storage, conv_want.storage) << "conv result changed under SIGPROF, round " << round;
    }
    timer_delete(timer);
    sigaction(SIGPROF, &previous, nullptr);
    EXPECT_GE(g_profiling_signals.load(), 200) << "the timer hardly fired: the test proved nothing";
}

}  // namespace

namespace {

// The team's other threads carry a name in profiles ("cpu compute 1", ...); the caller
// keeps its own. (Read from /proc: the team is the library's, compiled with OpenMP.)
TEST(CpuFastPath, TheTeamsOtherThreadsAreNamedForProfiles) {
    const int before = cpu::compute_threads();
    cpu::set_compute_threads(2);
    if (cpu::compute_threads() < 2) {
        cpu::set_compute_threads(before);
        GTEST_SKIP() << "one CPU in this process's affinity mask: no second team thread";
    }
    char caller[16] = {};
    pthread_getname_np(pthread_self(), caller, sizeof caller);
    EXPECT_EQ(cpu::thread_team(), 2);
    cpu::set_compute_threads(before);
    std::vector<std::string> names;
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
        std::ifstream comm(task.path() / "comm");
        std::string name;
        std::getline(comm, name);
        names.push_back(name);
    }
    EXPECT_NE(std::find(names.begin(), names.end(), "cpu compute 1"), names.end()) << testing::PrintToString(names);
    char after[16] = {};
    pthread_getname_np(pthread_self(), after, sizeof after);
    EXPECT_STREQ(after, caller);
}

}  // namespace
