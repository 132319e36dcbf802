// allocator.cpp: the caching allocator's bins, the device and pinned-host raw
// allocators, and the activation arena.
#include "engine/core/allocator.h"

#include "engine/core/cuda_check.h"
#include "engine/core/device.h"
#include "engine/core/nvtx.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace ember {

std::size_t CachingAllocator::size_class(std::size_t bytes) {
    constexpr std::size_t kSmallStep = 512;
    constexpr std::size_t kSmallLimit = 1u << 20;
    if (bytes == 0) return 0;
    if (bytes <= kSmallLimit) return (bytes + kSmallStep - 1) / kSmallStep * kSmallStep;
    // Four classes per power of two: step = 2^(floor(log2(bytes)) - 2).
    std::size_t power = kSmallLimit;
    while (power * 2 <= bytes) power *= 2;
    std::size_t step = power / 4;
    return (bytes + step - 1) / step * step;
}

CachingAllocator::CachingAllocator(RawAllocator raw) : raw_(std::move(raw)) {
    if (!raw_.allocate || !raw_.release)
        throw std::invalid_argument("CachingAllocator: raw allocate/release functions are required");
}

CachingAllocator::~CachingAllocator() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [p, segment] : segments_) {
        nvtx::memory::unregister_heap(segment.heap);
        raw_.release(p);
    }
}

// The caller holds the lock for these three.
void* CachingAllocator::raw_segment(std::size_t bytes, const char* name) {
    void* ptr = raw_.allocate(bytes);
    if (ptr == nullptr) {
        // Out of memory with cached blocks around: give them back and retry once.
        release_cached();
        ptr = raw_.allocate(bytes);
    }
    if (ptr == nullptr)
        throw std::runtime_error(raw_.name + ": out of memory allocating " + std::to_string(bytes) +
                                 " bytes (allocated " + std::to_string(stats_.allocated_bytes) + ", reserved " +
                                 std::to_string(stats_.reserved_bytes) + ")");
    ++stats_.raw_allocations;
    stats_.reserved_bytes += bytes;
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
    Segment segment;
    segment.bytes = bytes;
    if (raw_.announced_device != RawAllocator::kNotAnnounced)
        segment.heap = nvtx::memory::register_heap(ptr, bytes, raw_.announced_device, name);
    segments_[ptr] = segment;
    return ptr;
}

void CachingAllocator::release_raw_segment(void* ptr) {
    auto it = segments_.find(ptr);
    const Segment segment = it->second;
    segments_.erase(it);
    // Unregistering a heap ends its regions too (an arena's sub-allocations).
    stats_.allocated_bytes -= segment.sub_allocated;
    nvtx::memory::unregister_heap(segment.heap);
    raw_.release(ptr);
    ++stats_.raw_releases;
    stats_.reserved_bytes -= segment.bytes;
}

void CachingAllocator::release_cached() {
    for (auto& [size, blocks] : free_blocks_)
        for (void* p : blocks) release_raw_segment(p);
    free_blocks_.clear();
}

void* CachingAllocator::allocate(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    std::size_t size = size_class(bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.requests;
    void* ptr = nullptr;
    auto bin = free_blocks_.find(size);
    if (bin != free_blocks_.end() && !bin->second.empty()) {
        ptr = bin->second.back();
        bin->second.pop_back();
        ++stats_.cache_hits;
    } else {
        ptr = raw_segment(size, raw_.name.c_str());
    }
    live_[ptr] = size;
    stats_.allocated_bytes += size;
    stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
    if (void* heap = segments_[ptr].heap) nvtx::memory::register_region(heap, ptr, size);
    return ptr;
}

void CachingAllocator::free(void* ptr) {
    if (ptr == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    if (it == live_.end())
        throw std::invalid_argument(raw_.name + ": free of a pointer this allocator did not hand out");
    std::size_t size = it->second;
    live_.erase(it);
    stats_.allocated_bytes -= size;
    if (segments_[ptr].heap) nvtx::memory::unregister_region(ptr);
    free_blocks_[size].push_back(ptr);
}

void CachingAllocator::empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    release_cached();
}

void* CachingAllocator::allocate_segment(std::size_t bytes, const char* name) {
    if (bytes == 0) throw std::invalid_argument(raw_.name + ": a segment of 0 bytes");
    std::lock_guard<std::mutex> lock(mutex_);
    return raw_segment(bytes, name);
}

void CachingAllocator::release_segment(void* segment) {
    if (segment == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!segments_.count(segment) || live_.count(segment))
        throw std::invalid_argument(raw_.name + ": release_segment of a pointer that is not one of its segments");
    for (auto& [size, blocks] : free_blocks_)
        if (std::find(blocks.begin(), blocks.end(), segment) != blocks.end())
            throw std::invalid_argument(raw_.name + ": release_segment of a cached block");
    release_raw_segment(segment);
}

void CachingAllocator::note_sub_allocation(void* segment, const void* ptr, std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = segments_.find(segment);
    if (it == segments_.end()) throw std::invalid_argument(raw_.name + ": a sub-allocation in an unknown segment");
    it->second.sub_allocated += bytes;
    stats_.allocated_bytes += bytes;
    stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
    nvtx::memory::register_region(it->second.heap, ptr, bytes);
}

void CachingAllocator::note_segment_reset(void* segment) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = segments_.find(segment);
    if (it == segments_.end() || it->second.sub_allocated == 0) return;
    stats_.allocated_bytes -= it->second.sub_allocated;
    it->second.sub_allocated = 0;
    nvtx::memory::reset_heap(it->second.heap);
}

