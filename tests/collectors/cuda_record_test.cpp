// cuda_record_test.cpp (gpu): samples/cuda_basics under `ember record`. The file
// holds exactly the program's GPU work: 10 saxpy kernels of <<<4096, 256>>>, one
// pageable and one pinned 4 MiB HtoD copy, one pinned 4 MiB DtoH copy; every
// kernel and copy correlates to its API call and starts after that call began
// (blocking copies lie inside it); no record was dropped. With --cuda-memory, its two
// cudaMalloc'd 4 MiB buffers are the device's whole memory history: the gpu_memory
// report's peak is their sum, and each allocation is on the thread that called
// cudaMalloc.
#include "profiler/analysis/gpu_memory.h"
#include "profiler/store/reader.h"
#include "tests/collectors/subprocess.h"
#include "tests/support/event_lists.h"
#include "tests/support/gpu.h"

#include <gtest/gtest.h>

namespace ember {
namespace {

TEST(CollectorCuda, CudaBasicsUnderEmberRecord) {
    EMBER_REQUIRE_GPU();
    const int elements = 1 << 20;
    const int iterations = 10;
    std::string path = test::temp_path("cuda_basics.db");
    std::string output;
    int code = test::run({test::bin("ember"), "record", "-o", path, "--", test::bin("sample_cuda_basics"),
                          std::to_string(elements), std::to_string(iterations)},
                         &output, {}, 120.0);
    ASSERT_EQ(code, 0) << output;
    store::TraceReader reader(path);
    ASSERT_TRUE(reader.complete());
    EXPECT_EQ(reader.total_dropped(), 0u);
    ASSERT_GE(reader.devices().size(), 1u);

    const std::vector<trace::KernelEvent> kernels =
        test_support::all_events(reader, &store::TraceReader::for_each_kernel);
    ASSERT_EQ(kernels.size(), static_cast<std::size_t>(iterations)) << output;
    for (const trace::KernelEvent& kernel : kernels) {
        EXPECT_NE(std::string(reader.string(kernel.name_id)).find("saxpy"), std::string::npos);
        EXPECT_EQ(kernel.launch.grid_x, static_cast<std::uint32_t>((elements + 255) / 256));
        EXPECT_EQ(kernel.launch.grid_y, 1u);
        EXPECT_EQ(kernel.launch.block_x, 256u);
        EXPECT_EQ(kernel.launch.block_y, 1u);
        std::optional<trace::ApiEvent> launch_call = reader.api_call_by_correlation(kernel.correlation_id);
        ASSERT_TRUE(launch_call.has_value()) << "kernel without its launching API call";
        EXPECT_NE(std::string(reader.string(launch_call->name_id)).find("Launch"), std::string::npos);
        EXPECT_GE(kernel.start_ns, launch_call->start_ns) << "kernel began before the call that launched it";
        EXPECT_GT(kernel.end_ns, kernel.start_ns);
    }

    const std::vector<trace::MemcpyEvent> copies =
        test_support::all_events(reader, &store::TraceReader::for_each_memcpy);
    const std::uint64_t bytes = std::uint64_t(elements) * sizeof(float);
    int pageable_htod = 0, pinned_htod = 0, pinned_dtoh = 0;
    std::uint64_t htod_bytes = 0, dtoh_bytes = 0;
    for (const trace::MemcpyEvent& copy : copies) {
        if (copy.direction == trace::MemcpyDirection::host_to_device) {
            htod_bytes += copy.bytes;
            if (copy.source_kind == trace::MemoryKind::pageable) ++pageable_htod;
            if (copy.source_kind == trace::MemoryKind::pinned) ++pinned_htod;
        } else if (copy.direction == trace::MemcpyDirection::device_to_host) {
            dtoh_bytes += copy.bytes;
            if (copy.destination_kind == trace::MemoryKind::pinned) ++pinned_dtoh;
        }
        std::optional<trace::ApiEvent> call = reader.api_call_by_correlation(copy.correlation_id);
        ASSERT_TRUE(call.has_value()) << "copy without its API call";
        EXPECT_GE(copy.start_ns, call->start_ns);
        // cudaMemcpy returns once the copy is done, except from pageable host memory to
        // the device: it returns when the data is in the driver's staging buffer, and the
        // DMA may finish later (CUDA Runtime API, "API synchronization behavior"; seen on
        // an H200: 17 us after the call).
        const bool staged =
            copy.direction == trace::MemcpyDirection::host_to_device && copy.source_kind == trace::MemoryKind::pageable;
        if (!staged) EXPECT_LE(copy.end_ns, call->end_ns);
    }
    EXPECT_EQ(htod_bytes, 2 * bytes);
    EXPECT_EQ(dtoh_bytes, bytes);
    EXPECT_EQ(pageable_htod, 1);
    EXPECT_EQ(pinned_htod, 1);
    EXPECT_EQ(pinned_dtoh, 1);
    store::remove_trace_files(path);
}

TEST(CollectorCuda, CudaMemoryRecordsEveryAllocationAndFree) {
    EMBER_REQUIRE_GPU();
    const int elements = 1 << 20;
    const std::int64_t bytes = std::int64_t(elements) * sizeof(float);
    std::string path = test::temp_path("cuda_basics_memory.db");
    std::string output;
    int code = test::run({test::bin("ember"), "record", "--cuda-memory", "-o", path, "--",
                          test::bin("sample_cuda_basics"), std::to_string(elements), "2"},
                         &output, {}, 120.0);
    ASSERT_EQ(code, 0) << output;
    store::TraceReader reader(path);
    ASSERT_TRUE(reader.complete());
    // The hand replay: cudaMalloc(dx), cudaMalloc(dy), cudaFree(dx), cudaFree(dy); the
    // pinned host buffer (cudaMallocHost) is not device memory.
    const std::vector<trace::MemoryEvent> events = test_support::all_memory_events(reader);
    int allocs = 0, frees = 0;
    for (const trace::MemoryEvent& event : events) {
        if (event.action == trace::MemoryAction::alloc) {
            ++allocs;
            EXPECT_EQ(event.bytes, bytes);
            ASSERT_NE(event.thread_id, 0u) << "an allocation without the thread that called cudaMalloc";
        }
        if (event.action == trace::MemoryAction::free_completed) ++frees;
    }
    EXPECT_EQ(allocs, 2) << output;
    EXPECT_EQ(frees, 2);
    const analysis::GpuMemoryReport report = analysis::gpu_memory(reader);
    ASSERT_EQ(report.devices.size(), 1u);
    EXPECT_EQ(report.devices[0].peak_allocated_bytes, 2 * bytes);
    EXPECT_EQ(report.devices[0].peak_reserved_bytes, 2 * bytes);  // cudaMalloc reserves what it allocates
    store::remove_trace_files(path);
}

}  // namespace
}  // namespace ember
