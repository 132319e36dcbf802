// analysis_test.cpp: every number of every `ember stats` report on the fixture
// trace (tests/profiler/analysis/fixture_trace.cpp lists the events), computed
// by hand from the event list.
#include "profiler/analysis/advice.h"
#include "profiler/analysis/duration_summary.h"
#include "profiler/analysis/gpu_activity.h"
#include "profiler/analysis/gpu_time_by_range.h"
#include "profiler/analysis/memory_summary.h"
#include "profiler/analysis/operation_names.h"
#include "profiler/analysis/stats_report.h"
#include "tests/support/fixture_trace.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <sstream>

namespace ember::analysis {
namespace {

class FixtureTrace : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        path_ = new std::string(ember::testing::temporary_path("analysis-fixture", ".db"));
        ember::testing::write_fixture_trace(*path_);
    }
    static void TearDownTestSuite() {
        std::remove(path_->c_str());
        delete path_;
    }
    static std::string* path_;
};
std::string* FixtureTrace::path_ = nullptr;

TEST(SummarizeDurations, ExactMedianAndSampleStddev) {
    std::vector<std::int64_t> odd = {300, 100, 200};
    DurationStats s = summarize_durations(odd);
    EXPECT_EQ(s.instances, 3);
    EXPECT_EQ(s.total_ns, 600);
    EXPECT_DOUBLE_EQ(s.average_ns, 200.0);
    EXPECT_DOUBLE_EQ(s.median_ns, 200.0);
    EXPECT_EQ(s.min_ns, 100);
    EXPECT_EQ(s.max_ns, 300);
    EXPECT_DOUBLE_EQ(s.stddev_ns, 100.0);  // sqrt((100^2 + 0 + 100^2) / 2)
    std::vector<std::int64_t> even = {60, 50};
    s = summarize_durations(even);
    EXPECT_DOUBLE_EQ(s.median_ns, 55.0);
    EXPECT_DOUBLE_EQ(s.stddev_ns, std::sqrt(50.0));
    std::vector<std::int64_t> one = {7};
    EXPECT_DOUBLE_EQ(summarize_durations(one).stddev_ns, 0.0);
    std::vector<std::int64_t> none;
    EXPECT_EQ(summarize_durations(none).instances, 0);
}

TEST_F(FixtureTrace, KernelSummary) {
    store::TraceReader reader(*path_);
    auto rows = kernel_summary(reader);
    ASSERT_EQ(rows.size(), 3u);
    EXPECT_EQ(rows[0].name, "gemm");
    EXPECT_EQ(rows[0].stats.instances, 3);
    EXPECT_EQ(rows[0].stats.total_ns, 600);
    EXPECT_DOUBLE_EQ(rows[0].stats.median_ns, 200.0);
    EXPECT_DOUBLE_EQ(rows[0].stats.stddev_ns, 100.0);
    EXPECT_DOUBLE_EQ(rows[0].time_percent, 100.0 * 600 / 810);
    EXPECT_EQ(rows[1].name, "relu");
    EXPECT_EQ(rows[1].stats.total_ns, 110);
    EXPECT_EQ(rows[1].stats.min_ns, 50);
    EXPECT_EQ(rows[1].stats.max_ns, 60);
    EXPECT_DOUBLE_EQ(rows[1].stats.median_ns, 55.0);
    EXPECT_EQ(rows[2].name, "nccl_allreduce");
    EXPECT_EQ(rows[2].stats.total_ns, 100);
    EXPECT_DOUBLE_EQ(rows[2].stats.stddev_ns, 0.0);

    sort_and_cut(rows, SummarySort::instances, 2);
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0].name, "gemm");  // 3 instances
    EXPECT_EQ(rows[1].name, "relu");  // 2
    sort_and_cut(rows, SummarySort::name, 0);
    EXPECT_EQ(rows[0].name, "gemm");
}

