// gelu.h: the GELU activation (tanh approximation, as in GPT-2 and PyTorch's
// approximate="tanh") and its derivative, as __host__ __device__ functions so the
// CPU reference and the CUDA kernel compute with the same arithmetic.
#pragma once

#include "engine/core/dtype.h"  // EMBER_HD

#include <cmath>
#include <cstddef>

namespace ember::ops {

constexpr float kGeluSqrt2OverPi = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluCubic = 0.044715f;

// y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
EMBER_HD inline float gelu_tanh(float x) {
    float inner = kGeluSqrt2OverPi * (x + kGeluCubic * x * x * x);
    return 0.5f * x * (1.0f + tanhf(inner));
}

// dy/dx of gelu_tanh.
EMBER_HD inline float gelu_tanh_grad(float x) {
    float inner = kGeluSqrt2OverPi * (x + kGeluCubic * x * x * x);
    float t = tanhf(inner);
    float dinner = kGeluSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * dinner;
}

// CPU reference: out[i] = gelu_tanh(in[i]).
void gelu_forward_cpu(const float* in, float* out, std::size_t n);
void gelu_backward_cpu(const float* in, const float* grad_out, float* grad_in, std::size_t n);

// CUDA: device pointers; launched on `stream` (a cudaStream_t, 0 = default).
void gelu_forward_cuda(const float* in, float* out, std::size_t n, void* stream);
void gelu_backward_cuda(const float* in, const float* grad_out, float* grad_in, std::size_t n, void* stream);

}  // namespace ember::ops
