// kineto_test.cpp: every Kineto mapping rule on hand-written traces whose numbers are
// known (import_fixtures.h): GPU work on its device and stream with launch shapes,
// API calls on their threads linked by correlation id, host ranges nested by time,
// ProfilerStep#N as ember's step, the DataLoader wait, NCCL on a "nccl" stream,
// unlinked GPU events kept and counted, the top-level keys wherever they are, exact
// nanoseconds, gzip, the 2021 category names, nesting that spills to disk, cuda_sync
// events (and the synchronizing calls where there are none), events that cannot be
// placed skipped and named (refused under strict), and ranges written while the file is
// read numbered and nested exactly as nesting at the end numbers and nests them.
#include "profiler/analysis/gpu_activity.h"
#include "profiler/import/import.h"
#include "profiler/store/reader.h"
#include "tests/profiler/import/event_lists.h"
#include "tests/profiler/import/import_fixtures.h"
#include "tests/profiler/import/import_steps.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <tuple>
#include <vector>

namespace {

using namespace ember;
using import_test::all_events;
using import_test::TempDir;

struct NamedRange {
    trace::RangeEvent event;
    std::string name;
    std::string domain;
    std::string parent;
};

std::map<std::string, NamedRange> ranges_by_name(const store::TraceReader& reader) {
    std::map<trace::RangeId, std::string> names;
    auto ranges = all_events(reader, &store::TraceReader::for_each_range);
    for (const auto& range : ranges) names[range.range_id] = std::string(reader.string(range.name_id));
    std::map<std::string, NamedRange> by_name;
    for (const auto& range : ranges) {
        NamedRange named{range, names[range.range_id], std::string(reader.string(range.domain_id)),
                         range.parent_range_id != 0 ? names[range.parent_range_id] : ""};
        by_name[named.name] = named;
    }
    return by_name;
}

class KinetoFixture : public ::testing::Test {
  protected:
    void SetUp() override {
        input = dir.path("rank3.pt.trace.json");
        import_test::write_file(input, import_test::kineto_fixture());
        output = dir.path("rank3.db");
        imported = importing::import_file(input, output);
    }
    TempDir dir;
    std::string input, output;
    importing::ImportedFile imported;
};

TEST_F(KinetoFixture, RunFactsComeFromTheTopLevelKeysAfterTraceEvents) {
    store::TraceReader reader(output);
    EXPECT_EQ(imported.format, importing::SourceFormat::kineto);
    EXPECT_EQ(reader.run().rank, 3);
    EXPECT_EQ(reader.run().world_size, 8);
    EXPECT_EQ(reader.run().clock_offset_to_wall_ns, 1700000000000000000ll);
    EXPECT_EQ(reader.run().pid, 100);
    // The profiler's own span is the run's window.
    EXPECT_EQ(reader.run().start_ns, 900'000);
    EXPECT_EQ(reader.run().end_ns, 2'100'000);
    EXPECT_TRUE(reader.complete());
    ASSERT_EQ(reader.devices().size(), 1u);
    EXPECT_EQ(reader.devices()[0].name, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(reader.devices()[0].multiprocessor_count, 132);
    EXPECT_EQ(reader.devices()[0].compute_capability_major, 9);
    EXPECT_EQ(reader.devices()[0].memory_bytes, 85018279936);
    ASSERT_EQ(reader.processes().size(), 1u);
    EXPECT_EQ(reader.processes()[0].name, "python3");
}

TEST_F(KinetoFixture, KernelsCopiesAndMemsetsLandOnTheirStreamsWithTheirShapes) {
    store::TraceReader reader(output);
    auto kernels = all_events(reader, &store::TraceReader::for_each_kernel);
    ASSERT_EQ(kernels.size(), 3u);
    const trace::KernelEvent& sgemm = kernels[0];
    EXPECT_EQ(reader.string(sgemm.name_id), "sgemm_128x64");
    EXPECT_EQ(sgemm.start_ns, 1'300'125);
    EXPECT_EQ(sgemm.end_ns, 1'400'500);
    EXPECT_EQ(sgemm.device_id, 0);
    EXPECT_EQ(sgemm.correlation_id, 11u);
    EXPECT_EQ(sgemm.launch, (trace::LaunchConfig{4, 2, 1, 128, 1, 1, 64, 4096, 0}));
    const trace::StreamInfo* stream = reader.stream(sgemm.stream_id);
    ASSERT_NE(stream, nullptr);
    EXPECT_EQ(stream->cuda_stream_id, 7u);  // the trace's own stream id
    EXPECT_EQ(stream->context_id, 1u);

    // NCCL: counted, and its stream is named so.
    const trace::KernelEvent& nccl = kernels[1];
    EXPECT_EQ(reader.string(nccl.name_id).substr(0, 21), "ncclDevKernel_AllRedu");
    EXPECT_EQ(reader.stream(nccl.stream_id)->cuda_stream_id, 21u);
    EXPECT_EQ(reader.stream(nccl.stream_id)->name, "nccl");
    EXPECT_EQ(imported.counts.nccl_kernels, 1);

    const trace::MemcpyEvent copy = import_test::expect_one_memcpy(
        reader, trace::MemcpyDirection::host_to_device, trace::MemoryKind::pinned, trace::MemoryKind::device, 1048576);
    EXPECT_EQ(copy.start_ns, 1'500'000);
    EXPECT_EQ(copy.end_ns, 1'510'000);
    auto sets = all_events(reader, &store::TraceReader::for_each_memset);
    ASSERT_EQ(sets.size(), 1u);
    EXPECT_EQ(sets[0].bytes, 256u);
    EXPECT_EQ(sets[0].memory_kind, trace::MemoryKind::device);
}

TEST_F(KinetoFixture, RuntimeAndDriverCallsLinkToTheirGpuWork) {
    store::TraceReader reader(output);
    auto calls = all_events(reader, &store::TraceReader::for_each_api_call);
    ASSERT_EQ(calls.size(), 4u);
    EXPECT_EQ(reader.string(calls[0].name_id), "cudaLaunchKernel");
    EXPECT_EQ(calls[0].start_ns, 1'250'500);
    EXPECT_EQ(calls[0].end_ns, 1'260'750);
    const trace::ThreadInfo* thread = reader.thread(calls[0].thread_id);
    ASSERT_NE(thread, nullptr);
    EXPECT_EQ(thread->pid, 100);
    EXPECT_EQ(thread->tid, 100);
    EXPECT_EQ(thread->name, "thread 100 (python3)");
    EXPECT_EQ(reader.string(calls[1].name_id), "cuLaunchKernel");  // cuda_driver
    for (trace::CorrelationId id : {11u, 12u, 13u, 14u}) {
        EXPECT_TRUE(reader.api_call_by_correlation(id).has_value()) << id;
    }
    EXPECT_EQ(reader.kernels_by_correlation(11).size(), 1u);
    EXPECT_EQ(reader.memcpys_by_correlation(13).size(), 1u);
    // The kernel nobody launched is kept, and counted where readers see it.
    EXPECT_EQ(imported.counts.flows, 4);
    EXPECT_EQ(imported.counts.unlinked_gpu_events, 1);
    EXPECT_EQ(import_test::run_metadata(output, importing::import_metadata_key::unlinked_gpu_events), "1");
    EXPECT_EQ(import_test::run_metadata(output, importing::import_metadata_key::linked_gpu_events), "4");
}

TEST_F(KinetoFixture, HostRangesNestByTimeWhateverTheirOrderInTheFile) {
    store::TraceReader reader(output);
    auto ranges = ranges_by_name(reader);
    ASSERT_EQ(ranges.size(), 5u);
    const NamedRange& step = ranges.at("step");
    EXPECT_EQ(step.event.depth, 0);
    EXPECT_EQ(step.event.category, 1u);  // ember's step category
    EXPECT_EQ(step.event.payload, trace::Payload::of_integer(7));
    EXPECT_EQ(step.domain, "user_annotation");
    EXPECT_EQ(step.event.start_ns, 1'000'000);
    EXPECT_EQ(step.event.end_ns, 2'000'000);

    const NamedRange& wait = ranges.at("dataloader/wait");
    EXPECT_EQ(wait.event.category, 3u);
    EXPECT_EQ(wait.parent, "step");
    EXPECT_EQ(wait.event.depth, 1);
    EXPECT_EQ(wait.event.start_ns, 1'000'500);
    EXPECT_EQ(wait.event.end_ns, 1'100'250);

    const NamedRange& forward = ranges.at("model.py(10): forward");
    EXPECT_EQ(forward.parent, "step");
    EXPECT_EQ(forward.domain, "python_function");
    const NamedRange& mm = ranges.at("aten::mm");
    EXPECT_EQ(mm.parent, "model.py(10): forward");
    EXPECT_EQ(mm.event.depth, 2);
    EXPECT_EQ(mm.event.category, 2u);  // compute
    EXPECT_EQ(mm.domain, "cpu_op");
    const NamedRange& all_reduce = ranges.at("nccl:all_reduce");
    EXPECT_EQ(all_reduce.event.category, 4u);  // communication
    EXPECT_EQ(all_reduce.parent, "model.py(10): forward");
    EXPECT_EQ(imported.counts.ranges_not_nested, 0);
    // The categories are named in each domain that uses them.
    EXPECT_EQ(reader.nvtx_category_name(*reader.find_string("user_annotation"), 1), "step");
    EXPECT_EQ(reader.nvtx_category_name(*reader.find_string("cpu_op"), 2), "compute");
}

TEST_F(KinetoFixture, TheStepIsEmbersStepWithItsDataloaderWait) {
    store::TraceReader reader(output);
    analysis::GpuActivity activity = analysis::gpu_activity(reader, 4);
    ASSERT_FALSE(activity.steps.empty());
    EXPECT_EQ(activity.steps[0].start_ns, 1'000'000);
    EXPECT_EQ(activity.steps[0].wall_ns, 1'000'000);
    EXPECT_EQ(activity.steps[0].dataloader_wait_ns, 99'750);
    EXPECT_GT(activity.steps[0].gpu_compute_ns, 0);
}

TEST_F(KinetoFixture, MemorySamplesBecomeCountersAndTheRestIsCountedAsSkipped) {
    store::TraceReader reader(output);
    auto samples = all_events(reader, &store::TraceReader::for_each_counter_sample);
    ASSERT_EQ(samples.size(), 2u);
    std::map<std::string, double> by_name;
    for (const auto& sample : samples) {
        const trace::CounterInfo* counter = reader.counter(sample.counter_id);
        ASSERT_NE(counter, nullptr);
        EXPECT_EQ(counter->unit, "bytes");
        EXPECT_EQ(counter->device_id, 0);
        EXPECT_EQ(sample.time_ns, 1'260'000);
        by_name[counter->name] = sample.value;
    }
    EXPECT_EQ(by_name["memory allocated"], 1048576.0);
    EXPECT_EQ(by_name["memory reserved"], 2097152.0);
    const auto& skipped = imported.counts.skipped;
    EXPECT_EQ(skipped.at("gpu_user_annotation (GPU-side copy of a host annotation)"), 1);
    EXPECT_EQ(skipped.at("flow event (links come from correlation ids)"), 2);
    EXPECT_EQ(skipped.at("profiler span (becomes the run's start and end)"), 1);
    EXPECT_EQ(imported.counts.skipped_total(), 5);
    EXPECT_NE(
        import_test::run_metadata(output, importing::import_metadata_key::skipped_events).find("\"gpu_user_annotation"),
        std::string::npos);
}

TEST_F(KinetoFixture, GzipGivesTheSameTrace) {
    const std::string gz = dir.path("rank3.pt.trace.json.gz");
    import_test::write_file(gz, import_test::gzip_bytes(import_test::kineto_fixture()));
    importing::ImportedFile from_gz = importing::import_file(gz, dir.path("gz.db"));
    EXPECT_EQ(from_gz.counts.written(), imported.counts.written());
    EXPECT_EQ(from_gz.counts.skipped, imported.counts.skipped);
    store::TraceReader a(output), b(dir.path("gz.db"));
    EXPECT_EQ(all_events(a, &store::TraceReader::for_each_kernel), all_events(b, &store::TraceReader::for_each_kernel));
    EXPECT_EQ(all_events(a, &store::TraceReader::for_each_range), all_events(b, &store::TraceReader::for_each_range));
}

TEST_F(KinetoFixture, OptionsOverrideRankAndWorldSize) {
    importing::ImportOptions options;
    options.rank = 5;
    options.world_size = 16;
    importing::import_file(input, dir.path("override.db"), options);
    store::TraceReader reader(dir.path("override.db"));
    EXPECT_EQ(reader.run().rank, 5);
    EXPECT_EQ(reader.run().world_size, 16);
}

TEST(Kineto2021, TheOldCategoryNamesMapTheSameWay) {
    TempDir dir;
    import_test::write_file(dir.path("old.json"), import_test::kineto_2021_fixture());
    importing::ImportedFile imported =
        import_test::import_detected(dir.path("old.json"), dir.path("old.db"), importing::SourceFormat::kineto);
    store::TraceReader reader(dir.path("old.db"));
    EXPECT_EQ(imported.counts.kernels, 1);
    EXPECT_EQ(imported.counts.memcpys, 1);
    EXPECT_EQ(imported.counts.api_calls, 2);
    EXPECT_EQ(imported.counts.ranges, 3);
    EXPECT_EQ(imported.counts.flows, 2);
    EXPECT_EQ(reader.run().clock_offset_to_wall_ns, 0);  // no baseTimeNanoseconds: ts are Unix µs
    EXPECT_EQ(reader.run().pid, 200);
    auto kernels = all_events(reader, &store::TraceReader::for_each_kernel);
    ASSERT_EQ(kernels.size(), 1u);
    EXPECT_EQ(reader.stream(kernels[0].stream_id)->cuda_stream_id, 7u);  // "stream 7" and args.stream
    EXPECT_EQ(kernels[0].launch.registers_per_thread, 128u);
    auto copies = all_events(reader, &store::TraceReader::for_each_memcpy);
    ASSERT_EQ(copies.size(), 1u);
    EXPECT_EQ(copies[0].direction, trace::MemcpyDirection::device_to_host);
    EXPECT_EQ(copies[0].destination_kind, trace::MemoryKind::pageable);
    auto ranges = ranges_by_name(reader);
    EXPECT_EQ(ranges.at("step").event.payload, trace::Payload::of_integer(5));
    EXPECT_EQ(ranges.at("step").domain, "Operator");
    EXPECT_EQ(ranges.at("dataloader/wait").parent, "step");
    EXPECT_EQ(ranges.at("aten::conv2d").parent, "step");
    const trace::ThreadInfo* thread = reader.thread(ranges.at("step").event.thread_id);
    ASSERT_NE(thread, nullptr);
    EXPECT_EQ(thread->tid, 200);  // "200" as text
    EXPECT_EQ(thread->name, "thread 200 (python)");
    EXPECT_EQ(imported.counts.skipped.at("[memory] event without totals (older Kineto)"), 1);
    ASSERT_EQ(reader.devices().size(), 1u);
    EXPECT_EQ(reader.devices()[0].name, "Tesla V100-DGXS-32GB");
}

TEST(KinetoTimes, FractionalMicrosecondsAreExactNanoseconds) {
    TempDir dir;
    // 1712195495519695.8 µs is not a double; 0.0015 µs rounds to 2 ns; exponents are numbers too.
    import_test::write_file(dir.path("t.json"), R"({"schemaVersion": 1, "traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1712195495519695.8, "dur": 0.0015},
      {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 2, "ts": 1.5e3, "dur": "2.25"},
      {"ph": "X", "cat": "cpu_op", "name": "c", "pid": 1, "tid": 3, "ts": 123.456, "dur": 0}]})");
    importing::import_file(dir.path("t.json"), dir.path("t.db"));
    store::TraceReader reader(dir.path("t.db"));
    auto ranges = ranges_by_name(reader);
    EXPECT_EQ(ranges.at("a").event.start_ns, 1712195495519695800ll);
    EXPECT_EQ(ranges.at("a").event.end_ns, 1712195495519695802ll);
    EXPECT_EQ(ranges.at("b").event.start_ns, 1'500'000);
    EXPECT_EQ(ranges.at("b").event.end_ns, 1'502'250);
    EXPECT_EQ(ranges.at("c").event.start_ns, 123'456);
    EXPECT_EQ(ranges.at("c").event.end_ns, 123'456);
}

// PyTorch 2.x's cuda_sync events: a context sync (stream -1) waits for the whole device
// (stream 0, as ember's collector records it), a stream sync on its stream, an event
// sync with the CUDA event it waited for. With cuda_sync events in the file, the
// synchronizing runtime calls are only calls.
TEST(KinetoSync, CudaSyncEventsAreSynchronizations) {
    TempDir dir;
    import_test::write_file(dir.path("s.json"), R"({"schemaVersion": 1, "traceEvents": [
      {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 9, "tid": 9, "ts": 100, "dur": 50,
       "args": {"correlation": 11}},
      {"ph": "X", "cat": "cuda_sync", "name": "Context Sync", "pid": 0, "tid": 0, "ts": 101, "dur": 48,
       "args": {"cuda_sync_kind": "Context Sync", "stream": -1, "correlation": 11, "device": 0, "context": 1}},
      {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 7, "ts": 200, "dur": 20,
       "args": {"cuda_sync_kind": "Stream Sync", "stream": 7, "correlation": 12, "device": 0, "context": 1}},
      {"ph": "X", "cat": "cuda_sync", "name": "Event Sync", "pid": 0, "tid": 0, "ts": 300, "dur": 5,
       "args": {"cuda_sync_kind": "Event Sync", "wait_on_stream": -1, "wait_on_cuda_event_id": 42,
                "wait_on_cuda_event_record_corr_id": 10, "stream": -1, "correlation": 13, "device": 0, "context": 1}}
    ]})");
    const importing::ImportedFile imported = importing::import_file(dir.path("s.json"), dir.path("s.db"));
    EXPECT_TRUE(imported.counts.invalid.empty()) << imported.counts.invalid_summary();
    store::TraceReader reader(dir.path("s.db"));
    const auto syncs = all_events(reader, &store::TraceReader::for_each_sync);
    ASSERT_EQ(syncs.size(), 3u);
    EXPECT_EQ(syncs[0].kind, trace::SyncKind::context_synchronize);
    EXPECT_EQ(syncs[0].stream_id, 0u);
    EXPECT_EQ(syncs[0].correlation_id, 11u);
    EXPECT_EQ(syncs[1].kind, trace::SyncKind::stream_synchronize);
    ASSERT_NE(reader.stream(syncs[1].stream_id), nullptr);
    EXPECT_EQ(reader.stream(syncs[1].stream_id)->cuda_stream_id, 7u);
    EXPECT_EQ(syncs[2].kind, trace::SyncKind::event_synchronize);
    EXPECT_EQ(syncs[2].cuda_event_id, 42u);
    EXPECT_EQ(syncs[2].start_ns, 300'000);
}

// Older traces have no cuda_sync events: the synchronizing runtime calls are the waits,
// on the trace's one GPU.
TEST(KinetoSync, RuntimeCallsStandInWhereNoCudaSyncExists) {
    TempDir dir;
    import_test::write_file(dir.path("r.json"), R"({"schemaVersion": 1, "traceEvents": [
      {"ph": "X", "cat": "kernel", "name": "k", "pid": 2, "tid": 7, "ts": 10, "dur": 5,
       "args": {"device": 2, "stream": 7, "correlation": 1}},
      {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 9, "tid": 9, "ts": 20, "dur": 30,
       "args": {"correlation": 2}},
      {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9, "ts": 60, "dur": 3,
       "args": {"correlation": 3}},
      {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 9, "tid": 9, "ts": 70, "dur": 8,
       "args": {"correlation": 4}}
    ]})");
    const importing::ImportedFile imported = importing::import_file(dir.path("r.json"), dir.path("r.db"));
    store::TraceReader reader(dir.path("r.db"));
    const auto syncs = all_events(reader, &store::TraceReader::for_each_sync);
    ASSERT_EQ(syncs.size(), 2u);
    EXPECT_EQ(syncs[0].kind, trace::SyncKind::stream_synchronize);
    EXPECT_EQ(syncs[0].device_id, 2);
    EXPECT_EQ(syncs[0].start_ns, 20'000);
    EXPECT_EQ(syncs[0].end_ns, 50'000);
    EXPECT_EQ(syncs[0].correlation_id, 2u);
    EXPECT_EQ(syncs[1].kind, trace::SyncKind::context_synchronize);
    EXPECT_EQ(syncs[1].stream_id, 0u);
    ASSERT_EQ(imported.counts.notes.size(), 1u);
    EXPECT_NE(imported.counts.notes[0].find("2 synchronizations from the synchronizing runtime calls"),
              std::string::npos);
}

// A GPU event ember cannot place (a kernel on stream -1) is skipped, counted and named by
// default; --strict refuses the file, naming the element and its byte.
TEST(KinetoSync, AnUnplaceableEventIsSkippedOrRefusedWhenStrict) {
    TempDir dir;
    const std::string json = R"({"schemaVersion": 1, "traceEvents": [
      {"ph": "X", "cat": "kernel", "name": "ok", "pid": 0, "tid": 7, "ts": 10, "dur": 5, "args": {"device": 0, "stream": 7}},
      {"ph": "X", "cat": "kernel", "name": "lost", "pid": 0, "tid": -1, "ts": 20, "dur": 5, "args": {"device": 0, "stream": -1}}
    ]})";
    import_test::write_file(dir.path("k.json"), json);
    const importing::ImportedFile imported = importing::import_file(dir.path("k.json"), dir.path("k.db"));
    EXPECT_EQ(imported.counts.kernels, 1);
    EXPECT_EQ(imported.counts.invalid_total(), 1);
    const std::string summary = imported.counts.invalid_summary();
    EXPECT_NE(summary.find("element #1 at byte " +
                           std::to_string(json.find("{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"lost\""))),
              std::string::npos)
        << summary;
    EXPECT_EQ(import_test::run_metadata(dir.path("k.db"), importing::import_metadata_key::invalid_events), "1");
    EXPECT_THROW(import_test::import_strict(dir.path("k.json"), dir.path("k2.db")), store::TraceError);
}

