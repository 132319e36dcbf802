// schema_versions_test.cpp: schema version 3's columns (graph_id and graph_node_id
// of kernels/memcpys/memsets, api_calls.stack_id) survive a round trip; a
// version 2 file, which lacks them, opens and reads them as 0; and a version 3 file
// stays readable by a version 2 reader (min_reader_version unchanged, the old
// column lists still select the same rows). Version 4's collective_calls table
// survives a round trip, and a file without it reads it as empty. So do version 5's
// memory_events and memory_blocks (a file without them: no memory events).
#include "profiler/store/reader.h"
#include "profiler/store/schema.h"
#include "tests/support/store.h"
#include "tests/support/event_lists.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>
#include <vector>

namespace ember::store {
namespace {

using namespace ember::trace;
using test_support::all_events;
using testing::run_sql;
using testing::ScratchDir;

// Rows of `sql` (every column as text, joined by '|').
std::vector<std::string> select_rows(const std::string& path, const std::string& sql) {
    sqlite3* db = nullptr;
    std::vector<std::string> rows;
    EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* statement = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db) << " in " << sql;
    while (statement && sqlite3_step(statement) == SQLITE_ROW) {
        std::string row;
        for (int c = 0; c < sqlite3_column_count(statement); ++c) {
            const unsigned char* text = sqlite3_column_text(statement, c);
            if (c > 0) row += '|';
            row += text ? reinterpret_cast<const char*>(text) : "NULL";
        }
        rows.push_back(row);
    }
    sqlite3_finalize(statement);
    sqlite3_close(db);
    return rows;
}

// What the v3 round trip writes and expects back.
struct GraphSample {
    std::vector<KernelEvent> kernels;
    std::vector<MemcpyEvent> memcpys;
    std::vector<MemsetEvent> memsets;
    std::vector<ApiEvent> api_calls;
};

GraphSample write_graph_trace(const std::string& path) {
    GraphSample sample;
    RunInfo run;
    run.start_ns = 0;
    TraceWriter writer(path, run, testing::quiet_options());
    ThreadId main = writer.register_thread({0, 1, 1, "main"});
    writer.register_device({0, "gpu", "", 9, 0, 132, 1ll << 30, 1e12});
    StreamId stream = writer.register_stream({0, 0, 1, 7, 0, "compute"});
    StackId stack = writer.intern_stack(0, writer.intern_frame("train.py:step", "train.py", 0, 12));
    StringId launch = writer.intern("cudaGraphLaunch");
    StringId kernel_name = writer.intern("gemm");
    for (int i = 0; i < 4; ++i) {
        TimeNs t = 1000 + i * 10'000;
        CorrelationId correlation = static_cast<CorrelationId>(i + 1);
        bool in_graph = i % 2 == 1;
        ApiEvent call{t, t + 500, main, correlation, launch, 0};
        call.stack_id = in_graph ? stack : 0;
        KernelEvent kernel{t + 1000, t + 2000, 0, stream, correlation, kernel_name, {}};
        kernel.graph_id = in_graph ? 0xFFFF'FFF0u + static_cast<GraphId>(i) : 0;  // the full 32-bit range
        kernel.graph_node_id = in_graph ? (1ull << 40) + static_cast<GraphNodeId>(i) : 0;
        MemcpyEvent copy{t + 3000, t + 3500,           0,
                         stream,   correlation,        MemcpyDirection::device_to_device,
                         64,       MemoryKind::device, MemoryKind::device,
                         kNoDevice};
        copy.graph_id = in_graph ? 42 : 0;
        copy.graph_node_id = in_graph ? 420 + static_cast<GraphNodeId>(i) : 0;
        MemsetEvent memset{t + 4000, t + 4100, 0, stream, correlation, 128, 0, MemoryKind::device};
        memset.graph_id = in_graph ? 43 : 0;
        memset.graph_node_id = in_graph ? 430 + static_cast<GraphNodeId>(i) : 0;
        EXPECT_TRUE(writer.record_api_call(call));
        EXPECT_TRUE(writer.record_kernel(kernel));
        EXPECT_TRUE(writer.record_memcpy(copy));
        EXPECT_TRUE(writer.record_memset(memset));
        sample.api_calls.push_back(call);
        sample.kernels.push_back(kernel);
        sample.memcpys.push_back(copy);
        sample.memsets.push_back(memset);
    }
    writer.close();
    return sample;
}

TEST(TraceSchemaVersions, GraphIdsAndCallStacksRoundTrip) {
    ScratchDir dir;
    std::string path = dir.file("graphs.db");
    GraphSample sample = write_graph_trace(path);
    TraceReader reader(path);
    EXPECT_EQ(reader.schema_version(), kSchemaVersion);
    EXPECT_EQ(reader.min_reader_version(), 1);

    const std::vector<KernelEvent> kernels = all_events(reader, &TraceReader::for_each_kernel);
    EXPECT_EQ(kernels, sample.kernels);
    const std::vector<MemcpyEvent> memcpys = all_events(reader, &TraceReader::for_each_memcpy);
    EXPECT_EQ(memcpys, sample.memcpys);
    const std::vector<MemsetEvent> memsets = all_events(reader, &TraceReader::for_each_memset);
    EXPECT_EQ(memsets, sample.memsets);
    const std::vector<ApiEvent> api_calls = all_events(reader, &TraceReader::for_each_api_call);
    EXPECT_EQ(api_calls, sample.api_calls);

    // The lookups by correlation decode the same columns.
    EXPECT_EQ(reader.kernels_by_correlation(2), std::vector<KernelEvent>{sample.kernels[1]});
    EXPECT_EQ(reader.memcpys_by_correlation(2), std::vector<MemcpyEvent>{sample.memcpys[1]});
    EXPECT_EQ(reader.memsets_by_correlation(2), std::vector<MemsetEvent>{sample.memsets[1]});
    ASSERT_TRUE(reader.api_call_by_correlation(2).has_value());
    EXPECT_EQ(*reader.api_call_by_correlation(2), sample.api_calls[1]);
    ASSERT_FALSE(reader.stack_frames(api_calls[1].stack_id).empty());
    EXPECT_EQ(reader.stack_frames(api_calls[1].stack_id)[0].function, "train.py:step");
}

// The four tables as schema version 2 created them (profiler/store/schema.h before
// version 3); every other table is unchanged.
constexpr const char* kVersion2Tables = R"sql(
DROP TABLE kernels; DROP TABLE memcpys; DROP TABLE memsets; DROP TABLE api_calls;
CREATE TABLE kernels (
  start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, device_id INTEGER NOT NULL, stream_id INTEGER NOT NULL,
  correlation_id INTEGER NOT NULL, name_id INTEGER NOT NULL, launch_config_id INTEGER NOT NULL);
CREATE TABLE memcpys (
  start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, device_id INTEGER NOT NULL, stream_id INTEGER NOT NULL,
  correlation_id INTEGER NOT NULL, direction INTEGER NOT NULL, bytes INTEGER NOT NULL, source_kind INTEGER NOT NULL,
  destination_kind INTEGER NOT NULL, peer_device_id INTEGER NOT NULL);
CREATE TABLE memsets (
  start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, device_id INTEGER NOT NULL, stream_id INTEGER NOT NULL,
  correlation_id INTEGER NOT NULL, bytes INTEGER NOT NULL, value INTEGER NOT NULL, memory_kind INTEGER NOT NULL);
CREATE TABLE api_calls (
  start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, thread_id INTEGER NOT NULL, correlation_id INTEGER NOT NULL,
  name_id INTEGER NOT NULL, result INTEGER NOT NULL);
CREATE INDEX kernels_by_stream_start ON kernels (stream_id, start_ns);
CREATE INDEX kernels_by_correlation ON kernels (correlation_id);
CREATE INDEX api_calls_by_correlation ON api_calls (correlation_id);
UPDATE run_metadata SET value = 2 WHERE key = 'schema_version';
PRAGMA user_version = 2;
)sql";

