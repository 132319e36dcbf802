// context.cpp: ember::CudaContext as the kernel interpreter builds it, in place of
// engine/cuda/context.cpp: a stream and a workspace for our own kernels, and no cuBLAS,
// cuBLASLt or cuDNN handles. Those libraries are device-only; the interpreted
// libraries leave out the ops that call them (engine/cuda/gemm.cpp, conv.cpp).
#include "engine/cuda/context.h"

#include "engine/core/allocator.h"
#include "engine/core/cuda_check.h"
#include "engine/cuda/conv_autotune.h"

#include <stdexcept>
#include <string>

namespace ember {

void throw_cublas_error(int status, const char* expr, const char* file, int line) {
    throw std::runtime_error(std::string(expr) + " failed at " + file + ":" + std::to_string(line) +
                             ": cuBLAS status " + std::to_string(status) +
                             " (cuBLAS is device-only: not in the kernel interpreter)");
}

void throw_cudnn_error(int status, const char* expr, const char* file, int line) {
    throw std::runtime_error(std::string(expr) + " failed at " + file + ":" + std::to_string(line) + ": cuDNN status " +
                             std::to_string(status) + " (cuDNN is device-only: not in the kernel interpreter)");
}

CudaContext::CudaContext(const CudaContextOptions& options)
    : stream(options.stream),
      workspace_bytes(options.workspace_bytes),
      cudnn_benchmark(options.cudnn_benchmark),
      allow_tf32(options.allow_tf32),
      deterministic(options.deterministic),
      conv_algorithms(std::make_unique<ConvAlgoCache>()) {
    if (workspace_bytes > 0) workspace = device_allocator().allocate(workspace_bytes);
}

CudaContext::~CudaContext() {
    if (workspace) device_allocator().free(workspace);
}

void CudaContext::synchronize() const {
    EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace ember
