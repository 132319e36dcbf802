// nsys_test.cpp: every Nsight Systems mapping rule on hand-built exports
// (import_fixtures.h) of schema 2.x and of 3.x (ENUM_* tables with other numbers,
// extra columns, tables this importer does not read): API names as nsys stats shows
// them, kernel names by choice, copy kinds, memsets, synchronizations, NVTX domains,
// categories, payloads, colors, thread names, devices, the session's wall clock; the
// schema version under either metadata table name, or none, never refused; the CPU
// side (sampled call chains, OS runtime calls) and files without CUDA tables.
#include "profiler/analysis/cpu_profile.h"
#include "profiler/analysis/duration_summary.h"
#include "profiler/analysis/gpu_memory.h"
#include "profiler/import/import.h"
#include "profiler/store/reader.h"
#include "tests/profiler/import/event_lists.h"
#include "tests/profiler/import/import_fixtures.h"
#include "tests/profiler/import/import_steps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fmt/format.h>
#include <map>
#include <tuple>
#include <vector>

namespace {

using namespace ember;
using import_test::all_events;
using import_test::TempDir;

// The nsys fixture with its CPU side (samples, OS runtime calls, scheduling) as
// dir/r.sqlite.
void write_cpu_side_fixture(const TempDir& dir) {
    import_test::NsysFixtureOptions options;
    options.with_cpu_side = true;
    import_test::write_nsys_fixture(dir.path("r.sqlite"), options);
}

class NsysSchemas : public ::testing::TestWithParam<int> {};

TEST_P(NsysSchemas, EveryTableMapsToItsEmberEvents) {
    TempDir dir;
    import_test::NsysFixtureOptions options;
    options.schema_major = GetParam();
    import_test::write_nsys_fixture(dir.path("report.sqlite"), options);
    importing::ImportedFile imported =
        import_test::import_detected(dir.path("report.sqlite"), dir.path("report.db"), importing::SourceFormat::nsys);
    store::TraceReader reader(dir.path("report.db"));

    // The run: the session's wall clock and window, the traced process.
    EXPECT_EQ(reader.run().clock_offset_to_wall_ns, 1600000000000000000ll);
    EXPECT_EQ(reader.run().start_ns, 10);
    EXPECT_EQ(reader.run().end_ns, 5000);
    EXPECT_EQ(reader.run().pid, 4242);
    ASSERT_EQ(reader.processes().size(), 1u);
    EXPECT_EQ(reader.processes()[0].name, "./saxpy");
    ASSERT_EQ(reader.devices().size(), 1u);
    const trace::DeviceInfo& gpu = reader.devices()[0];
    EXPECT_EQ(gpu.name, "NVIDIA A100-SXM4-40GB");
    EXPECT_EQ(gpu.uuid, "GPU-d9a9a4ed-e78c-4eb8-5db5-817c57801cb5");
    EXPECT_EQ(gpu.multiprocessor_count, 108);
    EXPECT_EQ(gpu.compute_capability_major, 8);
    EXPECT_EQ(gpu.memory_bytes, 42331013120);
    EXPECT_EQ(gpu.memory_bandwidth_bytes_per_second, 1555200000000.0);

    // API calls: names without nsys' version suffix, on the thread globalTid packs.
    auto calls = all_events(reader, &store::TraceReader::for_each_api_call);
    ASSERT_EQ(calls.size(), 5u);
    std::vector<std::string> names;
    for (const auto& call : calls) names.emplace_back(reader.string(call.name_id));
    EXPECT_EQ(names, (std::vector<std::string>{"cudaMalloc", "cudaLaunchKernel", "cudaMemcpy", "cudaMemset",
                                               "cudaDeviceSynchronize"}));
    const trace::ThreadInfo* thread = reader.thread(calls[0].thread_id);
    ASSERT_NE(thread, nullptr);
    EXPECT_EQ(thread->pid, 4242);
    EXPECT_EQ(thread->tid, 4242);
    EXPECT_EQ(thread->name, "MPI Rank 0");  // nvtxNameOsThread wins over ThreadNames

    auto kernels = all_events(reader, &store::TraceReader::for_each_kernel);
    ASSERT_EQ(kernels.size(), 1u);
    EXPECT_EQ(reader.string(kernels[0].name_id), "saxpy(float*, float*)");
    EXPECT_EQ(kernels[0].launch, (trace::LaunchConfig{2, 1, 1, 512, 1, 1, 26, 16, 32}));
    EXPECT_EQ(kernels[0].correlation_id, 2u);
    EXPECT_EQ(kernels[0].start_ns, 400);
    EXPECT_EQ(kernels[0].end_ns, 1400);
    const trace::StreamInfo* stream = reader.stream(kernels[0].stream_id);
    EXPECT_EQ(stream->cuda_stream_id, 7u);
    EXPECT_EQ(stream->context_id, 1u);
    EXPECT_EQ(stream->name, "default");  // the context's NULL stream

    import_test::expect_one_memcpy(reader, trace::MemcpyDirection::host_to_device, trace::MemoryKind::pageable,
                                   trace::MemoryKind::device, 4096);
    auto sets = all_events(reader, &store::TraceReader::for_each_memset);
    ASSERT_EQ(sets.size(), 1u);
    EXPECT_EQ(sets[0].bytes, 256u);
    EXPECT_EQ(sets[0].memory_kind, trace::MemoryKind::device);
    auto syncs = all_events(reader, &store::TraceReader::for_each_sync);
    ASSERT_EQ(syncs.size(), 1u);
    EXPECT_EQ(syncs[0].kind, trace::SyncKind::context_synchronize);
    EXPECT_EQ(syncs[0].stream_id, 0u);  // a context-wide wait: the whole device
    EXPECT_EQ(imported.counts.flows, 3);
    EXPECT_EQ(imported.counts.unlinked_gpu_events, 0);

    // NVTX: domains by name, push/pop nested by time, start/end unnested, marks, payloads.
    std::map<std::string, trace::RangeEvent> ranges;
    for (const auto& range : all_events(reader, &store::TraceReader::for_each_range)) {
        ranges[std::string(reader.string(range.name_id))] = range;
    }
    ASSERT_EQ(ranges.size(), 3u);
    const trace::RangeEvent& send = ranges.at("MPI_Send");
    EXPECT_EQ(reader.string(send.domain_id), "MPI");
    EXPECT_EQ(send.depth, 0);
    EXPECT_EQ(send.category, 3u);
    EXPECT_EQ(send.payload, trace::Payload::of_integer(7));
    const trace::RangeEvent& inner = ranges.at("inner");
    EXPECT_EQ(inner.domain_id, trace::kNoString);
    EXPECT_EQ(inner.depth, 1);
    EXPECT_EQ(inner.parent_range_id, send.range_id);
    EXPECT_EQ(inner.color, 0xFF0000FFu);
    EXPECT_EQ(ranges.at("phase").depth, -1);
    EXPECT_EQ(reader.nvtx_category_name(send.domain_id, 3), "communication");
    auto marks = all_events(reader, &store::TraceReader::for_each_mark);
    ASSERT_EQ(marks.size(), 1u);
    EXPECT_EQ(reader.string(marks[0].name_id), "checkpoint");
    EXPECT_EQ(marks[0].time_ns, 1950);

    // The NVTX summary names the domain the way nsys stats does (DOMAIN:name).
    for (const auto& row : analysis::range_summary(reader)) {
        if (row.name == "MPI_Send") {
            EXPECT_EQ(row.domain + ":" + row.name, "MPI:MPI_Send");
        }
        if (row.name == "phase") {
            EXPECT_EQ(row.style, "start/end");
        }
    }
    if (GetParam() >= 3) {
        EXPECT_EQ(imported.counts.skipped.at("CUPTI_ACTIVITY_KIND_GRAPH_TRACE rows (not imported)"), 2);
    }
}

INSTANTIATE_TEST_SUITE_P(Versions, NsysSchemas, ::testing::Values(2, 3), [](const ::testing::TestParamInfo<int>& info) {
    return "schema" + std::to_string(info.param);
});

TEST(Nsys, MemorySummariesNameOperationsAsNsysDoes) {
    TempDir dir;
    import_test::write_nsys_fixture(dir.path("r.sqlite"));
    importing::import_file(dir.path("r.sqlite"), dir.path("r.db"));
    store::TraceReader reader(dir.path("r.db"));
    auto time = analysis::memory_time_summary(reader);
    ASSERT_EQ(time.size(), 2u);
    EXPECT_EQ(time[0].name, "[CUDA memcpy HtoD]");
    EXPECT_EQ(time[0].stats.total_ns, 80);
    EXPECT_EQ(time[1].name, "[CUDA memset]");
    EXPECT_EQ(time[1].stats.total_ns, 6);
    auto size = analysis::memory_size_summary(reader);
    ASSERT_EQ(size.size(), 2u);
    EXPECT_EQ(size[0].name, "[CUDA memcpy HtoD]");
    EXPECT_EQ(size[0].stats.total_ns, 4096);  // bytes
    EXPECT_EQ(size[1].stats.median_ns, 256.0);
}

TEST(Nsys, KernelNamesDemangledShortOrMangled) {
    TempDir dir;
    import_test::write_nsys_fixture(dir.path("r.sqlite"));
    for (auto [style, expected] : {std::pair{importing::KernelNameStyle::demangled, "saxpy(float*, float*)"},
                                   std::pair{importing::KernelNameStyle::short_name, "saxpy"},
                                   std::pair{importing::KernelNameStyle::mangled, "_Z5saxpyPfS_"}}) {
        importing::ImportOptions options;
        options.kernel_names = style;
        importing::import_file(dir.path("r.sqlite"), dir.path("r.db"), options);
        store::TraceReader reader(dir.path("r.db"));
        auto kernels = all_events(reader, &store::TraceReader::for_each_kernel);
        ASSERT_EQ(kernels.size(), 1u);
        EXPECT_EQ(reader.string(kernels[0].name_id), expected);
    }
}

TEST(Nsys, TablesThatAreAbsentAreSimplyEmpty) {
    TempDir dir;
    import_test::write_nsys_fixture(dir.path("r.sqlite"));
    import_test::exec_sql(dir.path("r.sqlite"),
                          "DROP TABLE CUPTI_ACTIVITY_KIND_MEMSET; DROP TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION; "
                          "DROP TABLE NVTX_EVENTS; DROP TABLE TARGET_INFO_GPU; "
                          "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN dynamicSharedMemory;");
    importing::ImportedFile imported = importing::import_file(dir.path("r.sqlite"), dir.path("r.db"));
    EXPECT_EQ(imported.counts.memsets, 0);
    EXPECT_EQ(imported.counts.ranges, 0);
    EXPECT_EQ(imported.counts.kernels, 1);
    store::TraceReader reader(dir.path("r.db"));
    auto kernels = all_events(reader, &store::TraceReader::for_each_kernel);
    EXPECT_EQ(kernels[0].launch.dynamic_shared_bytes, 0u);  // an optional column the table lacks
    ASSERT_EQ(reader.devices().size(), 1u);                 // seen in events only: a bare row
    EXPECT_EQ(reader.devices()[0].name, "");
}

TEST(Nsys, UnendedRangesAreCountedNotInvented) {
    TempDir dir;
    import_test::write_nsys_fixture(dir.path("r.sqlite"));
    import_test::exec_sql(dir.path("r.sqlite"), "UPDATE NVTX_EVENTS SET end = NULL WHERE text = 'inner';");
    importing::ImportedFile imported = importing::import_file(dir.path("r.sqlite"), dir.path("r.db"));
    EXPECT_EQ(imported.counts.ranges, 2);
    EXPECT_EQ(imported.counts.skipped.at("NVTX range never ended (end is NULL)"), 1);
}

// --- Schema versions: read by what the file holds ---------------------------------------

struct SchemaCase {
    const char* metadata_table;  // "" = no metadata table
    const char* version;
    bool newer_than_seen;
};

class NsysSchemaVersions : public ::testing::TestWithParam<SchemaCase> {};

TEST_P(NsysSchemaVersions, AnyVersionImportsANewerOneSaysSoInOneLine) {
    const SchemaCase& param = GetParam();
    TempDir dir;
    import_test::NsysFixtureOptions options;
    options.schema_major = 3;
    options.with_metadata_table = param.metadata_table[0] != '\0';
    if (options.with_metadata_table) options.metadata_table = param.metadata_table;
    options.schema_version_text = param.version;
    import_test::write_nsys_fixture(dir.path("r.sqlite"), options);
    importing::ImportedFile imported =
        import_test::import_detected(dir.path("r.sqlite"), dir.path("r.db"), importing::SourceFormat::nsys);
    EXPECT_EQ(imported.counts.kernels, 1);
    EXPECT_EQ(imported.counts.api_calls, 5);
    if (!param.newer_than_seen) {
        EXPECT_TRUE(imported.counts.notes.empty()) << imported.counts.notes.front();
        return;
    }
    ASSERT_EQ(imported.counts.notes.size(), 1u);
    EXPECT_NE(imported.counts.notes[0].find(std::string("schema ") + param.version + " is newer"), std::string::npos)
        << imported.counts.notes[0];
    store::TraceReader reader(dir.path("r.db"));
    EXPECT_EQ(reader.metadata(importing::import_metadata_key::notes), imported.counts.notes[0]);
}

INSTANTIATE_TEST_SUITE_P(
    Versions, NsysSchemaVersions,
    ::testing::Values(SchemaCase{"EXPORT_META_DATA", "2.7.0", false}, SchemaCase{"EXPORT_META_DATA", "3.0.0", false},
                      SchemaCase{"META_DATA_EXPORT", "3.4.0", false}, SchemaCase{"META_DATA_EXPORT", "3.25.0", false},
                      SchemaCase{"META_DATA_EXPORT", "3.26.1", true}, SchemaCase{"META_DATA_EXPORT", "4.1.0", true},
                      SchemaCase{"EXPORT_META_DATA", "1.2.0", false}, SchemaCase{"", "", false}));

// --- The CPU side ----------------------------------------------------------------------

TEST(Nsys, CpuSamplesKeepTheirCallChainsOutermostFirst) {
    TempDir dir;
    write_cpu_side_fixture(dir);
    importing::ImportedFile imported = importing::import_file(dir.path("r.sqlite"), dir.path("r.db"));
    EXPECT_EQ(imported.counts.stack_samples, 3);
    EXPECT_EQ(imported.counts.skipped.at("CPU sample without a call chain (no SAMPLING_CALLCHAINS rows)"), 1);
    EXPECT_EQ(imported.counts.skipped.at("SAMPLING_CALLCHAINS rows of no sample in COMPOSITE_EVENTS"), 1);
    EXPECT_FALSE(imported.counts.skipped.count("SCHED_EVENTS rows (not imported)"));
    EXPECT_EQ(imported.counts.skipped.at("OSRT_CALLCHAINS rows (not imported)"), 2);
    EXPECT_FALSE(imported.counts.skipped.count("COMPOSITE_EVENTS rows (not imported)"));
    EXPECT_FALSE(imported.counts.skipped.count("OSRT_API rows (not imported)"));

    store::TraceReader reader(dir.path("r.db"));
    auto samples = all_events(reader, &store::TraceReader::for_each_stack_sample);
    ASSERT_EQ(samples.size(), 3u);
    EXPECT_EQ(samples[0].time_ns, 2100);
    EXPECT_EQ(samples[0].stack_id, samples[1].stack_id);  // the same chain is one stack node
    auto frames = reader.stack_frames(samples[0].stack_id);
    ASSERT_EQ(frames.size(), 2u);
    EXPECT_EQ(frames[0].function, "main");
    EXPECT_EQ(frames[0].module, "/app/saxpy");
    EXPECT_EQ(frames[0].address, 4096u);
    EXPECT_EQ(frames[1].function, "compute");
    auto lock = reader.stack_frames(samples[2].stack_id);
    ASSERT_EQ(lock.size(), 2u);
    EXPECT_EQ(lock[0].function, "main");
    EXPECT_EQ(lock[1].function, "pthread_mutex_lock");
    EXPECT_EQ(lock[1].module, "/usr/lib/libc.so.6");
    const trace::ThreadInfo* thread = reader.thread(samples[0].thread_id);
    ASSERT_NE(thread, nullptr);
    EXPECT_EQ(thread->tid, 4242);

    // The CPU profile of `ember stats` reads them: compute 2 self samples, main 3 in total.
    analysis::CpuProfile profile = analysis::cpu_profile(reader);
    EXPECT_EQ(profile.samples, 3);
    std::map<std::string, std::pair<std::int64_t, std::int64_t>> by_function;
    for (const auto& row : profile.functions) by_function[row.function] = {row.self_samples, row.total_samples};
    EXPECT_EQ(by_function["compute"], std::make_pair(std::int64_t{2}, std::int64_t{2}));
    EXPECT_EQ(by_function["main"], std::make_pair(std::int64_t{0}, std::int64_t{3}));
    EXPECT_EQ(by_function["pthread_mutex_lock"], std::make_pair(std::int64_t{1}, std::int64_t{1}));
}

// SCHED_EVENTS -> a 0/1 counter per thread; CUDA_GPU_MEMORY_USAGE_EVENTS -> memory
// events of device memory only (cudaMalloc reserves what it allocates), on the thread
// of the runtime call with the row's correlation id.
TEST(Nsys, SchedulingIsACounterAndCudaMemoryUsageIsMemoryEvents) {
    TempDir dir;
    write_cpu_side_fixture(dir);
    importing::ImportedFile imported = importing::import_file(dir.path("r.sqlite"), dir.path("r.db"));
    EXPECT_EQ(imported.counts.counter_samples, 5);
    EXPECT_EQ(imported.counts.memory_events, 6);
    store::TraceReader reader(dir.path("r.db"));
    std::map<std::string, trace::CounterInfo> counters;
    for (const trace::CounterInfo& counter : reader.counters()) counters[counter.name] = counter;
    ASSERT_TRUE(counters.count("on CPU (tid 4242)"));
    EXPECT_EQ(counters.size(), 1u);
    EXPECT_EQ(counters["on CPU (tid 4242)"].unit, "running");
    EXPECT_EQ(counters["on CPU (tid 4242)"].device_id, trace::kNoDevice);
    std::map<trace::CounterId, std::vector<std::pair<trace::TimeNs, double>>> series;
    for (const trace::CounterSample& sample : all_events(reader, &store::TraceReader::for_each_counter_sample)) {
        series[sample.counter_id].emplace_back(sample.time_ns, sample.value);
    }
    using Series = std::vector<std::pair<trace::TimeNs, double>>;
    EXPECT_EQ(series[counters["on CPU (tid 4242)"].counter_id],
              (Series{{5, 1.0}, {2050, 0.0}, {2060, 1.0}, {2950, 0.0}, {2960, 1.0}}));
    using Event = std::tuple<trace::TimeNs, trace::MemoryAction, std::uint64_t, std::int64_t>;
    std::vector<Event> events;
    const std::vector<trace::MemoryEvent> memory_events = test_support::all_memory_events(reader);
    for (const trace::MemoryEvent& event : memory_events) {
        events.emplace_back(event.time_ns, event.action, event.address, event.bytes);
        EXPECT_EQ(event.device_id, 0);
        ASSERT_NE(reader.thread(event.thread_id), nullptr);
        EXPECT_EQ(reader.thread(event.thread_id)->tid, 4242);  // the cudaMalloc / cudaFree call's
    }
    std::sort(events.begin(), events.end());
    using A = trace::MemoryAction;
    EXPECT_EQ(events, (std::vector<Event>{{1000, A::alloc, 4096, 4194304},
                                          {1000, A::segment_alloc, 4096, 4194304},
                                          {1100, A::alloc, 8192, 1048576},
                                          {1100, A::segment_alloc, 8192, 1048576},
                                          {2500, A::free_completed, 4096, 4194304},
                                          {2500, A::segment_free, 4096, 4194304}}));
}

// `nsys profile --cuda-memory-usage=true` of a program on two GPUs, two threads:
// CUDA_GPU_MEMORY_USAGE_EVENTS and CUDA_GPU_MEMORY_POOL_EVENTS with the columns of an
// nsys 2024-2025 export (streamId came in 2024; the layout before it lacks only that
// column), and the ENUM_CUDA_DEV_MEM_EVENT_OPER / ENUM_CUDA_MEMPOOL_OPER /
// ENUM_CUDA_MEM_KIND values of the real exports in ../shared/real-traces/nsys-versions.
struct MemoryRow {
    std::int64_t start;
    int device;
    std::uint64_t address;
    std::int64_t bytes;
    int mem_kind;   // ENUM_CUDA_MEM_KIND: 1 pinned, 2 device, 4 managed
    int operation;  // ENUM_CUDA_DEV_MEM_EVENT_OPER: 0 allocation, 1 deallocation
    int correlation;
    std::uint64_t pool;      // localMemoryPoolAddress, 0 = NULL
    std::int64_t pool_size;  // localMemoryPoolSize
};

const std::int64_t MiB = 1 << 20;
const std::vector<MemoryRow> kMemoryRows = {
    {1000, 0, 0xA00000, 4 * MiB, 2, 0, 11, 0, 0},                // cudaMalloc on thread A
    {1100, 0, 0xB00000, 1 * MiB, 2, 0, 12, 0, 0},                // cudaMalloc on thread B
    {1150, 0, 0x7000000, 64 * MiB, 1, 0, 13, 0, 0},              // cudaMallocHost: not device memory
    {1200, 0, 0xC00000, 2 * MiB, 2, 0, 14, 0xC00000, 32 * MiB},  // cudaMallocAsync, the pool grows to 32 MiB
    {1300, 0, 0xA00000, 4 * MiB, 2, 1, 15, 0, 0},                // cudaFree
    {1400, 0, 0xD00000, 3 * MiB, 2, 1, 16, 0, 0},                // cudaFree of a block allocated before the capture
    {1500, 0, 0xC00000, 2 * MiB, 2, 1, 17, 0xC00000, 32 * MiB},  // cudaFreeAsync: back into the pool
    {2000, 1, 0xE00000, 8 * MiB, 2, 0, 18, 0, 0},                // cudaMalloc on GPU 1, never freed
    {2100, 1, 0x9000000, 16 * MiB, 4, 0, 19, 0, 0},              // cudaMallocManaged: not device memory
};

void write_memory_usage_export(const std::string& path) {
    const std::int64_t pid = 4242;
    const std::int64_t global_pid = pid << 24;
    const std::int64_t thread_a = global_pid | 4242, thread_b = global_pid | 4243;
    std::string sql = "BEGIN;";
    sql += "CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);";
    sql +=
        "INSERT INTO StringIds VALUES (1, 'cudaMalloc_v3020'), (2, 'cudaFree_v3020'), (3, 'cudaMallocAsync_v11020'),"
        "(4, 'cudaFreeAsync_v11020'), (5, 'cudaMallocHost_v3020'), (6, 'cudaMallocManaged_v6000'),"
        "(7, 'cudaMemPoolTrimTo_v11020'), (8, 'cudaMemPoolDestroy_v11020'), (9, 'cudaMemPoolCreate_v11020');";
    sql += "CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);";
    sql +=
        "INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.13.2'), ('EXPORT_SCHEMA_VERSION_MAJOR', '3'),"
        "('EXPORT_SCHEMA_VERSION_MINOR', '13');";
    sql +=
        "CREATE TABLE ENUM_CUDA_DEV_MEM_EVENT_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, label TEXT);";
    sql +=
        "INSERT INTO ENUM_CUDA_DEV_MEM_EVENT_OPER VALUES (0, 'CUDA_DEV_MEM_EVENT_OPR_ALLOCATION', 'Allocation'),"
        "(1, 'CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION', 'Deallocation');";
    sql += "CREATE TABLE ENUM_CUDA_MEMPOOL_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, label TEXT);";
    sql +=
        "INSERT INTO ENUM_CUDA_MEMPOOL_OPER VALUES (0, 'CUDA_MEMPOOL_OPERATION_TYPE_INVALID', 'Invalid'),"
        "(1, 'CUDA_MEMPOOL_OPERATION_TYPE_CREATED', 'Created'), (2, 'CUDA_MEMPOOL_OPERATION_TYPE_DESTROYED', 'Destroyed'),"
        "(3, 'CUDA_MEMPOOL_OPERATION_TYPE_TRIMMED', 'Trimmed');";
    sql += "CREATE TABLE ENUM_CUDA_MEMPOOL_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, label TEXT);";
    sql +=
        "INSERT INTO ENUM_CUDA_MEMPOOL_TYPE VALUES (0, 'CUDA_MEMPOOL_TYPE_INVALID', 'Invalid'),"
        "(1, 'CUDA_MEMPOOL_TYPE_LOCAL', 'Local'), (2, 'CUDA_MEMPOOL_TYPE_IMPORTED', 'Imported');";
    sql += "CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, label TEXT);";
    sql +=
        "INSERT INTO ENUM_CUDA_MEM_KIND VALUES (0, 'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE', 'Pageable'),"
        "(1, 'CUDA_MEMOPR_MEMORY_KIND_PINNED', 'Pinned'), (2, 'CUDA_MEMOPR_MEMORY_KIND_DEVICE', 'Device'),"
        "(3, 'CUDA_MEMOPR_MEMORY_KIND_ARRAY', 'Array'), (4, 'CUDA_MEMOPR_MEMORY_KIND_MANAGED', 'Managed'),"
        "(5, 'CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC', 'Device Static'),"
        "(6, 'CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC', 'Managed Static'), (7, 'CUDA_MEMOPR_MEMORY_KIND_UNKNOWN', 'Unknown');";
    sql +=
        "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER "
        "NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, "
        "callchainId INTEGER);";
    sql += fmt::format(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (990, 1010, 0, {0}, 11, 1, 0, NULL),"
        "(1090, 1110, 0, {1}, 12, 1, 0, NULL), (1140, 1160, 0, {0}, 13, 5, 0, NULL),"
        "(1190, 1210, 0, {1}, 14, 3, 0, NULL), (1290, 1310, 0, {0}, 15, 2, 0, NULL),"
        "(1390, 1410, 0, {0}, 16, 2, 0, NULL), (1490, 1510, 0, {1}, 17, 4, 0, NULL),"
        "(1990, 2010, 0, {0}, 18, 1, 0, NULL), (2090, 2110, 0, {0}, 19, 6, 0, NULL),"
        "(890, 910, 0, {1}, 20, 9, 0, NULL), (1590, 1610, 0, {1}, 21, 7, 0, NULL),"
        "(1690, 1710, 0, {1}, 22, 8, 0, NULL);",
        thread_a, thread_b);
    sql +=
        "CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER NOT NULL, globalPid INTEGER NOT NULL, deviceId "
        "INTEGER NOT NULL, contextId INTEGER NOT NULL, address INTEGER NOT NULL, pc INTEGER NOT NULL, bytes INTEGER "
        "NOT NULL, memKind INTEGER NOT NULL, memoryOperationType INTEGER NOT NULL, name TEXT, correlationId INTEGER, "
        "streamId INTEGER, localMemoryPoolAddress INTEGER, localMemoryPoolReleaseThreshold INTEGER, "
        "localMemoryPoolSize INTEGER, localMemoryPoolUtilizedSize INTEGER, importedMemoryPoolAddress INTEGER, "
        "importedMemoryPoolProcessId INTEGER);";
    for (const MemoryRow& row : kMemoryRows) {
        const bool pooled = row.pool != 0;
        sql += fmt::format(
            "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES ({}, {}, {}, 1, {}, 4198400, {}, {}, {}, NULL, "
            "{}, {}, {}, {}, {}, {}, NULL, NULL);",
            row.start, global_pid, row.device, row.address, row.bytes, row.mem_kind, row.operation, row.correlation,
            pooled ? "13" : "NULL", pooled ? std::to_string(row.pool) : "NULL", pooled ? "0" : "NULL",
            pooled ? std::to_string(row.pool_size) : "NULL", pooled ? "2097152" : "NULL");
    }
    sql +=
        "CREATE TABLE CUDA_GPU_MEMORY_POOL_EVENTS (start INTEGER NOT NULL, globalPid INTEGER NOT NULL, deviceId "
        "INTEGER NOT NULL, address INTEGER NOT NULL, operationType INTEGER NOT NULL, poolType INTEGER NOT NULL, "
        "correlationId INTEGER, minBytesToKeep INTEGER, localMemoryPoolReleaseThreshold INTEGER, "
        "localMemoryPoolSize INTEGER, localMemoryPoolUtilizedSize INTEGER);";
    sql += fmt::format(
        "INSERT INTO CUDA_GPU_MEMORY_POOL_EVENTS VALUES (900, {0}, 0, {1}, 1, 1, 20, NULL, 0, 0, 0),"
        "(1600, {0}, 0, {1}, 3, 1, 21, 0, 0, 0, 0), (1700, {0}, 0, {1}, 2, 1, 22, NULL, 0, 0, 0);",
        global_pid, 0xC00000);
    sql += "COMMIT;";
    import_test::exec_sql(path, sql);
}

// The hand replay of kMemoryRows and the pool rows, as a reader of the export would do
// it: device memory only; a free of a block the capture never allocated counts from
// the start; memory not from a pool is reserved as it is allocated; a pool reserves its
// localMemoryPoolSize until trimmed (at 1600, to 0).
struct Replay {
    std::int64_t peak_allocated = 0, peak_reserved = 0;
};
std::map<int, Replay> replay_memory_rows() {
    std::map<int, std::int64_t> allocated, reserved;
    std::map<std::pair<int, std::uint64_t>, bool> live;
    for (const MemoryRow& row : kMemoryRows) {  // blocks freed without an allocation
        if (row.mem_kind != 2) continue;
        if (row.operation == 0)
            live[{row.device, row.address}] = true;
        else if (!live.erase({row.device, row.address})) {
            allocated[row.device] += row.bytes;
            reserved[row.device] += row.bytes;
        }
    }
    std::map<int, Replay> out;
    std::int64_t pool_size = 0;
    for (const auto& [device, bytes] : allocated) out[device] = {bytes, reserved[device]};
    for (const MemoryRow& row : kMemoryRows) {
        if (row.mem_kind != 2) continue;
        const std::int64_t sign = row.operation == 0 ? 1 : -1;
        allocated[row.device] += sign * row.bytes;
        if (row.pool == 0) {
            reserved[row.device] += sign * row.bytes;
        } else {
            reserved[row.device] += row.pool_size - pool_size;
            pool_size = row.pool_size;
        }
        Replay& replay = out[row.device];
        replay.peak_allocated = std::max(replay.peak_allocated, allocated[row.device]);
        replay.peak_reserved = std::max(replay.peak_reserved, reserved[row.device]);
    }
    return out;
}

TEST(Nsys, CudaMemoryUsageEventsReplayToTheirPeakPerDevice) {
    TempDir dir;
    write_memory_usage_export(dir.path("memory.sqlite"));
    importing::ImportedFile imported =
        import_test::import_detected(dir.path("memory.sqlite"), dir.path("memory.db"), importing::SourceFormat::nsys);
    // 7 device rows, 4 of them cudaMalloc/cudaFree with their segments, the pool grown and
    // trimmed, and the block freed before being allocated, live at the start (with its segment).
    EXPECT_EQ(imported.counts.memory_events, 7 + 5 + 2 + 2);
    EXPECT_EQ(imported.counts.skipped.at("CUDA_GPU_MEMORY_USAGE_EVENTS rows of host or managed memory"), 2);
    store::TraceReader reader(dir.path("memory.db"));
    const analysis::GpuMemoryReport report = analysis::gpu_memory(reader);
    const std::map<int, Replay> expected = replay_memory_rows();
    ASSERT_EQ(report.devices.size(), expected.size());
    for (const analysis::GpuMemoryDevice& device : report.devices) {
        SCOPED_TRACE(device.device);
        ASSERT_TRUE(expected.count(device.device));
        EXPECT_EQ(device.peak_allocated_bytes, expected.at(device.device).peak_allocated);
        EXPECT_EQ(device.peak_reserved_bytes, expected.at(device.device).peak_reserved);
    }
    EXPECT_EQ(expected.at(0).peak_allocated, 10 * MiB);  // 3 live at start + 4 + 1 + 2, at 1200
    EXPECT_EQ(expected.at(0).peak_reserved, 40 * MiB);   // 3 + 4 + 1 + the pool's 32
    EXPECT_EQ(report.devices[0].allocated_before_trace_bytes, 3 * MiB);
    EXPECT_EQ(report.devices[0].peak_allocated_ns, 1200);

    // Each allocation on the thread of the runtime call with its correlation id; the
    // stream-ordered ones on their stream.
    std::map<std::uint64_t, std::int64_t> tid_of_alloc;
    const std::vector<trace::MemoryEvent> memory_events = test_support::all_memory_events(reader);
    for (const trace::MemoryEvent& event : memory_events) {
        if (event.action != trace::MemoryAction::alloc) continue;
        ASSERT_NE(reader.thread(event.thread_id), nullptr);
        tid_of_alloc[event.address] = reader.thread(event.thread_id)->tid;
        EXPECT_EQ(event.cuda_stream, event.address == 0xC00000 ? 13u : 0u);
    }
    EXPECT_EQ(tid_of_alloc, (std::map<std::uint64_t, std::int64_t>{
                                {0xA00000, 4242}, {0xB00000, 4243}, {0xC00000, 4243}, {0xE00000, 4242}}));
}

TEST(Nsys, CudaMemoryUsageOfAnExportWithoutThePoolColumnsOrEnumTables) {
    // The layout before 2024 (no streamId, pool columns as NULL) and no ENUM tables:
    // nsys' own numbers (memKind 2 device, memoryOperationType 0/1).
    TempDir dir;
    std::string sql = "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);";
    sql +=
        "CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER NOT NULL, globalPid INTEGER NOT NULL, deviceId "
        "INTEGER NOT NULL, contextId INTEGER NOT NULL, address INTEGER NOT NULL, pc INTEGER NOT NULL, bytes INTEGER "
        "NOT NULL, memKind INTEGER NOT NULL, memoryOperationType INTEGER NOT NULL, name TEXT, correlationId INTEGER);";
    sql +=
        "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES (10, 0, 0, 1, 4096, 0, 100, 2, 0, NULL, NULL),"
        "(20, 0, 0, 1, 8192, 0, 50, 2, 0, NULL, NULL), (30, 0, 0, 1, 4096, 0, 100, 2, 1, NULL, NULL),"
        "(40, 0, 0, 1, 65536, 0, 1000, 1, 0, NULL, NULL);";
    import_test::exec_sql(dir.path("old.sqlite"), sql);
    import_test::import_detected(dir.path("old.sqlite"), dir.path("old.db"), importing::SourceFormat::nsys);
    store::TraceReader reader(dir.path("old.db"));
    const analysis::GpuMemoryReport report = analysis::gpu_memory(reader);
    ASSERT_EQ(report.devices.size(), 1u);
    EXPECT_EQ(report.devices[0].peak_allocated_bytes, 150);
    EXPECT_EQ(report.devices[0].peak_reserved_bytes, 150);
}

TEST(Nsys, OsRuntimeCallsAreHostRangesOfTheirOwnDomain) {
    TempDir dir;
    write_cpu_side_fixture(dir);
    importing::ImportedFile imported = importing::import_file(dir.path("r.sqlite"), dir.path("r.db"));
    EXPECT_EQ(imported.counts.ranges, 5);  // 3 NVTX + 2 OS runtime
    store::TraceReader reader(dir.path("r.db"));
    std::vector<trace::RangeEvent> calls;
    for (const auto& range : all_events(reader, &store::TraceReader::for_each_range)) {
        if (reader.string(range.domain_id) == "OS runtime") calls.push_back(range);
    }
    ASSERT_EQ(calls.size(), 2u);
    EXPECT_EQ(reader.string(calls[0].name_id), "pthread_mutex_lock");
    EXPECT_EQ(calls[0].start_ns, 2300);
    EXPECT_EQ(calls[0].end_ns, 2350);
    EXPECT_EQ(calls[0].payload, trace::Payload::of_integer(0));
    EXPECT_EQ(reader.string(calls[1].name_id), "poll");
    EXPECT_EQ(calls[1].end_ns - calls[1].start_ns, 300);
    EXPECT_EQ(calls[1].payload, trace::Payload::of_integer(1));
    EXPECT_EQ(reader.thread(calls[1].thread_id)->tid, 4242);
}

TEST(Nsys, AFileWithoutCudaTablesImportsWhatItHas) {
    TempDir dir;
    import_test::NsysFixtureOptions options;
    options.with_cuda = false;
    options.with_cpu_side = true;
    options.metadata_table = "META_DATA_EXPORT";
    options.schema_version_text = "3.20.2";
    import_test::write_nsys_fixture(dir.path("cpu.sqlite"), options);
    importing::ImportedFile imported =
        import_test::import_detected(dir.path("cpu.sqlite"), dir.path("cpu.db"), importing::SourceFormat::nsys);
    EXPECT_EQ(imported.counts.kernels + imported.counts.memcpys + imported.counts.api_calls, 0);
    EXPECT_EQ(imported.counts.ranges, 5);
    EXPECT_EQ(imported.counts.marks, 1);
    EXPECT_EQ(imported.counts.stack_samples, 3);
    store::TraceReader reader(dir.path("cpu.db"));
    EXPECT_EQ(reader.run().pid, 4242);
    EXPECT_TRUE(reader.devices().empty());

    // Only CPU samples (no NVTX, no StringIds beyond the symbols): still a trace.
    TempDir samples_only;
    import_test::write_nsys_fixture(samples_only.path("s.sqlite"), options);
    import_test::exec_sql(samples_only.path("s.sqlite"), "DROP TABLE NVTX_EVENTS; DROP TABLE OSRT_API;");
    imported = importing::import_file(samples_only.path("s.sqlite"), samples_only.path("s.db"));
    EXPECT_EQ(imported.counts.stack_samples, 3);
    EXPECT_EQ(imported.counts.ranges, 0);
}

TEST(Nsys, ACpuSideTableWithoutAColumnItNeedsIsCountedNotFatal) {
    TempDir dir;
    write_cpu_side_fixture(dir);
    import_test::exec_sql(dir.path("r.sqlite"), "ALTER TABLE SAMPLING_CALLCHAINS RENAME COLUMN symbol TO symbolId;");
    importing::ImportedFile imported = importing::import_file(dir.path("r.sqlite"), dir.path("r.db"));
    EXPECT_EQ(imported.counts.kernels, 1);
    EXPECT_EQ(imported.counts.stack_samples, 0);
    EXPECT_EQ(imported.counts.skipped.at("SAMPLING_CALLCHAINS rows (not imported: the table has no column symbol)"), 7);
    EXPECT_EQ(imported.counts.skipped.at("COMPOSITE_EVENTS rows (not imported)"), 4);
}

TEST(Nsys, ASampleSymbolThatPointsNowhereIsSkippedOrUnderStrictNamesTableAndRow) {
    TempDir dir;
    write_cpu_side_fixture(dir);
    import_test::exec_sql(dir.path("r.sqlite"),
                          "UPDATE SAMPLING_CALLCHAINS SET symbol = 999 WHERE id = 2 AND stackDepth = 0;");
    try {
        import_test::import_strict(dir.path("r.sqlite"), dir.path("r.db"));
        FAIL() << "imported a symbol id that points nowhere under --strict";
    } catch (const store::TraceError& error) {
        EXPECT_NE(std::string(error.what()).find("table SAMPLING_CALLCHAINS row"), std::string::npos) << error.what();
        EXPECT_NE(std::string(error.what()).find("symbol 999 is not in StringIds"), std::string::npos) << error.what();
    }
    importing::ImportedFile imported = import_test::import_skipping_invalid(dir.path("r.sqlite"), dir.path("r.db"));
    EXPECT_EQ(imported.counts.stack_samples, 2);
    const auto& invalid = imported.counts.invalid.at("SAMPLING_CALLCHAINS: string id not in StringIds");
    EXPECT_EQ(invalid.count, 1);
    EXPECT_NE(invalid.first.find("table SAMPLING_CALLCHAINS row"), std::string::npos) << invalid.first;
}

}  // namespace
