// cuda_check.h: EMBER_CUDA_CHECK(...) wraps every CUDA runtime call and turns a
// failure into an ember::CudaError that names the call, the file and the line.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace ember {

class CudaError : public std::runtime_error {
  public:
    CudaError(cudaError_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
    cudaError_t code() const { return code_; }

  private:
    cudaError_t code_;
};

[[noreturn]] void throw_cuda_error(cudaError_t code, const char* expr, const char* file, int line);

// "<expr> failed at <file>:<line>": how every library-call check names its call.
std::string failed_call(const char* expr, const char* file, int line);

}  // namespace ember

#define EMBER_CUDA_CHECK(expr)                                                        \
    do {                                                                              \
        cudaError_t ember_cuda_status_ = (expr);                                      \
        if (ember_cuda_status_ != cudaSuccess)                                        \
            ::ember::throw_cuda_error(ember_cuda_status_, #expr, __FILE__, __LINE__); \
    } while (0)

// After a kernel launch: reports launch-configuration errors at the launch site.
#define EMBER_CUDA_CHECK_LAUNCH() EMBER_CUDA_CHECK(cudaGetLastError())
