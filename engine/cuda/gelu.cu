// gelu.cu: fused GELU forward and backward, one kernel each (grid-stride loop).
#include "engine/core/cuda_check.h"
#include "engine/core/launch.h"
#include "engine/ops/gelu.h"

#include <cuda_runtime.h>

namespace ember::ops {
namespace {

constexpr int kThreads = 256;

__global__ void gelu_forward_kernel(const float* __restrict__ in, float* __restrict__ out, std::size_t n) {
    for (std::size_t i = blockIdx.x * (std::size_t)blockDim.x + threadIdx.x; i < n;
         i += (std::size_t)gridDim.x * blockDim.x)
        out[i] = gelu_tanh(in[i]);
}

__global__ void gelu_backward_kernel(const float* __restrict__ in, const float* __restrict__ grad_out,
                                     float* __restrict__ grad_in, std::size_t n) {
    for (std::size_t i = blockIdx.x * (std::size_t)blockDim.x + threadIdx.x; i < n;
         i += (std::size_t)gridDim.x * blockDim.x)
        grad_in[i] = grad_out[i] * gelu_tanh_grad(in[i]);
}

unsigned grid_for(std::size_t n) {
    return cuda::grid_stride_blocks(static_cast<int64_t>((n + kThreads - 1) / kThreads), 65535LL * 8);
}

}  // namespace

void gelu_forward_cuda(const float* in, float* out, std::size_t n, void* stream) {
    EMBER_LAUNCH(gelu_forward_kernel, grid_for(n), kThreads, 0, (cudaStream_t)stream)(in, out, n);
    EMBER_CUDA_CHECK_LAUNCH();
}

void gelu_backward_cuda(const float* in, const float* grad_out, float* grad_in, std::size_t n, void* stream) {
    EMBER_LAUNCH(gelu_backward_kernel, grid_for(n), kThreads, 0, (cudaStream_t)stream)(in, grad_out, grad_in, n);
    EMBER_CUDA_CHECK_LAUNCH();
}

}  // namespace ember::ops