TEST_F(FixtureTrace, MemorySummarySplitsPinnedAndPageable) {
    store::TraceReader reader(*path_);
    auto rows = memory_summary(reader);
    ASSERT_EQ(rows.size(), 4u);
    EXPECT_EQ(rows[0].operation, "HtoD");
    EXPECT_EQ(rows[0].memory, "pageable");
    EXPECT_EQ(rows[0].count, 1);
    EXPECT_EQ(rows[0].total_bytes, 2000);
    EXPECT_EQ(rows[0].total_ns, 200);
    EXPECT_DOUBLE_EQ(rows[0].bandwidth_gb_per_s, 10.0);
    EXPECT_EQ(rows[1].operation, "HtoD");
    EXPECT_EQ(rows[1].memory, "pinned");
    EXPECT_EQ(rows[1].total_bytes, 1000);
    EXPECT_EQ(rows[1].total_ns, 100);
    EXPECT_EQ(rows[2].operation, "DtoH");
    EXPECT_EQ(rows[2].memory, "pinned");
    EXPECT_EQ(rows[2].total_bytes, 4096);
    EXPECT_DOUBLE_EQ(rows[2].bandwidth_gb_per_s, 51.2);
    EXPECT_EQ(rows[3].operation, "memset");
    EXPECT_EQ(rows[3].memory, "device");
    EXPECT_EQ(rows[3].total_bytes, 512);
    EXPECT_EQ(rows[3].total_ns, 50);
}

TEST_F(FixtureTrace, ApiAndRangeSummaries) {
    store::TraceReader reader(*path_);
    auto api = api_summary(reader);
    ASSERT_EQ(api.size(), 5u);
    EXPECT_EQ(api[0].name, "cudaMemcpy");
    EXPECT_EQ(api[0].stats.total_ns, 200);
    EXPECT_EQ(api[1].name, "cudaLaunchKernel");
    EXPECT_EQ(api[1].stats.instances, 5);
    EXPECT_EQ(api[1].stats.total_ns, 50);
    EXPECT_EQ(api[2].name, "cudaStreamSynchronize");
    EXPECT_EQ(api[3].name, "cudaMemcpyAsync");
    EXPECT_EQ(api[4].name, "cudaMemsetAsync");
    EXPECT_EQ(api[4].stats.total_ns, 5);

    auto ranges = range_summary(reader);
    ASSERT_EQ(ranges.size(), 7u);
    EXPECT_EQ(ranges[0].name, "epoch");
    EXPECT_EQ(ranges[0].style, "start/end");
    EXPECT_EQ(ranges[0].stats.total_ns, 4200);
    EXPECT_EQ(ranges[1].name, "step");
    EXPECT_EQ(ranges[1].style, "push/pop");
    EXPECT_EQ(ranges[1].domain, "ember");
    EXPECT_EQ(ranges[1].stats.total_ns, 4000);
    EXPECT_EQ(ranges[4].name, "dataloader/wait");
    EXPECT_EQ(ranges[4].stats.total_ns, 600);
    EXPECT_DOUBLE_EQ(ranges[4].stats.stddev_ns, std::sqrt(20000.0));
}

TEST_F(FixtureTrace, GpuTimeByInnermostRangeOfTheLaunchingThread) {
    store::TraceReader reader(*path_);
    GpuTimeByRange result = gpu_time_by_range(reader);
    EXPECT_EQ(result.total_gpu_ns, 810);
    auto rows = gpu_time_by_range_rows(result);
    ASSERT_EQ(rows.size(), 4u);
    EXPECT_EQ(rows[0].range_path, "step > forward");  // gemm 100 + gemm 300 + relu 50
    EXPECT_EQ(rows[0].gpu_ns, 450);
    EXPECT_EQ(rows[0].kernels, 3);
    EXPECT_EQ(rows[1].range_path, "step > backward");
    EXPECT_EQ(rows[1].gpu_ns, 200);
    EXPECT_EQ(rows[2].range_path, kNoLaunchingCallName);
    EXPECT_EQ(rows[2].gpu_ns, 100);
    EXPECT_EQ(rows[3].range_path, kNoRangeName);
    EXPECT_EQ(rows[3].gpu_ns, 60);
}

