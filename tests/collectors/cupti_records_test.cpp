// cupti_records_test.cpp: CUPTI activity records -> trace events, with hand-made
// records (no GPU needed): each field lands where docs/trace-schema.md says, memory
// kinds tell pinned from pageable, names are demangled, streams are registered once,
// graph launches keep their graph and node ids; device memory records (MEMORY2,
// MEMORY_POOL) become the allocations, frees and reservations a hand replay expects,
// on the thread of the call that made them.
#include "collectors/cupti_records.h"
#include "profiler/store/reader.h"
#include "profiler/store/writer.h"
#include "tests/collectors/subprocess.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

namespace ember {
namespace {

using collector::ActivityRecorder;

// A CUPTI activity record of type Record, every byte zero but its kind (as CUPTI
// leaves the fields a record does not use).
template <typename Record>
Record zeroed_record(CUpti_ActivityKind kind) {
    Record record;
    std::memset(&record, 0, sizeof record);
    record.kind = kind;
    return record;
}

// `to_event` carries the record's graph id and graph node id into the trace event.
template <typename Record, typename ToEvent>
void expect_graph_ids_kept(Record record, std::uint32_t graph_id, std::uint64_t graph_node_id, ToEvent to_event) {
    record.graphId = graph_id;
    record.graphNodeId = graph_node_id;
    EXPECT_EQ(to_event(record).graph_id, graph_id);
    EXPECT_EQ(to_event(record).graph_node_id, graph_node_id);
}

TEST(CuptiRecords, MemoryKindsAndDirections) {
    EXPECT_EQ(collector::memory_kind_from_cupti(CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE), trace::MemoryKind::pageable);
    EXPECT_EQ(collector::memory_kind_from_cupti(CUPTI_ACTIVITY_MEMORY_KIND_PINNED), trace::MemoryKind::pinned);
    EXPECT_EQ(collector::memory_kind_from_cupti(CUPTI_ACTIVITY_MEMORY_KIND_DEVICE), trace::MemoryKind::device);
    EXPECT_EQ(collector::memory_kind_from_cupti(CUPTI_ACTIVITY_MEMORY_KIND_MANAGED), trace::MemoryKind::managed);
    EXPECT_EQ(collector::memory_kind_from_cupti(CUPTI_ACTIVITY_MEMORY_KIND_ARRAY), trace::MemoryKind::array);
    EXPECT_EQ(collector::memory_kind_from_cupti(CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN), trace::MemoryKind::unknown);
    EXPECT_EQ(collector::direction_from_cupti(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD), trace::MemcpyDirection::host_to_device);
    EXPECT_EQ(collector::direction_from_cupti(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH), trace::MemcpyDirection::device_to_host);
    EXPECT_EQ(collector::direction_from_cupti(CUPTI_ACTIVITY_MEMCPY_KIND_DTOD),
              trace::MemcpyDirection::device_to_device);
    EXPECT_EQ(collector::direction_from_cupti(CUPTI_ACTIVITY_MEMCPY_KIND_HTOH), trace::MemcpyDirection::host_to_host);
    EXPECT_EQ(collector::direction_from_cupti(CUPTI_ACTIVITY_MEMCPY_KIND_PTOP), trace::MemcpyDirection::peer_to_peer);
}

TEST(CuptiRecords, DemanglesKernelNames) {
    EXPECT_EQ(collector::demangle("_Z5saxpyifPKfPf"), "saxpy(int, float, float const*, float*)");
    EXPECT_EQ(collector::demangle("plain_c_kernel"), "plain_c_kernel");
    EXPECT_EQ(collector::demangle(nullptr), "");
}

TEST(CuptiRecords, KernelFieldsAndLaunchConfiguration) {
    auto record = zeroed_record<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    record.start = 1000;
    record.end = 5000;
    record.deviceId = 1;
    record.gridX = 4096;
    record.gridY = 2;
    record.gridZ = 1;
    record.blockX = 256;
    record.blockY = 1;
    record.blockZ = 1;
    record.registersPerThread = 32;
    record.staticSharedMemory = 1024;
    record.dynamicSharedMemory = 2048;
    record.correlationId = 77;
    trace::KernelEvent event = collector::kernel_event(record, 3, 9);
    EXPECT_EQ(event.start_ns, 1000);
    EXPECT_EQ(event.end_ns, 5000);
    EXPECT_EQ(event.device_id, 1);
    EXPECT_EQ(event.stream_id, 3u);
    EXPECT_EQ(event.name_id, 9u);
    EXPECT_EQ(event.correlation_id, 77u);
    trace::LaunchConfig expected{4096, 2, 1, 256, 1, 1, 32, 1024, 2048};
    EXPECT_EQ(event.launch, expected);
}

TEST(CuptiRecords, MemcpyKeepsBytesKindsAndTheRuntimeCorrelation) {
    auto record = zeroed_record<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
    record.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    record.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
    record.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    record.bytes = 4 << 20;
    record.start = 10;
    record.end = 20;
    record.correlationId = 5;         // the driver call
    record.runtimeCorrelationId = 4;  // cudaMemcpy
    trace::MemcpyEvent event = collector::memcpy_event(record, 2);
    EXPECT_EQ(event.direction, trace::MemcpyDirection::host_to_device);
    EXPECT_EQ(event.bytes, 4u << 20);
    EXPECT_EQ(event.source_kind, trace::MemoryKind::pageable);
    EXPECT_EQ(event.destination_kind, trace::MemoryKind::device);
    EXPECT_EQ(event.correlation_id, 4u);
    EXPECT_EQ(event.peer_device_id, trace::kNoDevice);
    record.runtimeCorrelationId = 0;  // issued through the driver API
    EXPECT_EQ(collector::memcpy_event(record, 2).correlation_id, 5u);
}

TEST(CuptiRecords, PeerCopyNamesTheOtherDevice) {
    auto record = zeroed_record<CUpti_ActivityMemcpyPtoP4>(CUPTI_ACTIVITY_KIND_MEMCPY2);
    record.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
    record.deviceId = 0;
    record.srcDeviceId = 0;
    record.dstDeviceId = 3;
    record.bytes = 100;
    trace::MemcpyEvent event = collector::peer_memcpy_event(record, 1);
    EXPECT_EQ(event.direction, trace::MemcpyDirection::peer_to_peer);
    EXPECT_EQ(event.peer_device_id, 3);
}

// A kernel, copy or memset launched through cudaGraphLaunch carries its graph's id
// and its node's id; both stay 0 for a plain launch (what the schema's 0 means).
TEST(CuptiRecords, GraphIdsOfKernelsCopiesAndMemsets) {
    auto kernel = zeroed_record<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    EXPECT_EQ(collector::kernel_event(kernel, 1, 1).graph_id, 0u);
    EXPECT_EQ(collector::kernel_event(kernel, 1, 1).graph_node_id, 0u);
    expect_graph_ids_kept(kernel, 0xFFFFFFFEu, 0x1234'5678'9ABCull,
                          [](const auto& record) { return collector::kernel_event(record, 1, 1); });
    expect_graph_ids_kept(zeroed_record<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY), 3, 30,
                          [](const auto& record) { return collector::memcpy_event(record, 1); });
    expect_graph_ids_kept(zeroed_record<CUpti_ActivityMemcpyPtoP4>(CUPTI_ACTIVITY_KIND_MEMCPY2), 4, 40,
                          [](const auto& record) { return collector::peer_memcpy_event(record, 1); });
    expect_graph_ids_kept(zeroed_record<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET), 5, 50,
                          [](const auto& record) { return collector::memset_event(record, 1); });
}