// Thousands of ranges in shuffled order, nested three deep per group: the nesting
// is the same whether it is sorted in memory or through spilled runs on disk.
TEST(KinetoNesting, SpilledRunsNestExactlyLikeMemory) {
    TempDir dir;
    std::vector<std::string> events;
    for (int i = 0; i < 3000; ++i) {
        std::int64_t t = 10 * i * 1000;
        events.push_back(fmt::format(
            R"({{"ph":"X","cat":"cpu_op","name":"outer{}","pid":1,"tid":{},"ts":{},"dur":9000}})", i, 1 + i % 3, t));
        events.push_back(
            fmt::format(R"({{"ph":"X","cat":"cpu_op","name":"middle{}","pid":1,"tid":{},"ts":{},"dur":5000}})", i,
                        1 + i % 3, t + 1000));
        events.push_back(
            fmt::format(R"({{"ph":"X","cat":"cpu_op","name":"inner{}","pid":1,"tid":{},"ts":{},"dur":5000}})", i,
                        1 + i % 3, t + 1000));
    }
    std::mt19937 random(42);
    std::shuffle(events.begin(), events.end(), random);
    std::string json = R"({"schemaVersion":1,"traceEvents":[)";
    for (std::size_t i = 0; i < events.size(); ++i) json += (i ? "," : "") + events[i];
    json += "]}";
    import_test::write_file(dir.path("many.json"), json);
    importing::ImportOptions spill;
    spill.range_sort_memory_bytes = 1;  // the smallest buffer: every ~1000 ranges go to disk
    importing::import_file(dir.path("many.json"), dir.path("memory.db"));
    importing::import_file(dir.path("many.json"), dir.path("spilled.db"), spill);
    store::TraceReader memory(dir.path("memory.db")), spilled(dir.path("spilled.db"));
    auto a = ranges_by_name(memory), b = ranges_by_name(spilled);
    ASSERT_EQ(a.size(), 9000u);
    ASSERT_EQ(b.size(), 9000u);
    for (const auto& [name, range] : a) {
        const NamedRange& other = b.at(name);
        EXPECT_EQ(range.parent, other.parent) << name;
        EXPECT_EQ(range.event.depth, other.event.depth) << name;
    }
    // Identical intervals keep the file's order: the first listed is the parent.
    EXPECT_EQ(a.at("outer5").event.depth, 0);
    EXPECT_EQ(a.at("middle5").parent == "outer5" || a.at("inner5").parent == "outer5", true);
    EXPECT_EQ(a.at("middle5").event.depth + a.at("inner5").event.depth, 3);
    // No spill file is left behind.
    EXPECT_EQ(dir.files(), (std::vector<std::string>{"many.json", "memory.db", "spilled.db"}));
}

