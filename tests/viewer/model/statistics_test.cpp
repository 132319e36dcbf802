// statistics_test.cpp: tables and range summaries add up to the fixture's totals.
#include "tests/viewer/fixture_trace.h"
#include "viewer/model/statistics.h"

#include <gtest/gtest.h>

namespace ember::viewer {
namespace {

TEST(StatisticsTest, TablesMatchTheTrace) {
    const std::string path = testing::temporary_trace_path("stats");
    const auto totals = testing::write_fixture_trace(path);
    {
        TraceModel model({path});
        model.load_all();
        const Statistics stats = compute_statistics(model);
        ASSERT_EQ(stats.kernels.size(), 2u);
        std::int64_t kernels = 0;
        for (const NameTotal& row : stats.kernels) kernels += row.count;
        EXPECT_EQ(kernels, totals.kernels);
        EXPECT_EQ(stats.kernel_time_ns, totals.kernel_ns);
        EXPECT_EQ(model.name(stats.kernels[0].name_id), "sgemm_128x64");  // largest total first
        ASSERT_EQ(stats.copies.size(), 1u);
        EXPECT_EQ(stats.copies[0].bytes, totals.copy_bytes);
        EXPECT_NEAR(stats.copies[0].bandwidth(), (1 << 20) / 20e-6, 1.0);
        EXPECT_EQ(stats.steps.size(), 4u);
        EXPECT_EQ(stats.steps[3].index, 3);
        ASSERT_EQ(stats.stalls.size(), 1u);
        EXPECT_EQ(model.name(stats.stalls[0].name_id), "dataloader/wait");
        EXPECT_EQ(stats.stalls[0].total_ns, 4 * 200'000);

        // The first step only, clipped: the kernels that started in it.
        const TimeRange first_step{stats.steps[0].start_ns, stats.steps[0].start_ns + stats.steps[0].duration_ns};
        const Statistics summary = summarize_range(model, first_step);
        std::int64_t in_range = 0;
        for (const NameTotal& row : summary.kernels) in_range += row.count;
        EXPECT_EQ(in_range, totals.kernels / 4);
        // A range cutting a wait in half counts half of it.
        const TimeRange half_wait{stats.steps[0].start_ns + 200'000, stats.steps[0].start_ns + 400'000};
        const Statistics cut = summarize_range(model, half_wait);
        ASSERT_EQ(cut.stalls.size(), 1u);
        EXPECT_EQ(cut.stalls[0].total_ns, 100'000);
    }
    std::filesystem::remove(path);
}

TEST(StatisticsTest, StallNames) {
    EXPECT_TRUE(is_stall_name("dataloader/wait"));
    EXPECT_TRUE(is_stall_name("allreduce_WAIT"));
    EXPECT_TRUE(is_stall_name("pipeline stall"));
    EXPECT_FALSE(is_stall_name("forward"));
}

}  // namespace
}  // namespace ember::viewer
