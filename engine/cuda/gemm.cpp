// gemm.cpp: GEMM on cuBLASLt with fp32 accumulation (CUBLAS_COMPUTE_32F; TF32 only
// when the context allows it) and the bias / bias+GELU epilogues, plus nn.Linear
// forward/backward. Row-major C = op(A) op(B) is computed as the column-major
// product C^T = op(B)^T op(A)^T, so no operand is ever copied or transposed.
#include "engine/core/cuda_check.h"
#include "engine/cuda/context.h"
#include "engine/ops/activation.h"
#include "engine/ops/gemm.h"

#include <cublasLt.h>

#include <string>

namespace ember::ops {
namespace {

cudaDataType_t cuda_type(DType t) {
    switch (t) {
        case DType::f32:
            return CUDA_R_32F;
        case DType::f16:
            return CUDA_R_16F;
        case DType::bf16:
            return CUDA_R_16BF;
        default:
            break;
    }
    throw std::invalid_argument(std::string("gemm_cuda: unsupported dtype ") + dtype_name(t));
}

// Descriptors freed on every exit path.
struct LtDescriptors {
    cublasLtMatmulDesc_t matmul = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulPreference_t preference = nullptr;
    ~LtDescriptors() {
        if (preference) cublasLtMatmulPreferenceDestroy(preference);
        if (c) cublasLtMatrixLayoutDestroy(c);
        if (b) cublasLtMatrixLayoutDestroy(b);
        if (a) cublasLtMatrixLayoutDestroy(a);
        if (matmul) cublasLtMatmulDescDestroy(matmul);
    }
};

void check_cuda_operand(const Tensor& t, const char* name) {
    require(t.defined() && t.device == Device::cuda, "gemm_cuda",
            std::string(name) + " must be a cuda tensor" + (t.defined() ? ": " + t.describe() : ""));
}

}  // namespace

void gemm_cuda(CudaContext& ctx, const Tensor& a, const Tensor& b, const Tensor& c, const GemmArgs& args) {
    const char* op = "gemm_cuda";
    check_cuda_operand(a, "A");
    check_cuda_operand(b, "B");
    check_cuda_operand(c, "C");
    const bool has_bias = args.epilogue != Epilogue::none;
    if (has_bias) check_cuda_operand(args.bias, "bias");
    const auto [m, n, k] = check_gemm_sizes(op, a, b, c, args);
    const bool save_pre = args.epilogue == Epilogue::bias_gelu && args.pre_activation.defined();
    if (save_pre) {
        check_cuda_operand(args.pre_activation, "pre_activation");
        require(same_shape(args.pre_activation, c) && args.pre_activation.dtype == c.dtype, op,
                "pre_activation must be shaped and typed like C");
    }
    if (m == 0 || n == 0) return;

    // Saving the pre-activation: the GEMM writes C + bias into it, then one kernel
    // applies GELU into C (cuBLASLt's GELU_AUX needs ld % 8 == 0; this path has no such limit).
    const Tensor& destination = save_pre ? args.pre_activation : c;
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    if (args.epilogue == Epilogue::bias || save_pre)
        epilogue = CUBLASLT_EPILOGUE_BIAS;
    else if (args.epilogue == Epilogue::bias_gelu)
        epilogue = CUBLASLT_EPILOGUE_GELU_BIAS;

    const cudaDataType_t ab_type = cuda_type(a.dtype), c_type = cuda_type(c.dtype);
    const cublasComputeType_t compute =
        (ctx.allow_tf32 && a.dtype == DType::f32) ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    LtDescriptors d;
    EMBER_CUBLAS_CHECK(cublasLtMatmulDescCreate(&d.matmul, compute, CUDA_R_32F));
    // cuBLASLt's A is our B, its B our A (column-major view of row-major data).
    cublasOperation_t op_lt_a = args.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_lt_b = args.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    EMBER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d.matmul, CUBLASLT_MATMUL_DESC_TRANSA, &op_lt_a, sizeof op_lt_a));
    EMBER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d.matmul, CUBLASLT_MATMUL_DESC_TRANSB, &op_lt_b, sizeof op_lt_b));
    EMBER_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(d.matmul, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
    if (has_bias) {
        const void* bias_ptr = args.bias.data;
        EMBER_CUBLAS_CHECK(
            cublasLtMatmulDescSetAttribute(d.matmul, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof bias_ptr));
        cudaDataType_t bias_type = cuda_type(args.bias.dtype);
        EMBER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d.matmul, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                          sizeof bias_type));
    }
    // Stored (column-major) shapes: a row-major [r, c] matrix is column-major [c, r], ld c.
    EMBER_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.a, ab_type, b.cols(), b.rows(), b.cols()));
    EMBER_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.b, ab_type, a.cols(), a.rows(), a.cols()));
    EMBER_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.c, c_type, n, m, n));

    EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&d.preference));
    uint64_t workspace_limit = ctx.workspace_bytes;
    EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(d.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                            &workspace_limit, sizeof workspace_limit));
    cublasLtMatmulHeuristicResult_t heuristic{};
    int found = 0;
    EMBER_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(ctx.cublaslt, d.matmul, d.a, d.b, d.c, d.c, d.preference, 1,
                                                      &heuristic, &found));
    require(found > 0, op,
            "cuBLASLt has no algorithm for " + a.describe() + " x " + b.describe() + " -> " + c.describe());
    const float alpha = args.alpha;
    const float beta = args.beta;
    // With a saved pre-activation, beta applies to C, which the GEMM does not read:
    // seed the pre-activation buffer with C first.
    if (save_pre && beta != 0.0f)
        EMBER_CUDA_CHECK(
            cudaMemcpyAsync(args.pre_activation.data, c.data, c.bytes(), cudaMemcpyDeviceToDevice, ctx.stream));
    EMBER_CUBLAS_CHECK(cublasLtMatmul(ctx.cublaslt, d.matmul, &alpha, b.data, d.a, a.data, d.b, &beta, destination.data,
                                      d.c, destination.data, d.c, &heuristic.algo, ctx.workspace, ctx.workspace_bytes,
                                      ctx.stream));
    if (save_pre) gelu_forward_cuda(ctx, args.pre_activation, c);
}

