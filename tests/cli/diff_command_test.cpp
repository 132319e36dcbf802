// diff_command_test.cpp: `ember diff A B` run as a user runs it: the three formats, the
// CI gate's exit codes (0 pass, 4 slower, 2 bad input), the message naming the file or
// the flag on bad input, and a real Kineto trace diffed with itself (skipped when
// ../shared/real-traces is absent).
#include "profiler/store/writer.h"
#include "tests/support/fixture_trace.h"
#include "tests/support/shell_command.h"
#include "tests/support/store.h"
#include "tests/support/trace_ranges.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace {

using namespace ember;
using trace::TimeNs;

using Result = test_support::CommandResult;

// `arguments` follow `ember`; stderr joins stdout or is dropped; `environment` is a
// prefix such as "XDG_CACHE_HOME=/tmp/x".
Result run(const std::string& arguments, bool with_stderr = true, const std::string& environment = "") {
    return test_support::run_shell(environment + (environment.empty() ? "" : " ") + EMBER_CLI_BINARY + " " + arguments +
                                   (with_stderr ? " 2>&1" : " 2>/dev/null"));
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// A GPU run of five steps; step i lasts step_us[i] µs and runs a 20 µs "gemm" kernel.
void write_run(const std::string& path, const std::vector<double>& step_us) {
    trace::RunInfo run;
    run.pid = 7;
    store::WriterOptions options = store::testing::quiet_options();
    store::TraceWriter writer(path, run, options);
    writer.register_process({7, "train"});
    const trace::ThreadId thread = writer.register_thread({0, 7, 7, "main"});
    writer.register_device({0, "Test GPU", "", 9, 0, 132, 80ll << 30, 3.35e12});
    const trace::StreamId stream = writer.register_stream({0, 0, 1, 7, 0, ""});
    const TimeNs base = 1'000'000'000;
    TimeNs t = base;
    for (std::size_t i = 0; i < step_us.size(); ++i) {
        const TimeNs length = static_cast<TimeNs>(step_us[i] * 1000);
        trace::RangeEvent step;
        step.range_id = writer.next_range_id();
        step.start_ns = t;
        step.end_ns = t + length;
        step.thread_id = thread;
        step.domain_id = writer.intern("ember");
        step.name_id = writer.intern("step");
        step.category = 1;
        step.payload = trace::Payload::of_integer(static_cast<std::int64_t>(i));
        writer.record_range(step);
        trace::ApiEvent call;
        call.start_ns = t;
        call.end_ns = t + 500;
        call.thread_id = thread;
        call.correlation_id = i + 1;
        call.name_id = writer.intern("cudaLaunchKernel");
        writer.record_api_call(call);
        trace::KernelEvent kernel;
        kernel.start_ns = t + 1000;
        kernel.end_ns = t + 21'000;
        kernel.stream_id = stream;
        kernel.correlation_id = i + 1;
        kernel.name_id = writer.intern("gemm<float, 64>(float*)");
        writer.record_kernel(kernel);
        t += length;
    }
    writer.close();
}

class DiffCommand : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_TRUE(std::filesystem::exists(EMBER_CLI_BINARY)) << "no ember binary at " << EMBER_CLI_BINARY;
        a_ = make("diff-cli-a");
        b_ = make("diff-cli-b");
        write_run(a_, {100, 101, 99, 100, 100});
        write_run(b_, {110, 111, 109, 110, 110});  // +10%, beyond a noise band of 2 µs
    }
    void TearDown() override {
        for (const std::string& path : paths_) std::filesystem::remove_all(path);
    }
    std::string make(const std::string& stem, const std::string& extension = ".db") {
        paths_.push_back(ember::testing::temporary_path(stem, extension));
        return paths_.back();
    }
    std::string a_, b_;
    std::vector<std::string> paths_;
};

TEST_F(DiffCommand, ATraceAgainstItselfPassesTheGate) {
    const Result result = run("diff " + a_ + " " + a_ + " --fail-if-slower 1%");
    EXPECT_EQ(result.exit_code, 0) << result.output;
    EXPECT_TRUE(contains(result.output, "Step time: B is unchanged")) << result.output;
    EXPECT_TRUE(contains(result.output, "pass:")) << result.output;
}

TEST_F(DiffCommand, SlowerBeyondThresholdAndNoiseExitsFour) {
    const Result slower = run("diff " + a_ + " " + b_ + " --fail-if-slower 5%");
    EXPECT_EQ(slower.exit_code, 4) << slower.output;
    EXPECT_TRUE(contains(slower.output, "FAIL: B is slower")) << slower.output;
    EXPECT_TRUE(contains(slower.output, "Step time: B is slower")) << slower.output;
    // Within the threshold, or faster: 0.
    EXPECT_EQ(run("diff " + a_ + " " + b_ + " --fail-if-slower 15%").exit_code, 0);
    EXPECT_EQ(run("diff " + b_ + " " + a_ + " --fail-if-slower 0%").exit_code, 0);
    // The other metrics: the GPU did the same work; the span grew by 50 µs of 500.
    EXPECT_EQ(run("diff " + a_ + " " + b_ + " --fail-if-slower 5% --metric gpu_busy").exit_code, 0);
    EXPECT_EQ(run("diff " + a_ + " " + b_ + " --fail-if-slower 5% --metric span").exit_code, 4);
    // No gate asked: a report, exit 0.
    EXPECT_EQ(run("diff " + a_ + " " + b_).exit_code, 0);
}

