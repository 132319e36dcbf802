// real_traces_test.cpp: the GPU breakdowns of `ember stats` on traces recorded by other
// tools on real GPUs (../shared/real-traces), against what the reference tools computed
// on the same files (expected/):
//   * --like hta: temporal, kernel types, comm/comp overlap and the idle-time breakdown
//     equal Holistic Trace Analysis' numbers on the two A100 ranks (one job file) and on
//     the V100 DDP trace with fractional-microsecond times, for every rank and stream HTA
//     lists, within 1 µs per value and 0.01 percentage points per percentage; once
//     through the library calls, once through `ember stats --format json` (the JSON
//     keys docs/stats.md documents). Also the per-kernel totals behind the kernel-type report, and the
//     sums of HTA's kernel launch statistics and its queue-length summary.
//   * --like tracelens: the H100 inference trace's gpu_timeline equals TraceLens'
//     gpu_timeline.csv.
//   * --like tb: the ResNet-50 step breakdown against the TensorBoard plugin is checked
//     in step_breakdown_test.cpp (TbEqualsThePluginOnTheRealResNet50Trace), not here.
// The traces come in through the importer, as `ember stats` reads them. Every test
// skips, naming the folder, when ../shared/real-traces is absent (a fresh clone).
#include "profiler/analysis/gpu_breakdown.h"
#include "profiler/analysis/gpu_work.h"
#include "profiler/analysis/launches.h"
#include "profiler/analysis/stats_report.h"
#include "profiler/import/import.h"
#include "profiler/job/import_job.h"
#include "profiler/store/reader.h"
#include "tests/support/temp_path.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace {

using namespace ember;
using namespace ember::analysis;
using trace::TimeNs;

const std::filesystem::path kRoot = EMBER_REAL_TRACES_DIR;

// The bounds of every comparison: 1 µs per time, 0.01 percentage points per percentage.
constexpr double kMicrosecondTolerance = 1.0;
constexpr double kPercentTolerance = 0.01;

double as_us(TimeNs ns) {
    return static_cast<double>(ns) / 1000.0;
}

nlohmann::json read_json(const std::filesystem::path& path) {
    nlohmann::json document;
    std::ifstream(path) >> document;
    return document;
}

// ---------------------------------------------------------------------------
// [SECTION] The imported traces (once per run of this program)
// ---------------------------------------------------------------------------

class RealTraces : public ::testing::Test {
  protected:
    void SetUp() override {
        if (!std::filesystem::exists(kRoot / "kineto") || !std::filesystem::exists(kRoot / "expected"))
            GTEST_SKIP() << kRoot << " is absent (a fresh clone has no ../shared): no real traces to compare with";
    }
    static void TearDownTestSuite() {
        for (const auto& [name, path] : imported_) std::filesystem::remove(path);
        imported_.clear();
    }

    // The ember trace of `inputs` (Kineto files under kineto/), imported on first use;
    // several inputs become one job file, as `ember import r0.json.gz r1.json.gz` makes.
    static const std::string& imported(const std::string& name, const std::vector<std::string>& inputs) {
        auto found = imported_.find(name);
        if (found != imported_.end()) return found->second;
        const std::string output = test_support::unique_temp_path("ember-real-traces-" + name, ".db").string();
        std::vector<std::string> paths;
        for (const std::string& input : inputs) paths.push_back((kRoot / "kineto" / input).string());
        job::import_job_file(paths, output);
        return imported_.emplace(name, output).first->second;
    }
    static const std::string& a100_pair() {
        return imported("a100-pair", {"a100_sampled_rank0.json.gz", "a100_sampled_rank1.json.gz"});
    }
    static const std::string& v100_ns_resolution() { return imported("v100-ns", {"v100_ns_resolution_rank0.json.gz"}); }
    static const std::string& h100_bert() { return imported("h100-bert", {"h100_bert_small.json.gz"}); }

