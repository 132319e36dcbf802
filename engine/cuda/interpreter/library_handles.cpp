// library_handles.cpp: a CudaContext's library handles as the kernel interpreter builds
// it, in place of engine/cuda/library_handles.cpp: none. cuBLAS, cuBLASLt and cuDNN are
// device-only; the interpreted libraries leave out the ops that call them
// (engine/cuda/gemm.cpp, conv.cpp), so the handles stay null.
#include "engine/core/cuda_check.h"
#include "engine/cuda/context.h"

#include <stdexcept>
#include <string>

namespace ember {

void throw_cublas_error(int status, const char* expr, const char* file, int line) {
    throw std::runtime_error(failed_call(expr, file, line) + ": cuBLAS status " + std::to_string(status) +
                             " (cuBLAS is device-only: not in the kernel interpreter)");
}

void throw_cudnn_error(int status, const char* expr, const char* file, int line) {
    throw std::runtime_error(failed_call(expr, file, line) + ": cuDNN status " + std::to_string(status) +
                             " (cuDNN is device-only: not in the kernel interpreter)");
}

void create_library_handles(CudaContext&) {}

void destroy_library_handles(CudaContext&) {}

}  // namespace ember