TEST(CuptiRecords, SynchronizationKinds) {
    auto record = zeroed_record<CUpti_ActivitySynchronization2>(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
    record.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE;
    record.cudaEventId = 12;
    record.start = 1;
    record.end = 9;
    record.correlationId = 33;
    trace::SyncEvent event = collector::sync_event(record, 0, 4);
    EXPECT_EQ(event.kind, trace::SyncKind::event_synchronize);
    EXPECT_EQ(event.cuda_event_id, 12u);
    EXPECT_EQ(event.correlation_id, 33u);
    record.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
    record.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    event = collector::sync_event(record, 0, 0);
    EXPECT_EQ(event.kind, trace::SyncKind::context_synchronize);
    EXPECT_EQ(event.cuda_event_id, 0u);
}

TEST(CuptiRecords, RecorderWritesEventsStreamsAndDevicesReadableBack) {
    std::string path = test::temp_path("records.db");
    {
        trace::RunInfo run;
        store::TraceWriter writer(path, run);
        ActivityRecorder recorder(writer);

        auto device = zeroed_record<CUpti_ActivityDevice5>(CUPTI_ACTIVITY_KIND_DEVICE);
        device.id = 0;
        device.name = "Test GPU";
        device.computeCapabilityMajor = 9;
        device.numMultiprocessors = 132;
        device.globalMemorySize = 80ull << 30;
        device.globalMemoryBandwidth = 3'350'000'000ull;  // kB/s
        recorder.record(reinterpret_cast<const CUpti_Activity&>(device));

        auto context = zeroed_record<CUpti_ActivityContext3>(CUPTI_ACTIVITY_KIND_CONTEXT);
        context.contextId = 1;
        context.deviceId = 0;
        context.nullStreamId = 7;
        recorder.record(reinterpret_cast<const CUpti_Activity&>(context));

        for (int launch = 0; launch < 3; ++launch) {
            auto kernel = zeroed_record<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
            kernel.contextId = 1;
            kernel.streamId = 7;
            kernel.start = 100 + launch * 100;
            kernel.end = 150 + launch * 100;
            kernel.gridX = kernel.gridY = kernel.gridZ = 1;
            kernel.blockX = kernel.blockY = kernel.blockZ = 1;
            kernel.name = "_Z5saxpyifPKfPf";
            kernel.correlationId = 10 + launch;
            kernel.graphId = launch == 1 ? 6 : 0;  // the second launch ran from graph 6
            kernel.graphNodeId = launch == 1 ? 60 : 0;
            EXPECT_TRUE(recorder.record(reinterpret_cast<const CUpti_Activity&>(kernel)));
        }
        auto set = zeroed_record<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET);
        set.contextId = 1;
        set.streamId = 8;
        set.bytes = 64;
        set.value = 0xAB;
        set.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
        set.start = 500;
        set.end = 510;
        EXPECT_TRUE(recorder.record(reinterpret_cast<const CUpti_Activity&>(set)));
        EXPECT_EQ(recorder.kernels(), 3u);
        writer.close();
    }
    store::TraceReader reader(path);
    ASSERT_EQ(reader.devices().size(), 1u);
    EXPECT_EQ(reader.devices()[0].name, "Test GPU");
    EXPECT_EQ(reader.devices()[0].multiprocessor_count, 132);
    EXPECT_DOUBLE_EQ(reader.devices()[0].memory_bandwidth_bytes_per_second, 3.35e12);
    ASSERT_EQ(reader.streams().size(), 2u);  // stream 7 (default) and 8, each registered once
    const trace::StreamInfo* first = reader.stream(1);
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(first->cuda_stream_id, 7u);
    EXPECT_EQ(first->name, "default");
    EXPECT_EQ(reader.event_count("kernels"), 3);
    std::vector<trace::KernelEvent> kernels = reader.kernels_by_correlation(11);
    ASSERT_EQ(kernels.size(), 1u);
    EXPECT_EQ(reader.string(kernels[0].name_id), "saxpy(int, float, float const*, float*)");
    EXPECT_EQ(kernels[0].start_ns, 200);
    EXPECT_EQ(kernels[0].graph_id, 6u);
    EXPECT_EQ(kernels[0].graph_node_id, 60u);
    EXPECT_EQ(reader.kernels_by_correlation(10).at(0).graph_id, 0u);
    std::vector<trace::MemsetEvent> sets;
    reader.for_each_memset({}, [&](const trace::MemsetEvent& event) {
        sets.push_back(event);
        return true;
    });
    ASSERT_EQ(sets.size(), 1u);
    EXPECT_EQ(sets[0].bytes, 64u);
    EXPECT_EQ(sets[0].value, 0xABu);
    store::remove_trace_files(path);
}