TEST(TraceSchemaVersions, Version2FileReadsNewColumnsAsZero) {
    ScratchDir dir;
    std::string path = dir.file("v2.db");
    GraphSample sample = write_graph_trace(path);
    run_sql(path, kVersion2Tables);
    // The rows a version 2 writer would have stored: the same events without the new columns.
    std::string rows;
    for (const KernelEvent& k : sample.kernels)
        rows += "INSERT INTO kernels VALUES (" + std::to_string(k.start_ns) + "," + std::to_string(k.end_ns) + ",0," +
                std::to_string(k.stream_id) + "," + std::to_string(k.correlation_id) + "," + std::to_string(k.name_id) +
                ",0);";
    for (const MemcpyEvent& m : sample.memcpys)
        rows += "INSERT INTO memcpys VALUES (" + std::to_string(m.start_ns) + "," + std::to_string(m.end_ns) + ",0," +
                std::to_string(m.stream_id) + "," + std::to_string(m.correlation_id) + ",3,64,3,3,-1);";
    for (const MemsetEvent& m : sample.memsets)
        rows += "INSERT INTO memsets VALUES (" + std::to_string(m.start_ns) + "," + std::to_string(m.end_ns) + ",0," +
                std::to_string(m.stream_id) + "," + std::to_string(m.correlation_id) + ",128,0,3);";
    for (const ApiEvent& a : sample.api_calls)
        rows += "INSERT INTO api_calls VALUES (" + std::to_string(a.start_ns) + "," + std::to_string(a.end_ns) + "," +
                std::to_string(a.thread_id) + "," + std::to_string(a.correlation_id) + "," + std::to_string(a.name_id) +
                ",0);";
    run_sql(path, rows);

    TraceReader reader(path);
    EXPECT_EQ(reader.schema_version(), 2);
    auto without_v3 = [](auto events) {
        for (auto& e : events) {
            if constexpr (requires { e.graph_id; }) e.graph_id = 0;
            if constexpr (requires { e.graph_node_id; }) e.graph_node_id = 0;
            if constexpr (requires { e.stack_id; }) e.stack_id = 0;
        }
        return events;
    };
    const std::vector<KernelEvent> kernels = all_events(reader, &TraceReader::for_each_kernel);
    EXPECT_EQ(kernels, without_v3(sample.kernels));
    const std::vector<MemcpyEvent> memcpys = all_events(reader, &TraceReader::for_each_memcpy);
    EXPECT_EQ(memcpys, without_v3(sample.memcpys));
    const std::vector<MemsetEvent> memsets = all_events(reader, &TraceReader::for_each_memset);
    EXPECT_EQ(memsets, without_v3(sample.memsets));
    const std::vector<ApiEvent> api_calls = all_events(reader, &TraceReader::for_each_api_call);
    EXPECT_EQ(api_calls, without_v3(sample.api_calls));
    EXPECT_EQ(reader.kernels_by_correlation(2), std::vector<KernelEvent>{without_v3(sample.kernels)[1]});
    ASSERT_TRUE(reader.api_call_by_correlation(2).has_value());
    EXPECT_EQ(reader.api_call_by_correlation(2)->stack_id, 0u);
}

