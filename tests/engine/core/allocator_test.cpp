// The caching allocator's policy with an injected raw allocator (no GPU needed):
// size classes, reuse after free, statistics, empty_cache, out-of-memory retry; the
// activation arena; the pinned pool's fallback; the device allocator's refusal.
#include "engine/core/allocator.h"
#include "engine/core/copy.h"
#include "engine/core/cuda_check.h"
#include "engine/core/stream.h"
#include "engine/cuda/context.h"
#include "engine/core/device.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

namespace {

using namespace ember;

// A raw allocator over malloc that counts calls and can be told to fail.
struct CountingRaw {
    int allocations = 0;
    int releases = 0;
    std::size_t fail_above = SIZE_MAX;  // requests larger than this return nullptr
    std::set<void*> outstanding;

    RawAllocator make() {
        RawAllocator raw;
        raw.name = "test";
        raw.allocate = [this](std::size_t bytes) -> void* {
            if (bytes > fail_above) return nullptr;
            ++allocations;
            void* p = std::malloc(bytes);
            outstanding.insert(p);
            return p;
        };
        raw.release = [this](void* p) {
            ++releases;
            outstanding.erase(p);
            std::free(p);
        };
        return raw;
    }
};

TEST(CachingAllocator, SizeClasses) {
    EXPECT_EQ(CachingAllocator::size_class(0), 0u);
    EXPECT_EQ(CachingAllocator::size_class(1), 512u);
    EXPECT_EQ(CachingAllocator::size_class(512), 512u);
    EXPECT_EQ(CachingAllocator::size_class(513), 1024u);
    EXPECT_EQ(CachingAllocator::size_class(1u << 20), 1u << 20);
    // Above 1 MiB: quarter steps of the power of two.
    EXPECT_EQ(CachingAllocator::size_class((1u << 20) + 1), (1u << 20) + (1u << 18));
    EXPECT_EQ(CachingAllocator::size_class(3u << 20), 3u << 20);
    EXPECT_EQ(CachingAllocator::size_class((8u << 20) + 5), (8u << 20) + (2u << 20));
    for (std::size_t bytes : {1000u, 123457u, 5000000u, 70000000u}) {
        std::size_t c = CachingAllocator::size_class(bytes);
        EXPECT_GE(c, bytes);
        EXPECT_LE(double(c), 1.25 * double(bytes) + 512) << bytes;
    }
}

TEST(CachingAllocator, ReusesFreedBlocksWithoutNewRawCalls) {
    CountingRaw raw;
    CachingAllocator allocator(raw.make());
    // A "step" allocating three buffers and freeing them, repeated.
    for (int step = 0; step < 5; ++step) {
        void* a = allocator.allocate(1000);
        void* b = allocator.allocate(3u << 20);
        void* c = allocator.allocate(1000);
        EXPECT_NE(a, c);
        allocator.free(a);
        allocator.free(b);
        allocator.free(c);
    }
    EXPECT_EQ(raw.allocations, 3) << "only the first step may reach the raw allocator";
    AllocatorStats s = allocator.stats();
    EXPECT_EQ(s.raw_allocations, 3u);
    EXPECT_EQ(s.requests, 15u);
    EXPECT_EQ(s.cache_hits, 12u);
    EXPECT_EQ(s.allocated_bytes, 0u);
    EXPECT_EQ(s.reserved_bytes, 1024u + (3u << 20) + 1024u);
    EXPECT_EQ(s.peak_allocated_bytes, s.reserved_bytes);
}

TEST(CachingAllocator, DifferentClassesAreNotShared) {
    CountingRaw raw;
    CachingAllocator allocator(raw.make());
    void* small = allocator.allocate(512);
    allocator.free(small);
    void* larger = allocator.allocate(4096);
    EXPECT_EQ(raw.allocations, 2);
    void* again = allocator.allocate(300);  // same class as the freed 512-byte block
    EXPECT_EQ(again, small);
    EXPECT_EQ(raw.allocations, 2);
    allocator.free(larger);
    allocator.free(again);
}

TEST(CachingAllocator, StatsTrackPeakAndEmptyCacheReleases) {
    CountingRaw raw;
    CachingAllocator allocator(raw.make());
    void* a = allocator.allocate(2048);
    void* b = allocator.allocate(4096);
    EXPECT_EQ(allocator.stats().allocated_bytes, 6144u);
    allocator.free(a);
    EXPECT_EQ(allocator.stats().allocated_bytes, 4096u);
    EXPECT_EQ(allocator.stats().peak_allocated_bytes, 6144u);
    EXPECT_EQ(allocator.stats().reserved_bytes, 6144u);
    allocator.empty_cache();  // releases the free 2048 block only
    EXPECT_EQ(raw.releases, 1);
    EXPECT_EQ(allocator.stats().reserved_bytes, 4096u);
    allocator.reset_peak();
    EXPECT_EQ(allocator.stats().peak_allocated_bytes, 4096u);
    allocator.free(b);
    allocator.empty_cache();
    EXPECT_EQ(allocator.stats().reserved_bytes, 0u);
    EXPECT_TRUE(raw.outstanding.empty());
}

TEST(CachingAllocator, OutOfMemoryReleasesCacheAndRetries) {
    CountingRaw raw;
    CachingAllocator allocator(raw.make());
    void* a = allocator.allocate(1u << 20);
    allocator.free(a);
    // The raw allocator now refuses everything: the cached block must be released
    // before the allocator gives up with an error naming the request.
    raw.fail_above = 0;
    EXPECT_THROW(allocator.allocate(2u << 20), std::runtime_error);
    EXPECT_EQ(allocator.stats().reserved_bytes, 0u) << "cache must be released before failing";
    raw.fail_above = SIZE_MAX;
    void* b = allocator.allocate(2u << 20);
    EXPECT_NE(b, nullptr);
    allocator.free(b);
}

TEST(CachingAllocator, RejectsForeignPointers) {
    CountingRaw raw;
    CachingAllocator allocator(raw.make());
    int local = 0;
    EXPECT_THROW(allocator.free(&local), std::invalid_argument);
    allocator.free(nullptr);  // ignored
    EXPECT_EQ(allocator.allocate(0), nullptr);
}

TEST(CachingAllocator, BufferFreesOnDestruction) {
    CountingRaw raw;
    CachingAllocator allocator(raw.make());
    {
        Buffer buffer(allocator, 10000);
        EXPECT_NE(buffer.data(), nullptr);
        Buffer moved = std::move(buffer);
        EXPECT_EQ(buffer.data(), nullptr);
        EXPECT_EQ(allocator.stats().allocated_bytes, CachingAllocator::size_class(10000));
    }
    EXPECT_EQ(allocator.stats().allocated_bytes, 0u);
}

TEST(ActivationArena, BumpsAlignsResetsAndReportsPeak) {
    std::vector<char> backing(4096);
    ActivationArena arena(backing.data(), backing.size(), Device::cpu);
    void* a = arena.allocate(100);
    void* b = arena.allocate(10);
    EXPECT_EQ(a, backing.data());
    EXPECT_EQ(static_cast<char*>(b) - backing.data(), 256);
    Tensor t = arena.allocate_tensor(DType::f32, {4, 8});
    EXPECT_EQ(static_cast<char*>(t.data) - backing.data(), 512);
    EXPECT_EQ(arena.used(), 512u + 128u);
    arena.reset();
    EXPECT_EQ(arena.used(), 0u);
    EXPECT_EQ(arena.peak(), 640u);
    EXPECT_EQ(arena.allocate(8), backing.data());
    EXPECT_THROW(arena.allocate(5000), std::runtime_error);
}

TEST(PinnedHostPool, FallsBackToPageableWithoutDevice) {
    PinnedHostPool pool;
    if (!cuda_device_available()) {
        EXPECT_FALSE(pool.pinned());
        EXPECT_FALSE(pool.fallback_reason().empty());
    } else {
        EXPECT_TRUE(pool.pinned());
    }
    void* p = pool.allocate(1000);
    ASSERT_NE(p, nullptr);
    static_cast<char*>(p)[999] = 1;  // writable host memory either way
    pool.free(p);
    void* again = pool.allocate(900);
    EXPECT_EQ(again, p);
    pool.free(again);
    EXPECT_EQ(pool.stats().raw_allocations, 1u);
}

TEST(HostAllocator, IsTheCpuTwinOfTheDeviceAllocator) {
    CachingAllocator& host = allocator_for(Device::cpu);
    EXPECT_EQ(&host, &host_allocator());
    void* p = host.allocate(4000);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
    host.free(p);
    EXPECT_EQ(host.allocate(3900), p);  // same 4096-byte class, reused
    host.free(p);
}

TEST(CopyTensor, HostToHostAndChecks) {
    float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {};
    copy_tensor(make_tensor(a, DType::f32, {2, 3}), make_tensor(b, DType::f32, {3, 2}));
    EXPECT_EQ(b[5], 6.0f);
    EXPECT_THROW(copy_tensor(make_tensor(a, DType::f32, {6}), make_tensor(b, DType::i32, {6})), std::invalid_argument);
}

TEST(DeviceAllocator, RefusesClearlyWithoutDevice) {
    if (cuda_device_available()) GTEST_SKIP() << "a device is present";
    try {
        device_allocator();
        FAIL() << "expected a refusal";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
    }
}

}  // namespace

namespace {

TEST(CudaContext, RefusesClearlyWithoutDevice) {
    if (ember::cuda_device_available()) GTEST_SKIP() << "a device is present";
    try {
        ember::CudaContext ctx;
        FAIL() << "expected a refusal";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("CudaContext: no CUDA device"), std::string::npos) << e.what();
    }
    // Streams need a device too; the error names the call.
    try {
        ember::Stream stream;
        FAIL() << "expected a CudaError";
    } catch (const ember::CudaError& e) {
        EXPECT_NE(std::string(e.what()).find("cudaStreamCreateWithFlags"), std::string::npos) << e.what();
    }
}

}  // namespace
