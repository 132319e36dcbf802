// store_roundtrip_test.cpp: what TraceWriter writes, TraceReader gives back
// exactly — every table, in time order — and the window / correlation queries
// return the same events as a brute-force filter over what was written.
#include "profiler/store/reader.h"
#include "profiler/store/schema.h"
#include "tests/support/store.h"
#include "tests/support/event_lists.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <thread>

namespace ember::store {
namespace {

using namespace ember::trace;
using test_support::all_events;
using testing::collect_into;
using testing::ScratchDir;
using testing::write_sample_trace;

template <typename Event>
std::vector<Event> sorted_by(std::vector<Event> events, TimeNs Event::*time) {
    std::stable_sort(events.begin(), events.end(), [&](const Event& a, const Event& b) { return a.*time < b.*time; });
    return events;
}

TEST(TraceStoreRoundTrip, EveryTableReadsBackExactly) {
    ScratchDir dir;
    std::string path = dir.file("roundtrip.db");
    testing::SampleTrace sample = write_sample_trace(path, 4);

    TraceReader reader(path);
    EXPECT_EQ(reader.schema_version(), kSchemaVersion);
    EXPECT_TRUE(reader.complete());
    EXPECT_TRUE(reader.has_indexes());

    RunInfo run = reader.run();
    EXPECT_EQ(run.command_line, sample.run.command_line);
    EXPECT_EQ(run.host, "testhost");
    EXPECT_EQ(run.pid, 4242);
    EXPECT_EQ(run.rank, 1);
    EXPECT_EQ(run.world_size, 2);
    EXPECT_EQ(run.clock_name, "CLOCK_MONOTONIC");
    EXPECT_EQ(run.clock_offset_to_wall_ns, sample.run.clock_offset_to_wall_ns);
    EXPECT_EQ(run.start_ns, 1000);
    EXPECT_EQ(run.end_ns, sample.ranges.back().end_ns);  // the latest event end
    EXPECT_FALSE(run.ember_version.empty());

    ASSERT_EQ(reader.processes().size(), 1u);
    EXPECT_EQ(reader.processes()[0], (ProcessInfo{4242, "train"}));
    ASSERT_EQ(reader.threads().size(), 2u);
    EXPECT_EQ(reader.threads()[0], sample.main_thread);
    EXPECT_EQ(reader.threads()[1], sample.worker_thread);
    ASSERT_EQ(reader.devices().size(), 1u);
    EXPECT_EQ(reader.devices()[0], sample.device);
    ASSERT_EQ(reader.streams().size(), 2u);
    EXPECT_EQ(reader.streams()[0], sample.compute_stream);
    EXPECT_EQ(reader.streams()[1], sample.copy_stream);
    ASSERT_EQ(reader.counters().size(), 1u);
    EXPECT_EQ(reader.counters()[0], sample.utilization);
    ASSERT_NE(reader.stream(sample.copy_stream.stream_id), nullptr);
    EXPECT_EQ(reader.stream(sample.copy_stream.stream_id)->name, "copy");
    EXPECT_EQ(reader.thread(999), nullptr);

    const std::vector<KernelEvent> kernels = all_events(reader, &TraceReader::for_each_kernel);
    EXPECT_EQ(kernels, sorted_by(sample.kernels, &KernelEvent::start_ns));
    EXPECT_EQ(reader.string(kernels[0].name_id), "void gemm_kernel<float>(float const*, float*)");

    const std::vector<MemcpyEvent> memcpys = all_events(reader, &TraceReader::for_each_memcpy);
    EXPECT_EQ(memcpys, sample.memcpys);
    const std::vector<MemsetEvent> memsets = all_events(reader, &TraceReader::for_each_memset);
    EXPECT_EQ(memsets, sample.memsets);
    const std::vector<SyncEvent> syncs = all_events(reader, &TraceReader::for_each_sync);
    EXPECT_EQ(syncs, sample.syncs);
    const std::vector<ApiEvent> api_calls = all_events(reader, &TraceReader::for_each_api_call);
    EXPECT_EQ(api_calls, sorted_by(sample.api_calls, &ApiEvent::start_ns));
    const std::vector<RangeEvent> ranges = all_events(reader, &TraceReader::for_each_range);
    EXPECT_EQ(ranges, sorted_by(sample.ranges, &RangeEvent::start_ns));
    const std::vector<MarkEvent> marks = all_events(reader, &TraceReader::for_each_mark);
    EXPECT_EQ(marks, sample.marks);
    EXPECT_EQ(reader.string(marks[2].name_id), "epoch 2");
    const std::vector<CounterSample> counter_samples = all_events(reader, &TraceReader::for_each_counter_sample);
    EXPECT_EQ(counter_samples, sample.counter_samples);
    const std::vector<StackSample> stack_samples = all_events(reader, &TraceReader::for_each_stack_sample);
    EXPECT_EQ(stack_samples, sample.stack_samples);
    const std::vector<OverheadEvent> overheads = all_events(reader, &TraceReader::for_each_overhead);
    EXPECT_EQ(overheads, sample.overheads);
    EXPECT_EQ(reader.dropped_records(), sample.dropped);
    EXPECT_EQ(reader.total_dropped(), 4u * 3u);

    std::vector<FrameInfo> frames = reader.stack_frames(sample.stack);
    ASSERT_EQ(frames.size(), 2u);
    EXPECT_EQ(frames[0].function, "main");
    EXPECT_EQ(frames[1].function, "train_step(Model&)");
    EXPECT_EQ(frames[1].module, "/usr/bin/train");
    EXPECT_EQ(frames[1].address, 0x402000u);

    EXPECT_EQ(reader.event_count("kernels"), 4);
    EXPECT_EQ(reader.event_count("ranges"), 12);
    EXPECT_THROW(reader.event_count("no_such_table"), TraceError);
    EXPECT_EQ(reader.find_string("cudaLaunchKernel").has_value(), true);
    EXPECT_FALSE(reader.find_string("never interned").has_value());
    EXPECT_EQ(reader.string(kNoString), "");
    EXPECT_THROW(reader.string(1'000'000), TraceError);
}

TEST(TraceStoreRoundTrip, RangeTreeAndCorrelationFlows) {
    ScratchDir dir;
    std::string path = dir.file("flows.db");
    testing::SampleTrace sample = write_sample_trace(path, 3);
    TraceReader reader(path);

    // Each launch call finds its kernel, and each kernel its launch call.
    for (const KernelEvent& kernel : sample.kernels) {
        std::vector<KernelEvent> launched = reader.kernels_by_correlation(kernel.correlation_id);
        ASSERT_EQ(launched.size(), 1u);
        EXPECT_EQ(launched[0], kernel);
        std::optional<ApiEvent> call = reader.api_call_by_correlation(kernel.correlation_id);
        ASSERT_TRUE(call.has_value());
        EXPECT_EQ(reader.string(call->name_id), "cudaLaunchKernel");
        EXPECT_LE(call->end_ns, kernel.start_ns);
    }
    EXPECT_EQ(reader.memcpys_by_correlation(sample.memcpys[1].correlation_id),
              std::vector<MemcpyEvent>{sample.memcpys[1]});
    EXPECT_EQ(reader.memsets_by_correlation(sample.memsets[2].correlation_id),
              std::vector<MemsetEvent>{sample.memsets[2]});
    EXPECT_TRUE(reader.kernels_by_correlation(999'999).empty());
    EXPECT_FALSE(reader.api_call_by_correlation(999'999).has_value());

    const RangeEvent& step = sample.ranges[2];
    ASSERT_EQ(reader.range(step.range_id), step);
    std::vector<RangeEvent> children = reader.child_ranges(step.range_id);
    ASSERT_EQ(children.size(), 2u);
    EXPECT_EQ(children[0], sample.ranges[0]);
    EXPECT_EQ(children[1], sample.ranges[1]);
    EXPECT_EQ(children[0].payload, Payload::of_real(0.0));
    EXPECT_EQ(children[1].payload.kind, PayloadKind::none);
    EXPECT_FALSE(reader.range(123'456).has_value());
}

// Window queries must agree with a brute-force overlap filter, for windows that
// cut events, hold none, or cover everything.
TEST(TraceStoreRoundTrip, WindowQueriesMatchBruteForce) {
    ScratchDir dir;
    std::string path = dir.file("windows.db");
    testing::SampleTrace sample = write_sample_trace(path, 6);
    for (bool indexed : {true, false}) {
        if (!indexed) {
            // Same file without indexes and track_stats: the answers must not change.
            sqlite3* db = nullptr;
            ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
            for (const char* sql :
                 {"DROP INDEX ranges_by_thread_start", "DROP INDEX kernels_by_stream_start", "DELETE FROM track_stats"})
                ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sql;
            sqlite3_close(db);
        }
        TraceReader reader(path);
        EXPECT_EQ(reader.has_indexes(), indexed);
        for (TimeNs begin : {TimeNs{0}, TimeNs{25'000}, TimeNs{105'000}, TimeNs{340'000}, TimeNs{10'000'000}}) {
            for (TimeNs length : {TimeNs{1}, TimeNs{20'000}, TimeNs{150'000}}) {
                TimeNs end = begin + length;
                std::vector<RangeEvent> expected;
                for (const RangeEvent& r : sorted_by(sample.ranges, &RangeEvent::start_ns))
                    if (r.thread_id == sample.main_thread.thread_id && r.start_ns < end && r.end_ns > begin)
                        expected.push_back(r);
                std::vector<RangeEvent> got;
                EventQuery query{sample.main_thread.thread_id, begin, end};
                reader.for_each_range(query, collect_into(got));
                EXPECT_EQ(got, expected) << "ranges in [" << begin << ", " << end << ") indexed=" << indexed;

                std::vector<KernelEvent> expected_kernels;
                for (const KernelEvent& k : sample.kernels)
                    if (k.start_ns < end && k.end_ns > begin) expected_kernels.push_back(k);
                std::vector<KernelEvent> got_kernels;
                reader.for_each_kernel({sample.compute_stream.stream_id, begin, end}, collect_into(got_kernels));
                EXPECT_EQ(got_kernels, expected_kernels) << "kernels in [" << begin << ", " << end << ")";

                std::vector<CounterSample> expected_samples;
                for (const CounterSample& c : sample.counter_samples)
                    if (c.time_ns >= begin && c.time_ns < end) expected_samples.push_back(c);
                std::vector<CounterSample> got_samples;
                reader.for_each_counter_sample({sample.utilization.counter_id, begin, end}, collect_into(got_samples));
                EXPECT_EQ(got_samples, expected_samples);
            }
        }
        // No kernels on the copy stream; stopping early visits one event.
        std::vector<KernelEvent> none;
        reader.for_each_kernel({sample.copy_stream.stream_id}, collect_into(none));
        EXPECT_TRUE(none.empty());
        int visited = 0;
        reader.for_each_api_call({}, [&](const ApiEvent&) { return ++visited < 1; });
        EXPECT_EQ(visited, 1);
    }
}

// Without a track, events of every track come back in one start-time order
// (indexed files merge per-track index scans; others sort) — same answer both ways.
TEST(TraceStoreRoundTrip, AllTracksMergeInStartOrder) {
    ScratchDir dir;
    std::string path = dir.file("merge.db");
    std::vector<KernelEvent> written;
    {
        TraceWriter writer(path, RunInfo{}, testing::quiet_options());
        StreamId streams[3];
        for (int i = 0; i < 3; ++i)
            streams[i] = writer.register_stream({0, 0, 1, static_cast<std::uint64_t>(i), 0, ""});
        // Interleaved, unique start times; each stream's kernels recorded in order, streams shuffled.
        for (int i = 0; i < 3000; ++i) {
            KernelEvent k;
            int stream = (i * 7) % 3;
            k.start_ns = 1000 + static_cast<TimeNs>(i) * 10 + stream;
            k.end_ns = k.start_ns + 5 + (i % 4 == 0 ? 40 : 0);
            k.stream_id = streams[stream];
            k.correlation_id = static_cast<CorrelationId>(i + 1);
            written.push_back(k);
            ASSERT_TRUE(writer.record_kernel(k));
        }
        writer.close();
    }
    std::vector<KernelEvent> expected = sorted_by(written, &KernelEvent::start_ns);
    for (bool indexed : {true, false}) {
        if (!indexed) {
            sqlite3* db = nullptr;
            ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
            ASSERT_EQ(sqlite3_exec(db, "DROP INDEX kernels_by_stream_start", nullptr, nullptr, nullptr), SQLITE_OK);
            sqlite3_close(db);
        }
        TraceReader reader(path);
        ASSERT_EQ(reader.has_indexes(), indexed);
        std::vector<KernelEvent> got;
        EXPECT_EQ(reader.for_each_kernel({}, collect_into(got)), 3000);
        EXPECT_EQ(got, expected) << "indexed=" << indexed;
        // A window over all tracks, and stopping early.
        std::vector<KernelEvent> window;
        reader.for_each_kernel({std::nullopt, 5000, 6000}, collect_into(window));
        std::vector<KernelEvent> expected_window;
        for (const KernelEvent& k : expected)
            if (k.start_ns < 6000 && k.end_ns > 5000) expected_window.push_back(k);
        EXPECT_EQ(window, expected_window);
        int visited = 0;
        EXPECT_EQ(reader.for_each_kernel({}, [&](const KernelEvent&) { return ++visited < 10; }), 10);
    }
}

TEST(TraceStoreRoundTrip, TrackSummariesCountEveryLane) {
    ScratchDir dir;
    std::string path = dir.file("tracks.db");
    testing::SampleTrace sample = write_sample_trace(path, 5);
    TraceReader reader(path);
    auto find = [&](const std::string& table, std::uint32_t id) -> const TrackSummary* {
        for (const TrackSummary& t : reader.tracks())
            if (t.event_table == table && t.track.id == id) return &t;
        return nullptr;
    };
    const TrackSummary* kernels = find("kernels", sample.compute_stream.stream_id);
    ASSERT_NE(kernels, nullptr);
    EXPECT_EQ(kernels->track.kind, TrackKind::stream);
    EXPECT_EQ(kernels->event_count, 5);
    EXPECT_EQ(kernels->first_start_ns, sample.kernels.front().start_ns);
    EXPECT_EQ(kernels->last_end_ns, sample.kernels.back().end_ns);
    EXPECT_EQ(kernels->max_duration_ns, 24'000);
    const TrackSummary* ranges = find("ranges", sample.main_thread.thread_id);
    ASSERT_NE(ranges, nullptr);
    EXPECT_EQ(ranges->track.kind, TrackKind::thread);
    EXPECT_EQ(ranges->event_count, 15);
    EXPECT_EQ(ranges->max_duration_ns, 90'000);
    const TrackSummary* counters = find("counter_samples", sample.utilization.counter_id);
    ASSERT_NE(counters, nullptr);
    EXPECT_EQ(counters->track.kind, TrackKind::counter);
    EXPECT_EQ(find("kernels", sample.copy_stream.stream_id), nullptr);

    // What the writer accumulated equals what a scan of the rows computes.
    std::vector<TrackSummary> written = reader.tracks();
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "DELETE FROM track_stats", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
    TraceReader rescanned(path);
    auto key = [](const TrackSummary& t) { return std::make_pair(t.event_table, t.track.id); };
    std::sort(written.begin(), written.end(), [&](auto& a, auto& b) { return key(a) < key(b); });
    std::vector<TrackSummary> scanned = rescanned.tracks();
    std::sort(scanned.begin(), scanned.end(), [&](auto& a, auto& b) { return key(a) < key(b); });
    ASSERT_EQ(written.size(), scanned.size());
    for (std::size_t i = 0; i < written.size(); ++i) {
        EXPECT_EQ(written[i].event_table, scanned[i].event_table);
        EXPECT_EQ(written[i].track, scanned[i].track);
        EXPECT_EQ(written[i].event_count, scanned[i].event_count);
        EXPECT_EQ(written[i].first_start_ns, scanned[i].first_start_ns);
        EXPECT_EQ(written[i].last_end_ns, scanned[i].last_end_ns);
        EXPECT_EQ(written[i].max_duration_ns, scanned[i].max_duration_ns);
    }
}

// Many producer threads at once: every event arrives, each thread registered once.
TEST(TraceStoreWriter, ManyThreadsLoseNothingUnderBlockPolicy) {
    ScratchDir dir;
    std::string path = dir.file("threads.db");
    constexpr int kThreads = 4;
    constexpr int kPerThread = 50'000;
    {
        WriterOptions options = testing::quiet_options();
        options.ring_capacity_events = 1024;  // small: producers must wait for the writer
        TraceWriter writer(path, RunInfo{}, options);
        StringId name = writer.intern("cudaLaunchKernel");
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t) {
            threads.emplace_back([&writer, name, t] {
                ThreadId self = writer.current_thread();
                for (int i = 0; i < kPerThread; ++i) {
                    TimeNs start = i * 10;
                    ASSERT_TRUE(writer.record_api_call(
                        {start, start + 5, self, static_cast<CorrelationId>(t * kPerThread + i + 1), name, 0}));
                }
            });
        }
        for (auto& thread : threads) thread.join();
        writer.close();
        EXPECT_EQ(writer.stats().events_written, std::uint64_t{kThreads} * kPerThread);
        EXPECT_EQ(writer.stats().events_dropped, 0u);
    }
    TraceReader reader(path);
    EXPECT_EQ(reader.event_count("api_calls"), kThreads * kPerThread);
    EXPECT_EQ(reader.threads().size(), std::size_t{kThreads});
    EXPECT_EQ(reader.total_dropped(), 0u);
    // Per thread, the events come back in order and complete.
    for (const ThreadInfo& thread : reader.threads()) {
        std::int64_t expected_start = 0;
        reader.for_each_api_call({thread.thread_id}, [&](const ApiEvent& e) {
            EXPECT_EQ(e.start_ns, expected_start);
            expected_start += 10;
            return true;
        });
        EXPECT_EQ(expected_start, kPerThread * 10);
    }
}

// A full ring under the drop policy counts what it drops, and the count is stored.
TEST(TraceStoreWriter, OverflowIsCountedAndStored) {
    ScratchDir dir;
    std::string path = dir.file("overflow.db");
    std::uint64_t refused = 0;
    constexpr int kEvents = 200'000;
    {
        WriterOptions options = testing::quiet_options();
        options.overflow = OverflowPolicy::drop;
        options.ring_capacity_events = 1024;
        TraceWriter writer(path, RunInfo{}, options);
        ThreadId self = writer.current_thread();
        for (int i = 0; i < kEvents; ++i)
            if (!writer.record_counter({1, i, 1.0})) ++refused;
        writer.close();
        EXPECT_GT(refused, 0u) << "a 1024-event ring should overflow at this rate";
        EXPECT_EQ(writer.stats().events_dropped, refused);
        (void)self;
    }
    TraceReader reader(path);
    EXPECT_EQ(reader.event_count("counter_samples") + static_cast<std::int64_t>(refused), kEvents);
    EXPECT_EQ(reader.total_dropped(), refused);
    if (refused > 0) {
        std::vector<DroppedRecords> rows = reader.dropped_records();
        ASSERT_FALSE(rows.empty());
        EXPECT_EQ(reader.string(rows[0].source_id), "writer buffer full");
        EXPECT_EQ(rows[0].thread_id, reader.threads().at(0).thread_id);
    }
}

TEST(TraceStoreWriter, FlushMakesEventsVisibleToAConcurrentReader) {
    ScratchDir dir;
    std::string path = dir.file("live.db");
    TraceWriter writer(path, RunInfo{}, testing::quiet_options());
    StringId name = writer.intern("loss");
    CounterId loss = writer.register_counter({0, "loss", "", kNoDevice});
    for (int i = 0; i < 1000; ++i) writer.record_counter({loss, i, 1.0 / (i + 1)});
    writer.flush();
    {
        TraceReader reader(path);
        EXPECT_FALSE(reader.complete());
        EXPECT_EQ(reader.event_count("counter_samples"), 1000);
        EXPECT_EQ(reader.counters().at(0).name, "loss");
        EXPECT_EQ(reader.string(name), "loss");
    }
    writer.close();
    EXPECT_THROW(writer.flush(), TraceError);
    EXPECT_FALSE(writer.record_counter({loss, 5, 1.0}));
    TraceReader reader(path);
    EXPECT_TRUE(reader.complete());
}

// Rows stored after a rowid mark: exactly the later ones, on any track, also on a
// track that appeared after the reader opened.
TEST(TraceStoreReader, RowidBoundsSelectRowsStoredLater) {
    ScratchDir dir;
    std::string path = dir.file("growing.db");
    TraceWriter writer(path, RunInfo{}, testing::quiet_options());
    CounterId loss = writer.register_counter({0, "loss", "", kNoDevice});
    for (int i = 0; i < 100; ++i) writer.record_counter({loss, i, 1.0});
    writer.flush();
    TraceReader reader(path);
    CounterId late = writer.register_counter({0, "lr", "", kNoDevice});
    for (int i = 100; i < 130; ++i) writer.record_counter({i % 2 ? late : loss, i, 2.0});
    writer.flush();
    EventQuery newer;
    newer.after_rowid = 100;
    std::vector<TimeNs> times;
    reader.for_each_counter_sample(newer, [&](const CounterSample& sample) {
        times.push_back(sample.time_ns);
        EXPECT_EQ(sample.value, 2.0);
        return true;
    });
    ASSERT_EQ(times.size(), 30u);
    EXPECT_EQ(times.front(), 100);
    EventQuery window = newer;
    window.upto_rowid = 110;
    window.track = late;
    EXPECT_EQ(reader.for_each_counter_sample(window, [](const CounterSample&) { return true; }), 5);
    writer.close();
}

// A reader still open at close (a live viewer): close() succeeds, the file stays in WAL
// mode, and a later reader sees it complete with every event.
TEST(TraceStoreWriter, CloseWhileAReaderIsOpenKeepsEverything) {
    ScratchDir dir;
    std::string path = dir.file("watched.db");
    TraceWriter writer(path, RunInfo{}, testing::quiet_options());
    CounterId loss = writer.register_counter({0, "loss", "", kNoDevice});
    for (int i = 0; i < 500; ++i) writer.record_counter({loss, i, 1.0});
    writer.flush();
    {
        TraceReader watching(path);
        EXPECT_EQ(watching.event_count("counter_samples"), 500);
        for (int i = 500; i < 700; ++i) writer.record_counter({loss, i, 1.0});
        EXPECT_NO_THROW(writer.close());
    }
    TraceReader after(path);
    EXPECT_TRUE(after.complete());
    EXPECT_EQ(after.event_count("counter_samples"), 700);
}

// Every row of every table of the file, as text, table by table in rowid order, and
// the file's index definitions; run_metadata's wall-clock keys are left out.
std::string file_contents(const std::string& path) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    auto rows_of = [&](const std::string& sql) {
        std::string text;
        sqlite3_stmt* statement = nullptr;
        EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr), SQLITE_OK) << sql;
        while (sqlite3_step(statement) == SQLITE_ROW) {
            for (int column = 0; column < sqlite3_column_count(statement); ++column) {
                const unsigned char* value = sqlite3_column_text(statement, column);
                text += value != nullptr ? reinterpret_cast<const char*>(value) : "NULL";
                text += '|';
            }
            text += '\n';
        }
        sqlite3_finalize(statement);
        return text;
    };
    std::string contents = rows_of("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name");
    std::string tables = rows_of("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
    for (std::size_t at = 0, end; (end = tables.find("|\n", at)) != std::string::npos; at = end + 2) {
        const std::string table = tables.substr(at, end - at);
        const std::string filter = table == "run_metadata" ? " WHERE key NOT IN ('created_at', 'host', 'pid')" : "";
        contents += "== " + table + "\n" + rows_of("SELECT * FROM " + table + filter);
    }
    contents += "integrity: " + rows_of("PRAGMA integrity_check");
    sqlite3_close(db);
    return contents;
}

// Indexes filled as rows arrive (an import's writer) hold exactly what indexes built
// at close hold: the file is the same, and SQLite's integrity check, which compares
// every index entry with its row, passes. No journal is kept meanwhile.
TEST(TraceStoreWriter, IndexingWhileWritingGivesTheSameFile) {
    ScratchDir dir;
    const std::string built_at_close = dir.file("at_close.db"), built_while = dir.file("while.db");
    testing::write_sample_trace(built_at_close, 50);
    WriterOptions options = testing::quiet_options();
    options.index_while_writing = true;
    options.journal = WriterOptions::Journal::none;
    testing::write_sample_trace(built_while, 50, options);
    const std::string contents = file_contents(built_while);
    EXPECT_NE(contents.find("integrity: ok|"), std::string::npos) << contents.substr(contents.find("integrity: "));
    EXPECT_EQ(contents, file_contents(built_at_close));
    EXPECT_TRUE(TraceReader(built_while).has_indexes());

    TraceWriter writer(dir.file("unjournaled.db"), RunInfo{}, options);
    CounterId loss = writer.register_counter({0, "loss", "", kNoDevice});
    for (int i = 0; i < 500; ++i) writer.record_counter({loss, i, 1.0});
    writer.flush();
    EXPECT_FALSE(std::filesystem::exists(dir.file("unjournaled.db-wal")));
    EXPECT_FALSE(std::filesystem::exists(dir.file("unjournaled.db-journal")));
    EXPECT_EQ(writer.stats().tables_indexed_at_close, 0u);
    writer.close();
    EXPECT_EQ(TraceReader(dir.file("unjournaled.db")).event_count("counter_samples"), 500);
}

// Rows that arrive out of order would land all over a growing index: past 1/8 of the
// first 65,536 rows of a table, its indexes are dropped and built at close, and the
// file ends up as complete as any.
TEST(TraceStoreWriter, RowsOutOfOrderHaveTheirIndexesBuiltAtClose) {
    ScratchDir dir;
    const std::string path = dir.file("shuffled.db");
    WriterOptions options = testing::quiet_options();
    options.index_while_writing = true;
    options.journal = WriterOptions::Journal::none;
    std::vector<KernelEvent> kernels;
    std::vector<ApiEvent> calls;
    {
        TraceWriter writer(path, RunInfo{}, options);
        StreamInfo stream_info;
        stream_info.cuda_stream_id = 7;
        const StreamId stream = writer.register_stream(stream_info);
        const ThreadId thread = writer.current_thread();
        const StringId name = writer.intern("k");
        std::vector<TimeNs> starts(100'000);
        for (std::size_t i = 0; i < starts.size(); ++i) starts[i] = static_cast<TimeNs>(i) * 10;
        std::mt19937 random(7);
        std::shuffle(starts.begin(), starts.end(), random);
        for (std::size_t i = 0; i < starts.size(); ++i) {
            KernelEvent kernel;
            kernel.start_ns = starts[i];
            kernel.end_ns = starts[i] + 5;
            kernel.stream_id = stream;
            kernel.correlation_id = i + 1;
            kernel.name_id = name;
            ApiEvent call;
            call.start_ns = static_cast<TimeNs>(i) * 10;
            call.end_ns = call.start_ns + 3;
            call.thread_id = thread;
            call.correlation_id = i + 1;
            call.name_id = name;
            ASSERT_TRUE(writer.record_kernel(kernel));
            ASSERT_TRUE(writer.record_api_call(call));
            kernels.push_back(kernel);
            calls.push_back(call);
        }
        writer.flush();                                         // a commit: the kernels' order is judged
        EXPECT_EQ(writer.stats().tables_indexed_at_close, 1u);  // kernels; API calls came in order
        writer.close();
    }
    TraceReader reader(path);
    EXPECT_TRUE(reader.has_indexes());
    const std::string contents = file_contents(path);
    EXPECT_NE(contents.find("integrity: ok|"), std::string::npos) << contents.substr(contents.find("integrity: "));
    EXPECT_EQ(all_events(reader, &TraceReader::for_each_kernel), sorted_by(kernels, &KernelEvent::start_ns));
    EXPECT_EQ(all_events(reader, &TraceReader::for_each_api_call), calls);
}

TEST(TraceStoreWriter, UnwritablePathIsATraceErrorNamingIt) {
    try {
        TraceWriter writer("/nonexistent-dir/sub/trace.db", RunInfo{}, testing::quiet_options());
        FAIL() << "opened an impossible path";
    } catch (const TraceError& error) {
        EXPECT_NE(std::string(error.what()).find("/nonexistent-dir/sub/trace.db"), std::string::npos);
    }
}

}  // namespace
}  // namespace ember::store
