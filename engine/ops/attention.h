// attention.h: the pieces of multi-head attention that are not GEMMs, on both
// backends: moving a head-interleaved [B*T, parts*D] row matrix to and from per-head
// [B*H, T, dh] blocks (so each head is one contiguous GEMM operand), and a row softmax
// with its backward. Scores and probabilities are f32 (f64 on CPU in gradient
// checks): under AMP the softmax stays in fp32. The per-head products themselves are
// batched GEMMs (ops/gemm.h).
#pragma once

#include "engine/ops/common.h"

namespace ember::ops {

struct HeadLayout {
    int64_t batch = 0, tokens = 0, heads = 0, head_dim = 0;
    int parts = 1;  // 3 for a fused q|k|v projection, 1 for the attention output
    int part = 0;   // which of the parts
    int64_t model_dim() const { return heads * head_dim; }
};

// to_heads=true: heads[b,h,t,e] = rows[b*T+t, part*D + h*dh + e]; false: the reverse
// (rows written, heads read). Each element moves once, so the reverse is the backward.
void move_heads_cpu(const Tensor& rows, const Tensor& heads, const HeadLayout& layout, bool to_heads);
void move_heads_cuda(CudaContext& ctx, const Tensor& rows, const Tensor& heads, const HeadLayout& layout,
                     bool to_heads);

// probabilities[r, :] = softmax(scores[r, :])
void softmax_rows_cpu(const Tensor& scores, const Tensor& probabilities);
void softmax_rows_cuda(CudaContext& ctx, const Tensor& scores, const Tensor& probabilities);

// dscores = scale * p * (dp - sum(dp * p))  (scale folds in 1/sqrt(dh))
void softmax_rows_backward_cpu(const Tensor& p, const Tensor& dp, const Tensor& ds, float scale);
void softmax_rows_backward_cuda(CudaContext& ctx, const Tensor& p, const Tensor& dp, const Tensor& ds, float scale);

}  // namespace ember::ops
