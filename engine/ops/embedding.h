// embedding.h: table lookup, as nn.Embedding. ids: i32 [rows] with values in [0, V);
// table [V, D] and out [rows, D]: f32, f16, bf16 (f64 on CPU). Backward scatter-adds
// dout rows into dtable (f32) (atomics on CUDA: order differs, sums agree to rounding).
#pragma once

#include "engine/ops/common.h"

namespace ember::ops {

void embedding_forward_cpu(const Tensor& ids, const Tensor& table, const Tensor& out);
void embedding_forward_cuda(CudaContext& ctx, const Tensor& ids, const Tensor& table, const Tensor& out);

// store: dtable is zeroed first, then every row added; accumulate: added to dtable.
void embedding_backward_cpu(const Tensor& ids, const Tensor& dout, const Tensor& dtable, GradWrite write);
void embedding_backward_cuda(CudaContext& ctx, const Tensor& ids, const Tensor& dout, const Tensor& dtable,
                             GradWrite write);

}  // namespace ember::ops