TEST_F(DiffCommand, JsonAndCsv) {
    const Result json = run("diff " + a_ + " " + b_ + " --format json --fail-if-slower 5%", false);
    EXPECT_EQ(json.exit_code, 4);
    const nlohmann::json document = nlohmann::json::parse(json.output);
    EXPECT_EQ(document["a"]["file"], a_);
    EXPECT_EQ(document["headline"]["step"]["verdict"], "slower");
    EXPECT_DOUBLE_EQ(document["headline"]["step"]["delta_ns"].get<double>(), 10'000.0);
    EXPECT_EQ(document["gate"]["failed"], true);
    EXPECT_EQ(document["kernels"][0]["name"], "gemm<...>(float*)");
    EXPECT_EQ(document["kernels"][0]["delta_ns"], 0);
    ASSERT_TRUE(document["breakdown"].is_array());
    EXPECT_EQ(document["breakdown"][0]["category"], "gpu_compute");

    const Result csv = run("diff " + a_ + " " + b_ + " --format csv --time-unit us", false);
    EXPECT_EQ(csv.exit_code, 0);
    for (const char* section : {"# headline\r\n", "# breakdown\r\n", "# kernels\r\n", "# ranges\r\n", "# api\r\n"})
        EXPECT_TRUE(contains(csv.output, section)) << section;
    EXPECT_TRUE(contains(csv.output, "Median (us)")) << csv.output;
}

TEST_F(DiffCommand, BadInputExitsTwoNamingTheFileOrFlag) {
    struct Case {
        std::string arguments;
        std::string message;
    };
    const std::vector<Case> cases = {
        {"diff /nonexistent/a.db " + b_, "/nonexistent/a.db"},
        {"diff " + a_ + " /etc/passwd", "B: /etc/passwd"},
        {"diff " + a_ + " " + b_ + " --fail-if-slower lots", "--fail-if-slower 'lots'"},
        {"diff " + a_ + " " + b_ + " --fail-if-slower -5%", "--fail-if-slower '-5%'"},
        {"diff " + a_ + " " + b_ + " --fail-if-slower 5% --metric latency", "--metric 'latency'"},
        {"diff " + a_ + " " + b_ + " --format xml", "--format 'xml'"},
        {"diff " + a_ + " " + b_ + " --rank 3", "has no rank 3"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.arguments);
        const Result result = run(c.arguments);
        EXPECT_EQ(result.exit_code, 2) << result.output;
        EXPECT_TRUE(contains(result.output, "ember diff: ")) << result.output;
        EXPECT_TRUE(contains(result.output, c.message)) << result.output;
    }
}

TEST_F(DiffCommand, GpuBusyGateOnRunsWithoutGpuWorkIsBadInput) {
    const std::string cpu = make("diff-cli-cpu");
    {
        trace::RunInfo run;
        store::WriterOptions writer_options;
        writer_options.install_signal_handlers = false;
        writer_options.close_at_exit = false;
        store::TraceWriter writer(cpu, run, writer_options);
        const trace::ThreadId thread = writer.register_thread({0, 1, 1, "main"});
        test_support::record_range(writer, thread, "step", 1000, 2000);
        writer.close();
    }
    const Result result = run("diff " + cpu + " " + cpu + " --fail-if-slower 5% --metric gpu_busy");
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_TRUE(contains(result.output, "--metric gpu_busy: a run has no GPU work")) << result.output;
}

TEST_F(DiffCommand, RealKinetoTraceAgainstItself) {
    const std::string trace = std::string(EMBER_REAL_TRACES_DIR) + "/kineto/v100_resnet50_workers0.json.gz";
    if (!std::filesystem::exists(trace))
        GTEST_SKIP() << "../shared/real-traces is absent (a fresh clone has no ../shared): no real trace";
    // A copy, so the import is cached beside it and nothing is written into ../shared.
    const std::string cache = make("diff-cli-cache", "");
    std::filesystem::create_directories(cache);
    const std::string copy = cache + "/v100_resnet50_workers0.json.gz";
    std::filesystem::copy_file(trace, copy, std::filesystem::copy_options::overwrite_existing);
    const Result result =
        run("diff " + copy + " " + copy + " --fail-if-slower 1% --format json", false, "XDG_CACHE_HOME=" + cache);
    ASSERT_EQ(result.exit_code, 0) << result.output;
    const nlohmann::json document = nlohmann::json::parse(result.output);
    EXPECT_EQ(document["gate"]["failed"], false);
    for (const char* metric : {"step", "gpu_busy", "span"}) {
        EXPECT_EQ(document["headline"][metric]["delta_ns"].get<double>(), 0.0) << metric;
        EXPECT_EQ(document["headline"][metric]["verdict"], "unchanged") << metric;
    }
    for (const char* table : {"breakdown", "kernels", "ranges", "api"}) {
        ASSERT_FALSE(document[table].empty()) << table;
        for (const nlohmann::json& row : document[table]) EXPECT_EQ(row["delta_ns"].get<double>(), 0.0) << table;
    }
}

}  // namespace