TEST_F(FixtureTrace, StepBreakdownBusyAndGaps) {
    store::TraceReader reader(*path_);
    GpuActivity activity = gpu_activity(reader, 5);
    ASSERT_EQ(activity.steps.size(), 2u);
    const StepBreakdown& first = activity.steps[0];
    EXPECT_EQ(first.device_id, 0);
    EXPECT_EQ(first.wall_ns, 2000);
    EXPECT_EQ(first.gpu_compute_ns, 300);
    EXPECT_EQ(first.copies_ns, 300);
    EXPECT_EQ(first.dataloader_wait_ns, 200);
    EXPECT_EQ(first.allreduce_wait_ns, 0);
    EXPECT_EQ(first.gpu_idle_ns, 1400);
    const StepBreakdown& second = activity.steps[1];
    EXPECT_EQ(second.start_ns, 3000);
    EXPECT_EQ(second.gpu_compute_ns, 300);    // gemm [3600,3900) hides relu [3700,3750)
    EXPECT_EQ(second.communication_ns, 100);  // the nccl kernel: communication, not compute
    EXPECT_EQ(first.communication_ns, 0);
    EXPECT_EQ(second.copies_ns, 130);
    EXPECT_EQ(second.dataloader_wait_ns, 400);
    EXPECT_EQ(second.allreduce_wait_ns, 300);
    EXPECT_EQ(second.gpu_idle_ns, 1470);

    ASSERT_EQ(activity.devices.size(), 1u);
    EXPECT_EQ(activity.devices[0].window_start_ns, 1000);
    EXPECT_EQ(activity.devices[0].window_end_ns, 6000);
    EXPECT_EQ(activity.devices[0].busy_ns, 1190);
    EXPECT_DOUBLE_EQ(activity.devices[0].busy_fraction, 1190.0 / 5000.0);
    EXPECT_EQ(activity.devices[0].idle_gap_count, 8);

    ASSERT_EQ(activity.longest_gaps.size(), 5u);
    const std::pair<trace::TimeNs, trace::TimeNs> expected[] = {
        {2660, 3600}, {4700, 5300}, {2000, 2460}, {1400, 1800}, {4350, 4600}};
    for (std::size_t i = 0; i < 5; ++i) {
        EXPECT_EQ(activity.longest_gaps[i].start_ns, expected[i].first) << i;
        EXPECT_EQ(activity.longest_gaps[i].end_ns, expected[i].second) << i;
    }
}

TEST_F(FixtureTrace, Advice) {
    store::TraceReader reader(*path_);
    auto items = advise(gpu_activity(reader, 5), memory_summary(reader), reader.total_dropped());
    // Dropped records first, then by the time each could win back per step (2 steps).
    ASSERT_EQ(items.size(), 4u);
    EXPECT_EQ(items[0].topic, "dropped_records");
    EXPECT_EQ(items[0].finding, "12 records were dropped while recording");
    EXPECT_FALSE(items[0].recoverable_ns.has_value());
    EXPECT_EQ(items[1].topic, "gpu_idle");
    EXPECT_EQ(items[1].finding, "GPU 0 is idle 71.8% of step wall time (2870 of 4000 ns, 0.001 ms per step)");
    EXPECT_EQ(items[1].recoverable_ns, 2870 / 2);
    EXPECT_EQ(items[2].topic, "dataloader_wait");
    EXPECT_EQ(items[2].finding, "steps wait for data 15.0% of their wall time (600 of 4000 ns)");
    EXPECT_EQ(items[2].recoverable_ns, 600 / 2);
    EXPECT_EQ(items[3].topic, "pageable_copies");
    EXPECT_EQ(items[3].finding, "1 host-device copies (2000 bytes) use pageable host memory");
    EXPECT_FALSE(items[3].recoverable_ns.has_value());
}

