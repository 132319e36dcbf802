// activation_pool.cpp: chunked bump allocation of activations (see activation_pool.h).
#include "engine/nn/activation_pool.h"

#include <algorithm>

namespace ember::nn {

std::string TensorShape::describe() const {
    std::string s = "[";
    for (int i = 0; i < rank; ++i) s += (i ? "," : "") + std::to_string(dims[i]);
    return s + "]";
}

TensorShape shape_of(const Tensor& t) {
    TensorShape s;
    s.rank = t.rank;
    for (int i = 0; i < 4; ++i) s.dims[i] = t.shape[i];
    return s;
}

TensorShape make_shape(std::initializer_list<int64_t> dims) {
    TensorShape s;
    for (int64_t d : dims) s.dims[s.rank++] = d;
    return s;
}

ActivationPool::ActivationPool(Device backend, std::size_t chunk_bytes, std::string name)
    : backend_(backend), chunk_bytes_(chunk_bytes), name_(std::move(name)) {}

Tensor ActivationPool::allocate(DType dtype, const TensorShape& shape) {
    std::size_t bytes = static_cast<std::size_t>(shape.numel()) * dtype_size(dtype);
    bytes = std::max<std::size_t>(bytes, 1);
    while (current_ < chunks_.size()) {
        ActivationArena& arena = *chunks_[current_].arena;
        std::size_t aligned_used = (arena.used() + 255) / 256 * 256;
        if (aligned_used + bytes <= arena.capacity()) break;
        ++current_;
    }
    if (current_ == chunks_.size()) {
        std::size_t capacity = std::max(chunk_bytes_, (bytes + 255) / 256 * 256);
        Chunk chunk;
        chunk.arena = std::make_unique<ActivationArena>(allocator_for(backend_), capacity, backend_, name_.c_str());
        chunks_.push_back(std::move(chunk));
        ++chunk_allocations_;
    }
    void* data = chunks_[current_].arena->allocate(bytes);
    peak_ = std::max(peak_, used_bytes());
    return make_tensor(data, dtype, shape.rank, shape.dims, backend_);
}

void ActivationPool::reset() {
    for (Chunk& chunk : chunks_) chunk.arena->reset();
    current_ = 0;
}

std::size_t ActivationPool::used_bytes() const {
    std::size_t used = 0;
    for (const Chunk& chunk : chunks_) used += chunk.arena->used();
    return used;
}

std::size_t ActivationPool::peak_bytes() const {
    return peak_;
}

std::size_t ActivationPool::reserved_bytes() const {
    std::size_t reserved = 0;
    for (const Chunk& chunk : chunks_) reserved += chunk.arena->capacity();
    return reserved;
}

}  // namespace ember::nn
