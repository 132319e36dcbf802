// staging_buffer.h: host memory for finished batches: page-locked (cudaHostAlloc) when
// asked for and a CUDA driver is present, so cudaMemcpyAsync can DMA from it without a
// bounce copy; plain pageable memory otherwise. Also device buffers, used by the loader
// and the GPU-resident mode (their streams and events are core/stream.h's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace ember::data {

// True when the CUDA runtime sees at least one device (asked once, cached).
bool cuda_usable();

// Both buffers own their memory through a std::unique_ptr whose deleter frees it the way
// it was allocated, so they move (the moved-from buffer holds nothing) and never copy.
struct HostFree {
    bool pinned = false;  // cudaFreeHost, else std::free
    void operator()(void* data) const;
};
struct DeviceFree {
    void operator()(void* data) const;  // cudaFree
};

class HostBuffer {
  public:
    HostBuffer() = default;
    // pinned requested but no CUDA driver/device: falls back to pageable (pinned() = false).
    HostBuffer(size_t bytes, bool pinned);

    void* data() const { return data_.get(); }
    size_t bytes() const { return bytes_; }
    bool pinned() const { return data_.get_deleter().pinned; }

  private:
    std::unique_ptr<void, HostFree> data_;
    size_t bytes_ = 0;
};

class DeviceBuffer {
  public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(size_t bytes);  // throws CudaError

    void* data() const { return data_.get(); }
    size_t bytes() const { return bytes_; }

  private:
    std::unique_ptr<void, DeviceFree> data_;
    size_t bytes_ = 0;
};

}  // namespace ember::data
