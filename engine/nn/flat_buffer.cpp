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
    try {
        data_ = allocator_for(backend).allocate(bytes);
    } catch (const std::exception& e) {
        throw std::runtime_error("allocating " + name_ + " (" + std::to_string(bytes) + " bytes): " + e.what());
    }
    if (backend != Device::cuda) std::memset(data_, 0, bytes);
}

FlatBuffer::~FlatBuffer() {
    release();
}

void FlatBuffer::release() {
    if (!data_) return;
    allocator_for(backend_).free(data_);
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
    else
        std::memset(data_, 0, bytes_);
}

namespace {

// A host copy of `bytes` into or out of a buffer of `capacity` on `backend`. cudaMemcpy
// runs on the legacy stream, which does not order against non-blocking streams: wait
// for all device work first (uploads and downloads are rare).
void copy_host(Device backend, void* to, const void* from, std::size_t bytes, std::size_t capacity, cudaMemcpyKind kind,
               const std::string& name) {
    if (bytes > capacity) {
        const bool upload = kind == cudaMemcpyHostToDevice;
        throw std::out_of_range((upload ? "upload of " : "download of ") + std::to_string(bytes) +
                                (upload ? " bytes into " : " bytes from ") + name + " of " + std::to_string(capacity));
    }
    if (bytes == 0) return;
    if (backend == Device::cuda) {
        EMBER_CUDA_CHECK(cudaDeviceSynchronize());
        EMBER_CUDA_CHECK(cudaMemcpy(to, from, bytes, kind));
    } else
        std::memcpy(to, from, bytes);
}

}  // namespace

void FlatBuffer::upload(const void* host, std::size_t bytes) {
    copy_host(backend_, data_, host, bytes, bytes_, cudaMemcpyHostToDevice, name_);
}

void FlatBuffer::download(void* host, std::size_t bytes) const {
    copy_host(backend_, host, data_, bytes, bytes_, cudaMemcpyDeviceToHost, name_);
}

}  // namespace ember::nn
