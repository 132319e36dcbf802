// synth_test.cpp: the synthetic trace generator is deterministic for a seed and
// shaped like training (nested NVTX step ranges, kernels after their launch calls,
// serial streams, pinned and pageable copies, counters), one file per rank.
#include "profiler/store/reader.h"
#include "profiler/store/schema.h"
#include "profiler/synth/synthetic_trace.h"
#include "tests/support/store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <map>
#include <set>

namespace ember::synth {
namespace {

using namespace ember::trace;
using store::TraceReader;
using store::testing::ScratchDir;

// Every row of every table except run_metadata's timing-free keys, as text.
std::string dump_tables(const std::string& path) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    std::string out;
    for (const char* table : store::kRequiredTables) {
        std::string sql = std::string("SELECT * FROM ") + table;  // storage order: deterministic too
        sqlite3_stmt* statement = nullptr;
        EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr), SQLITE_OK) << sql;
        out += std::string("== ") + table + "\n";
        while (sqlite3_step(statement) == SQLITE_ROW) {
            for (int c = 0; c < sqlite3_column_count(statement); ++c) {
                const unsigned char* text = sqlite3_column_text(statement, c);
                out += text ? reinterpret_cast<const char*>(text) : "NULL";
                out += '|';
            }
            out += '\n';
        }
        sqlite3_finalize(statement);
    }
    sqlite3_close(db);
    return out;
}

