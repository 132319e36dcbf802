// activation.h: ReLU and GELU on tensors (f32, f16, bf16; f64 on CPU), computed in fp32.
// GELU comes in two forms so the fusion can be measured:
//   gelu_forward_*            one fused kernel (engine/ops/gelu.h's gelu_tanh)
//   gelu_forward_unfused_*    the chain of pointwise kernels an eager framework runs:
//                             t = x*x*x; t *= 0.044715; t += x; t *= sqrt(2/pi);
//                             t = tanh(t); t += 1; t *= x; y = 0.5 t
//                             (8 kernels, each reading and writing memory)
#pragma once

#include "engine/ops/common.h"
#include "engine/ops/gelu.h"

namespace ember::ops {

EMBER_HD inline float relu(float x) {
    return x > 0.0f ? x : 0.0f;
}
// Gradient of ReLU given the forward output (or input): 1 where positive.
EMBER_HD inline float relu_grad(float y_or_x) {
    return y_or_x > 0.0f ? 1.0f : 0.0f;
}

void relu_forward_cpu(const Tensor& x, const Tensor& y);
void relu_forward_cuda(CudaContext& ctx, const Tensor& x, const Tensor& y);
// dx = dy * (y > 0); `y` is the forward output (in-place ReLU keeps only that).
void relu_backward_cpu(const Tensor& y, const Tensor& dy, const Tensor& dx, GradWrite write);
void relu_backward_cuda(CudaContext& ctx, const Tensor& y, const Tensor& dy, const Tensor& dx, GradWrite write);

void gelu_forward_cpu(const Tensor& x, const Tensor& y);
void gelu_forward_cuda(CudaContext& ctx, const Tensor& x, const Tensor& y);
// scratch: f32 tensor with x.numel() elements (the chain's intermediate).
void gelu_forward_unfused_cpu(const Tensor& x, const Tensor& y, const Tensor& scratch);
void gelu_forward_unfused_cuda(CudaContext& ctx, const Tensor& x, const Tensor& y, const Tensor& scratch);
// dx = dy * gelu_tanh_grad(x)
void gelu_backward_cpu(const Tensor& x, const Tensor& dy, const Tensor& dx, GradWrite write);
void gelu_backward_cuda(CudaContext& ctx, const Tensor& x, const Tensor& dy, const Tensor& dx, GradWrite write);

}  // namespace ember::ops
