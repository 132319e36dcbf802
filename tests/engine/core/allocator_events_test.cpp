// allocator_events_test.cpp: what the caching allocator tells NVTX tools. This program
// is its own NVTX tool: it defines the static hook of NVTX's extensions
// (InitializeInjectionNvtxExtension_fnptr) and records every call of the memory
// extension (nvToolsExtMem.h) the allocator makes. The stream is checked by hand for a
// few operations (segment = heap, block = region, arena reset = heap reset), and a
// replay of a longer one (allocated: live regions; reserved: live heaps) must equal
// AllocatorStats after every operation, peaks included.
#define NVTX_NO_IMPL  // declarations only: the engine holds NVTX's implementation
#include "common/nvtx_contract.h"
#include "engine/core/allocator.h"

#include <gtest/gtest.h>
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Call {
    std::string what;  // heap_register, heap_unregister, heap_reset, region_register, region_unregister
    std::uintptr_t heap = 0;
    std::uintptr_t address = 0;
    std::size_t bytes = 0;
    std::uint32_t category = 0;
};

std::mutex g_mutex;
std::vector<Call> g_calls;
std::uintptr_t g_next_heap = 1;

void add(Call call) {
    std::lock_guard lock(g_mutex);
    g_calls.push_back(call);
}

std::vector<Call> take_calls() {
    std::lock_guard lock(g_mutex);
    std::vector<Call> calls;
    calls.swap(g_calls);
    return calls;
}

nvtxMemHeapHandle_t NVTX_API heap_register(nvtxDomainHandle_t, const nvtxMemHeapDesc_t* desc) {
    const auto* range = static_cast<const nvtxMemVirtualRangeDesc_t*>(desc->typeSpecificDesc);
    std::uintptr_t heap;
    {
        std::lock_guard lock(g_mutex);
        heap = g_next_heap++;
    }
    EXPECT_EQ(desc->type, static_cast<std::uint32_t>(NVTX_MEM_TYPE_VIRTUAL_ADDRESS));
    EXPECT_EQ(desc->usage, static_cast<std::uint32_t>(NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR));
    add({"heap_register", heap, reinterpret_cast<std::uintptr_t>(range->ptr), range->size, desc->category});
    return reinterpret_cast<nvtxMemHeapHandle_t>(heap);
}
void NVTX_API heap_unregister(nvtxDomainHandle_t, nvtxMemHeapHandle_t heap) {
    add({"heap_unregister", reinterpret_cast<std::uintptr_t>(heap)});
}
void NVTX_API heap_reset(nvtxDomainHandle_t, nvtxMemHeapHandle_t heap) {
    add({"heap_reset", reinterpret_cast<std::uintptr_t>(heap)});
}
void NVTX_API regions_register(nvtxDomainHandle_t, const nvtxMemRegionsRegisterBatch_t* batch) {
    ASSERT_EQ(batch->regionCount, 1u);
    const auto* range = static_cast<const nvtxMemVirtualRangeDesc_t*>(batch->regionDescElements);
    add({"region_register", reinterpret_cast<std::uintptr_t>(batch->heap), reinterpret_cast<std::uintptr_t>(range->ptr),
         range->size});
}
void NVTX_API regions_unregister(nvtxDomainHandle_t, const nvtxMemRegionsUnregisterBatch_t* batch) {
    ASSERT_EQ(batch->refCount, 1u);
    ASSERT_EQ(batch->refType, static_cast<std::uint32_t>(NVTX_MEM_REGION_REF_TYPE_POINTER));
    add({"region_unregister", 0, reinterpret_cast<std::uintptr_t>(batch->refElements[0].pointer)});
}

int NVTX_API initialize_extension(nvtxExtModuleInfo_t* module) {
    if (module->moduleId != NVTX_EXT_MODULEID_MEM) return 1;
    intptr_t* slots = module->segments[0].functionSlots;
    slots[NVTX3EXT_CBID_nvtxMemHeapRegister] = reinterpret_cast<intptr_t>(heap_register);
    slots[NVTX3EXT_CBID_nvtxMemHeapUnregister] = reinterpret_cast<intptr_t>(heap_unregister);
    slots[NVTX3EXT_CBID_nvtxMemHeapReset] = reinterpret_cast<intptr_t>(heap_reset);
    slots[NVTX3EXT_CBID_nvtxMemRegionsRegister] = reinterpret_cast<intptr_t>(regions_register);
    slots[NVTX3EXT_CBID_nvtxMemRegionsUnregister] = reinterpret_cast<intptr_t>(regions_unregister);
    return 1;
}

}  // namespace

extern "C" NvtxExtInitializeInjectionFunc_t InitializeInjectionNvtxExtension_fnptr = initialize_extension;