std::string stats_output(const std::string& path, StatsOptions options) {
    store::TraceReader reader(path);
    std::ostringstream out;
    write_stats(out, reader, options);
    return out.str();
}

#include "tests/profiler/analysis/expected_stats_text.inc"

TEST_F(FixtureTrace, TextReportPinned) {
    EXPECT_EQ(stats_output(*path_, {}), kExpectedText);
}

TEST_F(FixtureTrace, CsvKernelsInMicroseconds) {
    StatsOptions options;
    options.reports = {"kernels"};
    options.format = OutputFormat::csv;
    options.time_unit = TimeUnit::us;
    EXPECT_EQ(stats_output(*path_, options),
              "# WARNING: 12 records were dropped (cupti: 10, writer buffer full: 2); the numbers below undercount.\r\n"
              "Time (%),Total Time (us),Instances,Avg (us),Med (us),Min (us),Max (us),StdDev (us),Name\r\n"
              "74.1,0.600,3,0.200,0.200,0.100,0.300,0.100,gemm\r\n"
              "13.6,0.110,2,0.055,0.055,0.050,0.060,0.007,relu\r\n"
              "12.3,0.100,1,0.100,0.100,0.100,0.100,0.000,nccl_allreduce\r\n");
}

TEST_F(FixtureTrace, CsvSeveralReportsAreSectioned) {
    StatsOptions options;
    options.reports = {"memory", "gpu_busy"};
    options.format = OutputFormat::csv;
    EXPECT_EQ(stats_output(*path_, options),
              "# WARNING: 12 records were dropped (cupti: 10, writer buffer full: 2); the numbers below undercount.\r\n"
              "# memory\r\n"
              "Operation,Memory,Count,Total Bytes,Total Time (ns),Bandwidth (GB/s)\r\n"
              "HtoD,pageable,1,2000,200,10.000\r\n"
              "HtoD,pinned,1,1000,100,10.000\r\n"
              "DtoH,pinned,1,4096,80,51.200\r\n"
              "memset,device,1,512,50,10.240\r\n"
              "\r\n"
              "# gpu_busy\r\n"
              "Device,Window (ns),Busy (ns),Busy (%),Idle (ns),Idle Gaps\r\n"
              "0,5000,1190,23.8,3810,8\r\n");
}