// ---------------------------------------------------------------------------
// Device memory: MEMORY2 and MEMORY_POOL records
// ---------------------------------------------------------------------------

CUpti_ActivityMemory4 memory_record(CUpti_ActivityMemoryOperationType operation, std::uint64_t address,
                                    std::uint64_t bytes, std::uint64_t time) {
    auto record = zeroed_record<CUpti_ActivityMemory4>(CUPTI_ACTIVITY_KIND_MEMORY2);
    record.memoryOperationType = operation;
    record.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    record.address = address;
    record.bytes = bytes;
    record.timestamp = time;
    record.deviceId = 1;
    record.streamId = CUPTI_INVALID_STREAM_ID;  // cudaMalloc is not stream-ordered
    return record;
}

CUpti_ActivityMemoryPool3 pool_record(CUpti_ActivityMemoryPoolOperationType operation, std::uint64_t address,
                                      std::uint64_t size, std::uint64_t time) {
    auto record = zeroed_record<CUpti_ActivityMemoryPool3>(CUPTI_ACTIVITY_KIND_MEMORY_POOL);
    record.memoryPoolOperationType = operation;
    record.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
    record.address = address;
    record.size = size;
    record.timestamp = time;
    record.deviceId = 1;
    return record;
}

// One record through the recorder, as CUPTI's buffer walk hands it over.
template <typename Record>
bool feed(ActivityRecorder& recorder, const Record& record) {
    return recorder.record(reinterpret_cast<const CUpti_Activity&>(record));
}

