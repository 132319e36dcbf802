// real_traces_test.cpp: the importers against traces recorded by other tools on real
// GPUs (../shared/real-traces), checked against what the reference tools computed:
//   * Nsight Systems exports: ember's kernel, CUDA API, memory (time and size) and NVTX
//     summaries equal the `nsys stats` CSVs beside each file — same names, instances,
//     and Total/Min/Max/Med nanoseconds exactly (Avg and StdDev to the CSV's decimal);
//   * Kineto files: kernel count and total kernel time equal what the JSON itself holds
//     (computed here with nlohmann-json), and steps, streams, NCCL and flows arrive.
// Every test skips, saying why, when the folder is absent (a fresh clone has none).
#include "profiler/analysis/duration_summary.h"
#include "profiler/analysis/gpu_activity.h"
#include "profiler/import/import.h"
#include "profiler/job/import_job.h"
#include "profiler/store/reader.h"
#include "tests/profiler/import/import_fixtures.h"
#include "tests/profiler/import/import_steps.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace {

using namespace ember;
using import_test::TempDir;

#define SKIP_WITHOUT_REAL_TRACES()                                                                                  \
    do {                                                                                                            \
        if (import_test::real_traces_dir().empty()) {                                                               \
            GTEST_SKIP() << "../shared/real-traces is absent (a fresh clone has no ../shared): nothing to compare"; \
        }                                                                                                           \
    } while (0)

// --- nsys stats CSVs ----------------------------------------------------------------------

std::vector<std::string> split_csv_line(const std::string& line) {
    std::vector<std::string> cells;
    std::string cell;
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
        char c = line[i];
        if (quoted) {
            if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
                cell.push_back('"');
                ++i;
            } else if (c == '"') {
                quoted = false;
            } else {
                cell.push_back(c);
            }
        } else if (c == '"') {
            quoted = true;
        } else if (c == ',') {
            cells.push_back(cell);
            cell.clear();
        } else if (c != '\r') {
            cell.push_back(c);
        }
    }
    cells.push_back(cell);
    return cells;
}

// Rows of a CSV as column name -> cell.
std::vector<std::map<std::string, std::string>> read_csv(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::vector<std::map<std::string, std::string>> rows;
    if (!std::getline(in, line)) return rows;
    std::vector<std::string> header = split_csv_line(line);
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        std::vector<std::string> cells = split_csv_line(line);
        std::map<std::string, std::string> row;
        for (std::size_t i = 0; i < header.size() && i < cells.size(); ++i) row[header[i]] = cells[i];
        rows.push_back(std::move(row));
    }
    return rows;
}

std::int64_t as_int(const std::string& text) {
    return std::stoll(text);
}

// "20176780.0" and ember's double median: equal to the CSV's one decimal.
std::string one_decimal(double value) {
    return fmt::format("{:.1f}", value);
}

void expect_rows_equal(const std::vector<analysis::DurationSummaryRow>& rows,
                       const std::vector<std::map<std::string, std::string>>& csv, const std::string& name_column,
                       const std::string& count_column, const std::string& what,
                       const std::function<std::string(const analysis::DurationSummaryRow&)>& name_of) {
    ASSERT_EQ(rows.size(), csv.size()) << what;
    std::map<std::string, const analysis::DurationSummaryRow*> by_name;
    for (const auto& row : rows) by_name[name_of(row)] = &row;
    for (const auto& expected : csv) {
        const std::string& name = expected.at(name_column);
        ASSERT_TRUE(by_name.count(name)) << what << ": no row named " << name;
        const analysis::DurationStats& stats = by_name[name]->stats;
        SCOPED_TRACE(what + ": " + name);
        EXPECT_EQ(stats.instances, as_int(expected.at(count_column)));
        EXPECT_EQ(stats.total_ns, as_int(expected.at("Total Time (ns)")));
        EXPECT_EQ(stats.min_ns, as_int(expected.at("Min (ns)")));
        EXPECT_EQ(stats.max_ns, as_int(expected.at("Max (ns)")));
        EXPECT_EQ(one_decimal(stats.median_ns), expected.at("Med (ns)"));
        EXPECT_EQ(one_decimal(stats.average_ns), expected.at("Avg (ns)"));
        EXPECT_EQ(one_decimal(stats.stddev_ns), expected.at("StdDev (ns)"));
    }
}

class NsysRealTrace : public ::testing::TestWithParam<int> {};