TEST_F(FixtureTrace, JsonEveryReport) {
    StatsOptions options;
    options.format = OutputFormat::json;
    options.time_unit = TimeUnit::ms;
    nlohmann::json document = nlohmann::json::parse(stats_output(*path_, options));
    EXPECT_EQ(document["time_unit"], "ms");
    EXPECT_EQ(document["dropped_records"], 12);
    ASSERT_EQ(document["warnings"].size(), 1u);
    const auto& reports = document["reports"];
    // Every default report but "ranks" and "collectives", printed unasked only for files of two or more ranks.
    // A report of several tables is there by its tables' keys (cpu: cpu_functions, ...;
    // steps: steps_summary, slowest_steps and, in JSON, every step).
    for (const char* name : kDefaultReportNames) {
        const std::string key = std::string(name) == "cpu" ? "cpu_functions" : name;
        EXPECT_EQ(reports.contains(key), std::string(name) != "ranks" && std::string(name) != "collectives") << name;
    }
    for (const char* key : {"steps_summary", "slowest_steps", "kernel_types_top"})
        EXPECT_TRUE(reports.contains(key)) << key;
    // The others only when named.
    for (const char* name : {"launches", "queue", "gpu_timeline", "step_breakdown"})
        EXPECT_FALSE(reports.contains(name)) << name;
    const auto& gemm = reports["kernels"][0];
    EXPECT_EQ(gemm["name"], "gemm");
    EXPECT_EQ(gemm["instances"], 3);
    EXPECT_DOUBLE_EQ(gemm["total"].get<double>(), 600e-6);
    EXPECT_DOUBLE_EQ(gemm["stddev"].get<double>(), 100e-6);
    EXPECT_DOUBLE_EQ(gemm["time_percent"].get<double>(), 100.0 * 600 / 810);
    const auto& step = reports["steps"][1];
    EXPECT_EQ(step["step"], 1);
    EXPECT_EQ(step["device"], 0);
    EXPECT_DOUBLE_EQ(step["start"].get<double>(), 2000e-6);
    EXPECT_DOUBLE_EQ(step["gpu_compute"].get<double>(), 300e-6);
    EXPECT_DOUBLE_EQ(step["communication"].get<double>(), 100e-6);
    EXPECT_DOUBLE_EQ(step["gpu_idle"].get<double>(), 1470e-6);
    EXPECT_DOUBLE_EQ(step["gpu_idle_percent"].get<double>(), 73.5);
    EXPECT_EQ(reports["memory"][2]["total_bytes"], 4096);
    EXPECT_DOUBLE_EQ(reports["memory"][2]["bandwidth_gb_per_s"].get<double>(), 51.2);
    EXPECT_EQ(reports["gpu_by_range"][0]["range"], "step > forward");
    EXPECT_EQ(reports["idle_gaps"].size(), 5u);
    EXPECT_DOUBLE_EQ(reports["idle_gaps"][0]["duration"].get<double>(), 940e-6);
    // The four rules of the Advice test, and launch overhead from the idle breakdown: the one
    // gap under 30 us (stream 13, 850 ns) is 20% of the 4210 ns GPU span.
    ASSERT_EQ(reports["advice"].size(), 5u);
    EXPECT_EQ(reports["advice"][2]["topic"], "launch_overhead");
    EXPECT_EQ(reports["advice"][2]["recoverable_per_step_ns"], 850 / 2);
    EXPECT_EQ(reports["nvtx"].size(), 7u);
    EXPECT_EQ(reports["api"].size(), 5u);
}

TEST_F(FixtureTrace, TopAndSortOptions) {
    StatsOptions options;
    options.reports = {"api"};
    options.format = OutputFormat::csv;
    options.sort = SummarySort::instances;
    options.top = 2;
    EXPECT_EQ(stats_output(*path_, options),
              "# WARNING: 12 records were dropped (cupti: 10, writer buffer full: 2); the numbers below undercount.\r\n"
              "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\r\n"
              "15.9,50,5,10.0,10.0,10,10,0.0,cudaLaunchKernel\r\n"
              "63.5,200,2,100.0,100.0,100,100,0.0,cudaMemcpy\r\n");
}

