// cupti_records_test.cpp: CUPTI activity records -> trace events, with hand-made
// records (no GPU needed): each field lands where docs/trace-schema.md says, memory
// kinds tell pinned from pageable, names are demangled, streams are registered once,
// graph launches keep their graph and node ids.
#include "collectors/cupti_records.h"
#include "profiler/store/reader.h"
#include "profiler/store/writer.h"
#include "tests/collectors/subprocess.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

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
    EXPECT_EQ(collector::direction_from_cupti(CUPTI_ACTIVITY_MEMCPY_KIND_DTOD), trace::MemcpyDirection::device_to_device);
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
    record.correlationId = 5;          // the driver call
    record.runtimeCorrelationId = 4;   // cudaMemcpy
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
    std::remove(path.c_str());
}

}  // namespace
}  // namespace ember