TEST_P(NsysRealTrace, SummariesEqualNsysStatsCsvs) {
    SKIP_WITHOUT_REAL_TRACES();
    const int rank = GetParam();
    const std::string folder = import_test::real_traces_dir() + "/nsys";
    const std::string input = fmt::format("{}/saxpy_rank{}.sqlite", folder, rank);
    const std::string csvs = fmt::format("{}/saxpy_rank{}.nsys-stats", folder, rank);
    TempDir dir;
    const std::string output = dir.path("saxpy.db");
    importing::ImportedFile imported = import_test::import_detected(input, output, importing::SourceFormat::nsys);
    store::TraceReader reader(output);

    auto plain = [](const analysis::DurationSummaryRow& row) { return row.name; };
    expect_rows_equal(analysis::kernel_summary(reader), read_csv(csvs + "/gpukernsum.csv"), "Name", "Instances",
                      "gpukernsum", plain);
    expect_rows_equal(analysis::api_summary(reader), read_csv(csvs + "/cudaapisum.csv"), "Name", "Num Calls",
                      "cudaapisum", plain);
    expect_rows_equal(analysis::memory_time_summary(reader), read_csv(csvs + "/gpumemtimesum.csv"), "Operation",
                      "Count", "gpumemtimesum", plain);
    // NVTX: nsys names a range of a non-default domain "DOMAIN:name"; ember keeps the
    // domain in its own column.
    expect_rows_equal(analysis::range_summary(reader), read_csv(csvs + "/nvtxsum.csv"), "Range", "Instances", "nvtxsum",
                      [](const analysis::DurationSummaryRow& row) {
                          return row.domain.empty() ? row.name : row.domain + ":" + row.name;
                      });
    for (const auto& row : analysis::range_summary(reader)) EXPECT_EQ(row.style, "push/pop") << row.name;

    // Sizes: nsys reports MB (10^6 bytes) to three decimals.
    auto sizes = analysis::memory_size_summary(reader);
    auto expected_sizes = read_csv(csvs + "/gpumemsizesum.csv");
    ASSERT_EQ(sizes.size(), expected_sizes.size());
    for (const auto& expected : expected_sizes) {
        auto row =
            std::find_if(sizes.begin(), sizes.end(), [&](const auto& r) { return r.name == expected.at("Operation"); });
        ASSERT_NE(row, sizes.end()) << expected.at("Operation");
        EXPECT_EQ(row->stats.instances, as_int(expected.at("Count")));
        EXPECT_EQ(fmt::format("{:.3f}", static_cast<double>(row->stats.total_ns) / 1e6), expected.at("Total (MB)"));
        EXPECT_EQ(fmt::format("{:.3f}", row->stats.median_ns / 1e6), expected.at("Med (MB)"));
        EXPECT_EQ(fmt::format("{:.3f}", static_cast<double>(row->stats.min_ns) / 1e6), expected.at("Min (MB)"));
        EXPECT_EQ(fmt::format("{:.3f}", static_cast<double>(row->stats.max_ns) / 1e6), expected.at("Max (MB)"));
    }

    // The kernels' launch shape (gpukernsum's GridXYZ / BlockXYZ) and flows.
    reader.for_each_kernel({}, [&](const trace::KernelEvent& kernel) {
        EXPECT_EQ(kernel.launch.grid_x, 2u);
        EXPECT_EQ(kernel.launch.block_x, 512u);
        EXPECT_EQ(kernel.launch.registers_per_thread, 26u);
        EXPECT_TRUE(reader.api_call_by_correlation(kernel.correlation_id).has_value());
        return true;
    });
    EXPECT_EQ(imported.counts.unlinked_gpu_events, 0);
    EXPECT_EQ(imported.counts.flows, 20);  // 5 kernels + 15 copies, each from its call
    // The session's wall clock, so ranks line up.
    EXPECT_EQ(reader.run().clock_offset_to_wall_ns, rank == 0 ? 1685628247087953782ll : 1685628247101666884ll);
    // The rank the launcher gave it, from the environment the export kept (read with
    // sqlite3 here: the variable in TARGET_INFO_SYSTEM_ENV's NUL-separated block).
    EXPECT_EQ(reader.run().rank, rank);
    EXPECT_EQ(reader.run().rank_source, "OMPI_COMM_WORLD_RANK in the export's DeviceEnvironment");
    ASSERT_EQ(reader.devices().size(), 2u);
    EXPECT_EQ(reader.devices()[0].name, "NVIDIA A100-SXM4-40GB");
    EXPECT_EQ(reader.devices()[0].multiprocessor_count, 108);
}

