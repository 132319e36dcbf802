// ops_gpu_bench: device timings (CUDA events) that the op design promises can be
// measured: fused vs unfused GELU, and cuDNN convolution with heuristics vs the
// benchmark autotuner. Without a device it says so and exits 0.
//   build/<dir>/tests/engine/engine_ops_gpu_bench
#include "engine/core/allocator.h"
#include "engine/core/cuda_check.h"
#include "engine/core/device.h"
#include "engine/core/stream.h"
#include "engine/cuda/context.h"
#include "engine/ops/activation.h"
#include "engine/ops/conv.h"
#include "engine/ops/elementwise.h"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <functional>

namespace {

using namespace ember;
using namespace ember::ops;

CudaContext& context() {
    static CudaContext ctx;
    return ctx;
}

Tensor device_tensor(Buffer& buffer, DType dtype, std::initializer_list<int64_t> shape, Layout layout = Layout::nchw) {
    Tensor t = make_tensor(nullptr, dtype, shape, Device::cuda, layout);
    buffer = Buffer(device_allocator(), t.bytes());
    t.data = buffer.data();
    return t;
}

// Times `work` with CUDA events around each iteration (manual time).
void time_on_device(benchmark::State& state, const std::function<void()>& work) {
    Event start, end;
    work();  // warm-up (and, for the autotuner, the one-time search)
    for (auto _ : state) {
        start.record(context().stream);
        work();
        end.record(context().stream);
        end.synchronize();
        state.SetIterationTime(Event::elapsed_ms(start, end) / 1e3);
    }
}

void BM_Gelu(benchmark::State& state) {
    const bool fused = state.range(0) != 0;
    const int64_t n = int64_t(1) << 26;  // 64 Mi elements
    Buffer xb, yb, sb;
    Tensor x = device_tensor(xb, DType::f32, {n}), y = device_tensor(yb, DType::f32, {n});
    Tensor scratch = device_tensor(sb, DType::f32, {n});
    fill_cuda(context(), x, 0.5f);
    time_on_device(state, [&] {
        if (fused)
            gelu_forward_cuda(context(), x, y);
        else
            gelu_forward_unfused_cuda(context(), x, y, scratch);
    });
    state.SetBytesProcessed(state.iterations() * n * 8);  // the fused kernel's traffic
}
BENCHMARK(BM_Gelu)->ArgNames({"fused"})->Arg(1)->Arg(0)->UseManualTime()->Unit(benchmark::kMicrosecond);

// ResNet-ish conv: batch 64, 64 -> 64 channels, 56x56, 3x3 pad 1; bf16 channels-last
// or f32 nchw; heuristics (benchmark=0) or cudnnFind (benchmark=1).
void BM_Conv(benchmark::State& state) {
    const bool benchmark_mode = state.range(0) != 0;
    const bool channels_last_bf16 = state.range(1) != 0;
    const DType dtype = channels_last_bf16 ? DType::bf16 : DType::f32;
    const Layout layout = channels_last_bf16 ? Layout::nhwc : Layout::nchw;
    context().cudnn_benchmark = benchmark_mode;
    Buffer xb, wb, yb;
    Tensor x = device_tensor(xb, dtype, {64, 64, 56, 56}, layout);
    Tensor w = device_tensor(wb, dtype, {64, 64, 3, 3}, layout);
    Tensor y = device_tensor(yb, dtype, {64, 64, 56, 56}, layout);
    fill_cuda(context(), x, 0.25f);
    fill_cuda(context(), w, 0.01f);
    Conv2dParams p;
    p.pad_h = p.pad_w = 1;
    time_on_device(state, [&] { conv2d_forward_cuda(context(), x, w, {}, y, p); });
    state.counters["TFLOP/s"] =
        benchmark::Counter(2.0 * 64 * 64 * 64 * 9 * 56 * 56 / 1e12, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Conv)
    ->ArgNames({"benchmark", "nhwc_bf16"})
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
    if (!cuda_device_available()) {
        std::printf("engine_ops_gpu_bench: no CUDA device (%s); nothing to measure\n",
                    cuda_runtime_status().reason.c_str());
        return 0;
    }
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