// A version 2 reader opens a file when min_reader_version <= 2 and names the
// columns it selects: both must hold for a version 3 file.
TEST(TraceSchemaVersions, Version3FileStaysReadableByVersion2Readers) {
    ScratchDir dir;
    std::string path = dir.file("v3.db");
    GraphSample sample = write_graph_trace(path);
    EXPECT_EQ(select_rows(path, "SELECT value FROM run_metadata WHERE key = 'min_reader_version'"),
              std::vector<std::string>{"1"});
    EXPECT_EQ(select_rows(path, "PRAGMA user_version"), std::vector<std::string>{std::to_string(kSchemaVersion)});
    // The column lists of the version 2 reader (profiler/store/reader.cpp before version 3).
    auto kernels = select_rows(path,
                               "SELECT start_ns, end_ns, device_id, stream_id, correlation_id, name_id, "
                               "launch_config_id FROM kernels ORDER BY start_ns");
    ASSERT_EQ(kernels.size(), sample.kernels.size());
    EXPECT_EQ(kernels[1].substr(0, kernels[1].find('|')), std::to_string(sample.kernels[1].start_ns));
    EXPECT_EQ(select_rows(path,
                          "SELECT start_ns, end_ns, device_id, stream_id, correlation_id, direction, bytes, "
                          "source_kind, destination_kind, peer_device_id FROM memcpys")
                  .size(),
              sample.memcpys.size());
    EXPECT_EQ(select_rows(path,
                          "SELECT start_ns, end_ns, device_id, stream_id, correlation_id, bytes, value, "
                          "memory_kind FROM memsets")
                  .size(),
              sample.memsets.size());
    auto calls = select_rows(path,
                             "SELECT start_ns, end_ns, thread_id, correlation_id, name_id, result FROM api_calls "
                             "ORDER BY start_ns");
    ASSERT_EQ(calls.size(), sample.api_calls.size());
    EXPECT_EQ(calls[0], std::to_string(sample.api_calls[0].start_ns) + "|" +
                            std::to_string(sample.api_calls[0].end_ns) + "|" +
                            std::to_string(sample.api_calls[0].thread_id) + "|1|" +
                            std::to_string(sample.api_calls[0].name_id) + "|0");
    // Every table a version 1/2 reader requires is still there.
    for (const char* table : kRequiredTables)
        EXPECT_EQ(select_rows(path, std::string("SELECT count(*) FROM sqlite_master WHERE name = '") + table + "'"),
                  std::vector<std::string>{"1"})
            << table;
}

