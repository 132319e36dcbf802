// staging_buffer.h: host memory for finished batches: page-locked (cudaHostAlloc) when
// asked for and a CUDA driver is present, so cudaMemcpyAsync can DMA from it without a
// bounce copy; plain pageable memory otherwise. Also device buffers, used by the loader
// and the GPU-resident mode (their streams and events are core/stream.h's).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember::data {

// True when the CUDA runtime sees at least one device (asked once, cached).
bool cuda_usable();

class HostBuffer {
public:
    HostBuffer() = default;
    // pinned requested but no CUDA driver/device: falls back to pageable (pinned() = false).
    HostBuffer(size_t bytes, bool pinned);
    ~HostBuffer();
    HostBuffer(HostBuffer&& other) noexcept;
    HostBuffer& operator=(HostBuffer&& other) noexcept;
    HostBuffer(const HostBuffer&) = delete;
    HostBuffer& operator=(const HostBuffer&) = delete;

    void* data() const { return data_; }
    size_t bytes() const { return bytes_; }
    bool pinned() const { return pinned_; }

private:
    void release();
    void* data_ = nullptr;
    size_t bytes_ = 0;
    bool pinned_ = false;
};

class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(size_t bytes);  // throws CudaError
    ~DeviceBuffer();
    DeviceBuffer(DeviceBuffer&& other) noexcept;
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    void* data() const { return data_; }
    size_t bytes() const { return bytes_; }

private:
    void release();
    void* data_ = nullptr;
    size_t bytes_ = 0;
};

}  // namespace ember::data
