// conv.h: 2-D convolution (cross-correlation, as nn.Conv2d) forward and backward.
// x (N,C,H,W), weight (K,C,R,S), y (N,K,P,Q); nchw or nhwc (x, weight and y share one
// layout; nhwc filters are stored KRSC as cuDNN expects). dtypes: f32, f16, bf16 (f64 on
// CPU) with fp32 accumulation. CUDA uses cuDNN, with the algorithm picked by the
// autotuner (engine/cuda/conv_autotune.h: ctx.cudnn_benchmark); CPU uses im2col +
// OpenBLAS sgemm.
#pragma once

#include "engine/ops/common.h"

namespace ember::ops {

struct Conv2dParams {
    int stride_h = 1, stride_w = 1;
    int pad_h = 0, pad_w = 0;
    int dilation_h = 1, dilation_w = 1;
};

// Output spatial size: (in + 2 pad - dilation (kernel - 1) - 1) / stride + 1.
inline int64_t conv_output_size(int64_t in, int64_t kernel, int stride, int pad, int dilation) {
    return (in + 2 * pad - dilation * (kernel - 1) - 1) / stride + 1;
}

// y = conv(x, weight) (+ bias[K], f32 or y's dtype; may be undefined)
void conv2d_forward_cpu(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                        const Conv2dParams& params);
void conv2d_forward_cuda(CudaContext& ctx, const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                         const Conv2dParams& params);

// dx = conv_transpose(dy, weight)
void conv2d_backward_data_cpu(const Tensor& weight, const Tensor& dy, const Tensor& dx, const Conv2dParams& params,
                              GradWrite write);
void conv2d_backward_data_cuda(CudaContext& ctx, const Tensor& weight, const Tensor& dy, const Tensor& dx,
                               const Conv2dParams& params, GradWrite write);

// dweight = correlation of x with dy
void conv2d_backward_filter_cpu(const Tensor& x, const Tensor& dy, const Tensor& dweight, const Conv2dParams& params,
                                GradWrite write);
void conv2d_backward_filter_cuda(CudaContext& ctx, const Tensor& x, const Tensor& dy, const Tensor& dweight,
                                 const Conv2dParams& params, GradWrite write);

// dbias[K] (f32) = sum of dy over N, P, Q
void conv2d_backward_bias_cpu(const Tensor& dy, const Tensor& dbias, GradWrite write);
void conv2d_backward_bias_cuda(CudaContext& ctx, const Tensor& dy, const Tensor& dbias, GradWrite write);

}  // namespace ember::ops
