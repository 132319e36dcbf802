// TraceEditor against the reader: ranges taken out and written anew, their track
// summaries counted again, and the run metadata replaced, as an import amends its file.
#include "profiler/store/reader.h"
#include "profiler/store/schema.h"
#include "profiler/store/trace_editor.h"
#include "tests/support/store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace ember::store {
namespace {

using namespace ember::trace;

std::string temp_path(const char* name) {
    return (std::filesystem::temp_directory_path() / (std::string("ember_trace_editor_") + name)).string();
}

std::vector<RangeEvent> all_ranges(const TraceReader& reader) {
    std::vector<RangeEvent> ranges;
    reader.for_each_range({}, testing::collect_into(ranges));
    return ranges;
}

TEST(TraceEditor, RangesRewrittenAndCountedAgain) {
    const std::string path = temp_path("ranges.db");
    const testing::SampleTrace sample = testing::write_sample_trace(path);
    std::vector<RangeEvent> before;
    {
        TraceReader reader(path);
        before = all_ranges(reader);
    }
    ASSERT_GE(before.size(), 3u);
    const ThreadId thread = before.front().thread_id;
    // The first thread's ranges, by id: taken out, then written back one longer each.
    std::vector<RangeEvent> taken;
    {
        TraceEditor editor(path);
        const RangeId largest = editor.largest_range_id();
        RangeId expected_largest = 0;
        for (const RangeEvent& range : before) expected_largest = std::max(expected_largest, range.range_id);
        EXPECT_EQ(largest, expected_largest);
        TraceEditor::RangeCursor cursor = editor.ranges_by_id(1, largest, thread, false);
        for (RangeEvent range; cursor.next(range);) taken.push_back(range);
        const std::int64_t on_thread =
            std::count_if(before.begin(), before.end(), [&](const RangeEvent& r) { return r.thread_id == thread; });
        EXPECT_EQ(static_cast<std::int64_t>(taken.size()), on_thread);
        EXPECT_EQ(editor.delete_ranges(1, largest, thread, false), on_thread);
        for (RangeEvent range : taken) {
            range.range_id += largest;
            range.end_ns += 1000;
            editor.insert_range(range);
        }
        editor.recount_range_track_stats(thread);
        RunInfo run = sample.run;
        run.host = "otherhost";
        run.end_ns = 987654;
        editor.replace_run_info(run);
        editor.set_metadata("import_note", "amended");
        editor.commit();
    }
    TraceReader reader(path);
    EXPECT_EQ(reader.run().host, "otherhost");
    EXPECT_EQ(reader.run().end_ns, 987654);
    EXPECT_EQ(reader.run().command_line, sample.run.command_line);
    EXPECT_EQ(reader.metadata("import_note"), "amended");
    EXPECT_TRUE(reader.complete());  // the writer's own keys stay
    std::vector<RangeEvent> after = all_ranges(reader);
    ASSERT_EQ(after.size(), before.size());
    TimeNs longest = 0;
    std::int64_t count = 0;
    for (const RangeEvent& range : after) {
        if (range.thread_id != thread) continue;
        ++count;
        longest = std::max(longest, range.end_ns - range.start_ns);
        EXPECT_GT(range.range_id, before.back().range_id);
    }
    bool summarized = false;
    for (const TrackSummary& summary : reader.tracks()) {
        if (summary.event_table != "ranges" || summary.track.id != thread) continue;
        summarized = true;
        EXPECT_EQ(summary.event_count, count);
        EXPECT_EQ(summary.max_duration_ns, longest);
    }
    EXPECT_TRUE(summarized);
    std::filesystem::remove(path);
}

TEST(TraceEditor, UncommittedEditLeavesTheFileAsItWas) {
    const std::string path = temp_path("rollback.db");
    testing::write_sample_trace(path);
    std::size_t count = 0;
    {
        TraceReader reader(path);
        count = all_ranges(reader).size();
    }
    {
        TraceEditor editor(path);
        editor.delete_ranges(0, editor.largest_range_id(), std::nullopt, false);
        editor.set_metadata("host", "nowhere");
    }
    TraceReader reader(path);
    EXPECT_EQ(all_ranges(reader).size(), count);
    EXPECT_EQ(reader.run().host, "testhost");
    std::filesystem::remove(path);
}

}  // namespace
}  // namespace ember::store
