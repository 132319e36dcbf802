// step_consistency_test.cpp: every report that speaks of steps and ranks finds the same
// ones on one imported trace whose steps are PyTorch's ProfilerStep#N (steps.h,
// rank_map.h): the GPU work (--like hta's last-step rule), the step breakdown under
// both conventions, GPU activity per step, the ranks table and `ember diff`'s profile.
//   * a hand-built Chrome trace that keeps the names ProfilerStep#7..9 as they are, on a
//     file with a second (worker) process that is no rank of its own; the answers are
//     known: three steps 7, 8, 9, all on rank 0;
//   * the real ResNet-50 Kineto trace (../shared/real-traces; skipped, naming the
//     folder, when absent), whose ProfilerStep#5..10 the importer renames "step": the
//     reports agree with one another and with the numbers in the file.
#include "profiler/analysis/gpu_activity.h"
#include "profiler/analysis/gpu_work.h"
#include "profiler/analysis/rank_map.h"
#include "profiler/analysis/rank_summary.h"
#include "profiler/analysis/step_breakdown.h"
#include "profiler/analysis/steps.h"
#include "profiler/analysis/trace_diff.h"
#include "profiler/import/import.h"
#include "profiler/store/reader.h"
#include "tests/support/fixture_trace.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace {

using namespace ember;
using namespace ember::analysis;

const std::filesystem::path kRealTraces = EMBER_REAL_TRACES_DIR;

// Steps per rank, in time order, as one report sees them.
using StepsByRank = std::map<std::int32_t, std::vector<std::int64_t>>;

void expect_every_report_finds(const store::TraceReader& reader, const StepsByRank& expected) {
    std::map<std::int32_t, std::int64_t> expected_counts;
    for (const auto& [rank, steps] : expected) expected_counts[rank] = static_cast<std::int64_t>(steps.size());

    {
        SCOPED_TRACE("steps.h");
        StepsByRank found;
        for (const auto& [rank, ranges] : step_ranges(reader, rank_map(reader)))
            for (const StepRange& step : ranges) found[rank].push_back(step.number.value_or(-1));
        EXPECT_EQ(found, expected);
    }
    for (Convention convention : {Convention::ember, Convention::hta, Convention::tb, Convention::tracelens}) {
        SCOPED_TRACE(std::string("gpu_work --like ") + convention_name(convention));
        std::map<std::int32_t, std::int64_t> found;
        for (const RankGpuWork& work : gpu_work(reader, convention)) found[work.rank] = work.profiler_steps;
        EXPECT_EQ(found, expected_counts);
    }
    for (StepConvention convention : {StepConvention::ember, StepConvention::tb}) {
        SCOPED_TRACE(std::string("step_breakdown ") + step_convention_name(convention));
        StepsByRank found;
        for (const StepBreakdownRow& row : step_breakdown(reader, convention)) found[row.rank].push_back(row.step);
        EXPECT_EQ(found, expected);
    }
    {
        SCOPED_TRACE("gpu_activity (steps)");
        const RankMap ranks = rank_map(reader);
        std::map<std::int32_t, std::int64_t> found;
        std::int64_t last_index = -1;
        for (const StepBreakdown& row : gpu_activity(reader, 0).steps) {
            if (row.step_index == last_index) continue;  // one row per device
            last_index = row.step_index;
            ++found[row.rank < 0 ? ranks.single_rank : row.rank];
        }
        EXPECT_EQ(found, expected_counts);
    }
    {
        SCOPED_TRACE("rank_summary (ranks)");
        std::map<std::int32_t, std::int64_t> found;
        for (const RankTimes& rank : rank_summary(reader).ranks) found[rank.rank] = rank.steps;
        EXPECT_EQ(found, expected_counts);
    }
    {
        SCOPED_TRACE("ember diff's run profile");
        const RunProfile profile = profile_run(reader);
        EXPECT_TRUE(profile.has_step_ranges);
        std::vector<std::int32_t> ranks;
        for (const auto& [rank, steps] : expected) ranks.push_back(rank);
        EXPECT_EQ(profile.ranks, ranks);
        StepsByRank found;
        for (const DiffStep& step : profile.steps) found[step.rank].push_back(step.step);
        if (expected.size() == 1) EXPECT_EQ(found, expected);  // a whole job takes each step's slowest rank
    }
}

// Three ProfilerStep#N on the main thread of process 100, each launching one kernel; a
// second process (a data-loading worker) with a range of its own.
constexpr const char* kChromeTrace = R"({"traceEvents": [
  {"ph": "M", "name": "process_name", "pid": 100, "args": {"name": "python train.py"}},
  {"ph": "M", "name": "process_name", "pid": 200, "args": {"name": "pt_data_worker"}},
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 100, "tid": 1, "ts": 0, "dur": 1000},
  {"ph": "X", "cat": "cuda_api", "name": "cudaLaunchKernel", "pid": 100, "tid": 1, "ts": 10, "dur": 5, "args": {"correlation": 1}},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 1000000000, "tid": 7, "ts": 20, "dur": 300, "args": {"correlation": 1, "device": 0, "stream": 7}},
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#8", "pid": 100, "tid": 1, "ts": 1000, "dur": 1000},
  {"ph": "X", "cat": "cuda_api", "name": "cudaLaunchKernel", "pid": 100, "tid": 1, "ts": 1010, "dur": 5, "args": {"correlation": 2}},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 1000000000, "tid": 7, "ts": 1020, "dur": 300, "args": {"correlation": 2, "device": 0, "stream": 7}},
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#9", "pid": 100, "tid": 1, "ts": 2000, "dur": 1000},
  {"ph": "X", "cat": "cuda_api", "name": "cudaLaunchKernel", "pid": 100, "tid": 1, "ts": 2010, "dur": 5, "args": {"correlation": 3}},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 1000000000, "tid": 7, "ts": 2020, "dur": 300, "args": {"correlation": 3, "device": 0, "stream": 7}},
  {"ph": "X", "cat": "cpu_op", "name": "load_batch", "pid": 200, "tid": 2, "ts": 100, "dur": 500}
]})";

TEST(StepConsistency, EveryReportFindsTheProfilerStepsOfAHandBuiltImport) {
    const std::string json = ember::testing::temporary_path("step-consistency", ".json");
    const std::string db = ember::testing::temporary_path("step-consistency", ".db");
    std::ofstream(json) << kChromeTrace;
    importing::import_file(json, db);
    {
        store::TraceReader reader(db);
        ASSERT_EQ(reader.processes().size(), 2u);  // the worker is no rank of its own
        expect_every_report_finds(reader, {{0, {7, 8, 9}}});
    }
    std::filesystem::remove(json);
    std::filesystem::remove(db);
}

TEST(StepConsistency, EveryReportFindsTheStepsOfTheRealResNet50Trace) {
    const std::filesystem::path input = kRealTraces / "kineto" / "v100_resnet50_workers0.json.gz";
    if (!std::filesystem::exists(input)) GTEST_SKIP() << "no " << input << " (../shared/real-traces is absent)";
    const std::string db = ember::testing::temporary_path("step-consistency-resnet", ".db");
    importing::import_file(input.string(), db);
    {
        store::TraceReader reader(db);
        // The file's ProfilerStep#5..10 (docs of the folder), the importer's "step".
        expect_every_report_finds(reader, {{0, {5, 6, 7, 8, 9, 10}}});
    }
    std::filesystem::remove(db);
}

}  // namespace
