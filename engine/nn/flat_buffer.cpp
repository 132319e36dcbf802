// flat_buffer.cpp: host/device flat buffers (see flat_buffer.h).
#include "engine/nn/flat_buffer.h"

#include "engine/core/cuda_check.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace ember::nn {

FlatBuffer::FlatBuffer(Device backend, std::size_t bytes, std::string name)
    : backend_(backend), bytes_(bytes), name_(std::move(name)) {
    if (bytes == 0) return;
    if (backend == Device::cuda) {
        data_ = device_allocator().allocate(bytes);
    } else {
        std::size_t rounded = (bytes + 255) / 256 * 256;
        data_ = std::aligned_alloc(256, rounded);
        if (!data_) throw std::runtime_error("out of host memory allocating " + name_ + " (" +
                                             std::to_string(bytes) + " bytes)");
        std::memset(data_, 0, rounded);
    }
}

FlatBuffer::~FlatBuffer() { release(); }

void FlatBuffer::release() {
    if (!data_) return;
    if (backend_ == Device::cuda) device_allocator().free(data_);
    else std::free(data_);
    data_ = nullptr;
}

FlatBuffer::FlatBuffer(FlatBuffer&& other) noexcept
    : backend_(other.backend_), data_(other.data_), bytes_(other.bytes_), name_(std::move(other.name_)) {
    other.data_ = nullptr;
    other.bytes_ = 0;
}

FlatBuffer& FlatBuffer::operator=(FlatBuffer&& other) noexcept {
    if (this != &other) {
        release();
        backend_ = other.backend_;
        data_ = other.data_;
        bytes_ = other.bytes_;
        name_ = std::move(other.name_);
        other.data_ = nullptr;
        other.bytes_ = 0;
    }
    return *this;
}

void FlatBuffer::zero(void* stream) {
    if (!data_) return;
    if (backend_ == Device::cuda)
        EMBER_CUDA_CHECK(cudaMemsetAsync(data_, 0, bytes_, static_cast<cudaStream_t>(stream)));
    else std::memset(data_, 0, bytes_);
}

void FlatBuffer::upload(const void* host, std::size_t bytes) {
    if (bytes > bytes_)
        throw std::out_of_range("upload of " + std::to_string(bytes) + " bytes into " + name_ + " of " +
                                std::to_string(bytes_));
    if (bytes == 0) return;
    // cudaMemcpy runs on the legacy stream, which does not order against non-blocking
    // streams: wait for all device work first (uploads and downloads are rare).
    if (backend_ == Device::cuda) {
        EMBER_CUDA_CHECK(cudaDeviceSynchronize());
        EMBER_CUDA_CHECK(cudaMemcpy(data_, host, bytes, cudaMemcpyHostToDevice));
    }
    else std::memcpy(data_, host, bytes);
}

void FlatBuffer::download(void* host, std::size_t bytes) const {
    if (bytes > bytes_)
        throw std::out_of_range("download of " + std::to_string(bytes) + " bytes from " + name_ + " of " +
                                std::to_string(bytes_));
    if (bytes == 0) return;
    if (backend_ == Device::cuda) {
        EMBER_CUDA_CHECK(cudaDeviceSynchronize());
        EMBER_CUDA_CHECK(cudaMemcpy(host, data_, bytes, cudaMemcpyDeviceToHost));
    }
    else std::memcpy(host, data_, bytes);
}

}  // namespace ember::nn