AllocatorStats CachingAllocator::stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
}

void CachingAllocator::reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.peak_allocated_bytes = stats_.allocated_bytes;
    stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

RawAllocator cuda_raw_allocator() {
    RawAllocator raw;
    raw.name = "cudaMalloc";
    raw.allocate = [](std::size_t bytes) -> void* {
        void* p = nullptr;
        cudaError_t err = cudaMalloc(&p, bytes);
        if (err == cudaErrorMemoryAllocation) {
            cudaGetLastError();
            return nullptr;  // the caching allocator frees its cache and retries
        }
        EMBER_CUDA_CHECK(err);
        return p;
    };
    raw.release = [](void* p) { cudaFree(p); };  // a failed free has nothing left to protect
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) {
        cudaGetLastError();
        device = 0;
    }
    raw.announced_device = device;
    return raw;
}

CachingAllocator& device_allocator() {
    static const bool available = cuda_device_available();
    if (!available)
        throw std::runtime_error("device_allocator: no CUDA device (" + cuda_runtime_status().reason +
                                 "); use the cpu backend");
    // Never destroyed: at exit its destructor would tell NVTX tools (whose own statics
    // may be gone by then) about every cached segment; the process's end frees them.
    static CachingAllocator* allocator = new CachingAllocator(cuda_raw_allocator());
    return *allocator;
}

RawAllocator host_raw_allocator() {
    RawAllocator raw;
    raw.name = "aligned_alloc";
    raw.allocate = [](std::size_t bytes) -> void* { return std::aligned_alloc(256, (bytes + 255) / 256 * 256); };
    raw.release = [](void* p) { std::free(p); };
    raw.announced_device = RawAllocator::kHostMemory;
    return raw;
}

CachingAllocator& host_allocator() {
    static CachingAllocator* allocator = new CachingAllocator(host_raw_allocator());  // as device_allocator()'s
    return *allocator;
}

CachingAllocator& allocator_for(Device device) {
    return device == Device::cuda ? device_allocator() : host_allocator();
}

Buffer::Buffer(CachingAllocator& allocator, std::size_t bytes)
    : allocator_(&allocator), data_(allocator.allocate(bytes)), bytes_(bytes) {}

Buffer::~Buffer() {
    if (allocator_) allocator_->free(data_);
}

Buffer::Buffer(Buffer&& other) noexcept : allocator_(other.allocator_), data_(other.data_), bytes_(other.bytes_) {
    other.allocator_ = nullptr;
    other.data_ = nullptr;
    other.bytes_ = 0;
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
    if (this != &other) {
        if (allocator_) allocator_->free(data_);
        allocator_ = other.allocator_;
        data_ = other.data_;
        bytes_ = other.bytes_;
        other.allocator_ = nullptr;
        other.data_ = nullptr;
        other.bytes_ = 0;
    }
    return *this;
}

PinnedHostPool::PinnedHostPool() {
    RawAllocator raw;
    if (cuda_device_available()) {
        pinned_ = true;
        raw.name = "cudaHostAlloc";
        raw.allocate = [](std::size_t bytes) -> void* {
            void* p = nullptr;
            EMBER_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
            return p;
        };
        raw.release = [](void* p) { cudaFreeHost(p); };
    } else {
        pinned_ = false;
        fallback_reason_ = "no CUDA device (" + cuda_runtime_status().reason + "): host buffers are pageable";
        raw = host_raw_allocator();
    }
    // Staging buffers, not a backend's memory: not announced to NVTX tools.
    raw.announced_device = RawAllocator::kNotAnnounced;
    cache_ = std::make_unique<CachingAllocator>(std::move(raw));
}

void* PinnedHostPool::allocate(std::size_t bytes) {
    return cache_->allocate(bytes);
}
void PinnedHostPool::free(void* ptr) {
    cache_->free(ptr);
}

ActivationArena::ActivationArena(void* base, std::size_t capacity, Device device)
    : base_(static_cast<char*>(base)), capacity_(capacity), device_(device) {}

ActivationArena::ActivationArena(CachingAllocator& allocator, std::size_t capacity, Device device, const char* name)
    : base_(static_cast<char*>(allocator.allocate_segment(capacity, name))),
      capacity_(capacity),
      device_(device),
      owner_(&allocator) {
    // Host chunks start zeroed, as FlatBuffer's do (runs stay bit-identical whatever
    // the memory held before).
    if (device != Device::cuda) std::memset(base_, 0, capacity);
}

ActivationArena::~ActivationArena() {
    if (owner_) owner_->release_segment(base_);
}

void ActivationArena::reset() {
    if (owner_ && used_ > 0) owner_->note_segment_reset(base_);
    used_ = 0;
}

void* ActivationArena::allocate(std::size_t bytes, std::size_t alignment) {
    std::size_t start = (used_ + alignment - 1) / alignment * alignment;
    if (start + bytes > capacity_)
        throw std::runtime_error("ActivationArena: out of space: requested " + std::to_string(bytes) + " bytes with " +
                                 std::to_string(used_) + " of " + std::to_string(capacity_) + " used");
    used_ = start + bytes;
    peak_ = std::max(peak_, used_);
    if (owner_) owner_->note_sub_allocation(base_, base_ + start, bytes);
    return base_ + start;
}

Tensor ActivationArena::allocate_tensor(DType dtype, std::initializer_list<int64_t> shape, Layout layout) {
    Tensor t = make_tensor(nullptr, dtype, shape, device_, layout);
    t.data = allocate(t.bytes());
    return t;
}

}  // namespace ember