INSTANTIATE_TEST_SUITE_P(Ranks, NsysRealTrace, ::testing::Values(0, 1));

TEST(NsysRealTrace, TwoRanksMergeIntoOneJobFileOnTheWallClock) {
    SKIP_WITHOUT_REAL_TRACES();
    const std::string folder = import_test::real_traces_dir() + "/nsys";
    TempDir dir;
    importing::ImportOptions options;
    importing::ImportReport report = job::import_job_file(
        {folder + "/saxpy_rank0.sqlite", folder + "/saxpy_rank1.sqlite"}, dir.path("job.db"), options);
    EXPECT_TRUE(report.merged);
    store::TraceReader job(dir.path("job.db"));
    EXPECT_EQ(job.processes().size(), 2u);
    EXPECT_EQ(job.event_count("kernels"), 10);
    EXPECT_EQ(job.event_count("api_calls"), 76);
    // Only the job file is left.
    EXPECT_EQ(dir.files(), std::vector<std::string>{"job.db"});
}

// --- Kineto -----------------------------------------------------------------------------

struct KinetoTruth {
    std::int64_t kernels = 0;
    std::int64_t kernel_ns = 0;
    std::int64_t gpu_events = 0;  // kernels, copies, memsets
    std::int64_t steps = 0;
    std::set<std::int64_t> nccl_streams;
    std::int64_t cuda_syncs = 0;           // cuda_sync events
    std::int64_t synchronizing_calls = 0;  // cudaDeviceSynchronize, cudaStreamSynchronize, ... runtime calls
};

// What the JSON holds, read with another parser. Kernel durations have at most three
// decimals of µs: llround(dur * 1000) is their exact ns.
KinetoTruth kineto_truth(const std::string& path) {
    nlohmann::json document = nlohmann::json::parse(import_test::gunzip_file(path));
    KinetoTruth truth;
    for (const auto& event : document["traceEvents"]) {
        if (event.value("ph", "") != "X") continue;
        std::string category = event.value("cat", "");
        std::string name = event.value("name", "");
        if (category == "kernel" || category == "Kernel") {
            ++truth.kernels;
            truth.kernel_ns += std::llround(event["dur"].get<double>() * 1000.0);
            if (name.rfind("nccl", 0) == 0 || name.find("ncclKernel") != std::string::npos ||
                name.find("ncclDevKernel") != std::string::npos) {
                truth.nccl_streams.insert(event["args"]["stream"].get<std::int64_t>());
            }
        }
        if (category == "kernel" || category == "Kernel" || category == "gpu_memcpy" || category == "Memcpy" ||
            category == "gpu_memset" || category == "Memset") {
            ++truth.gpu_events;
        }
        if (name.rfind("ProfilerStep#", 0) == 0 && category != "gpu_user_annotation") ++truth.steps;
        if (category == "cuda_sync") ++truth.cuda_syncs;
        static const std::set<std::string> synchronizing = {
            "cudaDeviceSynchronize", "cudaThreadSynchronize", "cuCtxSynchronize",  "cudaStreamSynchronize",
            "cuStreamSynchronize",   "cudaEventSynchronize",  "cuEventSynchronize"};
        if ((category == "cuda_runtime" || category == "Runtime" || category == "cuda_driver" ||
             category == "Driver") &&
            synchronizing.count(name))
            ++truth.synchronizing_calls;
    }
    return truth;
}

class KinetoRealTrace : public ::testing::TestWithParam<std::string> {};

