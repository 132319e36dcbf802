// The CUDA GELU kernels against their CPU twins (label `gpu`).
#include "engine/core/cuda_check.h"
#include "engine/ops/gelu.h"
#include "tests/support/gpu.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace {

struct DeviceBuffer {
    float* ptr = nullptr;
    explicit DeviceBuffer(size_t n) { EMBER_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr), n * sizeof(float))); }
    ~DeviceBuffer() { cudaFree(ptr); }
};

TEST(GeluGpu, ForwardAndBackwardMatchCpu) {
    EMBER_REQUIRE_GPU();
    // Odd size: exercises the tail of the grid-stride loop.
    const size_t n = (1u << 20) + 37;
    std::mt19937 rng(42);
    std::normal_distribution<float> dist(0.0f, 2.0f);
    std::vector<float> x(n), g(n);
    for (auto& v : x) v = dist(rng);
    for (auto& v : g) v = dist(rng);

    std::vector<float> y_cpu(n), dx_cpu(n);
    ember::ops::gelu_forward_cpu(x.data(), y_cpu.data(), n);
    ember::ops::gelu_backward_cpu(x.data(), g.data(), dx_cpu.data(), n);

    DeviceBuffer dx_in(n), dg(n), dy(n), ddx(n);
    EMBER_CUDA_CHECK(cudaMemcpy(dx_in.ptr, x.data(), n * 4, cudaMemcpyHostToDevice));
    EMBER_CUDA_CHECK(cudaMemcpy(dg.ptr, g.data(), n * 4, cudaMemcpyHostToDevice));
    // Poison outputs so an unwritten element cannot pass.
    EMBER_CUDA_CHECK(cudaMemset(dy.ptr, 0xff, n * 4));
    EMBER_CUDA_CHECK(cudaMemset(ddx.ptr, 0xff, n * 4));
    ember::ops::gelu_forward_cuda(dx_in.ptr, dy.ptr, n, nullptr);
    ember::ops::gelu_backward_cuda(dx_in.ptr, dg.ptr, ddx.ptr, n, nullptr);
    EMBER_CUDA_CHECK(cudaDeviceSynchronize());

    std::vector<float> y_gpu(n), dx_gpu(n);
    EMBER_CUDA_CHECK(cudaMemcpy(y_gpu.data(), dy.ptr, n * 4, cudaMemcpyDeviceToHost));
    EMBER_CUDA_CHECK(cudaMemcpy(dx_gpu.data(), ddx.ptr, n * 4, cudaMemcpyDeviceToHost));

    double err_y = 0, ref_y = 0, err_dx = 0, ref_dx = 0;
    for (size_t i = 0; i < n; ++i) {
        ASSERT_TRUE(std::isfinite(y_gpu[i])) << "unwritten or NaN at " << i;
        ASSERT_TRUE(std::isfinite(dx_gpu[i])) << "unwritten or NaN at " << i;
        err_y += double(y_gpu[i] - y_cpu[i]) * (y_gpu[i] - y_cpu[i]);
        ref_y += double(y_cpu[i]) * y_cpu[i];
        err_dx += double(dx_gpu[i] - dx_cpu[i]) * (dx_gpu[i] - dx_cpu[i]);
        ref_dx += double(dx_cpu[i]) * dx_cpu[i];
    }
    // Same arithmetic on both sides; only tanhf's device/host ulp differences remain.
    EXPECT_LT(std::sqrt(err_y / ref_y), 1e-6);
    EXPECT_LT(std::sqrt(err_dx / ref_dx), 1e-6);
}

}  // namespace
