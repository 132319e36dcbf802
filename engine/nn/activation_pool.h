// activation_pool.h: where a step's activations live. A list of ActivationArena chunks
// (engine/core/allocator.h) that is reset at the start of every step: allocation is a
// pointer bump, nothing is freed inside a step. When a chunk is full the next one is
// used (allocated once, on the first step that needs it), so after the first step the
// same shapes land at the same addresses every step - what CUDA Graph replay needs.
// peak_bytes() is the activation memory a step needed. The chunks are segments of the
// backend's caching allocator (allocator_for), which counts what the pool hands out as
// allocated until the next reset: its peaks, and NVTX memory tools, see the activations.
#pragma once

#include "engine/core/allocator.h"
#include "engine/nn/flat_buffer.h"

#include <memory>
#include <string>
#include <vector>

namespace ember::nn {

struct TensorShape {
    int rank = 0;
    int64_t dims[4] = {1, 1, 1, 1};
    int64_t numel() const {
        int64_t n = 1;
        for (int i = 0; i < rank; ++i) n *= dims[i];
        return n;
    }
    std::string describe() const;
};
TensorShape shape_of(const Tensor& t);
TensorShape make_shape(std::initializer_list<int64_t> dims);

class ActivationPool {
  public:
    ActivationPool(Device backend, std::size_t chunk_bytes, std::string name);

    Tensor allocate(DType dtype, const TensorShape& shape);
    Tensor allocate(DType dtype, std::initializer_list<int64_t> dims) { return allocate(dtype, make_shape(dims)); }
    void reset();

    std::size_t used_bytes() const;      // now
    std::size_t peak_bytes() const;      // largest used_bytes() since construction / reset_peak
    std::size_t reserved_bytes() const;  // sum of chunk capacities
    int chunk_count() const { return static_cast<int>(chunks_.size()); }
    void reset_peak() { peak_ = used_bytes(); }
    // True when the last allocate() had to create a chunk (CUDA Graph capture refuses).
    uint64_t chunk_allocations() const { return chunk_allocations_; }

  private:
    struct Chunk {
        std::unique_ptr<ActivationArena> arena;
    };
    Device backend_;
    std::size_t chunk_bytes_;
    std::string name_;
    std::vector<Chunk> chunks_;
    std::size_t current_ = 0;
    std::size_t peak_ = 0;
    uint64_t chunk_allocations_ = 0;
};

}  // namespace ember::nn
