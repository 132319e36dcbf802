// context.h: ember::CudaContext, what every CUDA op needs besides its tensors:
// the stream it is enqueued on, the cuBLAS, cuBLASLt and cuDNN handles bound to that
// stream, a GEMM/conv workspace, and the cuDNN algorithm cache with its
// `cudnn_benchmark` and `deterministic` switches (engine/cuda/conv_autotune.h). One per stream; not
// thread-safe. Constructing one without a device throws std::runtime_error saying why.
#pragma once

#include "engine/core/allocator.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <memory>

namespace ember {

class ConvAlgoCache;

struct CudaContextOptions {
    bool cudnn_benchmark = false;  // time conv algorithms on first use of each shape
    bool allow_tf32 = false;       // f32 GEMM/conv may use TF32 tensor cores
    bool deterministic = false;    // only cuDNN algorithms that give the same bits every run
    std::size_t workspace_bytes = 64u << 20;
    cudaStream_t stream = nullptr;  // nullptr: the default stream
};

struct CudaContext {
    explicit CudaContext(const CudaContextOptions& options = {});
    ~CudaContext();
    CudaContext(const CudaContext&) = delete;
    CudaContext& operator=(const CudaContext&) = delete;

    cudaStream_t stream = nullptr;  // bound to the handles at construction: do not reassign
    cublasHandle_t cublas = nullptr;
    cublasLtHandle_t cublaslt = nullptr;
    cudnnHandle_t cudnn = nullptr;
    void* workspace = nullptr;  // from device_allocator(), once; cuBLASLt, cuDNN and
                                // BatchNorm's per-channel partial sums use it in stream order
    std::size_t workspace_bytes = 0;
    bool cudnn_benchmark = false;  // may be flipped between steps
    bool allow_tf32 = false;
    bool deterministic = false;  // may be flipped between steps, like cudnn_benchmark
    std::unique_ptr<ConvAlgoCache> conv_algorithms;

    void synchronize() const;
};

// Names the failing cuBLAS / cuDNN call, file and line (like EMBER_CUDA_CHECK).
[[noreturn]] void throw_cublas_error(int status, const char* expr, const char* file, int line);
[[noreturn]] void throw_cudnn_error(int status, const char* expr, const char* file, int line);

// The context's cuBLAS, cuBLASLt and cuDNN handles, bound to ctx.stream: created on a
// device (library_handles.cpp; throws without one), none in the kernel interpreter
// (interpreter/library_handles.cpp). The CudaContext constructor and destructor call them.
void create_library_handles(CudaContext& ctx);
void destroy_library_handles(CudaContext& ctx);

}  // namespace ember

#define EMBER_CUBLAS_CHECK(expr)                                                                            \
    do {                                                                                                    \
        cublasStatus_t ember_cublas_status_ = (expr);                                                       \
        if (ember_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                                  \
            ::ember::throw_cublas_error(static_cast<int>(ember_cublas_status_), #expr, __FILE__, __LINE__); \
    } while (0)

#define EMBER_CUDNN_CHECK(expr)                                                                           \
    do {                                                                                                  \
        cudnnStatus_t ember_cudnn_status_ = (expr);                                                       \
        if (ember_cudnn_status_ != CUDNN_STATUS_SUCCESS)                                                  \
            ::ember::throw_cudnn_error(static_cast<int>(ember_cudnn_status_), #expr, __FILE__, __LINE__); \
    } while (0)