// CPU hot spots by op family, from a profile like a CPU-backend run's with oneDNN's JIT
// kernels named (the collector reads oneDNN's perf map): each sample counts in the
// family of its function, families above the threshold are advised on with their share,
// samples and CPU time, and reorders are told apart from the convolutions they serve.
TEST(CpuAdvice, OpFamiliesOfNamedJitKernels) {
    CpuProfile cpu;
    cpu.samples = 1000;
    cpu.period_ns = 5'000'000;
    cpu.functions = {
        {"jit_uni_reorder_kernel_f32", "", 60, 60},  // 6%: reorders are overhead, advised from 5%
        {"jit_avx512_common_conv_bwd_weights_kernel_f32", "", 120, 120},
        {"jit_brgemm_kernel_t", "", 60, 60},
        {"_jit_avx512_common_conv_bwd_data_kernel_f32", "", 40, 40},
        {"ember::ops::maxpool2d_forward_cpu", "", 100, 100},  // pooling: 10%, under the threshold
        {"main", "", 620, 1000},
    };
    const GpuActivity no_gpu;
    const std::vector<MemoryOperationRow> no_memory;
    const std::vector<RankGpuWork> no_work;
    AdviceInputs inputs{no_gpu, no_memory, 0, no_work};
    inputs.cpu = &cpu;
    std::vector<AdviceItem> items;
    advise_cpu(inputs, 10, items);
    ASSERT_EQ(items.size(), 2u);
    EXPECT_EQ(items[0].topic, "cpu_hotspot");
    EXPECT_EQ(
        items[0].finding,
        "layout reordering (oneDNN) takes 6.0% of the sampled CPU time (60 of 1000 samples, 300.000 ms; 30.000 ms "
        "a step)");
    EXPECT_NE(items[0].advice.find("switches.channels_last = true"), std::string::npos) << items[0].advice;
    EXPECT_EQ(items[0].recoverable_ns, 30'000'000);  // per step, 10 steps
    EXPECT_EQ(items[1].finding,
              "convolution and GEMM takes 22.0% of the sampled CPU time (220 of 1000 samples, 1100.000 ms; 110.000 ms "
              "a step)");
    // Its hot functions are oneDNN's JIT kernels: no im2col to remove, so oneDNN is not
    // suggested; it says it is in place.
    EXPECT_EQ(items[1].advice.find("a convolution library"), std::string::npos) << items[1].advice;
    EXPECT_NE(items[1].advice.find("already in place: oneDNN's JIT kernels"), std::string::npos) << items[1].advice;
    EXPECT_NE(items[1].advice.find("channels-last layout"), std::string::npos) << items[1].advice;

    // A run that already keeps its activations channels-last (ember's trainer records
    // its settings in the trace): neither the reorders nor the convolutions are told to
    // go channels-last, and the reorders' advice, with nothing left to try, claims no time.
    inputs.settings = parse_run_settings("[model]\nname = 'cnn'\n\n[switches]\nchannels_last = true\n");
    std::vector<AdviceItem> channels_last;
    advise_cpu(inputs, 10, channels_last);
    ASSERT_EQ(channels_last.size(), 2u);
    EXPECT_EQ(channels_last[0].advice.find("keep the activations channels-last"), std::string::npos)
        << channels_last[0].advice;
    EXPECT_NE(channels_last[0].advice.find("switches.channels_last is on"), std::string::npos)
        << channels_last[0].advice;
    EXPECT_FALSE(channels_last[0].recoverable_ns.has_value());
    EXPECT_EQ(channels_last[1].advice.find("channels-last layout"), std::string::npos) << channels_last[1].advice;
    EXPECT_TRUE(channels_last[1].recoverable_ns.has_value());  // more GEMM threads is still open
}

// The settings ember's trainer records (TOML): sections become key prefixes, quotes go.
TEST(RunSettings, ParsedFromTheTrainConfigToml) {
    const RunSettings settings = parse_run_settings(
        "# comment\n[model]\nname = \"resnet\"\n[data]\nworkers = 4\npin_memory = true\n[switches]\n"
        "cuda_graph = false\nchannels_last = true\n");
    EXPECT_TRUE(settings.known());
    EXPECT_EQ(settings.value("model.name"), "resnet");
    EXPECT_EQ(settings.value("data.workers"), "4");
    EXPECT_TRUE(settings.is_on("data.pin_memory"));
    EXPECT_FALSE(settings.is_on("switches.cuda_graph"));
    EXPECT_FALSE(settings.value("switches.tf32").has_value());
    EXPECT_FALSE(parse_run_settings("").known());
}

