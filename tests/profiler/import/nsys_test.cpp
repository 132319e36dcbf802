// nsys_test.cpp: every Nsight Systems mapping rule on hand-built exports
// (import_fixtures.h) of schema 2.x and of 3.x (ENUM_* tables with other numbers,
// extra columns, tables this importer does not read): API names as nsys stats shows
// them, kernel names by choice, copy kinds, memsets, synchronizations, NVTX domains,
// categories, payloads, colors, thread names, devices, the session's wall clock; the
// schema version under either metadata table name, or none, never refused; the CPU
// side (sampled call chains, OS runtime calls) and files without CUDA tables.
#include "profiler/analysis/cpu_profile.h"
#include "profiler/analysis/duration_summary.h"
#include "profiler/import/import.h"
#include "profiler/store/reader.h"
#include "tests/profiler/import/event_lists.h"
#include "tests/profiler/import/import_fixtures.h"
#include "tests/profiler/import/import_steps.h"

#include <gtest/gtest.h>

#include <map>

namespace {

using namespace ember;
using import_test::TempDir;
using import_test::all_events;

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
    importing::ImportedFile imported = import_test::import_detected(dir.path("report.sqlite"), dir.path("report.db"),
                                                                   importing::SourceFormat::nsys);
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

INSTANTIATE_TEST_SUITE_P(Versions, NsysSchemas, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& info) { return "schema" + std::to_string(info.param); });

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
    ASSERT_EQ(reader.devices().size(), 1u);  // seen in events only: a bare row
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

INSTANTIATE_TEST_SUITE_P(Versions, NsysSchemaVersions,
                         ::testing::Values(SchemaCase{"EXPORT_META_DATA", "2.7.0", false},
                                           SchemaCase{"EXPORT_META_DATA", "3.0.0", false},
                                           SchemaCase{"META_DATA_EXPORT", "3.4.0", false},
                                           SchemaCase{"META_DATA_EXPORT", "3.25.0", false},
                                           SchemaCase{"META_DATA_EXPORT", "3.26.1", true},
                                           SchemaCase{"META_DATA_EXPORT", "4.1.0", true},
                                           SchemaCase{"EXPORT_META_DATA", "1.2.0", false},
                                           SchemaCase{"", "", false}));

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

// SCHED_EVENTS -> a 0/1 counter per thread; CUDA_GPU_MEMORY_USAGE_EVENTS -> the
// device's allocated bytes, allocations minus frees.
TEST(Nsys, SchedulingAndCudaMemoryUsageAreCounters) {
    TempDir dir;
    write_cpu_side_fixture(dir);
    importing::ImportedFile imported = importing::import_file(dir.path("r.sqlite"), dir.path("r.db"));
    EXPECT_EQ(imported.counts.counter_samples, 8);
    store::TraceReader reader(dir.path("r.db"));
    std::map<std::string, trace::CounterInfo> counters;
    for (const trace::CounterInfo& counter : reader.counters()) counters[counter.name] = counter;
    ASSERT_TRUE(counters.count("on CPU (tid 4242)"));
    ASSERT_TRUE(counters.count("CUDA memory allocated"));
    EXPECT_EQ(counters["on CPU (tid 4242)"].unit, "running");
    EXPECT_EQ(counters["on CPU (tid 4242)"].device_id, trace::kNoDevice);
    EXPECT_EQ(counters["CUDA memory allocated"].unit, "bytes");
    EXPECT_EQ(counters["CUDA memory allocated"].device_id, 0);
    std::map<trace::CounterId, std::vector<std::pair<trace::TimeNs, double>>> series;
    for (const trace::CounterSample& sample : all_events(reader, &store::TraceReader::for_each_counter_sample)) {
        series[sample.counter_id].emplace_back(sample.time_ns, sample.value);
    }
    using Series = std::vector<std::pair<trace::TimeNs, double>>;
    EXPECT_EQ(series[counters["on CPU (tid 4242)"].counter_id],
              (Series{{5, 1.0}, {2050, 0.0}, {2060, 1.0}, {2950, 0.0}, {2960, 1.0}}));
    EXPECT_EQ(series[counters["CUDA memory allocated"].counter_id],
              (Series{{1000, 4194304.0}, {1100, 5242880.0}, {2500, 1048576.0}}));
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
    import_test::exec_sql(dir.path("r.sqlite"), "UPDATE SAMPLING_CALLCHAINS SET symbol = 999 WHERE id = 2 AND stackDepth = 0;");
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