TEST(SyntheticTrace, SameSeedGivesIdenticalContent) {
    ScratchDir dir;
    SyntheticTraceOptions options;
    options.events = 5000;
    options.seed = 7;
    write_synthetic_traces(dir.file("a.db"), options);
    write_synthetic_traces(dir.file("b.db"), options);
    std::string a = dump_tables(dir.file("a.db"));
    EXPECT_GT(a.size(), 100'000u);
    EXPECT_EQ(a, dump_tables(dir.file("b.db")));
    options.seed = 8;
    write_synthetic_traces(dir.file("c.db"), options);
    EXPECT_NE(a, dump_tables(dir.file("c.db")));
}

TEST(SyntheticTrace, EventCountIsWhatWasAskedWithinOneStep) {
    ScratchDir dir;
    for (std::int64_t events : {1000, 25'000}) {
        SyntheticTraceOptions options;
        options.events = events;
        std::string path = dir.file("count" + std::to_string(events) + ".db");
        std::vector<SyntheticRankSummary> summary = write_synthetic_traces(path, options);
        ASSERT_EQ(summary.size(), 1u);
        TraceReader reader(path);
        std::int64_t stored = 0;
        for (const store::EventTableInfo& table : store::kEventTables) stored += reader.event_count(table.name);
        EXPECT_EQ(stored, summary[0].events);
        EXPECT_GE(stored, events);
        EXPECT_LT(stored, events + 200);  // one step is ~130 events
        EXPECT_TRUE(reader.complete());
        EXPECT_EQ(reader.total_dropped(), 0u);
    }
}

TEST(SyntheticTrace, StepsAreShapedLikeTraining) {
    ScratchDir dir;
    std::string path = dir.file("shape.db");
    SyntheticTraceOptions options;
    options.events = 20'000;
    options.ranks = 1;
    write_synthetic_traces(path, options);
    TraceReader reader(path);
    EXPECT_EQ(reader.run().clock_name, "synthetic");
    EXPECT_EQ(reader.streams().size(), 3u);
    EXPECT_EQ(reader.devices().size(), 1u);

    // NVTX: step at depth 0; forward/backward/optimizer/waits directly inside a step.
    std::map<RangeId, RangeEvent> ranges;
    std::map<std::string, int> names;
    reader.for_each_range({}, [&](const RangeEvent& r) {
        ranges[r.range_id] = r;
        names[std::string(reader.string(r.name_id))]++;
        return true;
    });
    for (const char* expected : {"step", "forward", "backward", "optimizer", "dataloader/wait", "allreduce/wait",
                                 "allreduce/bucket", "dataloader/load", "dataloader/decode", "conv1", "conv1.backward"})
        EXPECT_GT(names[expected], 0) << expected;
    int steps = names["step"];
    EXPECT_EQ(names["forward"], steps);
    EXPECT_EQ(names["backward"], steps);
    EXPECT_EQ(names["optimizer"], steps);
    EXPECT_EQ(names["dataloader/wait"], steps);
    for (const auto& [id, r] : ranges) {
        std::string name(reader.string(r.name_id));
        EXPECT_LT(r.start_ns, r.end_ns) << name;
        if (name == "step") {
            EXPECT_EQ(r.depth, 0);
            EXPECT_EQ(r.parent_range_id, 0u);
            EXPECT_EQ(r.payload.kind, PayloadKind::integer);
        }
        if (name == "forward" || name == "backward" || name == "optimizer" || name == "dataloader/wait" ||
            name == "allreduce/wait") {
            ASSERT_TRUE(ranges.count(r.parent_range_id)) << name;
            EXPECT_EQ(reader.string(ranges[r.parent_range_id].name_id), "step");
            EXPECT_EQ(r.depth, 1);
        }
        if (r.parent_range_id != 0) {
            const RangeEvent& parent = ranges.at(r.parent_range_id);
            EXPECT_EQ(r.depth, parent.depth + 1);
            EXPECT_GE(r.start_ns, parent.start_ns);
            EXPECT_LE(r.end_ns, parent.end_ns);
        }
        if (name == "allreduce/bucket") {
            EXPECT_GT(r.payload.integer, 0);
        }
    }

    // Kernels: after their launch call (same correlation id), never overlapping on a stream.
    std::map<StreamId, TimeNs> stream_end;
    std::int64_t kernels = 0;
    reader.for_each_kernel({}, [&](const KernelEvent& k) {
        ++kernels;
        std::optional<ApiEvent> call = reader.api_call_by_correlation(k.correlation_id);
        EXPECT_TRUE(call.has_value());
        if (call) {
            EXPECT_EQ(reader.string(call->name_id), "cudaLaunchKernel");
            EXPECT_LE(call->start_ns, k.start_ns);
        }
        EXPECT_GE(k.start_ns, stream_end[k.stream_id]) << "kernels overlap on stream " << k.stream_id;
        stream_end[k.stream_id] = k.end_ns;
        EXPECT_GT(k.launch.block_x, 0u);
        return kernels < 3000;  // enough to check; keeps the test quick
    });
    EXPECT_GE(stream_end.size(), 2u);  // compute and nccl

    std::set<int> source_kinds;
    reader.for_each_memcpy({}, [&](const MemcpyEvent& m) {
        EXPECT_EQ(m.direction, MemcpyDirection::host_to_device);
        source_kinds.insert(static_cast<int>(m.source_kind));
        return true;
    });
    EXPECT_TRUE(source_kinds.count(static_cast<int>(MemoryKind::pinned)));
    EXPECT_TRUE(source_kinds.count(static_cast<int>(MemoryKind::pageable)));
    EXPECT_GT(reader.event_count("memsets"), 0);
    EXPECT_GT(reader.event_count("synchronizations"), 0);
    EXPECT_GT(reader.event_count("stack_samples"), 0);
    EXPECT_GT(reader.event_count("marks"), 0);
    EXPECT_GT(reader.event_count("collector_overhead"), 0);

    std::set<std::string> counter_names;
    for (const CounterInfo& counter : reader.counters()) counter_names.insert(counter.name);
    for (const char* expected : {"gpu utilization", "loss", "lr"})
        EXPECT_TRUE(counter_names.count(expected)) << expected;
    reader.for_each_counter_sample({reader.counters()[0].counter_id}, [&](const CounterSample& sample) {
        EXPECT_GE(sample.value, 0.0);
        EXPECT_LE(sample.value, 100.0);
        return true;
    });
}

TEST(SyntheticTrace, OneFilePerRank) {
    EXPECT_EQ(synthetic_rank_paths("job.db", 1), std::vector<std::string>{"job.db"});
    EXPECT_EQ(synthetic_rank_paths("job.db", 2), (std::vector<std::string>{"job.rank0.db", "job.rank1.db"}));
    EXPECT_EQ(synthetic_rank_paths("out/trace", 2),
              (std::vector<std::string>{"out/trace.rank0.db", "out/trace.rank1.db"}));

    ScratchDir dir;
    SyntheticTraceOptions options;
    options.events = 3000;
    options.ranks = 3;
    write_synthetic_traces(dir.file("job.db"), options);
    std::set<std::string> dumps;
    for (int rank = 0; rank < 3; ++rank) {
        std::string path = dir.file("job.rank" + std::to_string(rank) + ".db");
        TraceReader reader(path);
        EXPECT_EQ(reader.run().rank, rank);
        EXPECT_EQ(reader.run().world_size, 3);
        EXPECT_EQ(reader.devices().at(0).device_id, rank);
        dumps.insert(dump_tables(path));
    }
    EXPECT_EQ(dumps.size(), 3u) << "ranks must differ";
}

TEST(SyntheticTrace, BadOptionsAreRefused) {
    ScratchDir dir;
    SyntheticTraceOptions options;
    options.events = 0;
    EXPECT_THROW(write_synthetic_traces(dir.file("x.db"), options), std::invalid_argument);
    options.events = 1000;
    EXPECT_THROW(write_synthetic_traces("/nonexistent-dir/x.db", options), store::TraceError);
}

}  // namespace
}  // namespace ember::synth