    static inline std::map<std::string, std::string> imported_;
};

// ---------------------------------------------------------------------------
// [SECTION] HTA's four breakdowns, read from ember (library or JSON) and compared
// ---------------------------------------------------------------------------

struct IdleValue {
    TimeNs idle_ns = 0;
    std::optional<double> ratio;  // of the stream's idle time, 0..1
};
using IdleKey = std::tuple<std::int32_t, std::uint64_t, std::string>;  // rank, stream, category

// One trace's temporal, kernel-type, overlap and idle breakdowns as ember reports them.
struct Breakdowns {
    std::map<std::int32_t, std::array<TimeNs, 4>> temporal;  // span, idle, compute, non-compute
    std::map<std::int32_t, std::map<std::string, TimeNs>> kernel_types;
    std::map<std::int32_t, std::optional<double>> overlap;  // percent
    std::map<IdleKey, IdleValue> idle;
};

Breakdowns breakdowns_from_library(const store::TraceReader& reader) {
    const std::vector<RankGpuWork> work = gpu_work(reader, Convention::hta);
    Breakdowns result;
    for (const TemporalRow& row : temporal_breakdown(work))
        result.temporal[row.rank] = {row.span_ns, row.idle_ns, row.compute_ns, row.non_compute_ns};
    for (const KernelTypeRow& row : kernel_type_breakdown(work))
        result.kernel_types[row.rank][row.kernel_type] = row.total_ns;
    for (const OverlapRow& row : communication_overlap(work)) result.overlap[row.rank] = row.percent;
    for (const IdleRow& row : idle_breakdown(work, 30'000))
        result.idle[{row.rank, row.stream, idle_category_name(row.category)}] = {row.idle_ns, row.ratio};
    return result;
}

// `ember stats FILE --report temporal,kernel_types,overlap,idle_breakdown --like hta
// --format json`, read back by the keys docs/stats.md documents.
Breakdowns breakdowns_from_json(const store::TraceReader& reader) {
    StatsOptions options;
    options.reports = {"temporal", "kernel_types", "overlap", "idle_breakdown"};
    options.format = OutputFormat::json;
    options.like = Convention::hta;
    std::ostringstream out;
    write_stats(out, reader, options);
    const nlohmann::json reports = nlohmann::json::parse(out.str()).at("reports");
    Breakdowns result;
    auto rank_of = [](const nlohmann::json& row) { return row.at("rank").get<std::int32_t>(); };
    for (const nlohmann::json& row : reports.at("temporal"))
        result.temporal[rank_of(row)] = {row.at("span_ns").get<TimeNs>(), row.at("idle_ns").get<TimeNs>(),
                                         row.at("compute_ns").get<TimeNs>(), row.at("non_compute_ns").get<TimeNs>()};
    for (const nlohmann::json& row : reports.at("kernel_types"))
        result.kernel_types[rank_of(row)][row.at("kernel_type").get<std::string>()] = row.at("total_ns").get<TimeNs>();
    for (const nlohmann::json& row : reports.at("overlap")) {
        const nlohmann::json& percent = row.at("comm_comp_overlap_percent");
        result.overlap[rank_of(row)] = percent.is_null() ? std::nullopt : std::optional<double>(percent.get<double>());
    }
    for (const nlohmann::json& row : reports.at("idle_breakdown")) {
        const nlohmann::json& percent = row.at("idle_percent");
        result.idle[{rank_of(row), row.at("stream").get<std::uint64_t>(), row.at("category").get<std::string>()}] = {
            row.at("idle_ns").get<TimeNs>(),
            percent.is_null() ? std::nullopt : std::optional<double>(percent.get<double>() / 100.0)};
    }
    return result;
}

std::optional<double> optional_number(const nlohmann::json& value) {
    if (value.is_null()) return std::nullopt;
    return value.get<double>();
}

// The keys of a map, as a set.
template <typename Map>
std::set<typename Map::key_type> keys_of(const Map& map) {
    std::set<typename Map::key_type> keys;
    for (const auto& [key, value] : map) keys.insert(key);
    return keys;
}

// Every number of HTA's temporal, kernel-type, overlap and idle breakdowns (`hta`, one
// expected/*.hta.json) against ember's, rank by rank and stream by stream; neither side
// may have a rank, combination or stream the other lacks.
void expect_equals_hta(const Breakdowns& ember, const nlohmann::json& hta) {
    std::set<std::int32_t> hta_ranks;
    for (const nlohmann::json& rank : hta.at("ranks")) hta_ranks.insert(rank.get<std::int32_t>());

    // Temporal: HTA's kernel_time is ember's span.
    EXPECT_EQ(keys_of(ember.temporal), hta_ranks);
    for (const nlohmann::json& want : hta.at("temporal_breakdown")) {
        const std::int32_t rank = want.at("rank").get<std::int32_t>();
        SCOPED_TRACE("temporal, rank " + std::to_string(rank));
        auto found = ember.temporal.find(rank);
        ASSERT_NE(found, ember.temporal.end());
        const auto& [span, idle, compute, non_compute] = found->second;
        EXPECT_NEAR(as_us(span), want.at("kernel_time(us)").get<double>(), kMicrosecondTolerance);
        EXPECT_NEAR(as_us(idle), want.at("idle_time(us)").get<double>(), kMicrosecondTolerance);
        EXPECT_NEAR(as_us(compute), want.at("compute_time(us)").get<double>(), kMicrosecondTolerance);
        EXPECT_NEAR(as_us(non_compute), want.at("non_compute_time(us)").get<double>(), kMicrosecondTolerance);
        // HTA prints its shares rounded to two decimals.
        const double whole = static_cast<double>(span);
        EXPECT_NEAR(100.0 * idle / whole, want.at("idle_time_pctg").get<double>(), kPercentTolerance);
        EXPECT_NEAR(100.0 * compute / whole, want.at("compute_time_pctg").get<double>(), kPercentTolerance);
        EXPECT_NEAR(100.0 * non_compute / whole, want.at("non_compute_time_pctg").get<double>(), kPercentTolerance);
    }

    // Kernel types: HTA sums each combination over all ranks (ember reports per rank).
    std::map<std::string, TimeNs> over_ranks;
    TimeNs all_types = 0;
    for (const auto& [rank, types] : ember.kernel_types)
        for (const auto& [type, total] : types) {
            over_ranks[type] += total;
            all_types += total;
        }
    std::set<std::string> hta_types;
    for (const nlohmann::json& want : hta.at("gpu_kernel_breakdown").at("kernel_type_breakdown")) {
        const std::string type = want.at("kernel_type").get<std::string>();
        SCOPED_TRACE("kernel type " + type);
        hta_types.insert(type);
        ASSERT_TRUE(over_ranks.count(type));
        EXPECT_NEAR(as_us(over_ranks[type]), want.at("sum").get<double>(), kMicrosecondTolerance);
        // HTA's share is rounded to one decimal: ember's rounds to the same.
        EXPECT_NEAR(100.0 * static_cast<double>(over_ranks[type]) / static_cast<double>(all_types),
                    want.at("percentage").get<double>(), 0.05 + 1e-9);
    }
    EXPECT_EQ(keys_of(over_ranks), hta_types);

    // Overlap: none (null) for a rank without communication, on both sides.
    EXPECT_EQ(keys_of(ember.overlap), hta_ranks);
    for (const nlohmann::json& want : hta.at("comm_comp_overlap")) {
        const std::int32_t rank = want.at("rank").get<std::int32_t>();
        SCOPED_TRACE("overlap, rank " + std::to_string(rank));
        ASSERT_TRUE(ember.overlap.count(rank));
        const std::optional<double> got = ember.overlap.at(rank);
        const std::optional<double> expected = optional_number(want.at("comp_comm_overlap_pctg"));
        ASSERT_EQ(got.has_value(), expected.has_value());
        if (got) {
            EXPECT_NEAR(*got, *expected, kPercentTolerance);
        }
    }

    // Idle breakdown: HTA's rows, (rank, stream, category) with the stream as recorded.
    const nlohmann::json& idle = hta.at("idle_time_breakdown(consecutive_kernel_delay=30)").at("idle_time_df");
    std::map<std::pair<std::int32_t, std::uint64_t>, double> stream_idle_us;  // HTA's own totals, for the ratios
    for (const nlohmann::json& want : idle)
        stream_idle_us[{want.at("rank").get<std::int32_t>(), want.at("stream").get<std::uint64_t>()}] +=
            want.at("idle_time").get<double>();
    std::set<IdleKey> hta_keys;
    for (const nlohmann::json& want : idle) {
        const IdleKey key{want.at("rank").get<std::int32_t>(), want.at("stream").get<std::uint64_t>(),
                          want.at("idle_category").get<std::string>()};
        SCOPED_TRACE("idle, rank " + std::to_string(std::get<0>(key)) + " stream " + std::to_string(std::get<1>(key)) +
                     " " + std::get<2>(key));
        hta_keys.insert(key);
        auto found = ember.idle.find(key);
        ASSERT_NE(found, ember.idle.end());
        const double idle_us = want.at("idle_time").get<double>();
        EXPECT_NEAR(as_us(found->second.idle_ns), idle_us, kMicrosecondTolerance);
        // The share of the stream's idle time: HTA prints it rounded to two decimals
        // (a fraction), so ember's is compared with the share of HTA's own times.
        const double stream_total = stream_idle_us[{std::get<0>(key), std::get<1>(key)}];
        const std::optional<double> expected_ratio = optional_number(want.at("idle_time_ratio"));
        ASSERT_EQ(found->second.ratio.has_value(), expected_ratio.has_value());
        if (found->second.ratio) {
            EXPECT_NEAR(100.0 * *found->second.ratio, 100.0 * idle_us / stream_total, kPercentTolerance);
            EXPECT_NEAR(*found->second.ratio, *expected_ratio, 0.005 + 1e-9);
        }
    }
    EXPECT_EQ(keys_of(ember.idle), hta_keys);
}

// HTA's interval_stats count gaps per (rank, stream, category); ember's IdleRow::gaps
// must count the same gaps (a NaN-length first gap counts in neither).
void expect_gap_counts_equal_hta(const std::vector<IdleRow>& rows, const nlohmann::json& hta) {
    std::map<IdleKey, std::int64_t> gaps;
    for (const IdleRow& row : rows) gaps[{row.rank, row.stream, idle_category_name(row.category)}] = row.gaps;
    for (const nlohmann::json& want : hta.at("idle_time_breakdown(consecutive_kernel_delay=30)").at("interval_stats")) {
        const IdleKey key{want.at("rank").get<std::int32_t>(), want.at("stream").get<std::uint64_t>(),
                          want.at("idle_category").get<std::string>()};
        SCOPED_TRACE("gaps, rank " + std::to_string(std::get<0>(key)) + " stream " + std::to_string(std::get<1>(key)) +
                     " " + std::get<2>(key));
        ASSERT_TRUE(gaps.count(key));
        EXPECT_EQ(gaps[key], static_cast<std::int64_t>(want.at("count").get<double>()));
    }
}

// HTA's top kernels of each type (those it names; "others" groups the rest): each
// name's total on its rank, from ember's per-name totals. (HTA's max and min there are
// over its per-rank sums for most names, not over runs, so only the totals compare.)
void expect_top_kernels_equal_hta(const store::TraceReader& reader, const std::vector<RankGpuWork>& work,
                                  const nlohmann::json& hta) {
    std::map<std::tuple<std::int32_t, std::string, std::string>, TopKernelRow> by_name;  // rank, type, name
    for (const TopKernelRow& row : top_kernels_by_type(reader, work, SIZE_MAX))
        by_name[{row.rank, row.kernel_type, row.name}] = row;
    int compared = 0;
    for (const nlohmann::json& want :
         hta.at("gpu_kernel_breakdown").at("kernel_breakdown_default(num_kernels=10,duration_ratio=0.8)")) {
        const std::string name = want.at("name").get<std::string>();
        const std::string type = want.at("kernel_type").get<std::string>();
        // ember names copies "memcpy"/"memset" as one row each; HTA per copy kind.
        if (name == "others" || type == "MEMORY") continue;
        const std::int32_t rank = want.at("rank").get<std::int32_t>();
        SCOPED_TRACE("rank " + std::to_string(rank) + " " + name);
        auto found = by_name.find({rank, type, name});
        ASSERT_NE(found, by_name.end());
        EXPECT_NEAR(as_us(found->second.total_ns), want.at("sum (us)").get<double>(), kMicrosecondTolerance);
        ++compared;
    }
    EXPECT_GT(compared, 0);
}

// HTA's cuda_kernel_launch_stats per rank: the number of launches and the summed CPU
// duration, GPU duration and launch delay (a GPU start before the call's end counts 0
// there, hence launch_options_for(hta)), from ember's launch rows.
void expect_launch_sums_equal_hta(const store::TraceReader& reader, const std::vector<RankGpuWork>& work,
                                  const nlohmann::json& hta) {
    std::map<std::int32_t, LaunchRow> sums;
    for (const LaunchRow& row : launch_statistics(reader, work, launch_options_for(Convention::hta))) {
        LaunchRow& sum = sums[row.rank];
        sum.launches += row.launches;
        sum.launch_total_ns += row.launch_total_ns;
        sum.gpu_total_ns += row.gpu_total_ns;
        sum.delay_total_ns += row.delay_total_ns;
        sum.launch_max_ns = std::max(sum.launch_max_ns, row.launch_max_ns);
    }
    const nlohmann::json& stats = hta.at("cuda_kernel_launch_stats(runtime_cutoff=50,launch_delay_cutoff=100)");
    ASSERT_EQ(sums.size(), stats.size());
    for (const auto& [rank_text, want] : stats.items()) {
        const std::int32_t rank = std::stoi(rank_text);
        SCOPED_TRACE("launches, rank " + rank_text);
        ASSERT_TRUE(sums.count(rank));
        const LaunchRow& got = sums[rank];
        EXPECT_EQ(got.launches, want.at("n_rows").get<std::int64_t>());
        EXPECT_NEAR(as_us(got.launch_total_ns), want.at("sum_cpu_duration").get<double>(), kMicrosecondTolerance);
        EXPECT_NEAR(as_us(got.gpu_total_ns), want.at("sum_gpu_duration").get<double>(), kMicrosecondTolerance);
        EXPECT_NEAR(as_us(got.delay_total_ns), want.at("sum_launch_delay").get<double>(), kMicrosecondTolerance);
        EXPECT_NEAR(as_us(got.launch_max_ns), want.at("describe").at("cpu_duration").at("max").get<double>(),
                    kMicrosecondTolerance);
    }
}

// HTA's queue-length summary per (rank, stream): the number of change points, their
// mean, median and maximum. Where a launch and a start share an instant on a stream,
// ember counts the launch first and HTA's unstable sort (pandas' default quicksort)
// either way; each launch-start pair so ordered can lower one change point by 2 in HTA,
// so there HTA's mean lies within 2 * (such pairs) / count below ember's, its maximum
// at most ember's. Elsewhere the order is fixed and the numbers are equal. Returns how
// many streams had a fixed order.
int expect_queue_summary_equals_hta(const std::vector<RankGpuWork>& work, const nlohmann::json& hta) {
    using StreamKey = std::pair<std::int32_t, std::uint64_t>;
    std::map<StreamKey, QueueRow> got;
    for (const QueueRow& row : queue_length_summary(work)) got[{row.rank, row.stream}] = row;
    std::map<StreamKey, std::int64_t> reorderable_pairs;
    for (const QueueSeries& series : queue_length_series(work)) {
        std::int64_t& pairs = reorderable_pairs[{series.rank, series.stream}];
        std::int64_t previous = 0;
        for (std::size_t i = 0; i < series.points.size();) {
            std::int64_t launches = 0, starts = 0;
            std::size_t j = i;
            for (; j < series.points.size() && series.points[j].time_ns == series.points[i].time_ns; ++j) {
                (series.points[j].length > previous ? launches : starts) += 1;
                previous = series.points[j].length;
            }
            pairs += launches * starts;
            i = j;
        }
    }
    std::size_t expected_streams = 0;
    int fixed_order_streams = 0;
    for (const auto& [rank_text, rows] : hta.at("queue_length_summary").items())
        for (const nlohmann::json& want : rows) {
            ++expected_streams;
            const StreamKey key{want.at("('rank', '')").get<std::int32_t>(),
                                want.at("('stream', '')").get<std::uint64_t>()};
            SCOPED_TRACE("queue, rank " + std::to_string(key.first) + " stream " + std::to_string(key.second));
            if (!got.count(key)) {
                ADD_FAILURE() << "no queue row";
                continue;
            }
            const QueueRow& row = got[key];
            const double mean = want.at("('queue_length', 'mean')").get<double>();
            const double median = want.at("('queue_length', '50%')").get<double>();
            const auto max = static_cast<std::int64_t>(want.at("('queue_length', 'max')").get<double>());
            EXPECT_EQ(row.samples, static_cast<std::int64_t>(want.at("('queue_length', 'count')").get<double>()));
            const std::int64_t pairs = reorderable_pairs[key];
            if (pairs == 0) {
                ++fixed_order_streams;
                EXPECT_NEAR(row.mean, mean, 1e-9);
                EXPECT_DOUBLE_EQ(row.median, median);
                EXPECT_EQ(row.max, max);
            } else {
                EXPECT_LE(mean, row.mean + 1e-9);
                EXPECT_GE(mean, row.mean - 2.0 * static_cast<double>(pairs) / static_cast<double>(row.samples) - 1e-9);
                EXPECT_LE(max, row.max);
            }
        }
    EXPECT_EQ(got.size(), expected_streams);
    return fixed_order_streams;
}

// ---------------------------------------------------------------------------
// [SECTION] --like hta
// ---------------------------------------------------------------------------

// Every breakdown the library gives `--like hta` against HTA's output for the same trace
// (expected/<hta_file>), with its 30 µs kernel_wait threshold; returns the GPU work of
// each rank under that convention.
std::vector<RankGpuWork> expect_library_equals_hta(const store::TraceReader& reader, const std::string& hta_file) {
    const nlohmann::json hta = read_json(kRoot / "expected" / hta_file);
    std::vector<RankGpuWork> work = gpu_work(reader, Convention::hta);
    expect_equals_hta(breakdowns_from_library(reader), hta);
    expect_gap_counts_equal_hta(idle_breakdown(work, 30'000), hta);
    expect_top_kernels_equal_hta(reader, work, hta);
    return work;
}

TEST_F(RealTraces, HtaBreakdownsOfTheA100PairEqualHta) {
    store::TraceReader reader(a100_pair());
    const std::vector<RankGpuWork> work = expect_library_equals_hta(reader, "a100_sampled_pair.hta.json");
    // The ranks are the ones the files give (distributedInfo), one job file.
    ASSERT_EQ(work.size(), 2u);
    EXPECT_EQ(work[0].rank, 0);
    EXPECT_EQ(work[1].rank, 1);
    for (const RankGpuWork& rank : work) {
        // Two profiler steps per rank: HTA keeps only the work launched before the last.
        EXPECT_EQ(rank.profiler_steps, 2);
        EXPECT_GT(rank.dropped_after_last_step, 0);
    }
}

TEST_F(RealTraces, HtaBreakdownsOfTheFractionalMicrosecondV100TraceEqualHta) {
    store::TraceReader reader(v100_ns_resolution());
    const std::vector<RankGpuWork> work = expect_library_equals_hta(reader, "v100_ns_resolution_rank0.hta.json");
    ASSERT_EQ(work.size(), 1u);
    EXPECT_EQ(work[0].rank, 0);
}

// The same numbers as `ember stats --format json` prints them, under its documented keys.
TEST_F(RealTraces, HtaBreakdownsInStatsJsonEqualHta) {
    for (const auto& [trace, expected] : {std::pair{&a100_pair, "a100_sampled_pair.hta.json"},
                                          std::pair{&v100_ns_resolution, "v100_ns_resolution_rank0.hta.json"}}) {
        SCOPED_TRACE(expected);
        store::TraceReader reader(trace());
        expect_equals_hta(breakdowns_from_json(reader), read_json(kRoot / "expected" / expected));
    }
}

TEST_F(RealTraces, HtaLaunchStatisticsAndQueueLengthsEqualHta) {
    {
        store::TraceReader reader(a100_pair());
        const nlohmann::json hta = read_json(kRoot / "expected" / "a100_sampled_pair.hta.json");
        const std::vector<RankGpuWork> work = gpu_work(reader, Convention::hta);
        expect_launch_sums_equal_hta(reader, work, hta);
        // No launch shares its microsecond with a start on its stream: all ten streams
        // compare exactly.
        EXPECT_EQ(expect_queue_summary_equals_hta(work, hta), 10);
    }
    {
        store::TraceReader reader(v100_ns_resolution());
        const nlohmann::json hta = read_json(kRoot / "expected" / "v100_ns_resolution_rank0.hta.json");
        const std::vector<RankGpuWork> work = gpu_work(reader, Convention::hta);
        expect_launch_sums_equal_hta(reader, work, hta);
        // One stream, with launches and starts sharing a microsecond: HTA's mean lies
        // within the bound of its tie order.
        EXPECT_EQ(expect_queue_summary_equals_hta(work, hta), 0);
    }
}

// ---------------------------------------------------------------------------
// [SECTION] --like tracelens
// ---------------------------------------------------------------------------

TEST_F(RealTraces, TracelensGpuTimelineOfTheH100TraceEqualsTracelens) {
    store::TraceReader reader(h100_bert());
    std::map<std::string, GpuTimelineRow> got;
    for (const GpuTimelineRow& row : gpu_timeline(gpu_work(reader, Convention::tracelens))) {
        EXPECT_EQ(row.rank, 0);
        got[row.type] = row;
    }
    std::ifstream csv(kRoot / "expected" / "h100_bert_small.tracelens" / "gpu_timeline.csv");
    std::string line;
    ASSERT_TRUE(std::getline(csv, line));
    EXPECT_EQ(line, "type,time ms,percent");
    std::size_t rows = 0;
    while (std::getline(csv, line)) {
        if (line.empty()) continue;
        std::istringstream fields(line);
        std::string type, ms, percent;
        std::getline(fields, type, ',');
        std::getline(fields, ms, ',');
        std::getline(fields, percent, ',');
        SCOPED_TRACE(type);
        ASSERT_TRUE(got.count(type));
        ++rows;
        EXPECT_NEAR(as_us(got[type].time_ns), std::stod(ms) * 1000.0, kMicrosecondTolerance);
        EXPECT_NEAR(got[type].percent, std::stod(percent), kPercentTolerance);
    }
    EXPECT_EQ(rows, got.size());
}

}  // namespace