// Version 4: Kineto's collective metadata, one row per kernel or range it describes.
TEST(TraceSchemaVersions, CollectiveCallsRoundTrip) {
    ScratchDir dir;
    std::string path = dir.file("v4.db");
    std::vector<CollectiveCall> calls;
    {
        RunInfo run;
        TraceWriter writer(path, run, testing::quiet_options());
        ThreadId main = writer.register_thread({0, 1, 1, "main"});
        StreamId stream = writer.register_stream({0, 0, 0, 13, 0, ""});
        CollectiveCall on_kernel;
        on_kernel.start_ns = 1000;
        on_kernel.track_id = stream;
        on_kernel.on_stream = true;
        on_kernel.name_id = writer.intern("allreduce");
        on_kernel.group_name_id = writer.intern("3");
        on_kernel.group_desc_id = writer.intern("mesh_tp");
        on_kernel.group_ranks_id = writer.intern("[0, 1]");
        on_kernel.group_size = 2;
        on_kernel.sequence = 41;
        on_kernel.in_elements = 1 << 20;
        on_kernel.out_elements = 1 << 20;
        on_kernel.dtype_id = writer.intern("BFloat16");
        CollectiveCall on_range = on_kernel;
        on_range.start_ns = 900;
        on_range.track_id = main;
        on_range.on_stream = false;
        on_range.sequence = -1;
        calls = {on_range, on_kernel};
        for (const CollectiveCall& call : calls) EXPECT_TRUE(writer.record_collective_call(call));
        writer.close();
    }
    TraceReader reader(path);
    EXPECT_EQ(reader.collective_calls(), calls);
    EXPECT_EQ(reader.string(reader.collective_calls()[1].group_desc_id), "mesh_tp");

    // An older file has no such table: it reads as none.
    run_sql(path, "DROP TABLE collective_calls;");
    TraceReader older(path);
    EXPECT_TRUE(older.collective_calls().empty());
}