// The ranges table as (id, name, depth, parent id), in id order.
std::vector<std::tuple<trace::RangeId, std::string, std::int32_t, trace::RangeId>> range_rows(const std::string& path) {
    store::TraceReader reader(path);
    std::vector<std::tuple<trace::RangeId, std::string, std::int32_t, trace::RangeId>> rows;
    for (const auto& range : all_events(reader, &store::TraceReader::for_each_range)) {
        rows.emplace_back(range.range_id, std::string(reader.string(range.name_id)), range.depth,
                          range.parent_range_id);
    }
    std::sort(rows.begin(), rows.end());
    return rows;
}

// A Kineto file's ranges are written as they come only while they get the ids nesting
// at the end gives (thread by thread in the order the threads were first seen, each
// by start, the longer first; start/end ranges numbered before them all). The answers
// below are that order, worked out by hand: the same whether the file lists the first
// thread in order (its ranges written early, the other thread's at the end), lists a
// range late that sorts before those written (all nested again at the end), or has an
// async range take an id after some were written.
TEST(KinetoNesting, RangesWrittenEarlyHaveTheIdsOfNestingAtTheEnd) {
    TempDir dir;
    auto x = [](std::string_view category, std::string_view name, int tid, int ts, int dur) {
        return fmt::format(R"({{"ph":"X","cat":"{}","name":"{}","pid":1,"tid":{},"ts":{},"dur":{}}})", category, name,
                           tid, ts, dur);
    };
    const std::vector<std::string> in_order = {
        x("cpu_op", "outer", 10, 0, 100),       x("cpu_op", "other_outer", 20, 5, 75), x("cpu_op", "inner", 10, 10, 40),
        x("cpu_op", "other_inner", 20, 20, 10), x("cpu_op", "inner2", 10, 60, 30),
    };
    auto import = [&](const std::string& name, std::vector<std::string> events) {
        std::string json = R"({"schemaVersion":1,"traceEvents":[)";
        for (std::size_t i = 0; i < events.size(); ++i) json += (i ? "," : "") + events[i];
        json += "]}";
        import_test::write_file(dir.path(name + ".json"), json);
        return importing::import_file(dir.path(name + ".json"), dir.path(name + ".db")).counts;
    };
    using Rows = std::vector<std::tuple<trace::RangeId, std::string, std::int32_t, trace::RangeId>>;

    // Thread 10 first and in order: written as it came; thread 20 at the end.
    EXPECT_EQ(import("in_order", in_order).ranges, 5);
    EXPECT_EQ(range_rows(dir.path("in_order.db")), (Rows{{1, "outer", 0, 0},
                                                         {2, "inner", 1, 1},
                                                         {3, "inner2", 1, 1},
                                                         {4, "other_outer", 0, 0},
                                                         {5, "other_inner", 1, 4}}));

    // A Python function listed after the CPU ops it holds sorts before them all.
    std::vector<std::string> late = in_order;
    late.push_back(x("python_function", "train.py(7): step", 10, 0, 200));
    EXPECT_EQ(import("late", late).ranges, 6);
    const Rows late_rows{
        {1, "train.py(7): step", 0, 0}, {2, "outer", 1, 1},      {3, "inner", 2, 2}, {4, "inner2", 2, 2},
        {5, "other_outer", 0, 0},       {6, "other_inner", 1, 5}};
    EXPECT_EQ(range_rows(dir.path("late.db")), late_rows);
    // Its thread's track_stats row counts what stayed: 4 ranges, 0 to 200 µs.
    EXPECT_EQ(import_test::count_rows(dir.path("late.db"),
                                      "SELECT COUNT(*) FROM track_stats WHERE event_table = 'ranges' AND track_id = 1 "
                                      "AND event_count = 4 AND first_start_ns = 0 AND last_end_ns = 200000 AND "
                                      "max_duration_ns = 200000"),
              1);
    // The same ranges listed in nesting order from the start: the same table.
    std::vector<std::string> early = late;
    std::rotate(early.begin(), early.end() - 1, early.end());
    import("early", early);
    EXPECT_EQ(range_rows(dir.path("early.db")), late_rows);

    // A thread seen first (by its runtime call) whose ranges come second.
    std::vector<std::string> second_thread_first = in_order;
    second_thread_first.insert(second_thread_first.begin(), x("cuda_runtime", "cudaLaunchKernel", 20, 1, 1));
    import("second_thread_first", second_thread_first);
    EXPECT_EQ(range_rows(dir.path("second_thread_first.db")), (Rows{{1, "other_outer", 0, 0},
                                                                    {2, "other_inner", 1, 1},
                                                                    {3, "outer", 0, 0},
                                                                    {4, "inner", 1, 3},
                                                                    {5, "inner2", 1, 3}}));

    // An async range after two ranges were written: numbered first, as at the end.
    std::vector<std::string> async = in_order;
    for (const char* phase : {"e", "b"}) {
        async.insert(
            async.begin() + 3,
            fmt::format(R"({{"ph":"{}","cat":"user_annotation","name":"async","id":7,"pid":1,"tid":10,"ts":{}}})",
                        phase, *phase == 'b' ? 2 : 3));
    }
    EXPECT_EQ(import("async", async).ranges, 6);
    EXPECT_EQ(range_rows(dir.path("async.db")), (Rows{{1, "async", -1, 0},
                                                      {2, "outer", 0, 0},
                                                      {3, "inner", 1, 2},
                                                      {4, "inner2", 1, 2},
                                                      {5, "other_outer", 0, 0},
                                                      {6, "other_inner", 1, 5}}));
}