void linear_forward_cuda(CudaContext& ctx, const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                         bool gelu, const Tensor& pre_activation) {
    gemm_cuda(ctx, x, weight, y, linear_forward_args("linear_forward_cuda", bias, gelu, pre_activation));
}

void linear_backward_cuda(CudaContext& ctx, const Tensor& x, const Tensor& weight, const Tensor& dy, const Tensor& dx,
                          const Tensor& dweight, const Tensor& dbias, GradWrite input_write, GradWrite param_write) {
    if (dx.defined()) {
        GemmArgs args;
        args.beta = input_write == GradWrite::accumulate ? 1.0f : 0.0f;
        gemm_cuda(ctx, dy, weight, dx, args);
    }
    if (dweight.defined()) {
        GemmArgs args;
        args.transpose_a = true;
        args.beta = param_write == GradWrite::accumulate ? 1.0f : 0.0f;
        gemm_cuda(ctx, dy, x, dweight, args);
    }
    if (dbias.defined()) bias_backward_cuda(ctx, dy, dbias, param_write);
}

void batched_gemm_cuda(CudaContext& ctx, const Tensor& a, const Tensor& b, const Tensor& c, const BatchedGemmShape& s) {
    check_batched_gemm(a, b, c, s);
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
        ctx.cublas, op_first, op_second, static_cast<int>(s.n), static_cast<int>(s.m), static_cast<int>(s.k), &s.alpha,
        b.data, cuda_type(b.dtype), ld_first, static_cast<long long>(s.k * s.n), a.data, cuda_type(a.dtype), ld_second,
        static_cast<long long>(s.m * s.k), &beta, c.data, cuda_type(c.dtype), static_cast<int>(s.n),
        static_cast<long long>(s.m * s.n), static_cast<int>(s.count), compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace ember::ops