namespace {

using namespace ember;

RawAllocator malloc_raw(int announced_device) {
    RawAllocator raw;
    raw.name = "test";
    raw.allocate = [](std::size_t bytes) -> void* { return std::aligned_alloc(256, (bytes + 255) / 256 * 256); };
    raw.release = [](void* p) { std::free(p); };
    raw.announced_device = announced_device;
    return raw;
}

std::uintptr_t address(const void* p) {
    return reinterpret_cast<std::uintptr_t>(p);
}

// The replay a memory tool does: live regions are allocated, live heaps reserved.
struct Replay {
    std::map<std::uintptr_t, std::size_t> heaps;                               // heap -> bytes
    std::map<std::uintptr_t, std::pair<std::uintptr_t, std::size_t>> regions;  // address -> heap, bytes
    std::size_t allocated = 0, reserved = 0, peak_allocated = 0, peak_reserved = 0;

    void apply(const Call& c) {
        if (c.what == "heap_register") {
            heaps[c.heap] = c.bytes;
            reserved += c.bytes;
        } else if (c.what == "heap_unregister" || c.what == "heap_reset") {
            for (auto it = regions.begin(); it != regions.end();) {
                if (it->second.first == c.heap) {
                    allocated -= it->second.second;
                    it = regions.erase(it);
                } else {
                    ++it;
                }
            }
            if (c.what == "heap_unregister") {
                reserved -= heaps.at(c.heap);
                heaps.erase(c.heap);
            }
        } else if (c.what == "region_register") {
            ASSERT_TRUE(heaps.count(c.heap)) << "a region in a heap never registered";
            ASSERT_FALSE(regions.count(c.address)) << "a region registered twice";
            regions[c.address] = {c.heap, c.bytes};
            allocated += c.bytes;
        } else if (c.what == "region_unregister") {
            auto it = regions.find(c.address);
            ASSERT_NE(it, regions.end()) << "unregistering a region never registered";
            allocated -= it->second.second;
            regions.erase(it);
        }
        peak_allocated = std::max(peak_allocated, allocated);
        peak_reserved = std::max(peak_reserved, reserved);
    }
    void apply(const std::vector<Call>& calls) {
        for (const Call& c : calls) apply(c);
    }
};

TEST(AllocatorEvents, SegmentsAreHeapsAndBlocksAreRegions) {
    take_calls();
    CachingAllocator allocator(malloc_raw(RawAllocator::kHostMemory));
    void* a = allocator.allocate(1000);  // class 1024: a new segment, then the block in it
    std::vector<Call> calls = take_calls();
    ASSERT_EQ(calls.size(), 2u);
    EXPECT_EQ(calls[0].what, "heap_register");
    EXPECT_EQ(calls[0].address, address(a));
    EXPECT_EQ(calls[0].bytes, 1024u);
    EXPECT_EQ(calls[0].category, nvtx::memory_category(-1));
    EXPECT_EQ(calls[0].category, nvtx::kHostMemoryCategory);
    EXPECT_EQ(calls[1].what, "region_register");
    EXPECT_EQ(calls[1].heap, calls[0].heap);
    EXPECT_EQ(calls[1].address, address(a));
    EXPECT_EQ(calls[1].bytes, 1024u);
    const std::uintptr_t heap = calls[0].heap;

    allocator.free(a);  // back to the cache: the region ends, the heap stays
    calls = take_calls();
    ASSERT_EQ(calls.size(), 1u);
    EXPECT_EQ(calls[0].what, "region_unregister");
    EXPECT_EQ(calls[0].address, address(a));

    void* again = allocator.allocate(700);  // the cached block: a region only
    EXPECT_EQ(again, a);
    calls = take_calls();
    ASSERT_EQ(calls.size(), 1u);
    EXPECT_EQ(calls[0].what, "region_register");
    EXPECT_EQ(calls[0].heap, heap);
    allocator.free(again);
    allocator.empty_cache();  // the segment goes back: its heap ends
    calls = take_calls();
    ASSERT_EQ(calls.size(), 2u);
    EXPECT_EQ(calls[1].what, "heap_unregister");
    EXPECT_EQ(calls[1].heap, heap);
}

TEST(AllocatorEvents, AnArenaIsAHeapWhoseResetEndsItsRegions) {
    take_calls();
    CachingAllocator allocator(malloc_raw(3));  // CUDA device 3, as far as NVTX is told
    {
        ActivationArena arena(allocator, 4096, Device::cpu, "activations");
        std::vector<Call> calls = take_calls();
        ASSERT_EQ(calls.size(), 1u);
        EXPECT_EQ(calls[0].what, "heap_register");
        EXPECT_EQ(calls[0].bytes, 4096u);
        EXPECT_EQ(calls[0].category, nvtx::kDeviceMemoryCategory + 3);
        const std::uintptr_t heap = calls[0].heap;
        EXPECT_EQ(allocator.stats().reserved_bytes, 4096u);
        EXPECT_EQ(allocator.stats().allocated_bytes, 0u);

        void* x = arena.allocate(100);
        void* y = arena.allocate(300);  // at 256: aligned
        EXPECT_EQ(address(y) - address(x), 256u);
        EXPECT_EQ(allocator.stats().allocated_bytes, 400u);
        calls = take_calls();
        ASSERT_EQ(calls.size(), 2u);
        EXPECT_EQ(calls[0].what, "region_register");
        EXPECT_EQ(calls[0].heap, heap);
        EXPECT_EQ(calls[0].bytes, 100u);
        EXPECT_EQ(calls[1].address, address(y));
        EXPECT_EQ(calls[1].bytes, 300u);

        arena.reset();
        EXPECT_EQ(allocator.stats().allocated_bytes, 0u);
        EXPECT_EQ(allocator.stats().peak_allocated_bytes, 400u);
        calls = take_calls();
        ASSERT_EQ(calls.size(), 1u);
        EXPECT_EQ(calls[0].what, "heap_reset");
        EXPECT_EQ(calls[0].heap, heap);
        arena.reset();  // nothing in use: nothing to say
        EXPECT_TRUE(take_calls().empty());
        arena.allocate(50);
        EXPECT_EQ(allocator.stats().allocated_bytes, 50u);
    }
    // The arena's end releases its segment, sub-allocations and all.
    std::vector<Call> calls = take_calls();
    ASSERT_EQ(calls.size(), 2u);
    EXPECT_EQ(calls[0].what, "region_register");
    EXPECT_EQ(calls[1].what, "heap_unregister");
    EXPECT_EQ(allocator.stats().allocated_bytes, 0u);
    EXPECT_EQ(allocator.stats().reserved_bytes, 0u);
}

TEST(AllocatorEvents, AReplayOfTheStreamEqualsTheStatistics) {
    take_calls();
    CachingAllocator allocator(malloc_raw(RawAllocator::kHostMemory));
    Replay replay;
    auto check = [&](const char* after) {
        replay.apply(take_calls());
        const AllocatorStats stats = allocator.stats();
        EXPECT_EQ(replay.allocated, stats.allocated_bytes) << after;
        EXPECT_EQ(replay.reserved, stats.reserved_bytes) << after;
        EXPECT_EQ(replay.peak_allocated, stats.peak_allocated_bytes) << after;
        EXPECT_EQ(replay.peak_reserved, stats.peak_reserved_bytes) << after;
    };
    std::vector<void*> blocks;
    for (std::size_t bytes : {100u, 5000u, 70000u, 3000000u, 100u, 5000u}) blocks.push_back(allocator.allocate(bytes));
    check("six allocations");
    allocator.free(blocks[1]);
    allocator.free(blocks[3]);
    check("two frees");
    blocks[1] = allocator.allocate(4800);     // the cached 5120 block
    blocks[3] = allocator.allocate(2900000);  // the cached 3 MiB block
    check("two cache hits");
    auto arena = std::make_unique<ActivationArena>(allocator, 1 << 20, Device::cpu, "activations");
    for (int step = 0; step < 3; ++step) {
        arena->reset();
        for (std::size_t bytes : {4096u, 10000u, 300000u}) arena->allocate(bytes * (step + 1));
        check("an arena step");
    }
    for (void* p : blocks) allocator.free(p);
    check("all blocks freed");
    allocator.empty_cache();
    check("empty_cache");
    arena.reset();  // the unique_ptr: the arena ends, its segment goes back
    check("the arena released");
    EXPECT_EQ(replay.allocated, 0u);
    EXPECT_EQ(replay.reserved, 0u);
    EXPECT_GT(replay.peak_allocated, 3000000u + 3 * 314096u - 1);  // the third step's arena on top of the blocks
}

TEST(AllocatorEvents, StagingPoolsAreNotAnnounced) {
    take_calls();
    CachingAllocator allocator(malloc_raw(RawAllocator::kNotAnnounced));
    allocator.free(allocator.allocate(4096));
    allocator.empty_cache();
    PinnedHostPool pool;
    pool.free(pool.allocate(4096));
    pool.empty_cache();
    EXPECT_TRUE(take_calls().empty());
}

TEST(AllocatorEvents, TheHostAllocatorAnnouncesHostMemory) {
    take_calls();
    void* p = host_allocator().allocate(123456);
    host_allocator().free(p);
    std::vector<Call> calls = take_calls();
    bool region = false;
    for (const Call& c : calls) {
        if (c.what == "heap_register") EXPECT_EQ(c.category, nvtx::kHostMemoryCategory);
        if (c.what == "region_register" && c.address == address(p)) region = true;
    }
    EXPECT_TRUE(region);
}

}  // namespace
