// ops_cpu_bench: Google Benchmark timings of the CPU ops, each with the reference loops
// (first argument 0) and the fast path (1; engine/cpu/implementation.h) in the same run,
// at the sizes of the Fashion-MNIST models at batch 128: the CNN's and the ResNet's
// convolutions, BatchNorm, ReLU, pooling and residual adds, the MLP's Linear layers, the
// transformer's GEMMs, attention and LayerNorm; then one forward+backward step of the
// small CNN. Numbers go to docs/performance.md ("Kernels and ops").
//   build/<dir>/bin/ember_bench_ops_cpu --benchmark_repetitions=5
//   --benchmark_report_aggregates_only=true
// Threads: the fast paths use OpenBLAS's thread count (OPENBLAS_NUM_THREADS, default:
// every core), as the reference GEMMs do.
#include "engine/core/host_tensor.h"
#include "engine/cpu/implementation.h"
#include "engine/ops/activation.h"
#include "engine/ops/attention.h"
#include "engine/ops/batchnorm.h"
#include "engine/ops/conv.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/gemm.h"
#include "engine/ops/layernorm.h"
#include "engine/ops/pooling.h"
#include "engine/ops/softmax_cross_entropy.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

namespace {

using namespace ember;
using namespace ember::ops;
using ember::HostTensor;

constexpr DType f32 = DType::f32;
constexpr int64_t kBatch = 128;

// Wall time (the fast paths run on several threads), and the fastest repetition beside
// the mean and median: on a shared machine the minimum is the least disturbed.
void timing(benchmark::internal::Benchmark* b) {
    b->UseRealTime()->Unit(benchmark::kMillisecond)->ComputeStatistics("min", [](const std::vector<double>& v) {
        return *std::min_element(v.begin(), v.end());
    });
}

// Argument 0 of every benchmark: 0 = reference loops, 1 = fast path.
cpu::OpImplementation implementation(const benchmark::State& state) {
    return state.range(0) ? cpu::OpImplementation::fast : cpu::OpImplementation::reference;
}

// Arguments: implementation, layout (0 nchw, 1 nhwc), C, K, H, kernel, stride.
void conv_args(benchmark::internal::Benchmark* b) {
    for (int fast : {0, 1}) {
        b->Args({fast, 0, 1, 32, 28, 3, 1});   // CNN conv1
        b->Args({fast, 0, 32, 64, 14, 3, 1});  // CNN conv2
        b->Args({fast, 0, 16, 16, 28, 3, 1});  // ResNet stage 1
        b->Args({fast, 0, 16, 32, 28, 3, 2});  // ResNet stage 2, first conv
        b->Args({fast, 0, 16, 32, 28, 1, 2});  // ResNet stage 2, projection shortcut
        b->Args({fast, 0, 64, 64, 7, 3, 1});   // ResNet stage 3
        b->Args({fast, 1, 16, 16, 28, 3, 1});  // ResNet stage 1, channels-last
    }
    b->ArgNames({"fast", "nhwc", "C", "K", "H", "R", "stride"});
    timing(b);
}

struct ConvBuffers {
    HostTensor x, w, y, dy, dx, dw;
    Conv2dParams params;
    double flops = 0;
    explicit ConvBuffers(const benchmark::State& state) {
        const Layout layout = state.range(1) ? Layout::nhwc : Layout::nchw;
        const int64_t C = state.range(2), K = state.range(3), H = state.range(4), R = state.range(5);
        params.stride_h = params.stride_w = static_cast<int>(state.range(6));
        params.pad_h = params.pad_w = static_cast<int>(R / 2);
        const int64_t P = conv_output_size(H, R, params.stride_h, params.pad_h, 1);
        x = HostTensor(f32, {kBatch, C, H, H}, layout);
        w = HostTensor(f32, {K, C, R, R}, layout);
        y = HostTensor(f32, {kBatch, K, P, P}, layout);
        dy = HostTensor(f32, {kBatch, K, P, P}, layout);
        dx = HostTensor(f32, {kBatch, C, H, H}, layout);
        dw = HostTensor(f32, {K, C, R, R}, layout);
        std::mt19937 rng(1);
        for (HostTensor* t : {&x, &w, &dy}) fill_random(*t, rng);
        flops = 2.0 * kBatch * K * C * R * R * P * P;
    }
};

void BM_ConvForward(benchmark::State& state) {
    cpu::ScopedOpImplementation scoped(implementation(state));
    ConvBuffers b(state);
    for (auto _ : state) conv2d_forward_cpu(b.x, b.w, {}, b.y, b.params);
    state.counters["FLOP/s"] =
        benchmark::Counter(b.flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_ConvForward)->Apply(conv_args);

void BM_ConvBackwardData(benchmark::State& state) {
    cpu::ScopedOpImplementation scoped(implementation(state));
    ConvBuffers b(state);
    for (auto _ : state) conv2d_backward_data_cpu(b.w, b.dy, b.dx, b.params, GradWrite::store);
}
BENCHMARK(BM_ConvBackwardData)->Apply(conv_args);

void BM_ConvBackwardFilter(benchmark::State& state) {
    cpu::ScopedOpImplementation scoped(implementation(state));
    ConvBuffers b(state);
    for (auto _ : state) conv2d_backward_filter_cpu(b.x, b.dy, b.dw, b.params, GradWrite::store);
}
BENCHMARK(BM_ConvBackwardFilter)->Apply(conv_args);

// Arguments: implementation, layout, C, H.
void activation_args(benchmark::internal::Benchmark* b) {
    for (int fast : {0, 1}) {
        b->Args({fast, 0, 16, 28});  // ResNet stage 1
        b->Args({fast, 0, 32, 28});  // CNN conv1
        b->Args({fast, 0, 64, 7});   // ResNet stage 3
        b->Args({fast, 1, 16, 28});
    }
    b->ArgNames({"fast", "nhwc", "C", "H"});
    timing(b);
}

struct ActivationBuffers {
    HostTensor x, y, dy, dx;
    HostTensor gamma, beta, mean, invstd, running_mean, running_var, dgamma, dbeta;
    explicit ActivationBuffers(const benchmark::State& state) {
        const Layout layout = state.range(1) ? Layout::nhwc : Layout::nchw;
        const int64_t C = state.range(2), H = state.range(3);
        for (HostTensor* t : {&x, &y, &dy, &dx}) *t = HostTensor(f32, {kBatch, C, H, H}, layout);
        for (HostTensor* t : {&gamma, &beta, &mean, &invstd, &running_mean, &running_var, &dgamma, &dbeta})
            *t = HostTensor(f32, {C});
        std::mt19937 rng(1);
        fill_random(x, rng);
        fill_random(dy, rng);
        fill_value(gamma, 1.0);
        fill_value(running_var, 1.0);
    }
};

void BM_BatchNormForwardTrain(benchmark::State& state) {
    cpu::ScopedOpImplementation scoped(implementation(state));
    ActivationBuffers b(state);
    for (auto _ : state)
        batchnorm_forward_train_cpu(b.x, b.gamma, b.beta, b.y, b.running_mean, b.running_var, b.mean, b.invstd, {});
}
BENCHMARK(BM_BatchNormForwardTrain)->Apply(activation_args);

void BM_BatchNormBackward(benchmark::State& state) {
    cpu::ScopedOpImplementation scoped(implementation(state));
    ActivationBuffers b(state);
    batchnorm_forward_train_cpu(b.x, b.gamma, b.beta, b.y, {}, {}, b.mean, b.invstd, {});
    for (auto _ : state)
        batchnorm_backward_cpu(b.x, b.dy, b.gamma, b.mean, b.invstd, b.dx, b.dgamma, b.dbeta, GradWrite::store,
                               GradWrite::store);
}
BENCHMARK(BM_BatchNormBackward)->Apply(activation_args);

void BM_Relu(benchmark::State& state) {
    cpu::ScopedOpImplementation scoped(implementation(state));
    ActivationBuffers b(state);
    for (auto _ : state) {
        relu_forward_cpu(b.x, b.y);
        relu_backward_cpu(b.y, b.dy, b.dx, GradWrite::store);
    }
}
BENCHMARK(BM_Relu)->Apply(activation_args);

// The residual join: add forward, the gradient accumulated into a branch.
void BM_AddAndAccumulate(benchmark::State& state) {
    cpu::ScopedOpImplementation scoped(implementation(state));
    ActivationBuffers b(state);
    for (auto _ : state) {
        add_cpu(b.x, b.dy, b.y);
        accumulate_grad_cpu(b.dy, b.dx, GradWrite::accumulate);
    }
}
BENCHMARK(BM_AddAndAccumulate)->Apply(activation_args);

void BM_MaxPool(benchmark::State& state) {
    cpu::ScopedOpImplementation scoped(implementation(state));
    ActivationBuffers b(state);
    const Layout layout = state.range(1) ? Layout::nhwc : Layout::nchw;
    const int64_t C = state.range(2), H = state.range(3);
    HostTensor pooled(f32, {kBatch, C, H / 2, H / 2}, layout), argmax(DType::i32, {kBatch, C, H / 2, H / 2}, layout);
    Pool2dParams p;
    for (auto _ : state) {
        maxpool2d_forward_cpu(b.x, pooled, argmax, p);
        maxpool2d_backward_cpu(pooled, argmax, b.dx, p, GradWrite::store);
    }
}
BENCHMARK(BM_MaxPool)->Apply(activation_args);

// Layout conversion of a ResNet stage-1 activation (arg 1: 0 nchw -> nhwc, 1 nhwc -> nchw).
void BM_ConvertLayout(benchmark::State& state) {
    cpu::ScopedOpImplementation scoped(implementation(state));
    const bool to_nchw = state.range(1) != 0;
    HostTensor from(f32, {kBatch, 16, 28, 28}, to_nchw ? Layout::nhwc : Layout::nchw);
    HostTensor to(f32, {kBatch, 16, 28, 28}, to_nchw ? Layout::nchw : Layout::nhwc);
    std::mt19937 rng(1);
    fill_random(from, rng);
    for (auto _ : state) convert_layout_cpu(from, to);
}
BENCHMARK(BM_ConvertLayout)->ArgsProduct({{0, 1}, {0, 1}})->ArgNames({"fast", "to_nchw"})->Apply(timing);

// Arguments: implementation, rows, in, out (y[rows, out] = x[rows, in] W^T + b).
void BM_LinearForwardBackward(benchmark::State& state) {
    cpu::ScopedOpImplementation scoped(implementation(state));
    const int64_t rows = state.range(1), in = state.range(2), out = state.range(3);
    HostTensor x(f32, {rows, in}), w(f32, {out, in}), bias(f32, {out}), y(f32, {rows, out});
    HostTensor dx(f32, {rows, in}), dw(f32, {out, in}), db(f32, {out});
    std::mt19937 rng(1);
    for (HostTensor* t : {&x, &w, &bias}) fill_random(*t, rng);
    for (auto _ : state) {
        linear_forward_cpu(x, w, bias, y);
        linear_backward_cpu(x, w, y, dx, dw, db, GradWrite::store, GradWrite::store);
    }
}
BENCHMARK(BM_LinearForwardBackward)
    ->ArgsProduct({{0, 1}, {kBatch}, {784}, {512}})      // the MLP's first layer
    ->ArgsProduct({{0, 1}, {kBatch * 16}, {64}, {192}})  // the transformer's qkv projection
    ->ArgNames({"fast", "rows", "in", "out"})
    ->Apply(timing);

// The transformer's attention at batch 128: 4 heads of 16 tokens x 16 dims.
void BM_Attention(benchmark::State& state) {
    cpu::ScopedOpImplementation scoped(implementation(state));
    const int64_t batch = kBatch, heads = 4, tokens = 16, head_dim = 16, stack = batch * heads;
    HostTensor qkv(f32, {batch * tokens, 3 * heads * head_dim}), q(f32, {stack, tokens, head_dim});
    HostTensor k(f32, {stack, tokens, head_dim}), v(f32, {stack, tokens, head_dim}),
        out(f32, {stack, tokens, head_dim});
    HostTensor scores(f32, {stack * tokens, tokens}), probabilities(f32, {stack * tokens, tokens});
    HostTensor merged(f32, {batch * tokens, heads * head_dim});
    std::mt19937 rng(1);
    fill_random(qkv, rng);
    for (auto _ : state) {
        HeadLayout layout{batch, tokens, heads, head_dim, 3, 0};
        for (int part = 0; part < 3; ++part) {
            layout.part = part;
            move_heads_cpu(qkv, part == 0 ? q : part == 1 ? k : v, layout, true);
        }
        batched_gemm_cpu(q, k, scores, {stack, tokens, tokens, head_dim, false, true, 0.25f});
        softmax_rows_cpu(scores, probabilities);
        batched_gemm_cpu(probabilities, v, out, {stack, tokens, head_dim, tokens});
        move_heads_cpu(merged, out, HeadLayout{batch, tokens, heads, head_dim, 1, 0}, false);
    }
}
BENCHMARK(BM_Attention)->Arg(0)->Arg(1)->ArgName("fast")->Apply(timing);

void BM_LayerNormForwardBackward(benchmark::State& state) {
    cpu::ScopedOpImplementation scoped(implementation(state));
    const int64_t rows = kBatch * 16, dim = 64;
    HostTensor x(f32, {rows, dim}), y(f32, {rows, dim}), dx(f32, {rows, dim}), gamma(f32, {dim}), beta(f32, {dim});
    HostTensor mean(f32, {rows}), rstd(f32, {rows}), dgamma(f32, {dim}), dbeta(f32, {dim});
    std::mt19937 rng(1);
    fill_random(x, rng);
    fill_value(gamma, 1.0);
    for (auto _ : state) {
        layernorm_forward_cpu(x, gamma, beta, y, mean, rstd, 1e-5f);
        layernorm_backward_cpu(x, y, gamma, mean, rstd, dx, dgamma, dbeta, GradWrite::store, GradWrite::store);
    }
}
BENCHMARK(BM_LayerNormForwardBackward)->Arg(0)->Arg(1)->ArgName("fast")->Apply(timing);

void BM_Gelu(benchmark::State& state) {
    cpu::ScopedOpImplementation scoped(implementation(state));
    const int64_t rows = kBatch * 16, dim = 128;
    HostTensor x(f32, {rows, dim}), y(f32, {rows, dim}), dx(f32, {rows, dim});
    std::mt19937 rng(1);
    fill_random(x, rng);
    for (auto _ : state) {
        gelu_forward_cpu(x, y);
        gelu_backward_cpu(x, y, dx, GradWrite::store);
    }
}
BENCHMARK(BM_Gelu)->Arg(0)->Arg(1)->ArgName("fast")->Apply(timing);

// conv(1->32)-BN-ReLU-pool, conv(32->64)-BN-ReLU-pool, linear(3136->10), softmax-CE:
// forward and backward of one batch of 128.
void BM_SmallCnnStep(benchmark::State& state) {
    cpu::ScopedOpImplementation scoped(implementation(state));
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
    for (HostTensor* t : {&x, &w1, &w2, &fc}) fill_random(*t, rng, -0.1, 0.1);
    fill_value(g1, 1.0);
    fill_value(g2, 1.0);
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
BENCHMARK(BM_SmallCnnStep)->Arg(0)->Arg(1)->ArgName("fast")->Apply(timing);

}  // namespace

BENCHMARK_MAIN();
