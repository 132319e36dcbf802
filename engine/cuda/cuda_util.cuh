// cuda_util.cuh: launch helpers and argument checks shared by the CUDA op files.
#pragma once

#include "engine/core/cuda_check.h"
#include "engine/core/launch.h"
#include "engine/core/tensor.h"
#include "engine/cuda/context.h"
#include "engine/ops/common.h"

#include <cuda_runtime.h>

#include <initializer_list>
#include <string>
#include <utility>

namespace ember::cuda {

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n elements (capped; the loop covers the rest).
inline unsigned grid_for(int64_t n) {
    return grid_stride_blocks((n + kThreads - 1) / kThreads, 65535LL * 8);
}

inline bool is_float(DType t) {
    return t == DType::f32 || t == DType::f16 || t == DType::bf16;
}

inline void check_float_cuda(const Tensor& t, const char* op, const char* name) {
    require(t.defined(), op, std::string(name) + " is undefined");
    require(t.device == Device::cuda, op, std::string(name) + " must be a cuda tensor: " + t.describe());
    require(is_float(t.dtype), op, std::string(name) + " must be f32, f16 or bf16 on cuda: " + t.describe());
}

inline void check_f32_cuda(const Tensor& t, const char* op, const char* name, int64_t numel) {
    require(t.defined() && t.device == Device::cuda && t.dtype == DType::f32, op,
            std::string(name) + " must be a cuda f32 tensor" + (t.defined() ? ": " + t.describe() : ""));
    require(t.numel() == numel, op,
            std::string(name) + " must have " + std::to_string(numel) + " elements: " + t.describe());
}

// check_f32_cuda for several tensors of one length: {{gamma, "gamma"}, {beta, "beta"}}.
inline void check_f32_cuda(const char* op, int64_t numel,
                           std::initializer_list<std::pair<const Tensor&, const char*>> tensors) {
    for (const auto& [t, name] : tensors) check_f32_cuda(t, op, name, numel);
}

#define EMBER_GRID_STRIDE(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

// Element offset of (n, c, spatial s) for a (N,C) or (N,C,H,W) tensor, either layout.
__device__ __forceinline__ int64_t channel_offset(int rank, bool nhwc, int64_t n, int64_t c, int64_t s, int64_t C,
                                                  int64_t spatial) {
    if (rank == 2) return n * C + c;
    return nhwc ? (n * spatial + s) * C + c : (n * C + c) * spatial + s;
}

// Block-wide sum (blockDim.x a multiple of 32, at most 1024); every thread gets it.
__device__ __forceinline__ float block_sum(float v) {
    EMBER_SHARED(float, partial, [32]);
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    __syncthreads();  // partial may still be read by a previous call
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    int warps = blockDim.x / 32;
    float total = 0.0f;
    for (int w = 0; w < warps; ++w) total += partial[w];
    return total;
}

__device__ __forceinline__ float block_max(float v) {
    EMBER_SHARED(float, partial, [32]);
    for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    __syncthreads();
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    int warps = blockDim.x / 32;
    float best = partial[0];
    for (int w = 1; w < warps; ++w) best = fmaxf(best, partial[w]);
    return best;
}

}  // namespace ember::cuda
