// chrome_test.cpp: the Chrome Trace Event importer. ember's own export round-trips:
// synth -> `export --format chrome` -> import gives the same kernel, CUDA API, NVTX and
// memory tables of profiler/analysis, the same tracks and the same API-to-GPU links, and
// the same collective metadata.
// Generic Trace Event files import too: "B"/"E" pairs nest, "b"/"e" become start/end
// ranges, instants marks, "C" events counters, metadata names threads and processes.
#include "profiler/analysis/duration_summary.h"
#include "profiler/export/chrome_trace.h"
#include "profiler/import/import.h"
#include "profiler/store/reader.h"
#include "profiler/synth/synthetic_job.h"
#include "profiler/synth/synthetic_trace.h"
#include "tests/profiler/import/event_lists.h"
#include "tests/profiler/import/import_fixtures.h"
#include "tests/profiler/import/import_steps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

namespace {

using namespace ember;
using import_test::all_events;
using import_test::TempDir;

void expect_same_rows(const std::vector<analysis::DurationSummaryRow>& a,
                      const std::vector<analysis::DurationSummaryRow>& b, const char* what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    for (std::size_t i = 0; i < a.size(); ++i) {
        SCOPED_TRACE(std::string(what) + ": " + a[i].name);
        EXPECT_EQ(a[i].name, b[i].name);
        EXPECT_EQ(a[i].domain, b[i].domain);
        EXPECT_EQ(a[i].style, b[i].style);
        EXPECT_EQ(a[i].stats.instances, b[i].stats.instances);
        EXPECT_EQ(a[i].stats.total_ns, b[i].stats.total_ns);
        EXPECT_EQ(a[i].stats.min_ns, b[i].stats.min_ns);
        EXPECT_EQ(a[i].stats.max_ns, b[i].stats.max_ns);
        EXPECT_EQ(a[i].stats.median_ns, b[i].stats.median_ns);
        EXPECT_DOUBLE_EQ(a[i].stats.stddev_ns, b[i].stats.stddev_ns);
    }
}

TEST(ChromeRoundTrip, SynthExportImportGivesTheSameTables) {
    TempDir dir;
    synth::SyntheticTraceOptions options;
    options.events = 30'000;
    options.seed = 11;
    synth::write_synthetic_traces(dir.path("synth.db"), options);
    import_test::export_chrome(dir.path("synth.db"), dir.path("synth.json"));
    importing::ImportedFile imported =
        import_test::import_detected(dir.path("synth.json"), dir.path("back.db"), importing::SourceFormat::chrome);
    store::TraceReader original(dir.path("synth.db")), back(dir.path("back.db"));

    expect_same_rows(analysis::kernel_summary(original), analysis::kernel_summary(back), "kernels");
    expect_same_rows(analysis::api_summary(original), analysis::api_summary(back), "api");
    expect_same_rows(analysis::range_summary(original), analysis::range_summary(back), "nvtx");
    expect_same_rows(analysis::memory_time_summary(original), analysis::memory_time_summary(back), "memory time");
    expect_same_rows(analysis::memory_size_summary(original), analysis::memory_size_summary(back), "memory size");
    for (const char* table : {"kernels", "memcpys", "memsets", "synchronizations", "api_calls", "ranges", "marks",
                              "counter_samples", "collector_overhead"}) {
        EXPECT_EQ(original.event_count(table), back.event_count(table)) << table;
    }
    // Absolute times come back through the export's time origin.
    EXPECT_EQ(all_events(original, &store::TraceReader::for_each_kernel).front().start_ns,
              all_events(back, &store::TraceReader::for_each_kernel).front().start_ns);
    EXPECT_EQ(original.run().start_ns, back.run().start_ns);
    // Every API call still reaches its GPU work.
    EXPECT_EQ(imported.counts.unlinked_gpu_events, 0);
    EXPECT_EQ(imported.counts.flows,
              original.event_count("kernels") + original.event_count("memcpys") + original.event_count("memsets"));
    // Tracks: streams keep their CUDA ids and names, threads their OS ids and names.
    std::set<std::pair<std::uint64_t, std::string>> streams_a, streams_b;
    for (const auto& s : original.streams()) streams_a.insert({s.cuda_stream_id, s.name});
    for (const auto& s : back.streams()) streams_b.insert({s.cuda_stream_id, s.name});
    EXPECT_EQ(streams_a, streams_b);
    std::set<std::pair<std::int64_t, std::string>> threads_a, threads_b;
    for (const auto& t : original.threads()) {
        if (original.event_count("ranges") > 0) threads_a.insert({t.tid, t.name});
    }
    for (const auto& t : back.threads()) threads_b.insert({t.tid, t.name});
    for (const auto& thread : threads_b) EXPECT_TRUE(threads_a.count(thread)) << thread.second;
    ASSERT_EQ(back.devices().size(), original.devices().size());
    EXPECT_EQ(back.devices()[0].name, original.devices()[0].name);
    ASSERT_EQ(back.processes().size(), 1u);
    EXPECT_EQ(back.processes()[0].name, original.processes()[0].name);
    // Counters keep their names and units.
    std::set<std::string> counters_a, counters_b;
    for (const auto& c : original.counters()) counters_a.insert(c.name + "|" + c.unit);
    for (const auto& c : back.counters()) counters_b.insert(c.name + "|" + c.unit);
    EXPECT_EQ(counters_a, counters_b);
}

// An imported trace is an ember trace like any other: its export comes back the same.
// Kineto's collective metadata (a rank of a two-dimensional job) is written under
// Kineto's own argument names and read back: the same rows, on the same events.
TEST(ChromeRoundTrip, CollectiveMetadataComesBack) {
    TempDir dir;
    synth::SyntheticJobOptions options;
    options.ranks = 4;
    options.steps = 3;
    options.tensor_parallel = 2;
    synth::write_synthetic_job(dir.path("mesh.db"), options);
    const std::string rank = synth::synthetic_rank_paths(dir.path("mesh.db"), 4)[3];
    import_test::export_chrome(rank, dir.path("mesh.json"));
    import_test::import_detected(dir.path("mesh.json"), dir.path("back.db"), importing::SourceFormat::chrome);
    store::TraceReader original(rank), back(dir.path("back.db"));
    // As text: the string and stream ids are the file's own.
    auto rows = [](const store::TraceReader& reader) {
        std::map<trace::TimeNs, std::vector<std::string>> kernel_start;
        reader.for_each_kernel({}, [&](const trace::KernelEvent& k) {
            kernel_start[k.start_ns].push_back(std::to_string(k.stream_id));
            return true;
        });
        std::vector<std::string> list;
        for (const trace::CollectiveCall& call : reader.collective_calls()) {
            EXPECT_TRUE(call.on_stream);
            EXPECT_EQ(kernel_start.count(call.start_ns), 1u) << "no kernel starts at " << call.start_ns;
            list.push_back(std::to_string(call.start_ns) + " " + std::string(reader.string(call.name_id)) + " " +
                           std::string(reader.string(call.group_name_id)) + " " +
                           std::string(reader.string(call.group_desc_id)) + " " +
                           std::string(reader.string(call.group_ranks_id)) + " " + std::to_string(call.group_size) +
                           " " + std::to_string(call.sequence) + " " + std::to_string(call.in_elements) + " " +
                           std::string(reader.string(call.dtype_id)));
        }
        return list;
    };
    const std::vector<std::string> before = rows(original);
    ASSERT_EQ(before.size(), 6u);  // two collectives a step
    EXPECT_EQ(rows(back), before);
    EXPECT_NE(before[0].find("mesh_tp [2, 3] 2 1"), std::string::npos) << before[0];
}

TEST(ChromeRoundTrip, AnImportedKinetoTraceExportsAndComesBack) {
    TempDir dir;
    import_test::write_file(dir.path("k.json"), import_test::kineto_fixture());
    importing::import_file(dir.path("k.json"), dir.path("k.db"));
    {
        store::TraceReader imported(dir.path("k.db"));
        exporting::OutputFile out(dir.path("k.chrome.json"));
        exporting::export_chrome_trace(imported, out);
        out.close();
    }
    importing::import_file(dir.path("k.chrome.json"), dir.path("back.db"));
    store::TraceReader imported(dir.path("k.db")), back(dir.path("back.db"));
    expect_same_rows(analysis::kernel_summary(imported), analysis::kernel_summary(back), "kernels");
    expect_same_rows(analysis::api_summary(imported), analysis::api_summary(back), "api");
    expect_same_rows(analysis::range_summary(imported), analysis::range_summary(back), "nvtx");
    auto steps = all_events(back, &store::TraceReader::for_each_range);
    auto step =
        std::find_if(steps.begin(), steps.end(), [&](const auto& r) { return back.string(r.name_id) == "step"; });
    ASSERT_NE(step, steps.end());
    EXPECT_EQ(step->payload, trace::Payload::of_integer(7));
    EXPECT_EQ(step->category, 1u);
}

// The file's ranges by name (each name once).
std::map<std::string, trace::RangeEvent> ranges_by_name(const store::TraceReader& reader) {
    std::map<std::string, trace::RangeEvent> ranges;
    for (const auto& range : all_events(reader, &store::TraceReader::for_each_range)) {
        EXPECT_TRUE(ranges.emplace(std::string(reader.string(range.name_id)), range).second)
            << "two ranges named " << reader.string(range.name_id);
    }
    return ranges;
}

TEST(ChromeGeneric, EveryPhaseMapsToEmberEvents) {
    TempDir dir;
    // The JSON Array Format, closing bracket omitted (allowed by the format).
    import_test::write_file(dir.path("generic.json"), import_test::chrome_generic_fixture());
    importing::ImportedFile imported =
        import_test::import_detected(dir.path("generic.json"), dir.path("generic.db"), importing::SourceFormat::chrome);
    store::TraceReader reader(dir.path("generic.db"));
    const std::map<std::string, trace::RangeEvent> ranges = ranges_by_name(reader);
    ASSERT_EQ(ranges.size(), 4u);
    EXPECT_EQ(ranges.at("outer").start_ns, 10'000);
    EXPECT_EQ(ranges.at("outer").end_ns, 20'000);
    EXPECT_EQ(ranges.at("outer").depth, 0);
    EXPECT_EQ(reader.string(ranges.at("outer").domain_id), "app");
    EXPECT_EQ(ranges.at("inner").start_ns, 12'500);
    EXPECT_EQ(ranges.at("inner").parent_range_id, ranges.at("outer").range_id);
    EXPECT_EQ(ranges.at("inner").payload, trace::Payload::of_integer(3));
    EXPECT_EQ(ranges.at("sibling").depth, 1);
    EXPECT_EQ(ranges.at("request").depth, -1);  // async: start/end
    EXPECT_EQ(ranges.at("request").end_ns, 30'000);
    const trace::ThreadInfo* worker = reader.thread(ranges.at("outer").thread_id);
    ASSERT_NE(worker, nullptr);
    EXPECT_EQ(worker->name, "worker");
    EXPECT_EQ(worker->pid, 7);
    ASSERT_EQ(reader.processes().size(), 1u);
    EXPECT_EQ(reader.processes()[0].name, "renderer");
    EXPECT_EQ(imported.counts.marks, 1);
    EXPECT_EQ(imported.counts.counter_samples, 2);
    std::set<std::string> counters;
    for (const auto& counter : reader.counters()) counters.insert(counter.name);
    EXPECT_EQ(counters, (std::set<std::string>{"heap.free", "heap.used"}));
    EXPECT_EQ(imported.counts.skipped.at("flow event (links come from correlation ids)"), 1);
    EXPECT_EQ(imported.counts.skipped.at("phase 'O' (not imported)"), 1);
    EXPECT_EQ(imported.counts.skipped.at("\"B\" event never ended (\"E\" missing)"), 1);
}

// Keys are compared as the file spells them unless they hold an escape, which is
// decoded first ("p\u0068" is "ph"). A flow event is counted once "ph" says it is
// one; what follows in it is not decoded (not even a "ts" that is no time).
TEST(ChromeGeneric, EscapedKeysAndFlowEventsWhereverTheirPhaseIs) {
    TempDir dir;
    import_test::write_file(dir.path("keys.json"), R"json({"traceEvents": [
{"p\u0068": "X", "n\u0061me": "escaped", "t\u0073": 5, "dur": 2, "pid": 1, "tid": 2, "cat": "app"},
{"ph": "X", "name": "plain", "ts": 8, "dur": 1, "pid": 1, "tid": 2, "cat": "app"},
{"ph": "s", "id": 1, "ts": "not a time", "pid": 1, "tid": 2, "name": "flow", "cat": "links"},
{"id": 1, "ts": 9, "pid": 1, "tid": 2, "name": "flow", "cat": "links", "bp": "e", "ph": "f"}
]})json");
    importing::ImportedFile imported =
        import_test::import_detected(dir.path("keys.json"), dir.path("keys.db"), importing::SourceFormat::chrome);
    store::TraceReader reader(dir.path("keys.db"));
    const std::map<std::string, trace::RangeEvent> ranges = ranges_by_name(reader);
    ASSERT_EQ(ranges.size(), 2u);
    EXPECT_EQ(ranges.at("escaped").start_ns, 5'000);
    EXPECT_EQ(ranges.at("escaped").end_ns, 7'000);
    EXPECT_EQ(ranges.at("plain").start_ns, 8'000);
    EXPECT_EQ(imported.counts.skipped.at("flow event (links come from correlation ids)"), 2);
}

// Each thread's "X" ranges are nested as they come while they come in order; a thread
// whose range then comes out of order (here a parent after its children) is nested at
// the end, and its early rows are gone from the file: depth, parent, the counts and
// the thread's lane summary are those of a file in order. An async range written on
// that thread meanwhile stays.
TEST(ChromeGeneric, RangesOutOfOrderAreNestedAtTheEndAndTheirEarlyRowsGo) {
    TempDir dir;
    import_test::write_file(dir.path("order.json"), R"json({"traceEvents": [
{"ph": "X", "name": "a_outer", "ts": 1, "dur": 10, "pid": 1, "tid": 1, "cat": "app"},
{"ph": "X", "name": "b_child", "ts": 2, "dur": 3, "pid": 1, "tid": 2, "cat": "app"},
{"ph": "X", "name": "a_inner", "ts": 2, "dur": 5, "pid": 1, "tid": 1, "cat": "app"},
{"ph": "b", "name": "b_async", "ts": 2, "id": 9, "pid": 1, "tid": 2, "cat": "app"},
{"ph": "e", "name": "b_async", "ts": 40, "id": 9, "pid": 1, "tid": 2, "cat": "app"},
{"ph": "X", "name": "b_grandchild", "ts": 3, "dur": 1, "pid": 1, "tid": 2, "cat": "app"},
{"ph": "X", "name": "b_parent", "ts": 1, "dur": 20, "pid": 1, "tid": 2, "cat": "app"},
{"ph": "X", "name": "b_later", "ts": 25, "dur": 2, "pid": 1, "tid": 2, "cat": "app"}
]})json");
    importing::ImportedFile imported =
        import_test::import_detected(dir.path("order.json"), dir.path("order.db"), importing::SourceFormat::chrome);
    store::TraceReader reader(dir.path("order.db"));
    const std::map<std::string, trace::RangeEvent> ranges = ranges_by_name(reader);
    std::map<trace::RangeId, std::string> names;
    for (const auto& [name, range] : ranges) names[range.range_id] = name;
    ASSERT_EQ(ranges.size(), 7u);
    EXPECT_EQ(imported.counts.ranges, 7);
    auto parent_of = [&](const char* name) {
        const trace::RangeEvent& range = ranges.at(name);
        return range.parent_range_id == 0 ? std::string("-") : names.at(range.parent_range_id);
    };
    EXPECT_EQ(ranges.at("a_outer").depth, 0);
    EXPECT_EQ(parent_of("a_inner"), "a_outer");
    EXPECT_EQ(ranges.at("b_parent").depth, 0);
    EXPECT_EQ(parent_of("b_child"), "b_parent");
    EXPECT_EQ(ranges.at("b_child").depth, 1);
    EXPECT_EQ(parent_of("b_grandchild"), "b_child");
    EXPECT_EQ(ranges.at("b_grandchild").depth, 2);
    EXPECT_EQ(ranges.at("b_later").depth, 0);
    EXPECT_EQ(ranges.at("b_async").depth, -1);
    EXPECT_EQ(ranges.at("b_async").end_ns, 40'000);
    const trace::ThreadId b = ranges.at("b_child").thread_id;
    bool summarized = false;
    for (const store::TrackSummary& track : reader.tracks()) {
        if (track.event_table != "ranges" || track.track.id != b) continue;
        summarized = true;
        EXPECT_EQ(track.event_count, 5);
        EXPECT_EQ(track.first_start_ns, 1'000);
        EXPECT_EQ(track.last_end_ns, 40'000);
        EXPECT_EQ(track.max_duration_ns, 38'000);
    }
    EXPECT_TRUE(summarized);
    EXPECT_TRUE(reader.has_indexes());
}

// ember's export names a thread "main (tid 4242)": its events carry a small tid, the OS
// thread id is in the name. Every kind of host event of that thread lands on the one
// thread with the OS id: "X" ranges, "B"/"E" pairs, "b"/"e" start/end ranges and instants.
TEST(ChromeGeneric, EveryHostEventOfARenamedThreadLandsOnOneThread) {
    TempDir dir;
    import_test::write_file(dir.path("tids.json"), R"json({"traceEvents": [
      {"ph": "M", "name": "thread_name", "pid": 7, "tid": 3, "args": {"name": "main (tid 4242)"}},
      {"ph": "X", "name": "complete", "pid": 7, "tid": 3, "ts": 1, "dur": 10},
      {"ph": "B", "name": "begin_end", "pid": 7, "tid": 3, "ts": 2},
      {"ph": "E", "pid": 7, "tid": 3, "ts": 4},
      {"ph": "b", "name": "async", "cat": "app", "id": 9, "pid": 7, "tid": 3, "ts": 5},
      {"ph": "e", "name": "async", "cat": "app", "id": 9, "pid": 7, "tid": 3, "ts": 8},
      {"ph": "i", "name": "instant", "pid": 7, "tid": 3, "ts": 6}]})json");
    importing::import_file(dir.path("tids.json"), dir.path("tids.db"));
    store::TraceReader reader(dir.path("tids.db"));
    std::set<trace::ThreadId> threads;
    std::set<std::string> names;
    for (const auto& range : all_events(reader, &store::TraceReader::for_each_range)) {
        threads.insert(range.thread_id);
        names.insert(std::string(reader.string(range.name_id)));
    }
    for (const auto& mark : all_events(reader, &store::TraceReader::for_each_mark)) threads.insert(mark.thread_id);
    EXPECT_EQ(names, (std::set<std::string>{"complete", "begin_end", "async"}));
    ASSERT_EQ(threads.size(), 1u);
    const trace::ThreadInfo* thread = reader.thread(*threads.begin());
    ASSERT_NE(thread, nullptr);
    EXPECT_EQ(thread->tid, 4242);
    EXPECT_EQ(thread->name, "main");
    EXPECT_EQ(reader.threads().size(), 1u);
}

TEST(ChromeGeneric, AnEndWithoutABeginIsCountedOrAnErrorWhenStrict) {
    TempDir dir;
    import_test::write_file(dir.path("e.json"), R"({"traceEvents": [
      {"ph": "X", "name": "ok", "pid": 1, "tid": 1, "ts": 1, "dur": 1},
      {"ph": "E", "pid": 1, "tid": 1, "ts": 5}]})");
    try {
        import_test::import_strict(dir.path("e.json"), dir.path("e.db"));
        FAIL() << "an E with no B imported under --strict";
    } catch (const store::TraceError& error) {
        EXPECT_EQ(error.kind(), store::TraceErrorKind::bad_value);
        std::string message = error.what();
        EXPECT_NE(message.find(dir.path("e.json")), std::string::npos) << message;
        EXPECT_NE(message.find("element #1"), std::string::npos) << message;
        EXPECT_NE(message.find("closes nothing"), std::string::npos) << message;
    }
    importing::ImportedFile imported = import_test::import_skipping_invalid(dir.path("e.json"), dir.path("e.db"));
    EXPECT_EQ(imported.counts.ranges, 1);
    EXPECT_EQ(imported.counts.invalid.at("\"E\" without a \"B\"").count, 1);
    EXPECT_NE(imported.counts.invalid_summary().find("element #1"), std::string::npos)
        << imported.counts.invalid_summary();
}

}  // namespace
