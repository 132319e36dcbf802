// collectives_real_test.cpp: the job analysis on multi-rank traces recorded by others on
// real GPUs (../shared/real-traces), against an independent computation over the same
// JSON files: the files parsed here with nlohmann::json (not ember's importer), NCCL
// kernels matched k-th to k-th per stream, clocks aligned on the median end difference,
// and each rank's wait, arrivals-last and the straggler worked out from the definitions
// in collectives.h. Skipped, naming the folder, when ../shared is absent.
#include "profiler/analysis/collectives.h"
#include "profiler/analysis/rank_summary.h"
#include "profiler/store/reader.h"
#include "profiler/import/import.h"
#include "profiler/job/job.h"
#include "tests/support/gunzip.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

namespace ember::analysis {
namespace {

using trace::TimeNs;

const std::string kRealTraces = EMBER_REAL_TRACES_DIR;

// One rank as read here: its NCCL kernels per stream, streams in order of first use.
struct IndependentRank {
    int rank = 0;
    std::vector<std::vector<std::pair<TimeNs, TimeNs>>> communicators;
};

IndependentRank read_rank(const std::string& path) {
    const nlohmann::json trace = nlohmann::json::parse(test_support::gunzip_file(path));
    IndependentRank rank;
    rank.rank = trace["distributedInfo"]["rank"].get<int>();
    std::map<long long, std::vector<std::pair<TimeNs, TimeNs>>> by_stream;
    for (const nlohmann::json& event : trace["traceEvents"]) {
        if (event.value("cat", "") != "kernel" || event.value("name", "").find("nccl") == std::string::npos) continue;
        // Whole microseconds (the A100 traces) in integers: 1.7e18 ns is beyond a double's exact range.
        auto nanoseconds = [](const nlohmann::json& us) -> TimeNs {
            return us.is_number_integer() ? us.get<long long>() * 1000 : std::llround(us.get<double>() * 1000.0);
        };
        const TimeNs start = nanoseconds(event["ts"]);
        const TimeNs end = start + nanoseconds(event["dur"]);
        by_stream[event["args"]["stream"].get<long long>()].emplace_back(start, end);
    }
    for (auto& [stream, kernels] : by_stream) {
        std::sort(kernels.begin(), kernels.end());
        rank.communicators.push_back(kernels);
    }
    std::sort(rank.communicators.begin(), rank.communicators.end(),
              [](const auto& a, const auto& b) { return a.front().first < b.front().first; });
    return rank;
}

// The union of a rank's kernels that are not NCCL's.
TimeNs independent_compute(const std::string& path) {
    const nlohmann::json trace = nlohmann::json::parse(test_support::gunzip_file(path));
    std::vector<std::pair<TimeNs, TimeNs>> kernels;
    for (const nlohmann::json& event : trace["traceEvents"]) {
        if (event.value("cat", "") != "kernel" || event.value("name", "").find("nccl") != std::string::npos) continue;
        const TimeNs start = std::llround(event["ts"].get<double>() * 1000.0);
        kernels.emplace_back(start, start + std::llround(event["dur"].get<double>() * 1000.0));
    }
    std::sort(kernels.begin(), kernels.end());
    TimeNs total = 0, start = 0, end = std::numeric_limits<TimeNs>::min();
    for (const auto& [s, e] : kernels) {
        if (s > end) {
            if (end > start) total += end - start;
            start = s;
            end = e;
        } else {
            end = std::max(end, e);
        }
    }
    if (end > start) total += end - start;
    return total;
}

TimeNs median(std::vector<TimeNs> values) {
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    if (n % 2) return values[n / 2];
    return values[n / 2 - 1] + (values[n / 2] - values[n / 2 - 1]) / 2;
}

struct IndependentAnswer {
    std::map<int, TimeNs> wait, offset;
    std::map<int, std::int64_t> arrived_last;
};

// Two ranks, as collectives.h defines it.
IndependentAnswer independent(const IndependentRank& a, const IndependentRank& b) {
    const IndependentRank& reference = a.rank < b.rank ? a : b;
    const IndependentRank& other = a.rank < b.rank ? b : a;
    std::vector<TimeNs> differences;
    for (std::size_t c = 0; c < std::min(reference.communicators.size(), other.communicators.size()); ++c)
        for (std::size_t k = 0; k < std::min(reference.communicators[c].size(), other.communicators[c].size()); ++k)
            differences.push_back(reference.communicators[c][k].second - other.communicators[c][k].second);
    IndependentAnswer answer;
    answer.offset[reference.rank] = 0;
    answer.offset[other.rank] = median(differences);
    const TimeNs shift = answer.offset[other.rank];
    std::vector<TimeNs> spreads;
    for (std::size_t c = 0; c < std::min(reference.communicators.size(), other.communicators.size()); ++c)
        for (std::size_t k = 0; k < std::min(reference.communicators[c].size(), other.communicators[c].size()); ++k)
            spreads.push_back(
                std::llabs(reference.communicators[c][k].second - (other.communicators[c][k].second + shift)));
    const TimeNs margin = std::max<TimeNs>(2 * median(spreads), 1000);
    for (std::size_t c = 0; c < std::min(reference.communicators.size(), other.communicators.size()); ++c) {
        for (std::size_t k = 0; k < std::min(reference.communicators[c].size(), other.communicators[c].size()); ++k) {
            const auto [r_start, r_end] = reference.communicators[c][k];
            const auto [o_start, o_end] = other.communicators[c][k];
            const TimeNs o_arrival = o_start + shift;
            const TimeNs last = std::max(r_start, o_arrival);
            answer.wait[reference.rank] += std::min(last - r_start, r_end - r_start);
            answer.wait[other.rank] += std::min(last - o_arrival, o_end - o_start);
            if (o_arrival - r_start > margin) ++answer.arrived_last[other.rank];
            if (r_start - o_arrival > margin) ++answer.arrived_last[reference.rank];
        }
    }
    return answer;
}

void expect_same_answer(const std::string& first, const std::string& second, const JobCollectives& job) {
    const IndependentAnswer answer = independent(read_rank(first), read_rank(second));
    ASSERT_EQ(job.ranks.size(), 2u);
    for (const RankWaitRow& row : job.ranks) {
        EXPECT_NEAR(static_cast<double>(row.wait_ns), static_cast<double>(answer.wait.at(row.rank)), 1000.0)
            << "rank " << row.rank;
        EXPECT_EQ(row.arrived_last, answer.arrived_last.count(row.rank) ? answer.arrived_last.at(row.rank) : 0)
            << "rank " << row.rank;
    }
    for (const RankClock& clock : job.clocks)
        EXPECT_NEAR(static_cast<double>(clock.offset_ns), static_cast<double>(answer.offset.at(clock.rank)), 1.0);
}

std::string ember_trace(const std::string& path) {
    importing::OpenTraceOptions options;
    options.cache = importing::CachePlace::user_cache;  // ../shared is read-only
    return importing::open_as_ember_trace(path, options);
}

job::JobFilesOptions options_for_imports() {
    job::JobFilesOptions options;
    options.ember_trace_for = ember_trace;
    return options;
}

#define REQUIRE_REAL_TRACES()                        \
    if (!std::filesystem::is_directory(kRealTraces)) \
    GTEST_SKIP() << kRealTraces << " is absent (the real GPU traces live in ../shared/real-traces)"

TEST(RealJobs, FsdpOnTwoRtx4090sNamesTheRankTheOtherWaitedFor) {
    REQUIRE_REAL_TRACES();
    const std::string folder = kRealTraces + "/kineto-multirank/";
    const std::string r0 =
        folder + "tugot17_tokenomics-from-first-principles_llama_trace_4layers0_with_annotations.json";
    const std::string r1 =
        folder + "tugot17_tokenomics-from-first-principles_llama_trace_4layers1_with_annotations.json";
    const JobCollectives job = job::analyze_job_files({r0, r1}, options_for_imports());
    expect_same_answer(r0, r1, job);
    EXPECT_EQ(job.matched, 19);
    EXPECT_TRUE(job.unmatched.empty());
    // Rank 1 came late to the first reduce-scatters and all-gathers (by 5 to 15 ms): rank 0
    // waited some 45 ms for it; rank 1 hardly waited.
    ASSERT_TRUE(job.straggler.has_value()) << job.straggler_evidence;
    EXPECT_EQ(*job.straggler, 1);
    EXPECT_GT(job.rank(0)->wait_ns, 40'000'000);
    EXPECT_LT(job.rank(1)->wait_ns, 1'000'000);
    EXPECT_EQ(job.rank(0)->rank_from, "distributedInfo.rank");
    EXPECT_FALSE(job.doing_instead.empty());
    EXPECT_TRUE(job.warnings.empty());
    // The ranks report's compute, where a PyTorch trace has no ember compute ranges: the
    // union of the rank's kernels that are not NCCL's, as the independent reading has it.
    for (const std::string& file : {r0, r1}) {
        const store::TraceReader reader(ember_trace(file));
        const RankSummary summary = rank_summary(reader, &job);
        ASSERT_EQ(summary.ranks.size(), 1u);
        EXPECT_TRUE(summary.ranks[0].compute_from_gpu);
        EXPECT_EQ(summary.ranks[0].compute_ns, independent_compute(file)) << file;
    }
}

TEST(RealJobs, TwoSampledRanksOfA128RankJobWarnTheMatchIsDoubtful) {
    REQUIRE_REAL_TRACES();
    const std::string r0 = kRealTraces + "/kineto/a100_sampled_rank0.json.gz";
    const std::string r1 = kRealTraces + "/kineto/a100_sampled_rank1.json.gz";
    const JobCollectives job = job::analyze_job_files({r0, r1}, options_for_imports());
    expect_same_answer(r0, r1, job);
    EXPECT_EQ(job.matched, 10);
    // Sampled SendRecv kernels of a 128-rank job: the k-th ones of two ranks are not one
    // operation, and their ends say so (milliseconds apart).
    EXPECT_GT(job.residual_median_ns, 1'000'000);
    for (const CollectiveRow& row : job.collectives) EXPECT_EQ(row.kind, CollectiveKind::send_recv);
}

}  // namespace
}  // namespace ember::analysis