// A GPU run: the advice names no remedy the run already applies (pinned memory,
// prefetching, CUDA graphs) and says what is in place.
TEST_F(FixtureTrace, AdviceLeavesOutWhatTheRunApplies) {
    store::TraceReader reader(*path_);
    const GpuActivity activity = gpu_activity(reader, 5);
    const std::vector<MemoryOperationRow> memory = memory_summary(reader);
    const std::vector<RankGpuWork> no_work;
    AdviceInputs inputs{activity, memory, 0, no_work};
    inputs.settings = parse_run_settings(
        "[data]\nworkers = 2\npin_memory = true\nprefetch_factor = 2\n"
        "[switches]\ncuda_graph = true\n");
    std::map<std::string, AdviceItem> by_topic;
    for (const AdviceItem& item : advise(inputs)) by_topic.emplace(item.topic, item);
    ASSERT_EQ(by_topic.count("dataloader_wait"), 1u);
    const std::string& loader = by_topic.at("dataloader_wait").advice;
    EXPECT_NE(loader.find("more data loader workers (data.workers is 2)"), std::string::npos) << loader;
    EXPECT_EQ(loader.find("pinned host memory for batches"), std::string::npos) << loader;
    EXPECT_NE(loader.find("data.pin_memory is on"), std::string::npos) << loader;
    EXPECT_NE(loader.find("data.prefetch_factor is 2"), std::string::npos) << loader;
    ASSERT_EQ(by_topic.count("gpu_idle"), 1u);
    EXPECT_EQ(by_topic.at("gpu_idle").advice.find("CUDA graphs"), std::string::npos) << by_topic.at("gpu_idle").advice;
    EXPECT_NE(by_topic.at("gpu_idle").advice.find("switches.cuda_graph is on"), std::string::npos);
    // Pinned batches, yet pageable copies: they are not the batches'.
    ASSERT_EQ(by_topic.count("pageable_copies"), 1u);
    EXPECT_NE(by_topic.at("pageable_copies").advice.find("so these are not the batches"), std::string::npos)
        << by_topic.at("pageable_copies").advice;
}

TEST(NoDroppedRecords, NoWarning) {
    std::string path = ember::testing::temporary_path("analysis-clean", ".db");
    ember::testing::write_fixture_trace(path, {.with_dropped_records = false});
    store::TraceReader reader(path);
    EXPECT_EQ(dropped_records_warning(reader), "");
    StatsOptions options;
    options.reports = {"advice"};
    std::ostringstream out;
    write_stats(out, reader, options);
    EXPECT_EQ(out.str().find("WARNING"), std::string::npos);
    EXPECT_EQ(out.str().find("dropped_records"), std::string::npos);
    std::remove(path.c_str());
}

// Copies and memsets go by Nsight Systems' names in ember stats, ember diff and the
// viewer's diff alike (operation_names.h); a direction the file does not know, or a
// number outside the enum, is "Unknown" (the diff once said "unknown" for the latter).
TEST(OperationNames, CopiesAreNamedAsNsightSystemsNamesThem) {
    using trace::MemcpyDirection;
    EXPECT_EQ(memcpy_operation_name(MemcpyDirection::host_to_device), "[CUDA memcpy HtoD]");
    EXPECT_EQ(memcpy_operation_name(MemcpyDirection::device_to_host), "[CUDA memcpy DtoH]");
    EXPECT_EQ(memcpy_operation_name(MemcpyDirection::device_to_device), "[CUDA memcpy DtoD]");
    EXPECT_EQ(memcpy_operation_name(MemcpyDirection::host_to_host), "[CUDA memcpy HtoH]");
    EXPECT_EQ(memcpy_operation_name(MemcpyDirection::peer_to_peer), "[CUDA memcpy PtoP]");
    EXPECT_EQ(memcpy_operation_name(MemcpyDirection::unknown), "[CUDA memcpy Unknown]");
    EXPECT_EQ(memcpy_operation_name(static_cast<MemcpyDirection>(42)), "[CUDA memcpy Unknown]");
    EXPECT_EQ(kMemsetOperationName, "[CUDA memset]");
    // Shown as Kineto names them.
    EXPECT_EQ(
        memcpy_display_name(MemcpyDirection::host_to_device, trace::MemoryKind::pinned, trace::MemoryKind::device),
        "Memcpy HtoD (pinned -> device)");
    EXPECT_EQ(memcpy_display_name(MemcpyDirection::device_to_host), "Memcpy DtoH");
    EXPECT_EQ(memset_display_name(trace::MemoryKind::device), "Memset (device)");
}

}  // namespace
}  // namespace ember::analysis
