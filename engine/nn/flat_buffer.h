// flat_buffer.h: one contiguous block of host or device memory that the engine owns
// for the life of a model (the flat parameter / gradient / low-precision buffers and
// the optimizer's state). Blocks come from the backend's caching allocator
// (allocator_for: device_allocator() or host_allocator()); host blocks start zeroed.
// Copies in and out name the buffer when they fail.
#pragma once

#include "engine/core/allocator.h"

#include <cstddef>
#include <memory>
#include <string>

namespace ember::nn {

class FlatBuffer {
  public:
    FlatBuffer() = default;
    FlatBuffer(Device backend, std::size_t bytes, std::string name);
    ~FlatBuffer();
    FlatBuffer(FlatBuffer&& other) noexcept;
    FlatBuffer& operator=(FlatBuffer&& other) noexcept;
    FlatBuffer(const FlatBuffer&) = delete;
    FlatBuffer& operator=(const FlatBuffer&) = delete;

    void* data() const { return data_; }
    std::size_t bytes() const { return bytes_; }
    Device backend() const { return backend_; }
    const std::string& name() const { return name_; }

    void zero(void* stream = nullptr);                   // async on `stream` for cuda
    void upload(const void* host, std::size_t bytes);    // host -> this (synchronous)
    void download(void* host, std::size_t bytes) const;  // this -> host (synchronous)

  private:
    void release();
    Device backend_ = Device::cpu;
    void* data_ = nullptr;
    std::size_t bytes_ = 0;
    std::string name_;
};

}  // namespace ember::nn
