// job_overview_test.cpp: the Job view's model (job_overview.h) on a generated job whose
// answer is known: one row per rank, the waits its bins and collective marks hold equal
// the job analysis's, the latest rank first when ordered by lateness, a collective found
// where it was drawn, and the timeline's shifts the analysis's clock offsets.
#include "tests/support/generated_job.h"
#include "viewer/model/job_overview.h"
#include "viewer/model/trace_model.h"

#include <gtest/gtest.h>

namespace ember::viewer {
namespace {

class JobOverviewTest : public ::testing::Test {
  protected:
    static synth::SyntheticJobOptions options() {
        synth::SyntheticJobOptions options;
        options.ranks = 6;
        options.steps = 8;
        options.straggler = 3;
        options.clock_skew_ns = 4'000'000;
        return options;
    }
    const test_support::GeneratedJob job_{options(), "ember-job-overview"};
};

TEST_F(JobOverviewTest, RowsHoldTheJobsNumbers) {
    const JobOverview overview = build_job_overview(job_.files, job_.files, 2048);
    ASSERT_EQ(overview.ranks.size(), 6u);
    ASSERT_EQ(overview.job.straggler, 3);
    const trace::TimeNs bin = overview.bin_ns();
    for (std::size_t r = 0; r < overview.ranks.size(); ++r) {
        const JobRankRow& row = overview.ranks[r];
        ASSERT_NE(row.numbers, nullptr);
        EXPECT_EQ(row.rank, static_cast<std::int32_t>(r));
        EXPECT_EQ(row.bins.size(), 2048u);
        // Its marks: one per matched collective, their waits summing to the analysis's.
        ASSERT_EQ(row.collectives.size(), 16u);
        trace::TimeNs marked_wait = 0;
        for (const JobCollectiveMark& mark : row.collectives) {
            EXPECT_LE(mark.arrival_ns, mark.wait_end_ns);
            EXPECT_LE(mark.wait_end_ns, mark.end_ns);
            marked_wait += mark.wait_end_ns - mark.arrival_ns;
            EXPECT_EQ(row.collectives[static_cast<std::size_t>(row.mark_of_collective[mark.collective])].arrival_ns,
                      mark.arrival_ns);
        }
        EXPECT_EQ(marked_wait, row.numbers->wait_ns) << "rank " << row.rank;
        // Its bins: the wait they hold, to within a bin per collective (rounding to 1/255).
        double binned_wait = 0;
        for (const auto& shares : row.bins)
            binned_wait += shares[static_cast<int>(JobActivity::wait)] / 255.0 * static_cast<double>(bin);
        EXPECT_NEAR(binned_wait, static_cast<double>(row.numbers->wait_ns), 16.0 * static_cast<double>(bin))
            << "rank " << row.rank;
        // And the bins agree with the shares the view reads.
        const auto whole = overview.activity(static_cast<int>(r), overview.begin_ns, overview.end_ns);
        EXPECT_NEAR(
            whole[static_cast<int>(JobActivity::wait)] * static_cast<double>(overview.end_ns - overview.begin_ns),
            binned_wait, 2.0 * static_cast<double>(bin));
    }
    // The straggler computes while the others wait: its compute share is the largest.
    const auto straggler = overview.activity(3, overview.begin_ns, overview.end_ns);
    for (int r = 0; r < 6; ++r) {
        if (r == 3) continue;
        const auto other = overview.activity(r, overview.begin_ns, overview.end_ns);
        EXPECT_GT(straggler[static_cast<int>(JobActivity::compute)], other[static_cast<int>(JobActivity::compute)]);
        EXPECT_LT(straggler[static_cast<int>(JobActivity::wait)], other[static_cast<int>(JobActivity::wait)]);
    }
}

TEST_F(JobOverviewTest, OrdersFindsAndShifts) {
    const JobOverview overview = build_job_overview(job_.files, job_.files);
    EXPECT_EQ(overview.row_order(JobOrder::rank), (std::vector<int>{0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(overview.row_order(JobOrder::lateness).front(), 3);  // the latest first
    EXPECT_EQ(overview.row_order(JobOrder::wait).back(), 3);       // it waits least
    // A collective is found where its box is.
    const JobCollectiveMark& mark = overview.ranks[1].collectives[5];
    EXPECT_EQ(overview.collective_at(1, (mark.arrival_ns + mark.end_ns) / 2, 0), mark.collective);
    EXPECT_FALSE(overview.collective_at(1, mark.arrival_ns - 1'000'000'000, 1000).has_value());
    // The timeline's shifts are the analysis's offsets (rank 0's clock).
    const std::vector<trace::TimeNs> shifts = overview.shifts_for(job_.files);
    for (std::size_t r = 0; r < job_.files.size(); ++r)
        EXPECT_NEAR(static_cast<double>(shifts[r]),
                    static_cast<double>(job_.truth[0].clock_offset_ns - job_.truth[r].clock_offset_ns), 3000.0);
    // A TraceModel on those shifts puts rank 3's collectives where the overview has them.
    const std::vector<std::string> two = {job_.files[0], job_.files[3]};
    const std::vector<trace::TimeNs> two_shifts = overview.shifts_for(two);
    TraceModel model(two, &two_shifts);
    EXPECT_EQ(model.files()[1].shift_ns, overview.ranks[3].offset_ns);
}

}  // namespace
}  // namespace ember::viewer
