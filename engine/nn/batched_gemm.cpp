// batched_gemm.cpp: stacked GEMMs on both backends (batched_gemm.h).
#include "engine/nn/batched_gemm.h"

#include "engine/cuda/context.h"

#include <library_types.h>

namespace ember::nn {

namespace {
Tensor matrix_at(const Tensor& stack, int64_t i, int64_t rows, int64_t cols) {
    char* base = static_cast<char*>(stack.data) + i * rows * cols * static_cast<int64_t>(dtype_size(stack.dtype));
    return make_tensor(base, stack.dtype, {rows, cols}, stack.device);
}

cudaDataType_t cuda_type(DType t) {
    switch (t) {
        case DType::f32: return CUDA_R_32F;
        case DType::f16: return CUDA_R_16F;
        case DType::bf16: return CUDA_R_16BF;
        default: break;
    }
    throw std::invalid_argument(std::string("batched_gemm_cuda: unsupported dtype ") + dtype_name(t));
}
}  // namespace

void batched_gemm(RunContext& ctx, const Tensor& a, const Tensor& b, const Tensor& c, const BatchedGemmShape& s) {
    const int64_t a_rows = s.transpose_a ? s.k : s.m, a_cols = s.transpose_a ? s.m : s.k;
    const int64_t b_rows = s.transpose_b ? s.n : s.k, b_cols = s.transpose_b ? s.k : s.n;
    require(a.numel() == s.count * s.m * s.k && b.numel() == s.count * s.k * s.n && c.numel() == s.count * s.m * s.n,
            "batched_gemm", "stack sizes do not match the shape: " + a.describe() + ", " + b.describe() + ", " +
                                c.describe());
    if (ctx.on_cuda()) {
        batched_gemm_cuda(*ctx.cuda, a, b, c, s);
        return;
    }
    ops::GemmArgs args;
    args.transpose_a = s.transpose_a;
    args.transpose_b = s.transpose_b;
    args.alpha = s.alpha;
    for (int64_t i = 0; i < s.count; ++i)
        ops::gemm_cpu(matrix_at(a, i, a_rows, a_cols), matrix_at(b, i, b_rows, b_cols), matrix_at(c, i, s.m, s.n),
                      args);
}

void batched_gemm_cuda(CudaContext& ctx, const Tensor& a, const Tensor& b, const Tensor& c,
                       const BatchedGemmShape& s) {
    require(a.dtype == b.dtype, "batched_gemm_cuda", "A and B dtypes differ");
    require(c.dtype == a.dtype || c.dtype == DType::f32, "batched_gemm_cuda", "C must be f32 or A's dtype");
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLAS's first
    // operand is our B. A row-major [r, c] matrix is a column-major [c, r] one (ld = c).
    const cublasOperation_t op_first = s.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_second = s.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int ld_first = static_cast<int>(s.transpose_b ? s.k : s.n);
    const int ld_second = static_cast<int>(s.transpose_a ? s.m : s.k);
    const float beta = 0.0f;
    const cublasComputeType_t compute =
        (ctx.allow_tf32 && a.dtype == DType::f32) ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    // A fixed workspace keeps cuBLAS from allocating inside a CUDA Graph capture.
    if (ctx.workspace) EMBER_CUBLAS_CHECK(cublasSetWorkspace(ctx.cublas, ctx.workspace, ctx.workspace_bytes));
    EMBER_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        ctx.cublas, op_first, op_second, static_cast<int>(s.n), static_cast<int>(s.m), static_cast<int>(s.k),
        &s.alpha, b.data, cuda_type(b.dtype), ld_first, static_cast<long long>(s.k * s.n), a.data, cuda_type(a.dtype),
        ld_second, static_cast<long long>(s.m * s.k), &beta, c.data, cuda_type(c.dtype), static_cast<int>(s.n),
        static_cast<long long>(s.m * s.n), static_cast<int>(s.count), compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace ember::nn