// The same with more ranges than are held before the first is written (1024 with the
// smallest sort memory): those written are taken back, deleted and written again.
TEST(KinetoNesting, RangesWrittenEarlyAndTakenBackHaveTheIdsOfNestingAtTheEnd) {
    TempDir dir;
    constexpr int kRanges = 2000;  // on thread 10, one every 10 µs; thread 20 has one in ten
    auto x = [](std::string_view category, std::string_view name, int tid, int ts, int dur) {
        return fmt::format(R"({{"ph":"X","cat":"{}","name":"{}","pid":1,"tid":{},"ts":{},"dur":{}}})", category, name,
                           tid, ts, dur);
    };
    auto import = [&](const std::string& name, const std::vector<std::string>& events) {
        std::string json = R"({"schemaVersion":1,"traceEvents":[)";
        for (std::size_t i = 0; i < events.size(); ++i) json += (i ? "," : "") + events[i];
        json += "]}";
        import_test::write_file(dir.path(name + ".json"), json);
        importing::ImportOptions options;
        options.range_sort_memory_bytes = 1;
        return importing::import_file(dir.path(name + ".json"), dir.path(name + ".db"), options).counts;
    };
    std::vector<std::string> events;
    for (int i = 0; i < kRanges; ++i) {
        events.push_back(x("cpu_op", fmt::format("r{}", i), 10, 10 * i, 5));
        if (i % 10 == 0) events.push_back(x("cpu_op", fmt::format("o{}", i), 20, 10 * i, 50));
    }
    using Rows = std::vector<std::tuple<trace::RangeId, std::string, std::int32_t, trace::RangeId>>;
    // `first`: the id of r0; `step`: whether a step holds thread 10's ranges (id first - 1).
    auto expected = [&](trace::RangeId first, bool step) {
        Rows rows;
        if (step) rows.emplace_back(first - 1, "train.py(7): step", 0, 0);
        for (int i = 0; i < kRanges; ++i)
            rows.emplace_back(first + i, fmt::format("r{}", i), step ? 1 : 0, step ? first - 1 : 0);
        for (int i = 0; i < kRanges / 10; ++i) rows.emplace_back(first + kRanges + i, fmt::format("o{}", 10 * i), 0, 0);
        return rows;
    };

    import("in_order", events);
    EXPECT_EQ(range_rows(dir.path("in_order.db")), expected(1, false));

    std::vector<std::string> late = events;
    late.push_back(x("python_function", "train.py(7): step", 10, 0, 10 * kRanges));
    EXPECT_EQ(import("late", late).ranges, kRanges + kRanges / 10 + 1);
    EXPECT_EQ(range_rows(dir.path("late.db")), expected(2, true));
    EXPECT_EQ(import_test::count_rows(dir.path("late.db"),
                                      "SELECT COUNT(*) FROM track_stats WHERE event_table = 'ranges' AND track_id = 1 "
                                      "AND event_count = 2001 AND first_start_ns = 0 AND last_end_ns = 20000000"),
              1);

    std::vector<std::string> async = events;
    const auto after_1500 = async.begin() + 1500 + 150;  // past r1499 and o1490
    async.insert(after_1500, {R"({"ph":"b","cat":"user_annotation","name":"async","id":7,"pid":1,"tid":10,"ts":2})",
                              R"({"ph":"e","cat":"user_annotation","name":"async","id":7,"pid":1,"tid":10,"ts":3})"});
    import("async", async);
    Rows with_async = expected(2, false);
    with_async.insert(with_async.begin(), {1, "async", -1, 0});
    EXPECT_EQ(range_rows(dir.path("async.db")), with_async);
}

}  // namespace
