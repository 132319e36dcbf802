// anchor_test.cpp: merging puts two rank files on one time base. Rank 1's clock
// runs 5 s ahead of rank 0's; both files hold a `clock/anchor` mark with sequence 0 at
// the same true instant, and a `backward` range 1 ms after it. In the merged file both
// ranges must start at the same time (rank 0's), each rank must be its own process,
// and the nesting of ranges must survive. The summary names rank 1 (the longer backward)
// as the straggler and reports rank 0's all-reduce wait.
#include "profiler/analysis/rank_summary.h"
#include "profiler/merge/merge.h"
#include "profiler/store/reader.h"
#include "profiler/store/writer.h"
#include "tests/support/temp_dir.h"
#include "tests/support/trace_ranges.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace ember {
namespace {

constexpr trace::TimeNs kAnchor0 = 1'000'000'000;     // rank 0's clock at the anchor
constexpr trace::TimeNs kRank1Ahead = 5'000'000'000;  // rank 1's clock offset

void write_rank_file(const std::string& path, int rank, trace::TimeNs clock_offset) {
    trace::RunInfo run;
    run.pid = 1000;  // the same pid on both "hosts": the merge must keep them apart
    run.rank = rank;
    run.world_size = 2;
    run.host = "host" + std::to_string(rank);
    store::TraceWriter writer(path, run);
    writer.register_process({run.pid, "ember"});
    const trace::ThreadId thread = writer.register_thread({0, run.pid, 1000, "main"});
    trace::MarkEvent anchor;
    anchor.time_ns = kAnchor0 + clock_offset;
    anchor.thread_id = thread;
    anchor.domain_id = writer.intern("ember");
    anchor.name_id = writer.intern("clock/anchor");
    anchor.payload = trace::Payload::of_real(0.0);
    writer.record_mark(anchor);
    const trace::TimeNs step_start = kAnchor0 + clock_offset + 500'000;
    const trace::RangeEvent step =
        test_support::record_range(writer, thread, "step", step_start, step_start + 10'000'000, anchor.domain_id);
    const trace::TimeNs backward_start = kAnchor0 + clock_offset + 1'000'000;
    // Backward is compute (category 2); rank 1's is slower.
    const trace::RangeEvent backward = test_support::record_child_range(writer, step, "backward", backward_start,
                                                                        backward_start + 2'000'000 * (rank + 1), 2);
    // Rank 0 finishes backward 2 ms earlier and waits for rank 1 in the all-reduce.
    test_support::record_child_range(writer, step, "allreduce/wait", backward.end_ns,
                                     backward.end_ns + (rank == 0 ? 2'000'000 : 10'000), 4);
    writer.close();
}

TEST(MergeAnchors, RankFilesShareOneTimeBaseAfterAnchors) {
    const test_support::TempDir dir("ember_merge_anchor_test");
    const std::string rank0 = dir.path("job.rank0.db"), rank1 = dir.path("job.rank1.db");
    const std::string merged = dir.path("job.db");
    write_rank_file(rank0, 0, 0);
    write_rank_file(rank1, 1, kRank1Ahead);
    merge::merge_traces({rank1, rank0}, merged);
    // Rank 1's backward takes 4 ms against rank 0's 2 ms; rank 0 waited 2 ms.
    const analysis::RankSummary summary = analysis::rank_summary(store::TraceReader(merged));
    ASSERT_TRUE(summary.straggler.has_value());
    EXPECT_EQ(summary.ranks[*summary.straggler].rank, 1);
    EXPECT_EQ(summary.ranks[*summary.straggler].compute_ns, 4'000'000);
    EXPECT_EQ(summary.others_wait_ns, 2'000'000);

    store::TraceReader reader(merged);
    EXPECT_EQ(reader.run().world_size, 2);
    EXPECT_EQ(reader.processes().size(), 2u);
    ASSERT_EQ(reader.threads().size(), 2u);
    std::optional<trace::StringId> backward = reader.find_string("backward");
    ASSERT_TRUE(backward);
    std::vector<trace::RangeEvent> backwards;
    int64_t ranges = 0;
    reader.for_each_range({}, [&](const trace::RangeEvent& range) {
        ++ranges;
        if (range.name_id == *backward) backwards.push_back(range);
        return true;
    });
    EXPECT_EQ(ranges, 6);
    ASSERT_EQ(backwards.size(), 2u);
    for (const trace::RangeEvent& range : backwards) {
        EXPECT_EQ(range.start_ns, kAnchor0 + 1'000'000) << "thread " << range.thread_id;
        ASSERT_TRUE(reader.range(range.parent_range_id));
        EXPECT_EQ(reader.string(reader.range(range.parent_range_id)->name_id), "step");
    }
    EXPECT_NE(backwards[0].thread_id, backwards[1].thread_id);
}

}  // namespace
}  // namespace ember
