// copy.cpp: tensor copies across devices.
#include "engine/core/copy.h"

#include "engine/core/cuda_check.h"

#include <cstring>

namespace ember {

void copy_tensor(const Tensor& src, const Tensor& dst, cudaStream_t stream) {
    require(src.defined() && dst.defined(), "copy_tensor", "undefined tensor");
    require(src.dtype == dst.dtype && src.numel() == dst.numel(), "copy_tensor",
            "dtype or size differs: " + src.describe() + " -> " + dst.describe());
    require(src.rank != 4 || dst.rank != 4 || src.layout == dst.layout, "copy_tensor",
            "layouts differ (use convert_layout): " + src.describe() + " -> " + dst.describe());
    if (src.bytes() == 0) return;
    if (src.device == Device::cpu && dst.device == Device::cpu) {
        std::memmove(dst.data, src.data, src.bytes());
        return;
    }
    cudaMemcpyKind kind = src.device == Device::cpu
                              ? cudaMemcpyHostToDevice
                              : (dst.device == Device::cpu ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice);
    EMBER_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, src.bytes(), kind, stream));
}

}  // namespace ember
