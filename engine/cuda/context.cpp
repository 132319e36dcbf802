// context.cpp: creating and destroying the per-stream CUDA context (library handles,
// workspace, conv algorithm cache), and the cuBLAS/cuDNN error messages.
#include "engine/cuda/context.h"

#include "engine/core/cuda_check.h"
#include "engine/core/device.h"
#include "engine/cuda/conv_autotune.h"

#include <stdexcept>
#include <string>

namespace ember {

void throw_cublas_error(int status, const char* expr, const char* file, int line) {
    throw std::runtime_error(std::string(expr) + " failed at " + file + ":" + std::to_string(line) + ": " +
                             cublasGetStatusName(static_cast<cublasStatus_t>(status)) + " (" +
                             cublasGetStatusString(static_cast<cublasStatus_t>(status)) + ")");
}

void throw_cudnn_error(int status, const char* expr, const char* file, int line) {
    throw std::runtime_error(std::string(expr) + " failed at " + file + ":" + std::to_string(line) + ": " +
                             cudnnGetErrorString(static_cast<cudnnStatus_t>(status)));
}

CudaContext::CudaContext(const CudaContextOptions& options)
    : stream(options.stream),
      workspace_bytes(options.workspace_bytes),
      cudnn_benchmark(options.cudnn_benchmark),
      allow_tf32(options.allow_tf32),
      deterministic(options.deterministic),
      conv_algorithms(std::make_unique<ConvAlgoCache>()) {
    if (!cuda_device_available())
        throw std::runtime_error("CudaContext: no CUDA device (" + cuda_runtime_status().reason +
                                 "); use the cpu backend");
    EMBER_CUBLAS_CHECK(cublasCreate(&cublas));
    EMBER_CUBLAS_CHECK(cublasSetStream(cublas, stream));
    EMBER_CUBLAS_CHECK(cublasSetMathMode(cublas, allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH));
    EMBER_CUBLAS_CHECK(cublasLtCreate(&cublaslt));
    EMBER_CUDNN_CHECK(cudnnCreate(&cudnn));
    EMBER_CUDNN_CHECK(cudnnSetStream(cudnn, stream));
    if (workspace_bytes > 0) workspace = device_allocator().allocate(workspace_bytes);
}

CudaContext::~CudaContext() {
    if (workspace) device_allocator().free(workspace);
    if (cudnn) cudnnDestroy(cudnn);
    if (cublaslt) cublasLtDestroy(cublaslt);
    if (cublas) cublasDestroy(cublas);
}

void CudaContext::synchronize() const {
    EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace ember
