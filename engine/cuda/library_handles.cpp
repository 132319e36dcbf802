// library_handles.cpp: the cuBLAS, cuBLASLt and cuDNN handles of a CudaContext on a
// device, and the cuBLAS/cuDNN error messages.
#include "engine/core/cuda_check.h"
#include "engine/core/device.h"
#include "engine/cuda/context.h"

#include <stdexcept>
#include <string>

namespace ember {

void throw_cublas_error(int status, const char* expr, const char* file, int line) {
    throw std::runtime_error(failed_call(expr, file, line) + ": " +
                             cublasGetStatusName(static_cast<cublasStatus_t>(status)) + " (" +
                             cublasGetStatusString(static_cast<cublasStatus_t>(status)) + ")");
}

void throw_cudnn_error(int status, const char* expr, const char* file, int line) {
    throw std::runtime_error(failed_call(expr, file, line) + ": " +
                             cudnnGetErrorString(static_cast<cudnnStatus_t>(status)));
}

void create_library_handles(CudaContext& ctx) {
    if (!cuda_device_available())
        throw std::runtime_error("CudaContext: no CUDA device (" + cuda_runtime_status().reason +
                                 "); use the cpu backend");
    EMBER_CUBLAS_CHECK(cublasCreate(&ctx.cublas));
    EMBER_CUBLAS_CHECK(cublasSetStream(ctx.cublas, ctx.stream));
    EMBER_CUBLAS_CHECK(
        cublasSetMathMode(ctx.cublas, ctx.allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH));
    EMBER_CUBLAS_CHECK(cublasLtCreate(&ctx.cublaslt));
    EMBER_CUDNN_CHECK(cudnnCreate(&ctx.cudnn));
    EMBER_CUDNN_CHECK(cudnnSetStream(ctx.cudnn, ctx.stream));
}

void destroy_library_handles(CudaContext& ctx) {
    if (ctx.cudnn) cudnnDestroy(ctx.cudnn);
    if (ctx.cublaslt) cublasLtDestroy(ctx.cublaslt);
    if (ctx.cublas) cublasDestroy(ctx.cublas);
}

}  // namespace ember