using Actions = std::vector<std::pair<trace::MemoryAction, std::int64_t>>;  // (action, bytes)

Actions actions_of(const std::vector<trace::MemoryEvent>& events) {
    Actions out;
    for (const trace::MemoryEvent& event : events) out.emplace_back(event.action, event.bytes);
    return out;
}

TEST(CuptiRecords, MemoryCallsAreTheAllocatingAndFreeingOnes) {
    for (const char* name : {"cudaMalloc_v3020", "cudaFree_v3020", "cudaMallocAsync_v11020", "cudaFreeAsync_v11020",
                             "cudaMallocManaged_v6000", "cudaMallocHost_v3020", "cudaHostAlloc_v3020", "cuMemAlloc_v2",
                             "cuMemFree_v2", "cuMemAllocAsync", "cuMemAllocFromPoolAsync", "cudaMemPoolCreate_v11020",
                             "cudaMemPoolDestroy_v11020", "cudaMemPoolTrimTo_v11020", "cuMemPoolTrimTo"})
        EXPECT_TRUE(collector::allocates_or_frees_memory(name)) << name;
    for (const char* name : {"cudaLaunchKernel_v7000", "cudaMemcpy_v3020", "cudaMemset_v3020", "cuMemcpyHtoD_v2",
                             "cudaMemPoolSetAttribute_v11020", "cuMemGetInfo_v2", "", "cudaStreamSynchronize_v3020"})
        EXPECT_FALSE(collector::allocates_or_frees_memory(name)) << name;
    EXPECT_FALSE(collector::allocates_or_frees_memory(nullptr));
}

TEST(CuptiRecords, MemoryCallThreadsAreTakenOnceAndBounded) {
    collector::MemoryCallThreads threads;
    threads.note(5, 3);
    threads.note(6, 4);
    EXPECT_EQ(threads.take(5), 3u);
    EXPECT_EQ(threads.take(5), 0u);  // given once
    EXPECT_EQ(threads.take(7), 0u);  // never noted
    EXPECT_EQ(threads.pending(), 1u);
    for (std::uint32_t id = 100; id < 100 + 3 * collector::MemoryCallThreads::kMaxPending; ++id) threads.note(id, 9);
    EXPECT_LE(threads.pending(), collector::MemoryCallThreads::kMaxPending);
    EXPECT_EQ(threads.take(100 + 3 * collector::MemoryCallThreads::kMaxPending - 1), 9u);  // the newest is kept
}

