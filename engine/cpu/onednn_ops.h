// onednn_ops.h: the fast paths of the CPU twins (engine/cpu only). Each takes f32
// tensors whose arguments its ops::<op>_cpu caller has already checked, and honours the
// same GradWrite and layout rules as the reference loops it stands in for.
#pragma once

#include "engine/ops/conv.h"
#include "engine/ops/gemm.h"

namespace ember::cpu {

// onednn_conv.cpp: oneDNN convolution primitives, cached per shape.
void onednn_conv2d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                           const ops::Conv2dParams& params);
void onednn_conv2d_backward_data(const Tensor& weight, const Tensor& dy, const Tensor& dx,
                                 const ops::Conv2dParams& params, ops::GradWrite write);
void onednn_conv2d_backward_filter(const Tensor& x, const Tensor& dy, const Tensor& dweight,
                                   const ops::Conv2dParams& params, ops::GradWrite write);

// onednn_gemm.cpp: C = epilogue(alpha op(A) op(B) + beta C) with dnnl_sgemm (m, n, k > 0),
// stacks of products with a cached matmul primitive, bias gradients by columns.
void fast_gemm(const Tensor& a, const Tensor& b, const Tensor& c, const ops::GemmArgs& args, int64_t m, int64_t n,
               int64_t k);
void onednn_batched_gemm(const Tensor& a, const Tensor& b, const Tensor& c, const ops::BatchedGemmShape& shape);
void fast_bias_backward(const Tensor& dy, const Tensor& dbias, ops::GradWrite write);

}  // namespace ember::cpu
