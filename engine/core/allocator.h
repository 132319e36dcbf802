// allocator.h: the engine's memory. Three owners, all of them cheap in the step loop:
//   CachingAllocator  size-class bins over a raw allocate/free pair; freed blocks are
//                     kept and reused, so after the first step no cudaMalloc happens.
//                     The raw pair is injected: cudaMalloc/cudaFree for the device
//                     (device_allocator()), aligned malloc for the CPU backend
//                     (host_allocator()), anything else in tests.
//   PinnedHostPool    page-locked host buffers (cudaHostAlloc) for fast H2D copies;
//                     without a driver it falls back to pageable memory, pinned()==false.
//   ActivationArena   a bump allocator over one buffer, reset at every step; its peak
//                     is the activation memory a step needs. An arena made from a
//                     CachingAllocator takes its buffer as one of that allocator's
//                     segments and counts what it hands out as allocated there.
//
// What an allocator does is announced through NVTX's memory extension
// (nvToolsExtMem.h, engine/core/nvtx.h): each raw block (segment) is a heap, each
// block handed out a region of its heap, an arena's reset a heap reset. Any NVTX tool
// sees it (ember's collector turns it into memory_events, docs/trace-schema.md).
#pragma once

#include "engine/core/tensor.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace ember {

struct RawAllocator {
    std::string name;                                  // "cudaMalloc", "test", ...
    std::function<void*(std::size_t bytes)> allocate;  // returns nullptr or throws on failure
    std::function<void(void* ptr)> release;
    // The memory NVTX is told the allocator's heaps hold: kHostMemory (the CPU
    // backend's), a CUDA ordinal, or kNotAnnounced (a staging pool, tests).
    static constexpr int kHostMemory = -1;
    static constexpr int kNotAnnounced = -2;
    int announced_device = kNotAnnounced;
};

struct AllocatorStats {
    std::size_t allocated_bytes = 0;  // handed out and not yet freed (rounded sizes)
    std::size_t reserved_bytes = 0;   // obtained from the raw allocator and not released
    std::size_t peak_allocated_bytes = 0;
    std::size_t peak_reserved_bytes = 0;
    uint64_t raw_allocations = 0;  // e.g. number of cudaMalloc calls
    uint64_t raw_releases = 0;
    uint64_t requests = 0;    // allocate() calls
    uint64_t cache_hits = 0;  // requests served from a cached block
};

class CachingAllocator {
  public:
    explicit CachingAllocator(RawAllocator raw);
    ~CachingAllocator();  // releases every block (live ones too: owners must be gone)
    CachingAllocator(const CachingAllocator&) = delete;
    CachingAllocator& operator=(const CachingAllocator&) = delete;

    // A block of at least `bytes` (0 gives nullptr), 256-byte aligned if the raw allocator is.
    void* allocate(std::size_t bytes);
    // Returns a block to its bin; nullptr is ignored; an unknown pointer throws.
    void free(void* ptr);
    // Gives every cached (free) block back to the raw allocator.
    void empty_cache();

    // A raw segment for a caller that sub-allocates it itself (an ActivationArena):
    // reserved at once, allocated only as the caller reports what it hands out.
    // `name` names the heap for NVTX tools. Never cached: release_segment frees it.
    void* allocate_segment(std::size_t bytes, const char* name);
    void release_segment(void* segment);  // its sub-allocations end with it
    // `bytes` at `ptr` of `segment` are in use now / nothing of `segment` is any more.
    void note_sub_allocation(void* segment, const void* ptr, std::size_t bytes);
    void note_segment_reset(void* segment);

    AllocatorStats stats() const;
    void reset_peak();

    // Size classes: multiples of 512 B up to 1 MiB, then four classes per power of
    // two (at most 25% waste). Blocks are reused only within their class.
    static std::size_t size_class(std::size_t bytes);

  private:
    // One raw allocation: a cached block's (whole segment) or an arena's.
    struct Segment {
        std::size_t bytes = 0;
        void* heap = nullptr;           // its NVTX heap (null: no tool, or not announced)
        std::size_t sub_allocated = 0;  // an arena segment's bytes in use
    };
    void* raw_segment(std::size_t bytes, const char* name);  // the caller holds the lock
    void release_raw_segment(void* ptr);                     // likewise
    void release_cached();                                   // likewise

    RawAllocator raw_;
    mutable std::mutex mutex_;
    std::unordered_map<void*, std::size_t> live_;            // ptr -> class size
    std::map<std::size_t, std::vector<void*>> free_blocks_;  // class size -> cached blocks
    std::unordered_map<void*, Segment> segments_;            // every raw allocation, by address
    AllocatorStats stats_;
};

// The process-wide device allocator (cudaMalloc/cudaFree on the current device).
// Throws std::runtime_error naming the reason when no CUDA device is usable. The
// process-wide allocators live until the process ends (never destroyed).
CachingAllocator& device_allocator();
RawAllocator cuda_raw_allocator();

// The process-wide host allocator (256-byte aligned malloc): the CPU backend's twin of
// device_allocator(), so code can pick one with allocator_for(device).
CachingAllocator& host_allocator();
RawAllocator host_raw_allocator();
CachingAllocator& allocator_for(Device device);

// A typed owner of one caching-allocator block; frees on destruction.
class Buffer {
  public:
    Buffer() = default;
    Buffer(CachingAllocator& allocator, std::size_t bytes);
    ~Buffer();
    Buffer(Buffer&& other) noexcept;
    Buffer& operator=(Buffer&& other) noexcept;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    void* data() const { return data_; }
    std::size_t bytes() const { return bytes_; }

  private:
    CachingAllocator* allocator_ = nullptr;
    void* data_ = nullptr;
    std::size_t bytes_ = 0;
};

class PinnedHostPool {
  public:
    PinnedHostPool();  // tries cudaHostAlloc; falls back to pageable memory
    void* allocate(std::size_t bytes);
    void free(void* ptr);
    bool pinned() const { return pinned_; }
    const std::string& fallback_reason() const { return fallback_reason_; }
    AllocatorStats stats() const { return cache_->stats(); }
    void empty_cache() { cache_->empty_cache(); }

  private:
    bool pinned_ = false;
    std::string fallback_reason_;
    std::unique_ptr<CachingAllocator> cache_;
};

class ActivationArena {
  public:
    // `base` is owned by the caller; nothing is counted anywhere.
    ActivationArena(void* base, std::size_t capacity, Device device);
    // Takes a segment of `capacity` bytes from `allocator` (released by the destructor)
    // and counts each allocation as allocated there until the next reset().
    ActivationArena(CachingAllocator& allocator, std::size_t capacity, Device device, const char* name);
    ~ActivationArena();
    ActivationArena(const ActivationArena&) = delete;
    ActivationArena& operator=(const ActivationArena&) = delete;
    // Bump-allocates; throws std::runtime_error with requested/used/capacity when full.
    void* allocate(std::size_t bytes, std::size_t alignment = 256);
    Tensor allocate_tensor(DType dtype, std::initializer_list<int64_t> shape, Layout layout = Layout::nchw);
    void reset();  // at the start of every step
    std::size_t used() const { return used_; }
    std::size_t peak() const { return peak_; }
    std::size_t capacity() const { return capacity_; }
    Device device() const { return device_; }

  private:
    char* base_;
    std::size_t capacity_;
    Device device_;
    CachingAllocator* owner_ = nullptr;  // the allocator its buffer came from, if any
    std::size_t used_ = 0;
    std::size_t peak_ = 0;
};

}  // namespace ember
