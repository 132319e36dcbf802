// nvtx_record_test.cpp: samples/nvtx_threads recorded in-process (the program links
// the collector) and through `ember record` (NVTX injection): each file holds
// exactly the program's events, nested as the program nested them.
#include "profiler/store/reader.h"
#include "tests/collectors/subprocess.h"
#include "tests/support/event_lists.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace ember {
namespace {

using trace::RangeEvent;

struct Recording {
    std::map<std::string, trace::ThreadId> threads;  // name -> id
    std::vector<RangeEvent> ranges;
    std::vector<trace::MarkEvent> marks;
};

std::string name_of(const store::TraceReader& reader, trace::StringId id) {
    return std::string(reader.string(id));
}

const RangeEvent* find_range(const store::TraceReader& reader, const std::vector<RangeEvent>& ranges,
                             const std::string& name, trace::ThreadId thread) {
    for (const RangeEvent& range : ranges)
        if (range.thread_id == thread && name_of(reader, range.name_id) == name) return &range;
    return nullptr;
}

bool inside(const RangeEvent& child, const RangeEvent& parent) {
    return child.start_ns >= parent.start_ns && child.end_ns <= parent.end_ns;
}

// The events samples/nvtx_threads/nvtx_threads.cpp documents, with 2 workers x 3 iterations.
// The program ran between the test's CLOCK_MONOTONIC readings `before` and `after`:
// every timestamp lies on that clock (the collector's TSC clock maps onto it).
void expect_sample_events(const std::string& path, std::int64_t before, std::int64_t after) {
    store::TraceReader reader(path);
    EXPECT_TRUE(reader.complete());
    std::map<std::string, trace::ThreadId> threads;
    for (const trace::ThreadInfo& thread : reader.threads()) threads[thread.name] = thread.thread_id;
    ASSERT_TRUE(threads.count("main")) << path;
    ASSERT_TRUE(threads.count("worker 0"));
    ASSERT_TRUE(threads.count("worker 1"));
    trace::ThreadId main_thread = threads["main"];

    const std::vector<RangeEvent> ranges = test_support::all_events(reader, &store::TraceReader::for_each_range);
    ASSERT_EQ(ranges.size(), 5u + 2 * 3 * 2);

    const RangeEvent* outer = find_range(reader, ranges, "outer", main_thread);
    const RangeEvent* inner = find_range(reader, ranges, "inner", main_thread);
    const RangeEvent* step = find_range(reader, ranges, "registered step", main_thread);
    const RangeEvent* wide = find_range(reader, ranges,
                                        "wide \xC3\xBCn\xC3\xAF"
                                        "code",
                                        main_thread);
    const RangeEvent* async_work = find_range(reader, ranges, "async work", main_thread);
    ASSERT_TRUE(outer && inner && step && wide && async_work);

    EXPECT_EQ(outer->depth, 0);
    EXPECT_EQ(outer->parent_range_id, 0u);
    EXPECT_EQ(outer->category, 1u);
    EXPECT_EQ(outer->color, 0xFF00FF00u);
    EXPECT_EQ(outer->domain_id, trace::kNoString);
    EXPECT_EQ(outer->payload.kind, trace::PayloadKind::none);

    EXPECT_EQ(inner->depth, 1);
    EXPECT_EQ(inner->parent_range_id, outer->range_id);
    EXPECT_EQ(inner->payload, trace::Payload::of_integer(42));
    EXPECT_TRUE(inside(*inner, *outer));

    EXPECT_EQ(step->depth, 1);
    EXPECT_EQ(step->parent_range_id, outer->range_id);
    EXPECT_EQ(name_of(reader, step->domain_id), "sample");
    EXPECT_EQ(step->payload, trace::Payload::of_integer(7));
    EXPECT_TRUE(inside(*step, *outer));
    EXPECT_GE(step->start_ns, inner->end_ns);

    EXPECT_EQ(wide->depth, 0);
    EXPECT_EQ(wide->parent_range_id, 0u);
    EXPECT_GE(wide->start_ns, outer->end_ns);
    EXPECT_EQ(async_work->depth, -1);
    EXPECT_EQ(async_work->parent_range_id, 0u);
    EXPECT_GE(async_work->end_ns - async_work->start_ns, 100000);  // it slept 100 us

    for (const char* worker : {"worker 0", "worker 1"}) {
        trace::ThreadId thread = threads[worker];
        std::vector<const RangeEvent*> items, computes;
        for (const RangeEvent& range : ranges) {
            if (range.thread_id != thread) continue;
            std::string name = name_of(reader, range.name_id);
            if (name == "work item")
                items.push_back(&range);
            else if (name == "compute")
                computes.push_back(&range);
            else
                ADD_FAILURE() << "unexpected range " << name << " on " << worker;
        }
        ASSERT_EQ(items.size(), 3u);
        ASSERT_EQ(computes.size(), 3u);
        std::vector<std::int64_t> payloads;
        for (const RangeEvent* item : items) {
            EXPECT_EQ(item->depth, 0);
            EXPECT_EQ(item->parent_range_id, 0u);
            payloads.push_back(item->payload.integer);
        }
        std::sort(payloads.begin(), payloads.end());
        EXPECT_EQ(payloads, (std::vector<std::int64_t>{0, 1, 2}));
        for (const RangeEvent* compute : computes) {
            EXPECT_EQ(compute->depth, 1);
            auto parent = std::find_if(items.begin(), items.end(), [&](const RangeEvent* item) {
                return item->range_id == compute->parent_range_id;
            });
            ASSERT_NE(parent, items.end());
            EXPECT_TRUE(inside(*compute, **parent));
            EXPECT_GE(compute->end_ns - compute->start_ns, 200000);  // slept 200 us
        }
    }

    const std::vector<trace::MarkEvent> marks = test_support::all_events(reader, &store::TraceReader::for_each_mark);
    ASSERT_EQ(marks.size(), 3u);
    int worker_done = 0;
    for (const trace::MarkEvent& mark : marks) {
        std::string name = name_of(reader, mark.name_id);
        if (name == "inner mark") {
            EXPECT_EQ(mark.thread_id, main_thread);
            EXPECT_EQ(mark.payload, trace::Payload::of_real(2.5));
            EXPECT_GE(mark.time_ns, inner->start_ns);
            EXPECT_LE(mark.time_ns, inner->end_ns);
        } else if (name == "worker done") {
            ++worker_done;
            EXPECT_NE(mark.thread_id, main_thread);
        } else {
            ADD_FAILURE() << "unexpected mark " << name;
        }
    }
    EXPECT_EQ(worker_done, 2);

    // domain "ember", category 100: a counter track, not marks.
    ASSERT_EQ(reader.counters().size(), 1u);
    EXPECT_EQ(reader.counters()[0].name, "loss");
    std::vector<double> losses;
    reader.for_each_counter_sample({}, [&](const trace::CounterSample& sample) {
        losses.push_back(sample.value);
        return true;
    });
    EXPECT_EQ(losses, (std::vector<double>{0.5, 0.25}));
    EXPECT_EQ(reader.run().clock_name.rfind("CLOCK_MONOTONIC", 0), 0u) << reader.run().clock_name;
    for (const RangeEvent& range : ranges) {
        EXPECT_GE(range.start_ns, before);
        EXPECT_LE(range.end_ns, after);
    }
    EXPECT_EQ(reader.total_dropped(), 0u);
}

TEST(CollectorNvtx, InProcessRecordingHoldsExactlyTheSampleEvents) {
    std::string path = test::temp_path("inprocess.db");
    std::string output;
    std::int64_t before = test::monotonic_ns();
    int code = test::run({test::bin("sample_nvtx_threads_inprocess"), "--record", path}, &output);
    std::int64_t after = test::monotonic_ns();
    ASSERT_EQ(code, 0) << output;
    expect_sample_events(path, before, after);
    store::remove_trace_files(path);
}

TEST(CollectorNvtx, EmberRecordHoldsExactlyTheSampleEvents) {
    std::string path = test::temp_path("injected.db");
    std::string output;
    std::int64_t before = test::monotonic_ns();
    int code = test::run({test::bin("ember"), "record", "-o", path, "--", test::bin("sample_nvtx_threads")}, &output);
    std::int64_t after = test::monotonic_ns();
    ASSERT_EQ(code, 0) << output;
    EXPECT_NE(output.find("17 NVTX ranges, 3 marks, 2 counter samples"), std::string::npos) << output;
    expect_sample_events(path, before, after);
    store::remove_trace_files(path);
}

TEST(CollectorNvtx, EmberRecordPassesOnTheExitStatus) {
    std::string output;
    EXPECT_EQ(test::run({test::bin("ember"), "record", "-o", test::temp_path("false.db"), "--", "false"}, &output), 1);
    EXPECT_NE(output.find("no trace written"), std::string::npos) << output;
    EXPECT_EQ(
        test::run({test::bin("ember"), "record", "-o", test::temp_path("x.db"), "--", "/no/such/program"}, &output),
        127);
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

// The process `ember record` starts is a shell here; the two programs it runs are
// other processes: each writes FILE.pid<N>.db under --children=suffix, nothing
// under --children=skip.
TEST(CollectorNvtx, ChildProcessesGetTheirOwnFilesOrAreSkipped) {
    std::string base = test::temp_path("children");
    std::string program = test::bin("sample_nvtx_threads");
    std::string script = program + " && " + program + "; true";  // the shell waits, never execs
    std::string output;
    std::int64_t before = test::monotonic_ns();
    ASSERT_EQ(test::run({test::bin("ember"), "record", "-o", base + ".db", "--", "sh", "-c", script}, &output), 0)
        << output;
    std::int64_t after = test::monotonic_ns();
    std::vector<std::string> children;
    for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(base).parent_path())) {
        std::string name = entry.path().string();
        if (name.rfind(base + ".pid", 0) == 0 && name.size() > 3 && name.compare(name.size() - 3, 3, ".db") == 0)
            children.push_back(name);
    }
    ASSERT_EQ(children.size(), 2u) << output;
    for (const std::string& child : children) {
        expect_sample_events(child, before, after);
        store::remove_trace_files(child);
    }
    EXPECT_FALSE(std::filesystem::exists(base + ".db"));  // the shell itself never loaded the collector

    ASSERT_EQ(test::run({test::bin("ember"), "record", "--children=skip", "-o", base + ".db", "--", "sh", "-c", script},
                        &output),
              0)
        << output;
    for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(base).parent_path()))
        EXPECT_NE(entry.path().string().rfind(base + ".", 0), 0u) << "skipped child wrote " << entry.path();
    EXPECT_NE(output.find("no trace written"), std::string::npos) << output;
}

}  // namespace
}  // namespace ember
