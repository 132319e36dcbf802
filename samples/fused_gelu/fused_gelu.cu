// fused_gelu: GELU (tanh form) on 1M floats as five pointwise kernels, each reading
// and writing the whole tensor, against one fused kernel that reads once and writes
// once. Pointwise chains are memory-bound, so the fused version moves ~5x fewer bytes;
// this is the fusion the tuning canon measures at ~4x (and what torch.compile or
// @torch.jit.script do for such chains). ember's trainer uses the fused kernel
// (engine/cuda/gelu.cu) unless `switches.fused_gelu = false`.
//
//   sample_fused_gelu [elements]   (default 1048576)
#include "engine/core/launch.h"
#include "engine/ops/gelu.h"
#include "samples/common.h"

#include <cmath>
#include <vector>

namespace {

constexpr int kThreads = 256;

__global__ void cube(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * x[i] * x[i];
}
__global__ void axpy_inner(const float* x, const float* x3, float* y, int n) {  // x + c x^3
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + ember::ops::kGeluCubic * x3[i];
}
__global__ void scale(float* y, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] *= s;
}
__global__ void tanh_inplace(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = tanhf(y[i]);
}
__global__ void finish(const float* x, const float* t, float* y, int n) {  // 0.5 x (1 + t)
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 0.5f * x[i] * (1.0f + t[i]);
}
__global__ void fused(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = ember::ops::gelu_tanh(x[i]);
}

}  // namespace

int main(int argc, char** argv) {
    if (!sample_has_device("fused_gelu")) return 0;
    int n = argc > 1 ? std::atoi(argv[1]) : (1 << 20);
    if (n <= 0) {
        std::fprintf(stderr, "usage: %s [elements > 0]\n", argv[0]);
        return 2;
    }
    size_t bytes = size_t(n) * sizeof(float);
    std::vector<float> host(n);
    for (int i = 0; i < n; ++i) host[i] = std::sin(0.001f * i) * 4.0f;
    float *x, *tmp, *tmp2, *y_unfused, *y_fused;
    SAMPLE_CHECK(cudaMalloc(&x, bytes));
    SAMPLE_CHECK(cudaMalloc(&tmp, bytes));
    SAMPLE_CHECK(cudaMalloc(&tmp2, bytes));
    SAMPLE_CHECK(cudaMalloc(&y_unfused, bytes));
    SAMPLE_CHECK(cudaMalloc(&y_fused, bytes));
    SAMPLE_CHECK(cudaMemcpy(x, host.data(), bytes, cudaMemcpyHostToDevice));
    int blocks = (n + kThreads - 1) / kThreads;

    auto unfused = [&] {
        EMBER_LAUNCH(cube, blocks, kThreads)(x, tmp, n);
        EMBER_LAUNCH(axpy_inner, blocks, kThreads)(x, tmp, tmp2, n);
        EMBER_LAUNCH(scale, blocks, kThreads)(tmp2, ember::ops::kGeluSqrt2OverPi, n);
        EMBER_LAUNCH(tanh_inplace, blocks, kThreads)(tmp2, n);
        EMBER_LAUNCH(finish, blocks, kThreads)(x, tmp2, y_unfused, n);
    };
    auto one = [&] { EMBER_LAUNCH(fused, blocks, kThreads)(x, y_fused, n); };
    float unfused_ms = sample_time_ms(10, 200, unfused);
    float fused_ms = sample_time_ms(10, 200, one);
    SAMPLE_CHECK(cudaGetLastError());

    std::vector<float> a(n), b(n);
    SAMPLE_CHECK(cudaMemcpy(a.data(), y_unfused, bytes, cudaMemcpyDeviceToHost));
    SAMPLE_CHECK(cudaMemcpy(b.data(), y_fused, bytes, cudaMemcpyDeviceToHost));
    double max_diff = 0;
    for (int i = 0; i < n; ++i) max_diff = std::fmax(max_diff, std::fabs(a[i] - b[i]));

    std::printf("GELU on %d floats\n", n);
    std::printf("  unfused (5 kernels): %8.2f us\n", unfused_ms * 1e3);
    std::printf("  fused   (1 kernel):  %8.2f us\n", fused_ms * 1e3);
    std::printf("  speed-up: %.2fx   max |difference|: %.2e\n", unfused_ms / fused_ms, max_diff);
    for (float* p : {x, tmp, tmp2, y_unfused, y_fused}) SAMPLE_CHECK(cudaFree(p));
    return max_diff < 1e-5 ? 0 : 1;
}
