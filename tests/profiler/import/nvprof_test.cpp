// nvprof_test.cpp: the nvprof database importer. A database written here with
// nvprof's tables and known answers (two GPUs whose clocks are off the host's, names by
// StringTable id, API calls by CUPTI callback id, NVTX markers with their data, a
// context-wide synchronization, a bad row); and the two real files of
// ../shared/real-traces/nvprof, whose kernel, copy, API and NVTX summaries must equal
// SQL over the same file, with no kernel starting before its launching call (skipped,
// saying why, without ../shared).
#include "profiler/analysis/duration_summary.h"
#include "profiler/import/import.h"
#include "profiler/store/reader.h"
#include "tests/profiler/import/event_lists.h"
#include "tests/profiler/import/import_fixtures.h"
#include "tests/profiler/import/import_steps.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <map>
#include <string>
#include <vector>

namespace {

using namespace ember;
using import_test::all_events;
using import_test::TempDir;

constexpr std::int64_t kHost = import_test::kNvprofHostNs;

TEST(Nvprof, EveryTableLandsWithItsNamesClocksAndShapes) {
    TempDir dir;
    import_test::write_nvprof_fixture(dir.path("run.nvvp"));
    EXPECT_EQ(importing::detect_format(dir.path("run.nvvp")), importing::SourceFormat::nvprof);
    const importing::ImportedFile imported = importing::import_file(dir.path("run.nvvp"), dir.path("run.db"));
    EXPECT_EQ(imported.format, importing::SourceFormat::nvprof);
    const importing::ImportCounts& counts = imported.counts;
    EXPECT_EQ(counts.api_calls, 5);  // the call that ends before it starts is skipped
    EXPECT_EQ(counts.invalid_total(), 1);
    EXPECT_NE(counts.invalid_summary().find("table CUPTI_ACTIVITY_KIND_RUNTIME row 5"), std::string::npos)
        << counts.invalid_summary();
    EXPECT_EQ(counts.kernels, 3);
    EXPECT_EQ(counts.memcpys, 1);
    EXPECT_EQ(counts.memsets, 1);
    EXPECT_EQ(counts.synchronizations, 1);
    EXPECT_EQ(counts.ranges, 2);
    EXPECT_EQ(counts.marks, 1);
    EXPECT_EQ(counts.skipped.at("CUPTI_ACTIVITY_KIND_METRIC row (not imported)"), 2);
    // Both GPUs' clocks, put on the host's.
    ASSERT_EQ(counts.notes.size(), 2u);
    EXPECT_NE(counts.notes[0].find("GPU 0's clock is 5.000005 s ahead of the host's"), std::string::npos)
        << counts.notes[0];
    EXPECT_NE(counts.notes[1].find("GPU 1's clock is 1.999997 s behind the host's"), std::string::npos)
        << counts.notes[1];

    store::TraceReader reader(dir.path("run.db"));
    EXPECT_EQ(reader.run().pid, 100000);
    EXPECT_EQ(reader.run().command_line, "train.py");
    ASSERT_EQ(reader.devices().size(), 2u);
    EXPECT_EQ(reader.devices()[0].name, "Tesla V100-SXM2-16GB");
    EXPECT_EQ(reader.devices()[0].multiprocessor_count, 80);
    EXPECT_DOUBLE_EQ(reader.devices()[0].memory_bandwidth_bytes_per_second, 898048000.0 * 1000.0);
    // API names from the callback ids; an unknown id says so.
    std::map<std::string, int> api;
    for (const trace::ApiEvent& call : all_events(reader, &store::TraceReader::for_each_api_call))
        ++api[std::string(reader.string(call.name_id))];
    EXPECT_EQ(api,
              (std::map<std::string, int>{
                  {"cudaLaunchKernel", 2}, {"cuLaunchKernel", 1}, {"cudaMemcpy", 1}, {"cudaDeviceSynchronize", 1}}));
    // Kernels: demangled names, launch shapes, on the host's clock: GPU 0's copy started
    // 5 µs after its call, the soonest of GPU 0's records, so it starts with its call and
    // the rest keep their distances; GPU 1's kernel starts with its launch.
    const auto kernels = all_events(reader, &store::TraceReader::for_each_kernel);
    ASSERT_EQ(kernels.size(), 3u);
    EXPECT_EQ(reader.string(kernels[0].name_id), "stencil(float*, float*, int)");
    EXPECT_EQ(kernels[0].start_ns, kHost + 105'000);
    EXPECT_EQ(kernels[0].end_ns - kernels[0].start_ns, 40'000);
    EXPECT_EQ(kernels[0].launch.grid_x, 4u);
    EXPECT_EQ(kernels[0].launch.block_x, 256u);
    EXPECT_EQ(kernels[0].launch.registers_per_thread, 32u);
    EXPECT_EQ(kernels[0].launch.static_shared_bytes, 1024u);
    EXPECT_EQ(reader.string(kernels[1].name_id), "void cuda::kernel<float>(float*)");
    EXPECT_EQ(kernels[1].start_ns, kHost + 225'000);
    EXPECT_EQ(kernels[2].device_id, 1);
    EXPECT_EQ(kernels[2].start_ns, kHost + 300'000);
    // Every GPU record linked to a call starts at or after it.
    EXPECT_EQ(import_test::count_rows(
                  dir.path("run.db"),
                  "SELECT COUNT(*) FROM kernels k JOIN api_calls a ON a.correlation_id = k.correlation_id "
                  "WHERE k.start_ns < a.start_ns"),
              0);
    // Streams: priorities and the default stream.
    const trace::StreamInfo* second = reader.stream(kernels[1].stream_id);
    ASSERT_NE(second, nullptr);
    EXPECT_EQ(second->cuda_stream_id, 14u);
    EXPECT_EQ(second->priority, -2);
    EXPECT_EQ(reader.stream(kernels[0].stream_id)->name, "default");
    // The copy and the memset.
    const auto copies = all_events(reader, &store::TraceReader::for_each_memcpy);
    ASSERT_EQ(copies.size(), 1u);
    EXPECT_EQ(copies[0].direction, trace::MemcpyDirection::host_to_device);
    EXPECT_EQ(copies[0].source_kind, trace::MemoryKind::pageable);
    EXPECT_EQ(copies[0].destination_kind, trace::MemoryKind::device);
    EXPECT_EQ(copies[0].bytes, 4096u);
    EXPECT_EQ(copies[0].start_ns, kHost + 400'000);
    const auto sets = all_events(reader, &store::TraceReader::for_each_memset);
    ASSERT_EQ(sets.size(), 1u);
    EXPECT_EQ(sets[0].start_ns, kHost + 347'000);
    // The context-wide synchronization, on stream 0 of GPU 0, host time.
    const auto syncs = all_events(reader, &store::TraceReader::for_each_sync);
    ASSERT_EQ(syncs.size(), 1u);
    EXPECT_EQ(syncs[0].kind, trace::SyncKind::context_synchronize);
    EXPECT_EQ(syncs[0].stream_id, 0u);
    EXPECT_EQ(syncs[0].device_id, 0);
    EXPECT_EQ(syncs[0].start_ns, kHost + 501'000);
    EXPECT_EQ(syncs[0].cuda_event_id, 0u);
    // NVTX: the ranges nest on the named thread, in their domain; the mark has its payload.
    const auto ranges = all_events(reader, &store::TraceReader::for_each_range);
    ASSERT_EQ(ranges.size(), 2u);
    EXPECT_EQ(reader.string(ranges[0].name_id), "forward");
    EXPECT_EQ(reader.string(ranges[0].domain_id), "mydomain");
    EXPECT_EQ(ranges[0].end_ns, kHost + 560'000);
    EXPECT_EQ(reader.string(ranges[1].name_id), "layer1");
    EXPECT_EQ(ranges[1].parent_range_id, ranges[0].range_id);
    EXPECT_EQ(reader.thread(ranges[0].thread_id)->tid, 0x12345678);
    EXPECT_EQ(reader.thread(ranges[0].thread_id)->name, "main thread");
    const auto marks = all_events(reader, &store::TraceReader::for_each_mark);
    ASSERT_EQ(marks.size(), 1u);
    EXPECT_EQ(reader.string(marks[0].name_id), "checkpoint");
    EXPECT_EQ(marks[0].payload.kind, trace::PayloadKind::integer);
    EXPECT_EQ(marks[0].payload.integer, 42);
    EXPECT_EQ(marks[0].color, 4278190335u);
    EXPECT_EQ(marks[0].category, 7u);
    EXPECT_EQ(reader.event_count("collector_overhead"), 1);
}

TEST(Nvprof, StrictRefusesTheBadRowAndKernelNamesFollowTheOption) {
    TempDir dir;
    import_test::write_nvprof_fixture(dir.path("run.nvvp"));
    EXPECT_THROW(import_test::import_strict(dir.path("run.nvvp"), dir.path("strict.db")), store::TraceError);
    importing::ImportOptions options;
    options.kernel_names = importing::KernelNameStyle::short_name;
    importing::import_file(dir.path("run.nvvp"), dir.path("short.db"), options);
    options.kernel_names = importing::KernelNameStyle::mangled;
    importing::import_file(dir.path("run.nvvp"), dir.path("mangled.db"), options);
    store::TraceReader short_names(dir.path("short.db")), mangled(dir.path("mangled.db"));
    std::vector<std::string> a, b;
    for (const auto& kernel : all_events(short_names, &store::TraceReader::for_each_kernel))
        a.emplace_back(short_names.string(kernel.name_id));
    for (const auto& kernel : all_events(mangled, &store::TraceReader::for_each_kernel))
        b.emplace_back(mangled.string(kernel.name_id));
    EXPECT_EQ(a, (std::vector<std::string>{"stencil", "kernel", "stencil"}));
    EXPECT_EQ(b, (std::vector<std::string>{"_Z7stencilPfS_i", "_ZN4cuda6kernelIfEEvPT_", "_Z7stencilPfS_i"}));
}

// --- the real files ----------------------------------------------------------------------

#define SKIP_WITHOUT_REAL_NVPROF(file)                                                                       \
    const std::string file =                                                                                 \
        import_test::real_traces_dir() + "/nvprof/" +                                                        \
        (#file[0] == 'l' ? "ZhangXin8069_qcu_log_x99-Yang_38033.nvvp" : "ZhangXin8069_qcu_mpi_dslash.nvvp"); \
    if (import_test::real_traces_dir().empty()) GTEST_SKIP() << "../shared/real-traces is absent: no real nvprof files"

// One number from SQL over a file.
std::int64_t sql_number(const std::string& path, const std::string& sql) {
    return import_test::count_rows(path, sql);
}

TEST(NvprofReal, SummariesEqualSqlOverTheFile) {
    SKIP_WITHOUT_REAL_NVPROF(log);
    TempDir dir;
    importing::ImportOptions options;
    options.kernel_names = importing::KernelNameStyle::mangled;
    const importing::ImportedFile imported = importing::import_file(log, dir.path("log.db"), options);
    EXPECT_EQ(imported.counts.invalid_total(), 0) << imported.counts.invalid_summary();
    store::TraceReader reader(dir.path("log.db"));
    // Kernels: per name, the count and total time of CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL.
    std::map<std::string, std::pair<std::int64_t, std::int64_t>> truth;
    {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open_v2(log.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
        sqlite3_stmt* statement = nullptr;
        ASSERT_EQ(sqlite3_prepare_v2(
                      db,
                      "SELECT s.value, COUNT(*), SUM(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL k "
                      "JOIN StringTable s ON s._id_ = k.name GROUP BY s.value",
                      -1, &statement, nullptr),
                  SQLITE_OK);
        while (sqlite3_step(statement) == SQLITE_ROW)
            truth[reinterpret_cast<const char*>(sqlite3_column_text(statement, 0))] = {
                sqlite3_column_int64(statement, 1), sqlite3_column_int64(statement, 2)};
        sqlite3_finalize(statement);
        sqlite3_close(db);
    }
    std::map<std::string, std::pair<std::int64_t, std::int64_t>> ours;
    for (const auto& row : analysis::kernel_summary(reader)) ours[row.name] = {row.stats.instances, row.stats.total_ns};
    EXPECT_EQ(ours, truth);
    EXPECT_EQ(truth.size(), 28u);
    // Copies, memsets, API calls, synchronizations: counts and bytes as the file's.
    EXPECT_EQ(reader.event_count("memcpys"), sql_number(log, "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY"));
    EXPECT_EQ(import_test::count_rows(dir.path("log.db"), "SELECT SUM(bytes) FROM memcpys"),
              sql_number(log, "SELECT SUM(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY"));
    EXPECT_EQ(import_test::count_rows(dir.path("log.db"), "SELECT COUNT(*) FROM memcpys WHERE direction = 1"),
              sql_number(log, "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1"));
    EXPECT_EQ(import_test::count_rows(dir.path("log.db"), "SELECT SUM(end_ns - start_ns) FROM memcpys"),
              sql_number(log, "SELECT SUM(end - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY"));
    EXPECT_EQ(reader.event_count("memsets"), sql_number(log, "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMSET"));
    EXPECT_EQ(reader.event_count("api_calls"),
              sql_number(log,
                         "SELECT (SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME) + (SELECT COUNT(*) FROM "
                         "CUPTI_ACTIVITY_KIND_DRIVER)"));
    EXPECT_EQ(import_test::count_rows(dir.path("log.db"),
                                      "SELECT COUNT(*) FROM api_calls a JOIN strings s ON s.string_id = a.name_id "
                                      "WHERE s.value = 'cudaLaunchKernel'"),
              sql_number(log, "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE cbid = 211"));
    EXPECT_EQ(import_test::count_rows(dir.path("log.db"), "SELECT SUM(end_ns - start_ns) FROM api_calls"),
              sql_number(log,
                         "SELECT (SELECT SUM(end - start) FROM CUPTI_ACTIVITY_KIND_RUNTIME) + (SELECT SUM(end - "
                         "start) FROM CUPTI_ACTIVITY_KIND_DRIVER)"));
    EXPECT_EQ(reader.event_count("synchronizations"),
              sql_number(log, "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"));
    // The GPU's clock was 156.6 s ahead: after import no kernel or copy starts before its call,
    // and the earliest starts exactly at it.
    const std::string db = dir.path("log.db");
    for (const char* table : {"kernels", "memcpys"}) {
        EXPECT_EQ(
            import_test::count_rows(db, fmt::format("SELECT COUNT(*) FROM {} g JOIN api_calls a ON a.correlation_id "
                                                    "= g.correlation_id WHERE g.start_ns < a.start_ns",
                                                    table)),
            0)
            << table;
    }
    EXPECT_EQ(import_test::count_rows(db,
                                      "SELECT MIN(g.start_ns - a.start_ns) FROM kernels g JOIN api_calls a ON "
                                      "a.correlation_id = g.correlation_id"),
              0);
    ASSERT_FALSE(imported.counts.notes.empty());
    EXPECT_NE(imported.counts.notes[0].find("GPU 0's clock is 156.6"), std::string::npos) << imported.counts.notes[0];
    // Every GPU record has its launching call.
    EXPECT_EQ(imported.counts.unlinked_gpu_events, 0);
}

TEST(NvprofReal, ApiCallsAndAnNvtxRangeOfTheOlderSchema) {
    SKIP_WITHOUT_REAL_NVPROF(dslash);
    TempDir dir;
    const importing::ImportedFile imported = importing::import_file(dslash, dir.path("d.db"));
    store::TraceReader reader(dir.path("d.db"));
    EXPECT_EQ(reader.event_count("api_calls"),
              sql_number(dslash,
                         "SELECT (SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME) + (SELECT COUNT(*) FROM "
                         "CUPTI_ACTIVITY_KIND_DRIVER)"));
    EXPECT_EQ(reader.event_count("kernels"), 0);
    // Its one NVTX range never ended (the program ended inside it): it ends with the trace.
    const auto ranges = all_events(reader, &store::TraceReader::for_each_range);
    ASSERT_EQ(ranges.size(), 1u);
    EXPECT_EQ(reader.string(ranges[0].name_id), "ncclCommInitRank");
    EXPECT_EQ(reader.string(ranges[0].domain_id), "NCCL");
    EXPECT_EQ(ranges[0].start_ns, sql_number(dslash, "SELECT timestamp FROM CUPTI_ACTIVITY_KIND_MARKER"));
    EXPECT_EQ(ranges[0].end_ns, reader.run().end_ns);
    EXPECT_NE(imported.counts.notes.back().find("never ended"), std::string::npos);
}

}  // namespace
