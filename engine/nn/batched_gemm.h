// batched_gemm.h: C_i = alpha op(A_i) op(B_i) for a stack of equally shaped row-major
// matrices laid out back to back (attention's per-(sample, head) products). CPU: one
// ops::gemm_cpu per matrix. CUDA: one cublasGemmStridedBatchedEx for the whole stack
// (fp32 accumulation; TF32 only when ctx.allow_tf32), instead of one launch per
// matrix - attention would otherwise launch batch x heads GEMMs four times per pass.
#pragma once

#include "engine/nn/run_context.h"
#include "engine/ops/gemm.h"

namespace ember::nn {

struct BatchedGemmShape {
    int64_t count = 1;     // matrices in the stack
    int64_t m = 0, n = 0, k = 0;  // C is [m, n]; op(A) [m, k]; op(B) [k, n]
    bool transpose_a = false, transpose_b = false;
    float alpha = 1.0f;
};

// a, b, c: tensors whose data hold `count` matrices each (A and B share a dtype; C is
// f32 or A's dtype, f64 on cpu when A is).
void batched_gemm(RunContext& ctx, const Tensor& a, const Tensor& b, const Tensor& c, const BatchedGemmShape& shape);
void batched_gemm_cuda(CudaContext& ctx, const Tensor& a, const Tensor& b, const Tensor& c,
                       const BatchedGemmShape& shape);

}  // namespace ember::nn
