// gpu_breakdown_test.cpp: the GPU breakdowns (temporal, kernel types, overlap, idle
// breakdown, TraceLens timeline, launches, queue) on a hand-built trace whose every
// answer is worked out below by hand, under each convention; the HTA rounding of
// fractional microseconds; and the interval arithmetic they rest on.
//
// Times in µs from 1 ms (the file stores ns). Streams of device 0:
//   stream 7:  K1 compute [0,100)    launch [-30,-20)   first on the stream
//              K2 compute [110,200)  launch [-10,-5)    gap 10, launched early: kernel_wait
//              K3 compute [300,400)  launch [250,260)   gap 100, launched late: host_wait
//              S1 memset  [450,460)  launch [270,280)   gap 50, launched early: other
//   stream 13: N1 nccl    [150,350)  launch [100,110)   first
//              N2 nccl    [600,700)  no launching call  gap 250: other
//   stream 21: C1 memcpy  [380,420)  launch [360,370)   first
// Profiler steps ProfilerStep#1 [-50,300), ProfilerStep#2 [300,800).
#include "profiler/analysis/breakdown_tables.h"
#include "profiler/analysis/gpu_breakdown.h"
#include "profiler/analysis/intervals.h"
#include "profiler/analysis/launches.h"
#include "profiler/analysis/stats_report.h"
#include "profiler/import/import.h"
#include "profiler/store/reader.h"
#include "profiler/store/writer.h"
#include "tests/support/fixture_trace.h"
#include "tests/support/trace_builder.h"
#include "tests/support/store.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <sstream>

namespace {

using namespace ember;
using namespace ember::analysis;
using trace::TimeNs;

using namespace ember::testing::breakdown_time;

void write_breakdown_trace(const std::string& path) {
    ember::testing::TraceBuilder b(path, ember::testing::TraceBuilder::run_info(kBase - 100'000));
    const trace::ThreadId thread = b.thread("main", 0, 42);
    b.device({0, "Test GPU", "GPU-test", 9, 0, 132, 80ll << 30, 3.35e12});
    const trace::StreamId s7 = b.stream(7), s13 = b.stream(13), s21 = b.stream(21);
    auto launch = [&](const char* api, double start, double end) { return b.call(thread, api, us(start), us(end)); };
    ember::testing::add_breakdown_work(b, thread, s7, s13);
    b.memcpy(s21, us(380), us(420), launch("cudaMemcpyAsync", 360, 370));
    b.close();
}

class GpuBreakdown : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        path_ = new std::string(ember::testing::temporary_path("gpu-breakdown", ".db"));
        write_breakdown_trace(*path_);
    }
    static void TearDownTestSuite() {
        std::filesystem::remove(*path_);
        delete path_;
    }
    static std::vector<RankGpuWork> work(Convention convention) {
        store::TraceReader reader(*path_);
        return gpu_work(reader, convention);
    }
    static std::string* path_;
};
std::string* GpuBreakdown::path_ = nullptr;

TEST(Intervals, UnionIntersectionDifference) {
    const IntervalUnion a = union_of({{5, 10}, {0, 3}, {2, 4}, {10, 12}, {20, 20}});
    ASSERT_EQ(a.size(), 2u);  // [0,4) [5,12): touching intervals merge, empty ones vanish
    EXPECT_EQ(measure(a), 4 + 7);
    const IntervalUnion b = union_of({{3, 6}, {11, 30}});
    EXPECT_EQ(measure(intersection(a, b)), 1 + 1 + 1);  // [3,4) [5,6) [11,12)
    EXPECT_EQ(measure(difference(a, b)), 3 + 5);        // [0,3) [6,11)
    EXPECT_EQ(measure(difference(b, a)), 1 + 18);       // [4,5) [12,30)
    EXPECT_EQ(measure(union_with(a, b)), 30);
    EXPECT_TRUE(intersection(a, {}).empty());
    EXPECT_EQ(measure(difference(a, {})), measure(a));
}

TEST(Classify, FollowsHtaNames) {
    EXPECT_EQ(classify_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL"), KernelClass::communication);
    EXPECT_EQ(classify_kernel("void foo<ncclKernel>()"), KernelClass::communication);
    EXPECT_EQ(classify_kernel("hipMemcpyAsync"), KernelClass::communication);
    EXPECT_EQ(classify_kernel("Memcpy DtoD (Device -> Device)"), KernelClass::memory);
    EXPECT_EQ(classify_kernel("Memset (Device)"), KernelClass::memory);
    EXPECT_EQ(classify_kernel("volta_sgemm_64x64_tn"), KernelClass::computation);
    EXPECT_EQ(classify_kernel("at::native::nccl_like_kernel"), KernelClass::computation);  // nccl not at the start
}

TEST_F(GpuBreakdown, TemporalOfEveryEvent) {
    const std::vector<TemporalRow> rows = temporal_breakdown(work(Convention::ember));
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0].span_ns, ns_of_us(700));         // 0 .. 700
    EXPECT_EQ(rows[0].idle_ns, ns_of_us(180));         // 700 - |union| 520
    EXPECT_EQ(rows[0].compute_ns, ns_of_us(290));      // K1 + K2 + K3
    EXPECT_EQ(rows[0].non_compute_ns, ns_of_us(230));  // 700 - 290 - 180
}

