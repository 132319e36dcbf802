// staging_buffer.cpp: pinned/pageable host buffers and device buffers.
#include "engine/data/staging_buffer.h"

#include "engine/core/cuda_check.h"
#include "engine/core/device.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <new>

namespace ember::data {

bool cuda_usable() {
    static const bool usable = ember::cuda_device_available();
    return usable;
}

HostBuffer::HostBuffer(size_t bytes, bool pinned) : bytes_(bytes) {
    if (pinned && cuda_usable()) {
        void* data = nullptr;
        EMBER_CUDA_CHECK(cudaHostAlloc(&data, bytes, cudaHostAllocDefault));
        data_ = std::unique_ptr<void, HostFree>(data, HostFree{true});
        return;
    }
    // 64-byte alignment: whole cache lines, and vector loads in the augmentation loop.
    data_ = std::unique_ptr<void, HostFree>(std::aligned_alloc(64, (bytes + 63) / 64 * 64), HostFree{false});
    if (data_ == nullptr) throw std::bad_alloc();
}

void HostFree::operator()(void* data) const {
    if (pinned)
        cudaFreeHost(data);  // in a destructor: a failure here cannot be reported usefully
    else
        std::free(data);
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
    void* data = nullptr;
    EMBER_CUDA_CHECK(cudaMalloc(&data, bytes));
    data_.reset(data);
}

void DeviceFree::operator()(void* data) const {
    cudaFree(data);
}

}  // namespace ember::data
