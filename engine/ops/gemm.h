// gemm.h: matrix multiply with an optional bias / bias+GELU epilogue, the
// nn.Linear forward/backward built on it, and stacks of equally shaped products
// (attention's per-(sample, head) matrices).
//
// Operands are row-major matrices (a tensor of rank r is read as [numel/last, last]).
// A and B share a dtype (f32, f16, bf16; f64 on CPU); C is f32 or A's dtype.
// Low precision computes with fp32 accumulation (cuBLASLt, CUBLAS_COMPUTE_32F, TF32
// off); the CPU twin rounds nothing further: inputs are already f16/bf16 values,
// products are accumulated in fp32 by sgemm, C is rounded once to its dtype.
#pragma once

#include "engine/ops/common.h"

namespace ember::ops {

enum class Epilogue : uint8_t {
    none = 0,
    bias = 1,       // C += bias[col]
    bias_gelu = 2,  // C = gelu_tanh(C + bias[col]); pre-activation optionally saved
};

struct GemmArgs {
    bool transpose_a = false;  // use A^T
    bool transpose_b = false;  // use B^T
    float alpha = 1.0f;
    float beta = 0.0f;  // C = alpha op(A) op(B) + beta C  (before the epilogue)
    Epilogue epilogue = Epilogue::none;
    Tensor bias;            // [N], dtype of C, when the epilogue has a bias
    Tensor pre_activation;  // [M,N], dtype of C: C + bias before GELU (for backward); optional
};

// C[M,N] = epilogue(alpha op(A)[M,K] op(B)[K,N] + beta C)
void gemm_cpu(const Tensor& a, const Tensor& b, const Tensor& c, const GemmArgs& args = {});
void gemm_cuda(CudaContext& ctx, const Tensor& a, const Tensor& b, const Tensor& c, const GemmArgs& args = {});

// The checks both GEMMs make once each has checked its operands' device and dtype: A
// and B share a dtype, no operand is channels-last, C is f32 or A's dtype, the inner
// dimensions agree, C is [M,N] and the bias (when the epilogue has one) holds N values
// of C's dtype. Returns M, N, K; throws naming `op` otherwise (cpu/gemm.cpp).
struct GemmSizes {
    int64_t m, n, k;
};
GemmSizes check_gemm_sizes(const char* op, const Tensor& a, const Tensor& b, const Tensor& c, const GemmArgs& args);

// nn.Linear's forward as a GEMM of x and weight^T: the bias epilogue when there is a
// bias, bias+GELU when gelu (which needs one; throws naming `op` otherwise).
GemmArgs linear_forward_args(const char* op, const Tensor& bias, bool gelu, const Tensor& pre_activation);

// nn.Linear: y[M,N] = x[M,K] weight[N,K]^T (+ bias[N]) (then GELU when gelu=true,
// saving pre_activation[M,N] if given). bias may be an undefined Tensor.
void linear_forward_cpu(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y, bool gelu = false,
                        const Tensor& pre_activation = {});
void linear_forward_cuda(CudaContext& ctx, const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                         bool gelu = false, const Tensor& pre_activation = {});

// Given dy (the gradient of the linear output, i.e. after GELU backward if any):
//   dx[M,K] = dy weight             (skipped when dx is undefined)
//   dweight[N,K] = dy^T x
//   dbias[N] = column sums of dy    (skipped when dbias is undefined)
// input_write applies to dx, param_write to dweight and dbias.
void linear_backward_cpu(const Tensor& x, const Tensor& weight, const Tensor& dy, const Tensor& dx,
                         const Tensor& dweight, const Tensor& dbias, GradWrite input_write, GradWrite param_write);
void linear_backward_cuda(CudaContext& ctx, const Tensor& x, const Tensor& weight, const Tensor& dy, const Tensor& dx,
                          const Tensor& dweight, const Tensor& dbias, GradWrite input_write, GradWrite param_write);

// dbias[N] (f32) = sum over rows of dy[M,N] (any float dtype), fp32 accumulation.
void bias_backward_cpu(const Tensor& dy, const Tensor& dbias, GradWrite write);
void bias_backward_cuda(CudaContext& ctx, const Tensor& dy, const Tensor& dbias, GradWrite write);

// C_i = alpha op(A_i) op(B_i) for a stack of equally shaped row-major matrices laid
// out back to back. CPU: one gemm_cpu per matrix. CUDA: one cublasGemmStridedBatchedEx
// for the whole stack (fp32 accumulation; TF32 only when ctx.allow_tf32) instead of
// one launch per matrix - attention would otherwise launch batch x heads GEMMs four
// times per pass. A and B share a dtype; C is f32 or A's dtype (f64 on cpu when A is).
struct BatchedGemmShape {
    int64_t count = 1;            // matrices in the stack
    int64_t m = 0, n = 0, k = 0;  // C is [m, n]; op(A) [m, k]; op(B) [k, n]
    bool transpose_a = false, transpose_b = false;
    float alpha = 1.0f;
};
void batched_gemm_cpu(const Tensor& a, const Tensor& b, const Tensor& c, const BatchedGemmShape& shape);
void batched_gemm_cuda(CudaContext& ctx, const Tensor& a, const Tensor& b, const Tensor& c,
                       const BatchedGemmShape& shape);
// Both twins check the stacks' sizes against the shape.
inline void check_batched_gemm(const Tensor& a, const Tensor& b, const Tensor& c, const BatchedGemmShape& s) {
    require(a.numel() == s.count * s.m * s.k && b.numel() == s.count * s.k * s.n && c.numel() == s.count * s.m * s.n,
            "batched_gemm",
            "stack sizes do not match the shape: " + a.describe() + ", " + b.describe() + ", " + c.describe());
}

}  // namespace ember::ops
