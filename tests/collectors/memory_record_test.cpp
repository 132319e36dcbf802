// memory_record_test.cpp: NVTX's memory extension (nvToolsExtMem.h) as the collector
// records it. Hand-built heap and region calls, made through NVTX as any program makes
// them (the static hooks of nvtx_static_injection.cpp are compiled into this test),
// must become exactly the memory events listed here by hand: a heap is a segment, a
// region a block, a heap reset or unregistering ends its regions; the device comes
// from the heap's category in the "ember" domain (common/nvtx_contract.h); each event
// carries its thread and the NVTX ranges open on it as its stack; a session that opens late
// starts from what is live. The gpu_memory report reads the peak the calls imply.
#include "collectors/session.h"
#include "common/nvtx_contract.h"
#include "profiler/analysis/gpu_memory.h"
#include "profiler/store/reader.h"
#include "tests/collectors/subprocess.h"
#include "tests/collectors/host_session.h"

#include <gtest/gtest.h>
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace ember {
namespace {

using trace::MemoryAction;

nvtxDomainHandle_t ember_domain() {
    static nvtxDomainHandle_t domain = nvtxDomainCreateA(std::string(nvtx::kDomain).c_str());
    return domain;
}

const void* at(std::uintptr_t address) {
    return reinterpret_cast<const void*>(address);
}

nvtxMemHeapHandle_t register_heap(nvtxDomainHandle_t domain, std::uintptr_t base, std::size_t bytes,
                                  std::uint32_t category) {
    nvtxMemVirtualRangeDesc_t range{};
    range.ptr = at(base);
    range.size = bytes;
    nvtxMemHeapDesc_t desc{};
    desc.extCompatID = NVTX_EXT_COMPATID_MEM;
    desc.structSize = sizeof(desc);
    desc.usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR;
    desc.type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    desc.typeSpecificDescSize = sizeof(range);
    desc.typeSpecificDesc = &range;
    desc.category = category;
    desc.messageType = NVTX_MESSAGE_TYPE_ASCII;
    desc.message.ascii = "test heap";
    return nvtxMemHeapRegister(domain, &desc);
}

// Registers regions given as (address, bytes); returns the handles the tool gave back.
std::vector<nvtxMemRegionHandle_t> register_regions(nvtxDomainHandle_t domain, nvtxMemHeapHandle_t heap,
                                                    const std::vector<nvtxMemVirtualRangeDesc_t>& ranges) {
    std::vector<nvtxMemRegionHandle_t> handles(ranges.size());
    nvtxMemRegionsRegisterBatch_t batch{};
    batch.extCompatID = NVTX_EXT_COMPATID_MEM;
    batch.structSize = sizeof(batch);
    batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    batch.heap = heap;
    batch.regionCount = ranges.size();
    batch.regionDescElementSize = sizeof(nvtxMemVirtualRangeDesc_t);
    batch.regionDescElements = ranges.data();
    batch.regionHandleElementsOut = handles.data();
    nvtxMemRegionsRegister(domain, &batch);
    return handles;
}

void unregister_region(nvtxDomainHandle_t domain, nvtxMemRegionRef_t ref, std::uint32_t ref_type) {
    nvtxMemRegionsUnregisterBatch_t batch{};
    batch.extCompatID = NVTX_EXT_COMPATID_MEM;
    batch.structSize = sizeof(batch);
    batch.refType = ref_type;
    batch.refCount = 1;
    batch.refElementSize = sizeof(ref);
    batch.refElements = &ref;
    nvtxMemRegionsUnregister(domain, &batch);
}

nvtxMemVirtualRangeDesc_t range_of(std::uintptr_t address, std::size_t bytes) {
    nvtxMemVirtualRangeDesc_t range{};
    range.ptr = at(address);
    range.size = bytes;
    return range;
}

struct Seen {
    MemoryAction action;
    trace::DeviceId device;
    std::uint64_t address;
    std::int64_t bytes;
    std::string stack;  // the frames' functions, outermost first, joined by ';'
    bool operator==(const Seen&) const = default;
};

std::ostream& operator<<(std::ostream& out, const Seen& s) {
    return out << trace::memory_action_name(s.action) << " device " << s.device << " 0x" << std::hex << s.address
               << std::dec << " " << s.bytes << " [" << s.stack << "]";
}

// Every memory event of a file (by device, then time), in the form above.
std::vector<Seen> memory_events(const std::string& path) {
    store::TraceReader reader(path);
    std::vector<Seen> seen;
    reader.for_each_memory_event([&](const trace::MemoryEvent& e) {
        std::string stack;
        for (const trace::FrameInfo& frame : reader.stack_frames(e.stack_id))
            stack += (stack.empty() ? "" : ";") + frame.function;
        seen.push_back({e.action, e.device_id, e.address, e.bytes, stack});
        return true;
    });
    return seen;
}

TEST(CollectorMemory, HeapsAndRegionsBecomeSegmentsAndBlocks) {
    const std::string path = test::temp_path("memory.db");
    collector::start_session(test::host_session_options(path));
    nvtxDomainHandle_t ember = ember_domain();
    nvtxDomainHandle_t other = nvtxDomainCreateA("some allocator");

    nvtxMemHeapHandle_t host = register_heap(ember, 0x10000, 0x1000, nvtx::kHostMemoryCategory);
    nvtxEventAttributes_t forward{};
    forward.version = NVTX_VERSION;
    forward.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    forward.messageType = NVTX_MESSAGE_TYPE_ASCII;
    forward.message.ascii = "forward";
    nvtxDomainRangePushEx(ember, &forward);
    nvtxRangePushA("conv1");
    std::vector<nvtxMemRegionHandle_t> handles =
        register_regions(ember, host, {range_of(0x10000, 0x100), range_of(0x10100, 0x200)});
    nvtxRangePop();
    unregister_region(ember, nvtxMemRegionRef_t{.pointer = at(0x10000)}, NVTX_MEM_REGION_REF_TYPE_POINTER);
    nvtxDomainRangePop(ember);
    register_regions(ember, host, {range_of(0x10400, 0x300)});
    nvtxMemRegionRef_t by_handle{};
    by_handle.handle = handles[1];
    unregister_region(ember, by_handle, NVTX_MEM_REGION_REF_TYPE_HANDLE);  // 0x10100
    nvtxMemHeapReset(ember, host);                                         // ends 0x10400

    // A CUDA device's heap (device 2), and a heap of another domain (device 0).
    nvtxMemHeapHandle_t device2 = register_heap(ember, 0x7000000, 0x10000, nvtx::memory_category(2));
    register_regions(ember, device2, {range_of(0x7000000, 0x800)});
    nvtxMemHeapHandle_t foreign = register_heap(other, 0x9000000, 0x2000, 7);
    register_regions(other, foreign, {range_of(0x9000800, 0x400)});
    nvtxMemHeapUnregister(ember, device2);  // ends its region first
    nvtxMemHeapUnregister(ember, host);
    std::string error;
    ASSERT_TRUE(collector::stop_session(&error)) << error;
    nvtxMemHeapUnregister(other, foreign);  // after the session: nothing recorded

    const std::vector<Seen> expected = {
        // device -1 (host) first, then 0, then 2: the reader's order
        {MemoryAction::segment_alloc, -1, 0x10000, 0x1000, ""},
        {MemoryAction::alloc, -1, 0x10000, 0x100, "forward;conv1"},
        {MemoryAction::alloc, -1, 0x10100, 0x200, "forward;conv1"},
        {MemoryAction::free_completed, -1, 0x10000, 0x100, "forward"},
        {MemoryAction::alloc, -1, 0x10400, 0x300, ""},
        {MemoryAction::free_completed, -1, 0x10100, 0x200, ""},
        {MemoryAction::free_completed, -1, 0x10400, 0x300, ""},
        {MemoryAction::segment_free, -1, 0x10000, 0x1000, ""},
        {MemoryAction::segment_alloc, 0, 0x9000000, 0x2000, ""},
        {MemoryAction::alloc, 0, 0x9000800, 0x400, ""},
        {MemoryAction::segment_alloc, 2, 0x7000000, 0x10000, ""},
        {MemoryAction::alloc, 2, 0x7000000, 0x800, ""},
        {MemoryAction::free_completed, 2, 0x7000000, 0x800, ""},
        {MemoryAction::segment_free, 2, 0x7000000, 0x10000, ""},
    };
    EXPECT_EQ(memory_events(path), expected);

    // Every event names the calling thread, the one its ranges have.
    store::TraceReader ranges_reader(path);
    trace::ThreadId forward_thread = 0;
    ranges_reader.for_each_range({}, [&](const trace::RangeEvent& range) {
        if (ranges_reader.string(range.name_id) == "forward") forward_thread = range.thread_id;
        return true;
    });
    ASSERT_NE(forward_thread, 0u);
    ranges_reader.for_each_memory_event([&](const trace::MemoryEvent& e) {
        EXPECT_EQ(e.thread_id, forward_thread) << trace::memory_action_name(e.action);
        return true;
    });

    // The report's peaks are the calls': 0x200 and 0x300 live together on the host.
    store::TraceReader reader(path);
    const analysis::GpuMemoryReport report = analysis::gpu_memory(reader);
    ASSERT_EQ(report.devices.size(), 3u);
    EXPECT_EQ(report.devices[0].device, -1);
    EXPECT_EQ(report.devices[0].peak_allocated_bytes, 0x500);
    EXPECT_EQ(report.devices[0].peak_reserved_bytes, 0x1000);
    EXPECT_EQ(report.devices[2].device, 2);
    EXPECT_EQ(report.devices[2].peak_allocated_bytes, 0x800);
    store::remove_trace_files(path);
}

TEST(CollectorMemory, ASessionOpenedLateStartsFromWhatIsLive) {
    nvtxDomainHandle_t ember = ember_domain();
    nvtxMemHeapHandle_t heap = register_heap(ember, 0x50000, 0x4000, nvtx::kHostMemoryCategory);
    register_regions(ember, heap, {range_of(0x50000, 0x1000), range_of(0x51000, 0x800)});
    unregister_region(ember, nvtxMemRegionRef_t{.pointer = at(0x51000)}, NVTX_MEM_REGION_REF_TYPE_POINTER);

    const std::string path = test::temp_path("memory_late.db");
    collector::start_session(test::host_session_options(path));
    register_regions(ember, heap, {range_of(0x52000, 0x200)});
    nvtxMemHeapUnregister(ember, heap);
    std::string error;
    ASSERT_TRUE(collector::stop_session(&error)) << error;

    const std::vector<Seen> expected = {
        {MemoryAction::segment_live_at_start, -1, 0x50000, 0x4000, ""},
        {MemoryAction::live_at_start, -1, 0x50000, 0x1000, ""},
        {MemoryAction::alloc, -1, 0x52000, 0x200, ""},
        // the heap's end: its regions (in no particular order), then the segment
    };
    std::vector<Seen> seen = memory_events(path);
    ASSERT_EQ(seen.size(), 6u);
    EXPECT_EQ(std::vector<Seen>(seen.begin(), seen.begin() + 3), expected);
    std::vector<std::uint64_t> freed = {seen[3].address, seen[4].address};
    std::sort(freed.begin(), freed.end());
    EXPECT_EQ(freed, (std::vector<std::uint64_t>{0x50000, 0x52000}));
    EXPECT_EQ(seen[3].action, MemoryAction::free_completed);
    EXPECT_EQ(seen[4].action, MemoryAction::free_completed);
    EXPECT_EQ(seen[5], (Seen{MemoryAction::segment_free, -1, 0x50000, 0x4000, ""}));
    store::remove_trace_files(path);
}

TEST(CollectorMemory, MalformedCallsAreIgnored) {
    const std::string path = test::temp_path("memory_bad.db");
    collector::start_session(test::host_session_options(path));
    nvtxDomainHandle_t ember = ember_domain();
    EXPECT_EQ(nvtxMemHeapRegister(ember, nullptr), nullptr);
    nvtxMemHeapUnregister(ember, reinterpret_cast<nvtxMemHeapHandle_t>(0x1234));  // never registered
    nvtxMemHeapReset(ember, reinterpret_cast<nvtxMemHeapHandle_t>(0x1234));
    register_regions(ember, reinterpret_cast<nvtxMemHeapHandle_t>(0x1234), {range_of(0x60000, 0x10)});
    unregister_region(ember, nvtxMemRegionRef_t{.pointer = at(0x60000)}, NVTX_MEM_REGION_REF_TYPE_POINTER);
    nvtxMemRegionsRegister(ember, nullptr);
    nvtxMemRegionsUnregister(ember, nullptr);
    std::string error;
    ASSERT_TRUE(collector::stop_session(&error)) << error;
    EXPECT_TRUE(memory_events(path).empty());
    store::remove_trace_files(path);
}

}  // namespace
}  // namespace ember
