// elementwise.h: residual add, gradient accumulation, dtype casts, layout
// conversion, fill and scale. Any float dtype (f64 on CPU), computed in fp32 (f64 on CPU).
#pragma once

#include "engine/ops/common.h"

namespace ember::ops {

// out = a + b (residual join). Its backward is the identity into both branches:
// use accumulate_grad for each.
void add_cpu(const Tensor& a, const Tensor& b, const Tensor& out);
void add_cuda(CudaContext& ctx, const Tensor& a, const Tensor& b, const Tensor& out);

// dst = src (store) or dst += src (accumulate); shapes equal, dtypes may differ.
void accumulate_grad_cpu(const Tensor& src, const Tensor& dst, GradWrite write);
void accumulate_grad_cuda(CudaContext& ctx, const Tensor& src, const Tensor& dst, GradWrite write);

// dst = src converted to dst's dtype (round to nearest even for f16/bf16).
void cast_cpu(const Tensor& src, const Tensor& dst);
void cast_cuda(CudaContext& ctx, const Tensor& src, const Tensor& dst);

// Copies a 4-D tensor into dst with dst's layout (nchw <-> nhwc); same logical shape.
void convert_layout_cpu(const Tensor& src, const Tensor& dst);
void convert_layout_cuda(CudaContext& ctx, const Tensor& src, const Tensor& dst);

void fill_cpu(const Tensor& t, float value);
void fill_cuda(CudaContext& ctx, const Tensor& t, float value);

// t *= factor (loss-scale unscaling, averaging).
void scale_cpu(const Tensor& t, float factor);
void scale_cuda(CudaContext& ctx, const Tensor& t, float factor);

}  // namespace ember::ops
