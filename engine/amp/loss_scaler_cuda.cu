// loss_scaler_cuda.cu: the device inf/NaN check behind DynamicLossScaler (loss_scaler.h).
#include "engine/amp/loss_scaler.h"
#include "engine/core/cuda_check.h"
#include "engine/core/launch.h"

#include <cuda_runtime.h>

namespace ember::amp {

namespace {
__global__ void find_non_finite(const float* values, std::size_t n, int32_t* flag) {
    bool bad = false;
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
        bad |= !isfinite(values[i]);
    if (__syncthreads_or(bad) && threadIdx.x == 0) *flag = 1;
}
}  // namespace

DeviceOverflowCheck::DeviceOverflowCheck() {
    EMBER_CUDA_CHECK(cudaMalloc(&flag_, sizeof(int32_t)));
}

DeviceOverflowCheck::~DeviceOverflowCheck() {
    if (flag_) cudaFree(flag_);
}

void DeviceOverflowCheck::check(const float* values, std::size_t n, void* stream) {
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    EMBER_CUDA_CHECK(cudaMemsetAsync(flag_, 0, sizeof(int32_t), s));
    if (n == 0) return;
    const int threads = 256;
    const unsigned blocks = cuda::grid_stride_blocks(static_cast<int64_t>((n + threads - 1) / threads), 1024);
    EMBER_LAUNCH(find_non_finite, blocks, threads, 0, s)(values, n, flag_);
    EMBER_CUDA_CHECK_LAUNCH();
}

bool DeviceOverflowCheck::read_flag(void* stream) const {
    int32_t host = 0;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    EMBER_CUDA_CHECK(cudaMemcpyAsync(&host, flag_, sizeof host, cudaMemcpyDeviceToHost, s));
    EMBER_CUDA_CHECK(cudaStreamSynchronize(s));
    return host != 0;
}

}  // namespace ember::amp