TEST_P(KinetoRealTrace, KernelCountAndTimeEqualTheJson) {
    SKIP_WITHOUT_REAL_TRACES();
    const std::string input = import_test::real_traces_dir() + "/kineto/" + GetParam() + ".json.gz";
    KinetoTruth truth = kineto_truth(input);
    ASSERT_GT(truth.kernels, 0);
    TempDir dir;
    const std::string output = dir.path("trace.db");
    importing::ImportedFile imported = import_test::import_detected(input, output, importing::SourceFormat::kineto);
    store::TraceReader reader(output);
    EXPECT_EQ(reader.event_count("kernels"), truth.kernels);
    EXPECT_EQ(import_test::count_rows(output, "SELECT SUM(end_ns - start_ns) FROM kernels"), truth.kernel_ns);
    std::int64_t summary_total = 0, summary_instances = 0;
    for (const auto& row : analysis::kernel_summary(reader)) {
        summary_total += row.stats.total_ns;
        summary_instances += row.stats.instances;
    }
    EXPECT_EQ(summary_instances, truth.kernels);
    EXPECT_EQ(summary_total, truth.kernel_ns);
    // Every GPU event is kept; linked plus unlinked is all of them.
    EXPECT_EQ(imported.counts.flows + imported.counts.unlinked_gpu_events, truth.gpu_events);
    EXPECT_GT(imported.counts.flows, 0);
    EXPECT_EQ(import_test::run_metadata(output, importing::import_metadata_key::unlinked_gpu_events),
              std::to_string(imported.counts.unlinked_gpu_events));
    // ProfilerStep#N are ember's steps: the step analysis finds each one.
    std::set<std::int64_t> steps;
    for (const auto& step : analysis::gpu_activity(reader, 0).steps) steps.insert(step.step_index);
    EXPECT_EQ(static_cast<std::int64_t>(steps.size()), truth.steps);
    // NCCL kernels run on streams named "nccl", keeping the trace's stream ids.
    std::set<std::int64_t> nccl_streams;
    for (const trace::StreamInfo& stream : reader.streams()) {
        if (stream.name == "nccl") nccl_streams.insert(static_cast<std::int64_t>(stream.cuda_stream_id));
    }
    EXPECT_EQ(nccl_streams, truth.nccl_streams);
    EXPECT_EQ(imported.counts.nccl_kernels > 0, !truth.nccl_streams.empty());
    // Synchronizations: the cuda_sync events, else (these traces have none) one per
    // synchronizing runtime call, each at its call's time with its correlation.
    EXPECT_EQ(truth.cuda_syncs, 0);
    EXPECT_EQ(reader.event_count("synchronizations"), truth.synchronizing_calls);
    EXPECT_EQ(import_test::count_rows(output,
                                      "SELECT COUNT(*) FROM synchronizations s JOIN api_calls a ON "
                                      "a.correlation_id = s.correlation_id AND a.start_ns = s.start_ns AND "
                                      "a.end_ns = s.end_ns"),
              truth.synchronizing_calls);
}

INSTANTIATE_TEST_SUITE_P(Files, KinetoRealTrace,
                         ::testing::Values("v100_resnet50_workers0", "v100_ns_resolution_rank0", "a100_sampled_rank0",
                                           "a100_sampled_rank1", "h100_bert_small"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(KinetoRealTrace, RankAndWorldSizeComeFromDistributedInfo) {
    SKIP_WITHOUT_REAL_TRACES();
    TempDir dir;
    const std::string input = import_test::real_traces_dir() + "/kineto/a100_sampled_rank1.json.gz";
    importing::import_file(input, dir.path("r1.db"));
    store::TraceReader reader(dir.path("r1.db"));
    EXPECT_EQ(reader.run().rank, 1);
    EXPECT_EQ(reader.run().world_size, 128);
}

TEST(KinetoRealTrace, FractionalMicrosecondsStayExactNanoseconds) {
    SKIP_WITHOUT_REAL_TRACES();
    // The first kernel of the file, read from the decimal text: ember keeps every digit.
    const std::string input = import_test::real_traces_dir() + "/kineto/v100_ns_resolution_rank0.json.gz";
    std::string text = import_test::gunzip_file(input);
    std::size_t kernel = text.find("\"cat\": \"kernel\"");
    ASSERT_NE(kernel, std::string::npos);
    std::size_t ts = text.find("\"ts\": ", kernel);
    std::size_t end = text.find_first_of(",}", ts);
    std::string digits = text.substr(ts + 6, end - ts - 6);
    std::size_t dot = digits.find('.');
    std::string fraction = dot == std::string::npos ? "" : digits.substr(dot + 1);
    fraction.resize(3, '0');
    std::int64_t expected = std::stoll(digits.substr(0, dot)) * 1000 + std::stoll(fraction);
    TempDir dir;
    importing::import_file(input, dir.path("ns.db"));
    EXPECT_EQ(import_test::count_rows(dir.path("ns.db"),
                                      fmt::format("SELECT COUNT(*) FROM kernels WHERE start_ns = {}", expected)),
              1)
        << "ts " << digits;
}

}  // namespace
