// pooling.h: 2-D max and average pooling over (N,C,H,W), nchw or nhwc, as
// nn.MaxPool2d / nn.AvgPool2d (count_include_pad=True: padded cells count in the
// divisor). Max pooling saves, per output, the flat index h*W+w of the winning input
// in its (n, c) plane (i32) for backward; ties go to the first in scan order.
// Global average pooling is avg pooling with the kernel equal to the input size.
#pragma once

#include "engine/ops/common.h"

namespace ember::ops {

struct Pool2dParams {
    int kernel_h = 2, kernel_w = 2;
    int stride_h = 2, stride_w = 2;
    int pad_h = 0, pad_w = 0;
};

void maxpool2d_forward_cpu(const Tensor& x, const Tensor& y, const Tensor& argmax, const Pool2dParams& params);
void maxpool2d_forward_cuda(CudaContext& ctx, const Tensor& x, const Tensor& y, const Tensor& argmax,
                            const Pool2dParams& params);
// dx gets dy routed to the saved argmax positions (scatter; overlapping windows add).
void maxpool2d_backward_cpu(const Tensor& dy, const Tensor& argmax, const Tensor& dx, const Pool2dParams& params,
                            GradWrite write);
void maxpool2d_backward_cuda(CudaContext& ctx, const Tensor& dy, const Tensor& argmax, const Tensor& dx,
                             const Pool2dParams& params, GradWrite write);

void avgpool2d_forward_cpu(const Tensor& x, const Tensor& y, const Pool2dParams& params);
void avgpool2d_forward_cuda(CudaContext& ctx, const Tensor& x, const Tensor& y, const Pool2dParams& params);
void avgpool2d_backward_cpu(const Tensor& dy, const Tensor& dx, const Pool2dParams& params, GradWrite write);
void avgpool2d_backward_cuda(CudaContext& ctx, const Tensor& dy, const Tensor& dx, const Pool2dParams& params,
                             GradWrite write);

}  // namespace ember::ops