TEST_F(GpuBreakdown, KernelTypesAreExclusiveCombinations) {
    std::map<std::string, TimeNs> totals;
    for (const KernelTypeRow& row : kernel_type_breakdown(work(Convention::ember)))
        totals[row.kernel_type] = row.total_ns;
    EXPECT_EQ(totals["COMPUTATION"], ns_of_us(170));                            // [0,100) [110,150) [350,380)
    EXPECT_EQ(totals["COMPUTATION overlapping COMMUNICATION"], ns_of_us(100));  // [150,200) [300,350)
    EXPECT_EQ(totals["COMMUNICATION"], ns_of_us(200));                          // [200,300) [600,700)
    EXPECT_EQ(totals["COMPUTATION overlapping MEMORY"], ns_of_us(20));          // [380,400)
    EXPECT_EQ(totals["MEMORY"], ns_of_us(30));                                  // [400,420) [450,460)
    EXPECT_EQ(totals.size(), 5u);
    TimeNs sum = 0;
    for (const auto& [type, total] : totals) sum += total;
    EXPECT_EQ(sum, ns_of_us(520));  // the union of all GPU work
}

TEST_F(GpuBreakdown, OverlapOfCommunicationWithComputation) {
    const std::vector<OverlapRow> rows = communication_overlap(work(Convention::ember));
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0].communication_ns, ns_of_us(300));
    EXPECT_EQ(rows[0].overlapped_ns, ns_of_us(100));
    ASSERT_TRUE(rows[0].percent.has_value());
    EXPECT_NEAR(*rows[0].percent, 100.0 / 3.0, 1e-9);
}