TEST(CuptiRecords, CudaMallocAllocatesAndReservesTheSameBlock) {
    collector::GpuMemoryRecords memory;
    auto allocation = memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x7f0000000000, 4 << 20, 1000);
    std::vector<trace::MemoryEvent> events = memory.memory(allocation, 12);
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[0].action, trace::MemoryAction::alloc);
    EXPECT_EQ(events[0].time_ns, 1000);
    EXPECT_EQ(events[0].device_id, 1);
    EXPECT_EQ(events[0].address, 0x7f0000000000u);
    EXPECT_EQ(events[0].bytes, 4 << 20);
    EXPECT_EQ(events[0].cuda_stream, 0u);  // CUPTI_INVALID_STREAM_ID
    EXPECT_EQ(events[0].thread_id, 12u);
    EXPECT_EQ(events[0].device_free_bytes, -1);
    EXPECT_EQ(events[1].action, trace::MemoryAction::segment_alloc);
    EXPECT_EQ(events[1].address, 0x7f0000000000u);
    EXPECT_EQ(events[1].bytes, 4 << 20);
    auto release = memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, 0x7f0000000000, 4 << 20, 2000);
    release.streamId = 13;
    events = memory.memory(release, 12);
    EXPECT_EQ(actions_of(events),
              (Actions{{trace::MemoryAction::free_completed, 4 << 20}, {trace::MemoryAction::segment_free, 4 << 20}}));
    EXPECT_EQ(events[0].cuda_stream, 13u);

    // Host and managed memory are not device memory; an unknown operation is nothing.
    for (CUpti_ActivityMemoryKind kind :
         {CUPTI_ACTIVITY_MEMORY_KIND_PINNED, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, CUPTI_ACTIVITY_MEMORY_KIND_MANAGED}) {
        allocation.memoryKind = kind;
        EXPECT_TRUE(memory.memory(allocation, 12).empty()) << int(kind);
    }
    allocation.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC;  // __device__ variables: device memory
    EXPECT_EQ(memory.memory(allocation, 0).size(), 2u);
    allocation.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_INVALID;
    EXPECT_TRUE(memory.memory(allocation, 0).empty());
}

TEST(CuptiRecords, PoolMemoryIsReservedByThePoolsSize) {
    collector::GpuMemoryRecords memory;
    const std::uint64_t pool = 0x7e0000000000;
    EXPECT_EQ(actions_of(memory.pool(pool_record(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED, pool, 0, 100), 0)),
              Actions{});  // an empty pool reserves nothing
    // cudaMallocAsync of 1 MiB grows the pool to 32 MiB; a second 1 MiB fits in it.
    auto from_pool = [&](CUpti_ActivityMemoryOperationType operation, std::uint64_t address, std::uint64_t pool_size,
                         std::uint64_t time) {
        auto record = memory_record(operation, address, 1 << 20, time);
        record.isAsync = 1;
        record.streamId = 13;
        record.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
        record.memoryPoolConfig.address = pool;
        record.memoryPoolConfig.pool.size = pool_size;
        return memory.memory(record, 4);
    };
    std::vector<trace::MemoryEvent> events =
        from_pool(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, pool, 32 << 20, 200);
    EXPECT_EQ(actions_of(events),
              (Actions{{trace::MemoryAction::alloc, 1 << 20}, {trace::MemoryAction::segment_alloc, 32 << 20}}));
    EXPECT_EQ(events[1].address, pool);
    EXPECT_EQ(events[1].thread_id, 4u);
    EXPECT_EQ(actions_of(from_pool(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, pool + (1 << 20), 32 << 20, 300)),
              (Actions{{trace::MemoryAction::alloc, 1 << 20}}));
    EXPECT_EQ(actions_of(from_pool(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, pool, 32 << 20, 400)),
              (Actions{{trace::MemoryAction::free_completed, 1 << 20}}));  // freed into the pool, still reserved
    // Trimmed to 2 MiB, then destroyed: 30 MiB then 2 MiB released.
    EXPECT_EQ(
        actions_of(memory.pool(pool_record(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED, pool, 2 << 20, 500), 0)),
        (Actions{{trace::MemoryAction::segment_free, 30 << 20}}));
    EXPECT_EQ(actions_of(
                  memory.pool(pool_record(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED, pool, 2 << 20, 600), 0)),
              (Actions{{trace::MemoryAction::segment_free, 2 << 20}}));
    // A pool imported from another process reserves nothing here.
    auto imported = pool_record(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED, pool + (64 << 20), 8 << 20, 700);
    imported.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_IMPORTED;
    EXPECT_TRUE(memory.pool(imported, 0).empty());
}

