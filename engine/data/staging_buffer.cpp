// staging_buffer.cpp: pinned/pageable host buffers and device buffers.
#include "engine/data/staging_buffer.h"

#include "engine/core/cuda_check.h"
#include "engine/core/device.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <new>
#include <utility>

namespace ember::data {

bool cuda_usable() {
    static const bool usable = ember::cuda_device_available();
    return usable;
}

HostBuffer::HostBuffer(size_t bytes, bool pinned) : bytes_(bytes) {
    if (pinned && cuda_usable()) {
        EMBER_CUDA_CHECK(cudaHostAlloc(&data_, bytes, cudaHostAllocDefault));
        pinned_ = true;
        return;
    }
    // 64-byte alignment: whole cache lines, and vector loads in the augmentation loop.
    data_ = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (data_ == nullptr) throw std::bad_alloc();
}

HostBuffer::~HostBuffer() { release(); }

void HostBuffer::release() {
    if (data_ == nullptr) return;
    if (pinned_)
        cudaFreeHost(data_);  // in a destructor: a failure here cannot be reported usefully
    else
        std::free(data_);
    data_ = nullptr;
}

HostBuffer::HostBuffer(HostBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(other.bytes_), pinned_(other.pinned_) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& other) noexcept {
    if (this != &other) {
        release();
        data_ = std::exchange(other.data_, nullptr);
        bytes_ = other.bytes_;
        pinned_ = other.pinned_;
    }
    return *this;
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) { EMBER_CUDA_CHECK(cudaMalloc(&data_, bytes)); }

DeviceBuffer::~DeviceBuffer() { release(); }

void DeviceBuffer::release() {
    if (data_ != nullptr) cudaFree(data_);
    data_ = nullptr;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(other.bytes_) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
        release();
        data_ = std::exchange(other.data_, nullptr);
        bytes_ = other.bytes_;
    }
    return *this;
}

}  // namespace ember::data