TEST_F(GpuBreakdown, IdleTimePerStreamByCause) {
    std::map<std::pair<std::uint64_t, std::string>, IdleRow> rows;
    for (const IdleRow& row : idle_breakdown(work(Convention::ember), 30'000))
        rows[{row.stream, idle_category_name(row.category)}] = row;
    EXPECT_EQ(rows.at({7, "kernel_wait"}).idle_ns, ns_of_us(10));
    EXPECT_EQ(rows.at({7, "host_wait"}).idle_ns, ns_of_us(100));
    EXPECT_EQ(rows.at({7, "other"}).idle_ns, ns_of_us(50));
    EXPECT_NEAR(*rows.at({7, "host_wait"}).ratio, 100.0 / 160.0, 1e-12);
    EXPECT_EQ(rows.at({13, "other"}).idle_ns, ns_of_us(250));  // after N1; N2 has no launching call
    EXPECT_FALSE(rows.count({13, "host_wait"}));
    // A stream with one event has an "other" row of nothing and no ratio (HTA's shape).
    EXPECT_EQ(rows.at({21, "other"}).idle_ns, 0);
    EXPECT_FALSE(rows.at({21, "other"}).ratio.has_value());
    EXPECT_EQ(rows.size(), 5u);
    // A wider kernel_wait bound turns the 50 µs gap into kernel_wait.
    std::map<std::string, TimeNs> wide;
    for (const IdleRow& row : idle_breakdown(work(Convention::ember), 60'000))
        if (row.stream == 7) wide[idle_category_name(row.category)] = row.idle_ns;
    EXPECT_EQ(wide["kernel_wait"], ns_of_us(60));
    EXPECT_EQ(wide["other"], 0);
}

TEST_F(GpuBreakdown, HtaDropsWorkLaunchedInTheLastStep) {
    const std::vector<RankGpuWork> hta = work(Convention::hta);
    ASSERT_EQ(hta.size(), 1u);
    EXPECT_EQ(hta[0].events.size(), 5u);           // K1 K2 K3 S1 N1
    EXPECT_EQ(hta[0].dropped_after_last_step, 1);  // C1, launched at 360 >= 300
    EXPECT_EQ(hta[0].dropped_unlinked, 1);         // N2
    const TemporalRow row = temporal_breakdown(hta).at(0);
    EXPECT_EQ(row.span_ns, ns_of_us(460));
    EXPECT_EQ(row.idle_ns, ns_of_us(60));  // 460 - (100 + 290 + 10)
    EXPECT_EQ(row.compute_ns, ns_of_us(290));
    EXPECT_EQ(row.non_compute_ns, ns_of_us(110));
}

TEST_F(GpuBreakdown, TraceLensTimelineCountsLinkedWorkOnly) {
    std::map<std::string, TimeNs> rows;
    for (const GpuTimelineRow& row : gpu_timeline(work(Convention::tracelens))) rows[row.type] = row.time_ns;
    EXPECT_EQ(rows["computation_time"], ns_of_us(290));
    EXPECT_EQ(rows["exposed_comm_time"], ns_of_us(100));   // N1 [150,350) less computation
    EXPECT_EQ(rows["exposed_memcpy_time"], ns_of_us(30));  // [400,420) [450,460)
    EXPECT_EQ(rows["busy_time"], ns_of_us(420));
    EXPECT_EQ(rows["total_time"], ns_of_us(460));
    EXPECT_EQ(rows["idle_time"], ns_of_us(40));
}

TEST_F(GpuBreakdown, LaunchesAndQueue) {
    store::TraceReader reader(*path_);
    const std::vector<RankGpuWork> all = gpu_work(reader, Convention::ember);
    std::map<std::string, LaunchRow> rows;
    for (const LaunchRow& row : launch_statistics(reader, all)) rows[row.name] = row;
    const LaunchRow& gemm = rows.at("gemm");
    EXPECT_EQ(gemm.launches, 2);
    EXPECT_EQ(gemm.launch_total_ns, ns_of_us(10 + 5));
    EXPECT_EQ(gemm.delay_total_ns, ns_of_us((0 - -20) + (110 - -5)));
    EXPECT_EQ(gemm.delay_max_ns, ns_of_us(115));
    EXPECT_EQ(gemm.delay_outliers, 1);              // 115 µs > 100 µs
    EXPECT_EQ(rows.at("memset").short_kernels, 0);  // 10 µs of work for a 10 µs launch: not shorter
    EXPECT_FALSE(rows.count("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"));  // no launching call
    std::map<std::uint64_t, std::vector<QueuePoint>> series;
    for (const QueueSeries& s : queue_length_series(all)) series[s.stream] = s.points;
    const std::vector<std::int64_t> expected = {1, 2, 1, 0,
                                                1, 2, 1, 0};  // launches -30 -10 +250 +270, starts 0 110 300 450
    ASSERT_EQ(series[7].size(), expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(series[7][i].length, expected[i]) << i;
    for (const QueueRow& row : queue_length_summary(all))
        if (row.stream == 7) {
            EXPECT_EQ(row.max, 2);
        }
}

TEST_F(GpuBreakdown, StatsJsonRowsFollowTheDocumentedKeys) {
    store::TraceReader reader(*path_);
    StatsOptions options;
    options.reports = {"temporal", "kernel_types", "overlap", "idle_breakdown"};
    options.format = OutputFormat::json;
    options.time_unit = TimeUnit::ms;  // *_ns keys stay nanoseconds
    std::ostringstream out;
    write_stats(out, reader, options);
    const nlohmann::json document = nlohmann::json::parse(out.str());
    const nlohmann::json& temporal = document["reports"]["temporal"].at(0);
    EXPECT_EQ(temporal["rank"], 0);
    EXPECT_EQ(temporal["span_ns"], ns_of_us(700));
    EXPECT_EQ(temporal["idle_ns"], ns_of_us(180));
    EXPECT_EQ(temporal["compute_ns"], ns_of_us(290));
    EXPECT_EQ(temporal["non_compute_ns"], ns_of_us(230));
    EXPECT_EQ(document["reports"]["kernel_types"].at(0)["kernel_type"], "COMMUNICATION");  // longest first
    EXPECT_EQ(document["reports"]["kernel_types"].at(0)["total_ns"], ns_of_us(200));
    EXPECT_NEAR(document["reports"]["overlap"].at(0)["comm_comp_overlap_percent"].get<double>(), 100.0 / 3, 1e-9);
    bool host_wait = false;
    for (const nlohmann::json& row : document["reports"]["idle_breakdown"])
        if (row["stream"] == 7 && row["category"] == "host_wait") host_wait = row["idle_ns"] == ns_of_us(100);
    EXPECT_TRUE(host_wait);
}

TEST(GpuBreakdownHta, RoundsFractionalMicrosecondsInward) {
    // A kernel at ts = 10.2 µs lasting 5.5 µs: HTA keeps [ceil(10.2), floor(15.7)) = [11, 15).
    const std::string path = ember::testing::temporary_path("hta-rounding", ".db");
    {
        trace::RunInfo run;
        store::TraceWriter writer(path, run, store::testing::quiet_options());
        writer.register_device({0, "Test GPU", "", 9, 0, 1, 1, 1});
        const trace::StreamId stream = writer.register_stream({0, 0, 1, 7, 0, ""});
        trace::KernelEvent k;
        k.start_ns = 10'200;
        k.end_ns = 15'700;
        k.stream_id = stream;
        k.name_id = writer.intern("gemm");
        writer.record_kernel(k);
        writer.close();
    }
    store::TraceReader reader(path);
    const std::vector<RankGpuWork> hta = gpu_work(reader, Convention::hta);
    ASSERT_EQ(hta.at(0).events.size(), 1u);  // fewer than two steps: nothing is filtered
    EXPECT_EQ(hta[0].events[0].start_ns, 11'000);
    EXPECT_EQ(hta[0].events[0].end_ns, 15'000);
    const std::vector<RankGpuWork> exact = gpu_work(reader, Convention::ember);
    EXPECT_EQ(exact.at(0).events[0].start_ns, 10'200);
    std::filesystem::remove(path);
}

TEST(GpuBreakdownEmpty, CpuOnlyTraceSaysSoInOneLine) {
    const std::string path = ember::testing::temporary_path("cpu-only", ".db");
    {
        trace::RunInfo run;
        store::TraceWriter writer(path, run, store::testing::quiet_options());
        writer.close();
    }
    store::TraceReader reader(path);
    StatsOptions options;
    options.reports = {"temporal", "idle_breakdown"};
    std::ostringstream out;
    write_stats(out, reader, options);
    EXPECT_NE(out.str().find("no GPU activity recorded"), std::string::npos) << out.str();
    EXPECT_EQ(out.str().find("(none)"), std::string::npos) << out.str();
    std::filesystem::remove(path);
}

// Work that starts before its launching call returns: ember reports the negative delay
// as it is, hta counts it as no delay (HTA's launch_delay, as its numbers on the real
// A100/V100 traces show). The queue median of an even number of change points is the
// mean of the middle two (HTA's, pandas' 50%).
TEST_F(GpuBreakdown, NegativeLaunchDelayAndEvenQueueMedian) {
    store::TraceReader reader(*path_);
    RankGpuWork rank;
    // A copy on stream 7 over [start, end) µs, launched by call `correlation` over [call_start, call_end).
    auto add_copy = [&rank](trace::CorrelationId correlation, double start, double end, double call_start,
                            double call_end) {
        GpuEvent copy;
        copy.kind = GpuEventKind::memcpy;
        copy.kernel_class = KernelClass::memory;
        copy.cuda_stream = 7;
        copy.correlation = correlation;
        copy.start_ns = ns_of_us(start);
        copy.end_ns = ns_of_us(end);
        copy.launch_start_ns = ns_of_us(call_start);
        copy.launch_end_ns = ns_of_us(call_end);
        rank.events.push_back(copy);
    };
    add_copy(1, 5, 8, 0, 10);     // 5 µs before its call [0,10) returns
    add_copy(2, 30, 35, 12, 14);  // 16 µs after its call [12,14) returns
    const std::vector<RankGpuWork> work = {rank};

    const std::vector<LaunchRow> ember_rows = launch_statistics(reader, work, launch_options_for(Convention::ember));
    ASSERT_EQ(ember_rows.size(), 1u);
    EXPECT_EQ(ember_rows[0].name, "memcpy");
    EXPECT_EQ(ember_rows[0].delay_total_ns, ns_of_us(-5 + 16));
    EXPECT_EQ(ember_rows[0].delay_max_ns, ns_of_us(16));
    const std::vector<LaunchRow> hta_rows = launch_statistics(reader, work, launch_options_for(Convention::hta));
    ASSERT_EQ(hta_rows.size(), 1u);
    EXPECT_EQ(hta_rows[0].delay_total_ns, ns_of_us(0 + 16));
    EXPECT_EQ(hta_rows[0].launch_total_ns, ns_of_us(10 + 2));  // the calls themselves are unchanged

    // Launch 0 -> 1, start 5 -> 0, launch 12 -> 1, start 30 -> 0.
    const std::vector<QueueRow> queue = queue_length_summary(work);
    ASSERT_EQ(queue.size(), 1u);
    EXPECT_EQ(queue[0].samples, 4);
    EXPECT_DOUBLE_EQ(queue[0].mean, 0.5);
    EXPECT_DOUBLE_EQ(queue[0].median, 0.5);
    EXPECT_EQ(queue[0].max, 1);
}

// HTA's rounding starts from the double Python reads for a Kineto time: strtod of the
// decimal microseconds. ember computes it without the text; both must agree on every
// time, Unix-epoch nanoseconds (beyond 2^53) included, ties at eighths of a µs too.
TEST(HtaRounding, MicrosecondsAsPythonFloatEqualStrtodOfTheDecimalText) {
    auto by_text = [](TimeNs ns) {
        const bool negative = ns < 0;
        const unsigned long long magnitude =
            negative ? 0ull - static_cast<unsigned long long>(ns) : static_cast<unsigned long long>(ns);
        char text[40];
        std::snprintf(text, sizeof(text), "%s%llu.%03llu", negative ? "-" : "", magnitude / 1000, magnitude % 1000);
        return std::strtod(text, nullptr);
    };
    std::vector<TimeNs> times;
    const TimeNs bases[] = {0,
                            1'419'247'332'500'684,
                            TimeNs{1} << 53,
                            -(TimeNs{1} << 53),
                            1'712'195'495'519'695'800,
                            -1'712'195'495'519'695'800,
                            9'000'000'000'000'000'000,
                            9'100'000'000'000'000'000};  // the last beyond 2^53 µs: read through the text
    for (TimeNs base : bases)
        for (TimeNs delta = -3000; delta <= 3000; ++delta) times.push_back(base + delta);
    std::mt19937_64 random(14);
    for (int i = 0; i < 200'000; ++i) {
        const TimeNs base = bases[static_cast<std::size_t>(i) % std::size(bases)];
        times.push_back(base + static_cast<TimeNs>(random() % 2'000'000'000'000) - 1'000'000'000'000);
    }
    int compared = 0;
    for (TimeNs ns : times) {
        ASSERT_EQ(microseconds_as_python_float(ns), by_text(ns)) << ns;
        ++compared;
    }
    EXPECT_EQ(compared, static_cast<int>(times.size()));
    // 1712195495519695.875 µs lies halfway between two doubles (0.25 apart there):
    // both round to the even one.
    EXPECT_EQ(microseconds_as_python_float(1'712'195'495'519'695'875), 1712195495519696.0);
}

// --- HTA and CUDA synchronizations ------------------------------------------------------

// A Kineto trace (PyTorch 2.x) with cuda_sync events of every kind. Three
// ProfilerSteps of 1000 µs; in each, at s + ...: gemm [20, 120) and relu [130, 330) on
// stream 7, an NCCL all-reduce [40, 90) on stream 13; a Stream Wait Event on stream 13
// [36, 38); the host's cudaStreamSynchronize [40, 335) with its Stream Sync on stream 7
// [45, 332); an Event Sync [402, 417) and a Context Sync [502, 527), both on no stream
// (-1). Every GPU event has its launching runtime call.
std::string kineto_trace_with_syncs(bool with_cuda_sync_events) {
    nlohmann::json events = nlohmann::json::array();
    int correlation = 1000;
    auto host = [&](const char* name, double ts, double dur, const char* cat, nlohmann::json args) {
        events.push_back({{"ph", "X"},
                          {"cat", cat},
                          {"name", name},
                          {"pid", 100},
                          {"tid", 100},
                          {"ts", ts},
                          {"dur", dur},
                          {"args", args}});
    };
    auto launch = [&](double ts, double kernel_ts, double kernel_dur, int stream, const char* kernel) {
        ++correlation;
        host("cudaLaunchKernel", ts, 5, "cuda_runtime", {{"cbid", 211}, {"correlation", correlation}});
        events.push_back({{"ph", "X"},
                          {"cat", "kernel"},
                          {"name", kernel},
                          {"pid", 0},
                          {"tid", stream},
                          {"ts", kernel_ts},
                          {"dur", kernel_dur},
                          {"args", {{"device", 0}, {"stream", stream}, {"correlation", correlation}, {"context", 1}}}});
    };
    auto sync = [&](const char* kind, double ts, double dur, int stream, nlohmann::json extra) {
        if (!with_cuda_sync_events) return;
        nlohmann::json args = {
            {"cuda_sync_kind", kind}, {"stream", stream}, {"correlation", correlation}, {"device", 0}, {"context", 1}};
        args.update(extra);
        events.push_back({{"ph", "X"},
                          {"cat", "cuda_sync"},
                          {"name", kind},
                          {"pid", 0},
                          {"tid", stream >= 0 ? stream : 7},
                          {"ts", ts},
                          {"dur", dur},
                          {"args", args}});
    };
    const double t0 = 1'700'000'000'000.0;
    for (int step = 0; step < 3; ++step) {
        const double s = t0 + step * 1000;
        host(("ProfilerStep#" + std::to_string(step + 1)).c_str(), s, 900, "user_annotation", nlohmann::json::object());
        launch(s + 10, s + 20, 100, 7, "gemm_kernel");
        launch(s + 20, s + 130, 200, 7, "relu_kernel");
        launch(s + 30, s + 40, 50, 13, "ncclKernel_AllReduce");
        ++correlation;
        sync("Stream Wait Event", s + 36, 2, 13,
             {{"wait_on_stream", 7},
              {"wait_on_cuda_event_record_corr_id", correlation - 3},
              {"wait_on_cuda_event_id", 5}});
        host("cudaStreamWaitEvent", s + 35, 4, "cuda_runtime", {{"cbid", 146}, {"correlation", correlation}});
        ++correlation;
        host("cudaStreamSynchronize", s + 40, 295, "cuda_runtime", {{"cbid", 131}, {"correlation", correlation}});
        sync("Stream Sync", s + 45, 287, 7, nlohmann::json::object());
        ++correlation;
        host("cudaEventSynchronize", s + 400, 20, "cuda_runtime", {{"cbid", 133}, {"correlation", correlation}});
        sync("Event Sync", s + 402, 15, -1,
             {{"wait_on_stream", 7}, {"wait_on_cuda_event_record_corr_id", 1}, {"wait_on_cuda_event_id", 5}});
        ++correlation;
        host("cudaDeviceSynchronize", s + 500, 30, "cuda_runtime", {{"cbid", 165}, {"correlation", correlation}});
        sync("Context Sync", s + 502, 25, -1, nlohmann::json::object());
    }
    nlohmann::json trace = {{"schemaVersion", 1},
                            {"deviceProperties", {{{"id", 0}, {"name", "NVIDIA H100 80GB HBM3"}}}},
                            {"distributedInfo", {{"rank", 0}, {"world_size", 1}, {"backend", "nccl"}}},
                            {"traceEvents", events}};
    return trace.dump();
}

std::vector<RankGpuWork> hta_work_of(const std::string& kineto_json, const std::string& stem) {
    const std::string json_path = ember::testing::temporary_path(stem, ".json");
    const std::string db_path = ember::testing::temporary_path(stem, ".db");
    {
        std::ofstream out(json_path);
        out << kineto_json;
    }
    importing::import_file(json_path, db_path);
    std::filesystem::remove(json_path);
    std::vector<RankGpuWork> work;
    {
        store::TraceReader reader(db_path);
        work = gpu_work(reader, Convention::hta);
    }
    std::filesystem::remove(db_path);
    return work;
}

// Holistic Trace Analysis (its repository's HEAD of 2026-05-01, run with Debian's pandas
// 1.5.3) on this trace: get_temporal_breakdown() gives idle 688 µs, compute 600 µs,
// non-compute 24 µs, kernel time 1312 µs; get_gpu_kernel_breakdown() gives COMPUTATION
// 500 µs and COMPUTATION overlapping COMMUNICATION 100 µs (the synchronizations in no
// kernel type); get_idle_time_breakdown() gives stream 7 host_wait 690, kernel_wait 20,
// stream 13 host_wait 950 µs (synchronizations left out by category). The last step is
// dropped; the Stream Sync of each kept step covers the 10 µs between gemm and relu and
// outlasts relu by 2 µs: 24 µs of non-compute busy time.
TEST(GpuBreakdownHta, CountsStreamSynchronizationsAsHtaDoes) {
    const std::vector<RankGpuWork> work = hta_work_of(kineto_trace_with_syncs(true), "hta-syncs");
    ASSERT_EQ(work.size(), 1u);
    EXPECT_EQ(work[0].stream_syncs.size(), 4u);  // Stream Wait Event and Stream Sync of steps 1 and 2
    const TemporalRow temporal = temporal_breakdown(work).at(0);
    EXPECT_EQ(temporal.span_ns, 1'312'000);
    EXPECT_EQ(temporal.idle_ns, 688'000);
    EXPECT_EQ(temporal.compute_ns, 600'000);
    EXPECT_EQ(temporal.non_compute_ns, 24'000);
    std::map<std::string, TimeNs> types;
    for (const KernelTypeRow& row : kernel_type_breakdown(work)) types[row.kernel_type] = row.total_ns;
    EXPECT_EQ(types, (std::map<std::string, TimeNs>{{"COMPUTATION", 500'000},
                                                    {"COMPUTATION overlapping COMMUNICATION", 100'000}}));
    std::map<std::pair<std::uint64_t, std::string>, TimeNs> idle;
    for (const IdleRow& row : idle_breakdown(work, 30'000))
        idle[{row.stream, idle_category_name(row.category)}] = row.idle_ns;
    EXPECT_EQ(idle[std::make_pair(std::uint64_t{7}, std::string("host_wait"))], 690'000);
    EXPECT_EQ(idle[std::make_pair(std::uint64_t{7}, std::string("kernel_wait"))], 20'000);
    EXPECT_EQ(idle[std::make_pair(std::uint64_t{13}, std::string("host_wait"))], 950'000);
}

// Without cuda_sync events the import makes synchronizations from the runtime calls; they
// are not GPU records, and HTA would see no synchronization at all.
TEST(GpuBreakdownHta, LeavesOutSynchronizationsMadeFromCalls) {
    const std::vector<RankGpuWork> work = hta_work_of(kineto_trace_with_syncs(false), "hta-no-syncs");
    ASSERT_EQ(work.size(), 1u);
    EXPECT_TRUE(work[0].stream_syncs.empty());
    const TemporalRow temporal = temporal_breakdown(work).at(0);
    EXPECT_EQ(temporal.span_ns, 1'310'000);  // gemm of step 1 to relu of step 2
    EXPECT_EQ(temporal.non_compute_ns, 0);
}

}  // namespace