// The records of a small program in the order CUPTI delivers them, through the
// recorder into a file: the file's events replay to the peak the program had
// (cudaMalloc 4 MiB, cudaMallocAsync 1 MiB from a pool of 8 MiB, cudaMalloc 2 MiB,
// frees), each on the thread of its call.
TEST(CuptiRecords, RecorderWritesMemoryEventsReplayingToThePeak) {
    std::string path = test::temp_path("memory_records.db");
    collector::MemoryCallThreads calls;
    {
        trace::RunInfo run;
        store::TraceWriter writer(path, run);
        ActivityRecorder recorder(writer, &calls);
        const trace::ThreadId main_thread = writer.register_thread({0, 1, 1, "main"});
        const trace::ThreadId worker = writer.register_thread({0, 1, 2, "worker"});
        calls.note(1, main_thread);
        calls.note(2, worker);
        calls.note(3, main_thread);
        calls.note(4, main_thread);
        calls.note(5, worker);
        calls.note(6, main_thread);
        auto record = [&](auto r, std::uint32_t correlation) {
            r.correlationId = correlation;
            return feed(recorder, r);
        };
        EXPECT_TRUE(record(memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x1000000, 4 << 20, 100), 1));
        auto async = memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x9000000, 1 << 20, 200);
        async.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
        async.memoryPoolConfig.address = 0x9000000;
        async.memoryPoolConfig.pool.size = 8 << 20;
        EXPECT_TRUE(record(async, 2));
        EXPECT_TRUE(record(memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x2000000, 2 << 20, 300), 3));
        EXPECT_TRUE(record(memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, 0x1000000, 4 << 20, 400), 4));
        async.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
        async.timestamp = 500;
        EXPECT_TRUE(record(async, 5));
        EXPECT_TRUE(record(pool_record(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED, 0x9000000, 0, 600), 6));
        auto pinned = memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x3000000, 64 << 20, 650);
        pinned.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
        EXPECT_FALSE(record(pinned, 7));
        EXPECT_EQ(recorder.memory_events(), 10u);
        writer.close();
    }
    EXPECT_EQ(calls.pending(), 0u);  // every call's thread was taken by its record
    store::TraceReader reader(path);
    std::int64_t allocated = 0, reserved = 0, peak_allocated = 0, peak_reserved = 0;
    std::map<std::uint64_t, std::string> thread_of_alloc;
    reader.for_each_memory_event([&](const trace::MemoryEvent& event) {
        EXPECT_EQ(event.device_id, 1);
        switch (event.action) {
            case trace::MemoryAction::alloc:
                allocated += event.bytes;
                thread_of_alloc[event.address] = reader.thread(event.thread_id)->name;
                break;
            case trace::MemoryAction::free_completed:
                allocated -= event.bytes;
                break;
            case trace::MemoryAction::segment_alloc:
                reserved += event.bytes;
                break;
            case trace::MemoryAction::segment_free:
                reserved -= event.bytes;
                break;
            default:
                ADD_FAILURE() << "unexpected action " << trace::memory_action_name(event.action);
        }
        peak_allocated = std::max(peak_allocated, allocated);
        peak_reserved = std::max(peak_reserved, reserved);
        return true;
    });
    EXPECT_EQ(peak_allocated, (4 << 20) + (1 << 20) + (2 << 20));  // at 300
    EXPECT_EQ(peak_reserved, (4 << 20) + (8 << 20) + (2 << 20));
    EXPECT_EQ(allocated, 2 << 20);
    EXPECT_EQ(reserved, 2 << 20);
    EXPECT_EQ(thread_of_alloc,
              (std::map<std::uint64_t, std::string>{{0x1000000, "main"}, {0x9000000, "worker"}, {0x2000000, "main"}}));
    store::remove_trace_files(path);
}

}  // namespace
}  // namespace ember
