// ops_cpu_bench: Google Benchmark timings of the CPU reference ops at the sizes of
// the small Fashion-MNIST CNN (batch 64, 28x28), and one full forward+backward step
// of that network. Numbers go to docs/performance.md ("Kernels and ops").
//   build/<dir>/tests/engine/engine_ops_cpu_bench --benchmark_min_time=0.5s
#include "engine/ops/activation.h"
#include "engine/ops/batchnorm.h"
#include "engine/ops/conv.h"
#include "engine/ops/gemm.h"
#include "engine/ops/pooling.h"
#include "engine/ops/softmax_cross_entropy.h"
#include "tests/engine/ops/test_util.h"

#include <benchmark/benchmark.h>

namespace {

using namespace ember;
using namespace ember::ops;
using ember::test::HostTensor;

constexpr DType f32 = DType::f32;
constexpr int64_t kBatch = 64;

// conv 3x3 pad 1, C -> K channels at H x W.
void BM_ConvForward(benchmark::State& state) {
    const int64_t C = state.range(0), K = state.range(1), H = state.range(2);
    std::mt19937 rng(1);
    HostTensor x(f32, {kBatch, C, H, H}), w(f32, {K, C, 3, 3}), y(f32, {kBatch, K, H, H});
    test::fill_random(x, rng);
    test::fill_random(w, rng);
    Conv2dParams p;
    p.pad_h = p.pad_w = 1;
    for (auto _ : state) conv2d_forward_cpu(x, w, {}, y, p);
    state.counters["FLOP/s"] = benchmark::Counter(2.0 * kBatch * K * C * 9 * H * H,
                                                  benchmark::Counter::kIsIterationInvariantRate,
                                                  benchmark::Counter::kIs1000);
}
BENCHMARK(BM_ConvForward)->Args({1, 32, 28})->Args({32, 64, 14})->Unit(benchmark::kMillisecond);

void BM_ConvBackward(benchmark::State& state) {
    const int64_t C = state.range(0), K = state.range(1), H = state.range(2);
    std::mt19937 rng(1);
    HostTensor x(f32, {kBatch, C, H, H}), w(f32, {K, C, 3, 3}), dy(f32, {kBatch, K, H, H});
    HostTensor dx(f32, {kBatch, C, H, H}), dw(f32, {K, C, 3, 3});
    test::fill_random(x, rng);
    test::fill_random(w, rng);
    test::fill_random(dy, rng);
    Conv2dParams p;
    p.pad_h = p.pad_w = 1;
    for (auto _ : state) {
        conv2d_backward_data_cpu(w, dy, dx, p, GradWrite::store);
        conv2d_backward_filter_cpu(x, dy, dw, p, GradWrite::store);
    }
}
BENCHMARK(BM_ConvBackward)->Args({32, 64, 14})->Unit(benchmark::kMillisecond);

// Arg 0: nchw, 1: nhwc (channels-last rows).
Layout bench_layout(const benchmark::State& state) { return state.range(0) ? Layout::nhwc : Layout::nchw; }

void BM_BatchNormTrain(benchmark::State& state) {
    std::mt19937 rng(1);
    const Layout layout = bench_layout(state);
    HostTensor x(f32, {kBatch, 32, 28, 28}, layout), y(f32, {kBatch, 32, 28, 28}, layout);
    HostTensor dx(f32, {kBatch, 32, 28, 28}, layout);
    HostTensor gamma(f32, {32}), beta(f32, {32}), mean(f32, {32}), invstd(f32, {32});
    HostTensor dgamma(f32, {32}), dbeta(f32, {32});
    test::fill_random(x, rng);
    test::fill_value(gamma, 1.0);
    for (auto _ : state) {
        batchnorm_forward_train_cpu(x, gamma, beta, y, {}, {}, mean, invstd, {});
        batchnorm_backward_cpu(x, y, gamma, mean, invstd, dx, dgamma, dbeta, GradWrite::store, GradWrite::store);
    }
}
BENCHMARK(BM_BatchNormTrain)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_BatchNormEval(benchmark::State& state) {
    std::mt19937 rng(1);
    const Layout layout = bench_layout(state);
    HostTensor x(f32, {kBatch, 32, 28, 28}, layout), y(f32, {kBatch, 32, 28, 28}, layout);
    HostTensor gamma(f32, {32}), beta(f32, {32}), mean(f32, {32}), var(f32, {32});
    test::fill_random(x, rng);
    test::fill_value(gamma, 1.0);
    test::fill_value(var, 1.0);
    for (auto _ : state) batchnorm_forward_eval_cpu(x, gamma, beta, mean, var, y, {});
}
BENCHMARK(BM_BatchNormEval)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_ReluMaxPool(benchmark::State& state) {
    std::mt19937 rng(1);
    const Layout layout = bench_layout(state);
    HostTensor x(f32, {kBatch, 32, 28, 28}, layout), y(f32, {kBatch, 32, 28, 28}, layout);
    HostTensor pooled(f32, {kBatch, 32, 14, 14}, layout), argmax(DType::i32, {kBatch, 32, 14, 14}, layout);
    HostTensor dx(f32, {kBatch, 32, 28, 28}, layout);
    test::fill_random(x, rng);
    for (auto _ : state) {
        relu_forward_cpu(x, y);
        maxpool2d_forward_cpu(y, pooled, argmax, {});
        maxpool2d_backward_cpu(pooled, argmax, dx, {}, GradWrite::store);
        relu_backward_cpu(y, dx, dx, GradWrite::store);
    }
}
BENCHMARK(BM_ReluMaxPool)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// conv(1->32)-BN-ReLU-pool, conv(32->64)-BN-ReLU-pool, linear(3136->10), softmax-CE:
// forward and backward of one batch of 64.
void BM_SmallCnnStep(benchmark::State& state) {
    std::mt19937 rng(1);
    Conv2dParams p;
    p.pad_h = p.pad_w = 1;
    HostTensor x(f32, {kBatch, 1, 28, 28}), w1(f32, {32, 1, 3, 3}), w2(f32, {64, 32, 3, 3});
    HostTensor c1(f32, {kBatch, 32, 28, 28}), b1(f32, {kBatch, 32, 28, 28}), p1(f32, {kBatch, 32, 14, 14});
    HostTensor c2(f32, {kBatch, 64, 14, 14}), b2(f32, {kBatch, 64, 14, 14}), p2(f32, {kBatch, 64, 7, 7});
    HostTensor a1(DType::i32, {kBatch, 32, 14, 14}), a2(DType::i32, {kBatch, 64, 7, 7});
    HostTensor fc(f32, {10, 3136}), fcb(f32, {10}), logits(f32, {kBatch, 10}), losses(f32, {kBatch});
    HostTensor dlogits(f32, {kBatch, 10}), targets(DType::i32, {kBatch});
    HostTensor g1(f32, {32}), be1(f32, {32}), m1(f32, {32}), s1(f32, {32}), dg1(f32, {32}), db1(f32, {32});
    HostTensor g2(f32, {64}), be2(f32, {64}), m2(f32, {64}), s2(f32, {64}), dg2(f32, {64}), db2(f32, {64});
    HostTensor dp2(f32, {kBatch, 64, 7, 7}), db2x(f32, {kBatch, 64, 14, 14}), dc2(f32, {kBatch, 64, 14, 14});
    HostTensor dp1(f32, {kBatch, 32, 14, 14}), db1x(f32, {kBatch, 32, 28, 28}), dc1(f32, {kBatch, 32, 28, 28});
    HostTensor dw1(f32, {32, 1, 3, 3}), dw2(f32, {64, 32, 3, 3}), dfc(f32, {10, 3136}), dfcb(f32, {10});
    for (HostTensor* t : {&x, &w1, &w2, &fc}) test::fill_random(*t, rng, -0.1, 0.1);
    test::fill_value(g1, 1.0);
    test::fill_value(g2, 1.0);
    for (int i = 0; i < kBatch; ++i) targets.set(i, i % 10);
    for (auto _ : state) {
        conv2d_forward_cpu(x, w1, {}, c1, p);
        batchnorm_forward_train_cpu(c1, g1, be1, b1, {}, {}, m1, s1, {});
        relu_forward_cpu(b1, b1);
        maxpool2d_forward_cpu(b1, p1, a1, {});
        conv2d_forward_cpu(p1, w2, {}, c2, p);
        batchnorm_forward_train_cpu(c2, g2, be2, b2, {}, {}, m2, s2, {});
        relu_forward_cpu(b2, b2);
        maxpool2d_forward_cpu(b2, p2, a2, {});
        linear_forward_cpu(flatten(p2), fc, fcb, logits);
        softmax_cross_entropy_cpu(logits, targets, losses, dlogits, 1.0f / kBatch);
        linear_backward_cpu(flatten(p2), fc, dlogits, flatten(dp2), dfc, dfcb, GradWrite::store, GradWrite::store);
        maxpool2d_backward_cpu(dp2, a2, db2x, {}, GradWrite::store);
        relu_backward_cpu(b2, db2x, db2x, GradWrite::store);
        batchnorm_backward_cpu(c2, db2x, g2, m2, s2, dc2, dg2, db2, GradWrite::store, GradWrite::store);
        conv2d_backward_filter_cpu(p1, dc2, dw2, p, GradWrite::store);
        conv2d_backward_data_cpu(w2, dc2, dp1, p, GradWrite::store);
        maxpool2d_backward_cpu(dp1, a1, db1x, {}, GradWrite::store);
        relu_backward_cpu(b1, db1x, db1x, GradWrite::store);
        batchnorm_backward_cpu(c1, db1x, g1, m1, s1, dc1, dg1, db1, GradWrite::store, GradWrite::store);
        conv2d_backward_filter_cpu(x, dc1, dw1, p, GradWrite::store);
    }
    state.counters["images/s"] = benchmark::Counter(double(kBatch), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_SmallCnnStep)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