// Version 5: a caching allocator's events and state.
TEST(TraceSchemaVersions, MemoryEventsAndBlocksRoundTrip) {
    ScratchDir dir;
    std::string path = dir.file("v5.db");
    std::vector<MemoryEvent> events;
    MemoryBlock block;
    {
        RunInfo run;
        TraceWriter writer(path, run, testing::quiet_options());
        FrameId python = writer.intern_frame("forward", "model.py", 0, 21);
        FrameId native = writer.intern_frame("at::empty", "", 0);
        const FrameId frames[] = {python, native};
        StackId stack = writer.intern_stack(frames);
        MemoryEvent alloc;
        alloc.time_ns = 2000;
        alloc.device_id = 1;
        alloc.action = MemoryAction::alloc;
        alloc.address = 0x7f0000000000ull;
        alloc.bytes = 1 << 20;
        alloc.cuda_stream = 0x5555deadbeefull;
        alloc.stack_id = stack;
        alloc.thread_id = writer.register_thread({0, 4242, 4243, "main"});
        MemoryEvent before = alloc;
        before.time_ns = 1999;
        before.action = MemoryAction::live_at_start;
        before.address += 1 << 20;
        before.stack_id = 0;
        MemoryEvent oom;
        oom.time_ns = 3000;
        oom.device_id = 0;
        oom.action = MemoryAction::oom;
        oom.bytes = 1ll << 34;
        oom.device_free_bytes = 12345;
        for (const MemoryEvent& e : {alloc, before, oom}) EXPECT_TRUE(writer.record_memory_event(e));
        events = {oom, before, alloc};  // by device, then time
        block.time_ns = 3000;
        block.device_id = 1;
        block.state = MemoryBlockState::active_allocated;
        block.expandable_segment = true;
        block.segment_address = alloc.address;
        block.segment_bytes = 2 << 20;
        block.address = alloc.address;
        block.bytes = 1 << 20;
        block.requested_bytes = (1 << 20) - 512;
        block.stack_id = stack;
        EXPECT_TRUE(writer.record_memory_block(block));
        writer.close();
    }
    TraceReader reader(path);
    EXPECT_EQ(reader.schema_version(), kSchemaVersion);
    const std::vector<MemoryEvent> read = test_support::all_memory_events(reader);
    EXPECT_EQ(read, events);
    EXPECT_EQ(reader.memory_event_count(), 3);
    std::int64_t on_device_1 = reader.for_each_memory_event([](const MemoryEvent&) { return true; }, 1);
    EXPECT_EQ(on_device_1, 2);
    ASSERT_EQ(reader.memory_blocks().size(), 1u);
    EXPECT_EQ(reader.memory_blocks()[0], block);
    const std::vector<FrameInfo> frames = reader.stack_frames(read[2].stack_id);
    ASSERT_EQ(frames.size(), 2u);
    EXPECT_EQ(frames[0].line, 21);
    EXPECT_EQ(frames[1].function, "at::empty");

    EXPECT_NE(read[2].thread_id, 0u);

    // A version 5 file has no memory_events.thread_id: its events read as on an unknown thread.
    run_sql(path, "ALTER TABLE memory_events DROP COLUMN thread_id;");
    {
        TraceReader version5(path);
        std::vector<MemoryEvent> read5;
        version5.for_each_memory_event(testing::collect_into(read5));
        ASSERT_EQ(read5.size(), events.size());
        for (std::size_t i = 0; i < events.size(); ++i) {
            MemoryEvent expected = events[i];
            expected.thread_id = 0;
            EXPECT_EQ(read5[i], expected);
        }
    }

    // An older file has no such tables: no memory events.
    run_sql(path, "DROP TABLE memory_events; DROP TABLE memory_blocks;");
    TraceReader older(path);
    EXPECT_EQ(older.memory_event_count(), 0);
    EXPECT_EQ(older.for_each_memory_event([](const MemoryEvent&) { return true; }), 0);
    EXPECT_TRUE(older.memory_blocks().empty());
}

}  // namespace
}  // namespace ember::store
