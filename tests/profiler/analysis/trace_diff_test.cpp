// trace_diff_test.cpp: `ember diff` as a library (profiler/analysis/trace_diff.h) on
// traces built so every answer is known: hand-built fixtures for each rule of the step
// breakdown (worked out in the comments), the name tables, the headline and its noise
// band, the CI gate, job files; and copies of a real Kineto trace (../shared/real-traces,
// skipped when absent) with one kernel family made 1.5x longer, with the GPU work after
// the third step moved 20 ms later, and with nothing changed.
//
// [SECTION] Trace building
// [SECTION] Names
// [SECTION] The breakdown of a GPU step, rule by rule
// [SECTION] A CPU-backend run: host side by top-level range
// [SECTION] Two runs: name tables, headline, noise, gate
// [SECTION] Job files and traces without steps
// [SECTION] Real Kineto trace, modified copies
#include "profiler/analysis/trace_diff.h"

#include "profiler/merge/merge.h"
#include "profiler/store/reader.h"
#include "profiler/store/writer.h"
#include "tests/support/fixture_trace.h"
#include "tests/support/gunzip.h"
#include "tests/support/trace_builder.h"

#include "profiler/import/import.h"
#include "tests/support/store.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

namespace {

using namespace ember;
using analysis::StepCategory;
using trace::TimeNs;

// ---------------------------------------------------------------------------
// [SECTION] Trace building
// ---------------------------------------------------------------------------

constexpr TimeNs kBase = 7'000'000'000;  // times in the fixtures are µs after 7 s

TimeNs at(double micros) {
    return kBase + std::llround(micros * 1000.0);
}
TimeNs us(double micros) {
    return std::llround(micros * 1000.0);
}

// The shared test builder (trace_builder.h) with a main thread that makes the calls and
// ranges unless told otherwise, recording from 1 ms before kBase.
class TraceBuilder {
  public:
    explicit TraceBuilder(const std::string& path, std::int32_t rank = 0, std::int32_t world_size = 1)
        : builder_(path, ember::testing::TraceBuilder::run_info(kBase - us(1000), rank, world_size)),
          main_(builder_.thread("main", 0, 42)) {}

    trace::ThreadId main_thread() const { return main_; }
    trace::ThreadId thread(const char* name, std::int64_t tid) { return builder_.thread(name, 0, tid); }
    trace::StreamId stream(std::uint64_t cuda_stream) { return builder_.stream(cuda_stream); }
    trace::CorrelationId call(const char* name, TimeNs start, TimeNs end) {
        return builder_.call(main_, name, start, end);
    }
    void kernel(trace::StreamId stream, const char* name, TimeNs start, TimeNs end, trace::CorrelationId correlation) {
        builder_.kernel(stream, name, start, end, correlation);
    }
    void memcpy(trace::StreamId stream, TimeNs start, TimeNs end, trace::CorrelationId correlation) {
        builder_.memcpy(stream, start, end, correlation);
    }
    void memset(trace::StreamId stream, TimeNs start, TimeNs end, trace::CorrelationId correlation) {
        builder_.memset(stream, start, end, correlation);
    }
    // An "ember"-domain push/pop range; category as engine/core/nvtx.h numbers them.
    void range(const char* name, TimeNs start, TimeNs end, std::uint32_t category = 2, std::int32_t depth = 1,
               std::optional<std::int64_t> payload = {}, std::optional<trace::ThreadId> thread = {}) {
        builder_.range(thread.value_or(main_), "ember", name, start, end, category, depth, payload);
    }
    void step(std::int64_t number, TimeNs start, TimeNs end) { range("step", start, end, 1, 0, number); }
    void close() { builder_.close(); }

  private:
    ember::testing::TraceBuilder builder_;
    trace::ThreadId main_ = 0;
};

// Temporary files removed when the test ends.
class TempFiles {
  public:
    ~TempFiles() {
        for (const std::string& path : paths_) std::filesystem::remove(path);
    }
    std::string make(const std::string& stem, const std::string& extension = ".db") {
        paths_.push_back(ember::testing::temporary_path(stem, extension));
        return paths_.back();
    }

  private:
    std::vector<std::string> paths_;
};

analysis::RunProfile profile_of(const std::string& path, analysis::DiffOptions options = {}) {
    store::TraceReader reader(path);
    return analysis::profile_run(reader, options);
}

// The profile of the trace `write(path)` writes into a temporary file named after `stem`.
analysis::RunProfile profile_of_written(const std::string& stem, void (*write)(const std::string& path),
                                        analysis::DiffOptions options = {}) {
    TempFiles files;
    const std::string path = files.make(stem);
    write(path);
    return profile_of(path, options);
}

TimeNs part(const analysis::DiffStep& step, StepCategory category) {
    return step.parts[static_cast<int>(category)];
}

void expect_parts_add_up(const analysis::RunProfile& run) {
    for (const analysis::DiffStep& step : run.steps) {
        TimeNs sum = 0;
        for (TimeNs value : step.parts) sum += value;
        EXPECT_EQ(sum, step.length_ns()) << "step " << step.step;
        TimeNs host = 0;
        for (const auto& [name, time] : step.host_side_by_range) host += time;
        EXPECT_EQ(host, part(step, StepCategory::host_side)) << "step " << step.step;
    }
}

const analysis::BreakdownDelta& row_of(const analysis::TraceDiff& diff, StepCategory category) {
    return diff.breakdown[static_cast<std::size_t>(category)];
}

const analysis::NameDelta* find_name(const std::vector<analysis::NameDelta>& rows, const std::string& name) {
    for (const analysis::NameDelta& row : rows)
        if (row.name == name) return &row;
    return nullptr;
}

// ---------------------------------------------------------------------------
// [SECTION] Names
// ---------------------------------------------------------------------------

// GPU memory peaks compared per device: B's activations no longer live at once.
TEST(TraceDiffMemory, PeaksPerDeviceAreComparedAndInTheJson) {
    auto write = [](const std::string& path, std::int64_t activation_bytes, bool second_device) {
        ember::testing::TraceBuilder b(path, trace::RunInfo{});
        b.memory(10, trace::MemoryAction::segment_alloc, 0x1000, 1000);
        b.memory(10, trace::MemoryAction::alloc, 0x100, 100);               // weights
        b.memory(20, trace::MemoryAction::alloc, 0x200, activation_bytes);  // activations
        b.memory(30, trace::MemoryAction::free_completed, 0x200, activation_bytes);
        if (second_device) b.memory(10, trace::MemoryAction::alloc, 0x100, 7, {.device = 1});
        b.close();
    };
    const std::string a_path = ember::testing::temporary_path("diff-memory-a", ".db");
    const std::string b_path = ember::testing::temporary_path("diff-memory-b", ".db");
    write(a_path, 400, true);
    write(b_path, 150, false);
    analysis::TraceDiff diff;
    {
        store::TraceReader a(a_path), b(b_path);
        diff = analysis::diff_runs(analysis::profile_run(a), analysis::profile_run(b));
    }
    ASSERT_EQ(diff.memory.size(), 2u);
    ASSERT_TRUE(diff.memory[0].a && diff.memory[0].b);
    EXPECT_EQ(diff.memory[0].a->allocated_bytes, 500);
    EXPECT_EQ(diff.memory[0].b->allocated_bytes, 250);
    EXPECT_EQ(diff.memory[0].b->reserved_bytes, 1000);
    EXPECT_EQ(diff.memory[1].device, 1);
    EXPECT_TRUE(diff.memory[1].a && !diff.memory[1].b);  // only A used GPU 1
    const nlohmann::json json = analysis::diff_json(diff);
    ASSERT_EQ(json.at("gpu_memory").size(), 2u);
    EXPECT_EQ(json["gpu_memory"][0]["allocated_change_bytes"], -250);
    EXPECT_DOUBLE_EQ(json["gpu_memory"][0]["allocated_change_percent"].get<double>(), -50.0);
    EXPECT_EQ(json["gpu_memory"][0]["reserved_change_bytes"], 0);
    EXPECT_TRUE(json["gpu_memory"][1]["b_peak_allocated_bytes"].is_null());
    // No thread names the allocations: by line, and no block has a stack.
    ASSERT_EQ(diff.memory_places.size(), 1u);  // GPU 1 is not in both runs
    EXPECT_EQ(diff.memory_places[0].by, "line");
    EXPECT_EQ(diff.memory_places[0].place, "(no stack recorded)");
    EXPECT_EQ(diff.memory_places[0].change_bytes(), -250);
    std::filesystem::remove(a_path);
    std::filesystem::remove(b_path);
}

// What was live at the peak, by allocating op, A against B: B holds less in layer2, adds
// layer3, and its Block is another instance of the same module (matched by name).
TEST(TraceDiffMemory, LiveAtThePeakByOpLargestChangesFirst) {
    struct Holding {
        const char* op;
        std::int64_t bytes;
    };
    auto write = [](const std::string& path, std::initializer_list<Holding> holdings) {
        ember::testing::TraceBuilder b(path, ember::testing::TraceBuilder::run_info(0));
        const trace::ThreadId main = b.thread("main");
        TimeNs at = 0;
        std::uint64_t address = 0x100;
        for (const Holding& holding : holdings) {
            b.range(main, "", holding.op, at, at + 100);
            b.memory(at + 50, trace::MemoryAction::alloc, address++, holding.bytes, {.thread = main});
            at += 100;
        }
        b.close();
    };
    const std::string a_path = ember::testing::temporary_path("diff-memory-ops-a", ".db");
    const std::string b_path = ember::testing::temporary_path("diff-memory-ops-b", ".db");
    write(a_path, {{"layer1", 100}, {"layer2", 400}, {"nn.Module: Block_3", 50}});
    write(b_path, {{"layer1", 100}, {"layer2", 150}, {"nn.Module: Block_7", 80}, {"layer3", 30}});
    analysis::TraceDiff diff;
    {
        store::TraceReader a(a_path), b(b_path);
        diff = analysis::diff_runs(analysis::profile_run(a), analysis::profile_run(b));
    }
    struct Want {
        const char* place;
        std::int64_t a, b;
    };
    // |change| largest first; the two +30 in name order.
    const Want want[] = {{"layer2", 400, 150}, {"layer3", 0, 30}, {"nn.Module: Block", 50, 80}, {"layer1", 100, 100}};
    ASSERT_EQ(diff.memory_places.size(), std::size(want));
    for (std::size_t i = 0; i < std::size(want); ++i) {
        EXPECT_EQ(diff.memory_places[i].by, "op");
        EXPECT_EQ(diff.memory_places[i].place, want[i].place) << i;
        EXPECT_EQ(diff.memory_places[i].a_bytes, want[i].a) << want[i].place;
        EXPECT_EQ(diff.memory_places[i].b_bytes, want[i].b) << want[i].place;
    }
    const nlohmann::json json = analysis::diff_json(diff);
    ASSERT_EQ(json.at("gpu_memory_at_peak").size(), 4u);
    EXPECT_EQ(json["gpu_memory_at_peak"][0]["place"], "layer2");
    EXPECT_EQ(json["gpu_memory_at_peak"][0]["change_bytes"], -250);
    std::ostringstream text;
    analysis::write_diff(text, diff, {});
    EXPECT_NE(text.str().find("by allocating op (or line), A vs B"), std::string::npos) << text.str();
    std::filesystem::remove(a_path);
    std::filesystem::remove(b_path);
}

TEST(TraceDiffNames, TemplatesCollapseAndLaunchNumbersGo) {
    using analysis::normalise_name;
    EXPECT_EQ(normalise_name("void gemm<float, 128, true>(float*, int)"), "void gemm<...>(float*, int)");
    EXPECT_EQ(
        normalise_name(
            "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, "
            "at::detail::Array<char*, 3> >(int, at::native::AddFunctor<float>, at::detail::Array<char*, 3>)"),
        "void at::native::vectorized_elementwise_kernel<...>(int, at::native::AddFunctor<...>, at::detail::Array<...>)");
    EXPECT_EQ(normalise_name("ProfilerStep#12"), "ProfilerStep");
    EXPECT_EQ(normalise_name("triton_poi_fused_add_3"), "triton_poi_fused_add");
    EXPECT_EQ(normalise_name("nn.Module: ResNet_0"), "nn.Module: ResNet");
    // Names that only look like it stay.
    EXPECT_EQ(normalise_name("volta_sgemm_128x64_nn"), "volta_sgemm_128x64_nn");
    EXPECT_EQ(normalise_name("fc1"), "fc1");
    EXPECT_EQ(normalise_name("_3"), "_3");
    EXPECT_EQ(normalise_name("Memcpy HtoD (Pageable -> Device)"), "Memcpy HtoD (Pageable -> Device)");
    EXPECT_EQ(normalise_name("bool operator<(A const&, B const&)"), "bool operator<(A const&, B const&)");
    EXPECT_EQ(normalise_name("<built-in method conv2d of type object at 0x7f3a2c1d9e40>"),
              "<built-in method conv2d of type object at 0x...>");
    EXPECT_EQ(normalise_name("unclosed<float"), "unclosed<float");
}

// ---------------------------------------------------------------------------
// [SECTION] The breakdown of a GPU step, rule by rule
// ---------------------------------------------------------------------------

// µs after kBase. Thread main: step 1 [0,100), step 2 [100,200); forward [0,8),
// dataloader/wait [92,96), allreduce/wait [170,180) (communication category).
// Streams: s7 compute, s13 NCCL, s21 copies.
//   K1  gemm   s7  [10,30)   launch [2,4)
//   N1  nccl   s13 [20,50)   launch [5,6)      [30,50) is exposed communication
//   C1  memcpy s21 [40,60)   launch [7,8)      [50,60) is an exposed copy
//   K2  relu   s7  [70,80)   launch [62,64)    gap [60,70): launched after it began: host_wait
//   K3  gemm   s7  [85,90)   launch [50,52)    gap [80,85): 5 µs, launched before: kernel_wait
//   K4  gemm   s7  [140,160) launch [101,103)  gap [90,140): host_wait, less the dataloader wait
//   M1  memset s7  [200,220) launch [120,122)  gap [160,200): 40 µs, launched before: other,
//                                               less the allreduce wait [170,180)
// Windows: step 1 [0,100); step 2 launched work to 220, so [100,220).
//   step 1: compute 20+10+5 = 35, exposed communication 20, copies 10, host_side [0,10)
//           = 10 (forward 8, no range 2), host_wait [60,70) + [90,92) + [96,100) = 16,
//           kernel_wait 5, dataloader_wait 4                                  -> 100
//   step 2: compute 20, host_wait [100,140) = 40, other 30, exposed communication 10
//           (the host's allreduce wait), copies 20                            -> 120
void write_gpu_rules_trace(const std::string& path) {
    TraceBuilder b(path);
    const trace::StreamId s7 = b.stream(7), s13 = b.stream(13), s21 = b.stream(21);
    b.step(1, at(0), at(100));
    b.step(2, at(100), at(200));
    b.range("forward", at(0), at(8));
    b.range("dataloader/wait", at(92), at(96), 3);
    b.range("allreduce/wait", at(170), at(180), 4);
    b.kernel(s7, "gemm_kernel<float, 128>(float*)", at(10), at(30), b.call("cudaLaunchKernel", at(2), at(4)));
    b.kernel(s13, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)", at(20), at(50),
             b.call("cudaLaunchKernel", at(5), at(6)));
    b.memcpy(s21, at(40), at(60), b.call("cudaMemcpyAsync", at(7), at(8)));
    const trace::CorrelationId k3 = b.call("cudaLaunchKernel", at(50), at(52));
    b.kernel(s7, "relu_kernel", at(70), at(80), b.call("cudaLaunchKernel", at(62), at(64)));
    b.kernel(s7, "gemm_kernel<float, 64>(float*)", at(85), at(90), k3);
    b.kernel(s7, "gemm_kernel<float, 128>(float*)", at(140), at(160), b.call("cudaLaunchKernel", at(101), at(103)));
    b.memset(s7, at(200), at(220), b.call("cudaMemsetAsync", at(120), at(122)));
    b.close();
}

TEST(TraceDiffBreakdown, EveryGpuRuleOnAHandBuiltTrace) {
    const analysis::RunProfile run = profile_of_written("diff-gpu-rules", write_gpu_rules_trace);
    ASSERT_EQ(run.steps.size(), 2u);
    EXPECT_TRUE(run.has_step_ranges);
    EXPECT_TRUE(run.has_gpu_work);
    expect_parts_add_up(run);

    const analysis::DiffStep& first = run.steps[0];
    EXPECT_EQ(first.step, 1);
    EXPECT_EQ(first.start_ns, at(0));
    EXPECT_EQ(first.end_ns, at(100));
    EXPECT_EQ(part(first, StepCategory::gpu_compute), us(35));
    EXPECT_EQ(part(first, StepCategory::exposed_communication), us(20));
    EXPECT_EQ(part(first, StepCategory::exposed_copies), us(10));
    EXPECT_EQ(part(first, StepCategory::dataloader_wait), us(4));
    EXPECT_EQ(part(first, StepCategory::idle_host_wait), us(16));
    EXPECT_EQ(part(first, StepCategory::idle_kernel_wait), us(5));
    EXPECT_EQ(part(first, StepCategory::idle_other), 0);
    EXPECT_EQ(part(first, StepCategory::host_side), us(10));
    EXPECT_EQ(first.host_side_by_range.at("forward"), us(8));
    EXPECT_EQ(first.host_side_by_range.at("(no range)"), us(2));
    EXPECT_EQ(first.gpu_busy_ns(), us(65));

    const analysis::DiffStep& second = run.steps[1];
    EXPECT_EQ(second.step, 2);
    EXPECT_EQ(second.start_ns, at(100));
    EXPECT_EQ(second.end_ns, at(220));  // stretched to the memset step 2 launched
    EXPECT_EQ(part(second, StepCategory::gpu_compute), us(20));
    EXPECT_EQ(part(second, StepCategory::exposed_communication), us(10));
    EXPECT_EQ(part(second, StepCategory::exposed_copies), us(20));
    EXPECT_EQ(part(second, StepCategory::dataloader_wait), 0);
    EXPECT_EQ(part(second, StepCategory::idle_host_wait), us(40));
    EXPECT_EQ(part(second, StepCategory::idle_kernel_wait), 0);
    EXPECT_EQ(part(second, StepCategory::idle_other), us(30));
    EXPECT_EQ(part(second, StepCategory::host_side), 0);
    EXPECT_EQ(run.span_ns, us(220));

    // The kernel table matches template instances under one name; copies by direction.
    const auto kernel = std::find_if(run.kernels.begin(), run.kernels.end(), [](const analysis::NameTotal& row) {
        return row.name == "gemm_kernel<...>(float*)";
    });
    ASSERT_NE(kernel, run.kernels.end());
    EXPECT_EQ(kernel->instances, 3);
    EXPECT_EQ(kernel->total_ns, us(20 + 5 + 20));
    const auto copy = std::find_if(run.kernels.begin(), run.kernels.end(),
                                   [](const analysis::NameTotal& row) { return row.name == "[CUDA memcpy HtoD]"; });
    ASSERT_NE(copy, run.kernels.end());
    EXPECT_EQ(copy->total_ns, us(20));
}

TEST(TraceDiffBreakdown, KernelWaitThresholdDecidesShortGaps) {
    analysis::DiffOptions options;
    options.kernel_wait_threshold_ns = us(4);  // the 5 µs gap [80,85) is no longer launch overhead
    const analysis::RunProfile run = profile_of_written("diff-threshold", write_gpu_rules_trace, options);
    ASSERT_EQ(run.steps.size(), 2u);
    EXPECT_EQ(part(run.steps[0], StepCategory::idle_kernel_wait), 0);
    EXPECT_EQ(part(run.steps[0], StepCategory::idle_other), us(5));
}

// ---------------------------------------------------------------------------
// [SECTION] A CPU-backend run: host side by top-level range
// ---------------------------------------------------------------------------

// Three steps of 10 ms on the main thread, each: forward [0,4), backward [4,8) with a
// layer range inside it, optimizer [8,9), dataloader/wait [9,9.5), allreduce/wait
// [9.5,9.8), nothing [9.8,10) (with a longer backward, everything after it later). An "epoch" range holds every step
// (context, not work); a loader thread's ranges run beside the steps (not a driving thread).
void write_cpu_trace(const std::string& path, double backward_ms = 4.0) {
    TraceBuilder b(path);
    const trace::ThreadId loader = b.thread("loader", 43);
    b.range("epoch", at(-500), at(40'000), 0, 0);
    const double shift = (backward_ms - 4.0) * 1000.0;
    for (int i = 0; i < 3; ++i) {
        const double t = (10'000.0 + shift) * i;
        b.step(i, at(t), at(t + 10'000 + shift));
        b.range("forward", at(t), at(t + 4000), 2, 2);
        b.range("backward", at(t + 4000), at(t + 8000 + shift), 2, 2);
        b.range("conv1", at(t + 4500), at(t + 5000), 2, 3);
        b.range("optimizer", at(t + 8000 + shift), at(t + 9000 + shift), 2, 2);
        b.range("dataloader/wait", at(t + 9000 + shift), at(t + 9500 + shift), 3, 2);
        b.range("allreduce/wait", at(t + 9500 + shift), at(t + 9800 + shift), 4, 2);
        b.range("dataloader/load", at(t), at(t + 9000), 3, 0, std::nullopt, loader);
    }
    b.close();
}

TEST(TraceDiffBreakdown, CpuRunSplitsHostTimeByTopLevelRange) {
    const analysis::RunProfile run =
        profile_of_written("diff-cpu", [](const std::string& path) { write_cpu_trace(path); });
    EXPECT_FALSE(run.has_gpu_work);
    ASSERT_EQ(run.steps.size(), 3u);
    expect_parts_add_up(run);
    for (const analysis::DiffStep& step : run.steps) {
        EXPECT_EQ(step.length_ns(), us(10'000));
        EXPECT_EQ(part(step, StepCategory::dataloader_wait), us(500));
        EXPECT_EQ(part(step, StepCategory::exposed_communication), us(300));
        EXPECT_EQ(part(step, StepCategory::host_side), us(9200));
        EXPECT_EQ(part(step, StepCategory::gpu_compute) + part(step, StepCategory::idle_host_wait) +
                      part(step, StepCategory::idle_other) + part(step, StepCategory::idle_kernel_wait),
                  0);
        EXPECT_EQ(step.host_side_by_range.at("forward"), us(4000));
        EXPECT_EQ(step.host_side_by_range.at("backward"), us(4000));  // conv1 is inside it
        EXPECT_EQ(step.host_side_by_range.at("optimizer"), us(1000));
        EXPECT_EQ(step.host_side_by_range.at("(no range)"), us(200));
        EXPECT_EQ(step.host_side_by_range.count("epoch"), 0u);
        EXPECT_EQ(step.host_side_by_range.count("dataloader/load"), 0u);
    }
}

TEST(TraceDiffBreakdown, CpuRunsDiffedNameTheRangeThatGrew) {
    TempFiles files;
    const std::string a_path = files.make("diff-cpu-a"), b_path = files.make("diff-cpu-b");
    write_cpu_trace(a_path, 4.0);
    write_cpu_trace(b_path, 5.5);  // backward 1.5 ms longer in every step
    const analysis::TraceDiff diff = analysis::diff_runs(profile_of(a_path), profile_of(b_path));
    EXPECT_EQ(row_of(diff, StepCategory::host_side).delta_total_ns(), 3 * us(1500));
    EXPECT_DOUBLE_EQ(row_of(diff, StepCategory::host_side).delta_ns(), 1.5e6);
    for (int c = 0; c < analysis::kDiffCategoryCount; ++c)
        if (c != static_cast<int>(StepCategory::host_side)) {
            EXPECT_EQ(diff.breakdown[c].delta_total_ns(), 0) << c;
        }
    ASSERT_FALSE(diff.host_side.empty());
    EXPECT_EQ(diff.host_side.front().name, "backward");
    EXPECT_EQ(diff.host_side.front().delta_total_ns(), 3 * us(1500));
    EXPECT_FALSE(diff.gpu_idle);  // no GPU: no GPU idle group
    EXPECT_FALSE(diff.metric(analysis::DiffMetric::gpu_busy).available);
    // The range rows that moved: backward and the steps holding it (ties by name).
    ASSERT_GE(diff.ranges.size(), 3u);
    EXPECT_EQ(diff.ranges[0].name, "backward");
    EXPECT_EQ(diff.ranges[0].delta_ns(), 3 * us(1500));
    EXPECT_EQ(diff.ranges[1].name, "step");
    EXPECT_EQ(diff.ranges[1].delta_ns(), 3 * us(1500));
    EXPECT_EQ(diff.ranges[2].delta_ns(), 0);
    EXPECT_THROW(analysis::check_gate(diff, analysis::DiffMetric::gpu_busy, 5.0), std::invalid_argument);
}

// ---------------------------------------------------------------------------
// [SECTION] Two runs: name tables, headline, noise, gate
// ---------------------------------------------------------------------------

// A GPU run of `steps.size()` steps; step i lasts steps[i] µs and runs, one after the
// other from its start + 1 µs: "gemm<float, T>(float*)" for gemm_us (T changes per run:
// the name still matches), "relu_kernel_<i>" (a per-launch number) for 2 µs, and, when
// `with_bias`, "bias_add" for 3 µs.
struct GpuRunShape {
    std::vector<double> steps;
    double gemm_us = 20.0;
    bool with_bias = false;
    const char* gemm_name = "gemm<float, 128>(float*)";
};

void write_gpu_run(const std::string& path, const GpuRunShape& shape) {
    TraceBuilder b(path);
    const trace::StreamId s7 = b.stream(7);
    double t = 0.0;
    for (std::size_t i = 0; i < shape.steps.size(); ++i) {
        b.step(static_cast<std::int64_t>(i), at(t), at(t + shape.steps[i]));
        double k = t + 1.0;
        b.kernel(s7, shape.gemm_name, at(k), at(k + shape.gemm_us), b.call("cudaLaunchKernel", at(t), at(t + 0.5)));
        k += shape.gemm_us;
        const std::string relu = "relu_kernel_" + std::to_string(i);
        b.kernel(s7, relu.c_str(), at(k), at(k + 2.0), b.call("cudaLaunchKernel", at(t + 0.5), at(t + 0.8)));
        k += 2.0;
        if (shape.with_bias)
            b.kernel(s7, "bias_add", at(k), at(k + 3.0), b.call("cudaLaunchKernel", at(t + 0.8), at(t + 0.9)));
        t += shape.steps[i];
    }
    b.close();
}

TEST(TraceDiffRuns, NameTablesMatchNormalisedNamesAndFlagNewOnes) {
    TempFiles files;
    const std::string a_path = files.make("diff-runs-a"), b_path = files.make("diff-runs-b");
    write_gpu_run(a_path, {{100, 100, 100, 100}, 20.0, false, "gemm<float, 128>(float*)"});
    write_gpu_run(b_path, {{100, 100, 100, 100}, 30.0, true, "gemm<float, 256>(float*)"});
    const analysis::TraceDiff diff = analysis::diff_runs(profile_of(a_path), profile_of(b_path));

    ASSERT_EQ(diff.kernels.size(), 3u);  // gemm, bias_add, relu_kernel
    EXPECT_EQ(diff.kernels[0].name, "gemm<...>(float*)");
    EXPECT_EQ(diff.kernels[0].status, analysis::NameStatus::both);
    EXPECT_EQ(diff.kernels[0].delta_ns(), 4 * us(10));
    EXPECT_EQ(diff.kernels[0].a_instances, 4);
    EXPECT_EQ(diff.kernels[0].b_instances, 4);
    EXPECT_EQ(diff.kernels[1].name, "bias_add");
    EXPECT_EQ(diff.kernels[1].status, analysis::NameStatus::appeared);
    EXPECT_EQ(diff.kernels[1].delta_ns(), 4 * us(3));
    EXPECT_EQ(diff.kernels[2].name, "relu_kernel");  // relu_kernel_0 .. _3, one name
    EXPECT_EQ(diff.kernels[2].a_instances, 4);
    EXPECT_EQ(diff.kernels[2].delta_ns(), 0);

    // Same step windows (the host steps hold the GPU work): compute grows by 13 µs a step
    // and the idle time after it shrinks by as much — a gap before the next step's work,
    // launched late (host_wait), or after the last GPU work of all (host_side).
    EXPECT_EQ(row_of(diff, StepCategory::gpu_compute).delta_total_ns(), 4 * us(13));
    EXPECT_DOUBLE_EQ(row_of(diff, StepCategory::gpu_compute).delta_ns(), 13'000.0);
    EXPECT_EQ(row_of(diff, StepCategory::idle_host_wait).delta_total_ns(), -3 * us(13));
    EXPECT_EQ(row_of(diff, StepCategory::host_side).delta_total_ns(), -us(13));
    EXPECT_EQ(diff.metric(analysis::DiffMetric::step).verdict, analysis::Verdict::unchanged);
    EXPECT_EQ(diff.metric(analysis::DiffMetric::gpu_busy).verdict, analysis::Verdict::slower);
    EXPECT_DOUBLE_EQ(diff.metric(analysis::DiffMetric::gpu_busy).delta_ns, 13'000.0);
    ASSERT_TRUE(diff.total_step_change_ns);
    EXPECT_EQ(*diff.total_step_change_ns, 0);

    // The gate on GPU busy: 13 / 22 µs = +59% beyond a noise band of 0 (steps are alike).
    EXPECT_TRUE(analysis::check_gate(diff, analysis::DiffMetric::gpu_busy, 50.0).failed);
    EXPECT_FALSE(analysis::check_gate(diff, analysis::DiffMetric::gpu_busy, 60.0).failed);
    EXPECT_FALSE(analysis::check_gate(diff, analysis::DiffMetric::step, 1.0).failed);
}

TEST(TraceDiffRuns, HeadlineCallsAChangeInsideTheSpreadNoise) {
    TempFiles files;
    const std::string a_path = files.make("diff-noise-a"), b_path = files.make("diff-noise-b"),
                      c_path = files.make("diff-noise-c");
    // A: median 100, deviations 0 2 2 6 6 -> MAD 2, noise band 4.
    write_gpu_run(a_path, {{100, 98, 102, 94, 106}});
    // B: median 103 (+3 µs, +3%): inside the band.
    write_gpu_run(b_path, {{103, 101, 105, 97, 109}});
    // C: median 110 (+10%): outside it.
    write_gpu_run(c_path, {{110, 108, 112, 104, 116}});
    const analysis::RunProfile a = profile_of(a_path);

    const analysis::TraceDiff noise = analysis::diff_runs(a, profile_of(b_path));
    const analysis::MetricComparison& step = noise.metric(analysis::DiffMetric::step);
    EXPECT_DOUBLE_EQ(step.a.median_ns, 100'000.0);
    EXPECT_DOUBLE_EQ(step.a.mad_ns, 2'000.0);
    EXPECT_DOUBLE_EQ(step.a.p10_ns, 94'000.0 + 0.4 * 4'000.0);  // between 94 and 98
    EXPECT_DOUBLE_EQ(step.noise_ns, 4'000.0);
    EXPECT_DOUBLE_EQ(step.delta_ns, 3'000.0);
    ASSERT_TRUE(step.delta_percent);
    EXPECT_DOUBLE_EQ(*step.delta_percent, 3.0);
    EXPECT_EQ(step.verdict, analysis::Verdict::noise);
    // 3% is beyond a 1% threshold but not beyond the noise: the gate passes.
    EXPECT_FALSE(analysis::check_gate(noise, analysis::DiffMetric::step, 1.0).failed);

    const analysis::TraceDiff slower = analysis::diff_runs(a, profile_of(c_path));
    EXPECT_EQ(slower.metric(analysis::DiffMetric::step).verdict, analysis::Verdict::slower);
    EXPECT_TRUE(analysis::check_gate(slower, analysis::DiffMetric::step, 5.0).failed);
    EXPECT_FALSE(analysis::check_gate(slower, analysis::DiffMetric::step, 10.0).failed);  // exactly 10%: not beyond
    // Every step grew while the GPU sat idle waiting for the next step's launches, the
    // last one after the GPU's last work.
    EXPECT_EQ(row_of(slower, StepCategory::idle_host_wait).delta_total_ns(), 4 * us(10));
    EXPECT_EQ(row_of(slower, StepCategory::host_side).delta_total_ns(), us(10));
    EXPECT_EQ(row_of(slower, StepCategory::gpu_compute).delta_total_ns(), 0);
    // The span: one value per run, no spread: the threshold alone decides.
    EXPECT_DOUBLE_EQ(slower.metric(analysis::DiffMetric::span).delta_ns, 5 * 10'000.0);
    EXPECT_DOUBLE_EQ(slower.metric(analysis::DiffMetric::span).noise_ns, 0.0);

    const analysis::TraceDiff faster = analysis::diff_runs(profile_of(c_path), a);
    EXPECT_EQ(faster.metric(analysis::DiffMetric::step).verdict, analysis::Verdict::faster);
    EXPECT_FALSE(analysis::check_gate(faster, analysis::DiffMetric::step, 0.0).failed);
}

TEST(TraceDiffRuns, ParsePercent) {
    EXPECT_EQ(analysis::parse_percent("5%"), 5.0);
    EXPECT_EQ(analysis::parse_percent("2.5 %"), 2.5);
    EXPECT_EQ(analysis::parse_percent("0"), 0.0);
    EXPECT_FALSE(analysis::parse_percent("five"));
    EXPECT_FALSE(analysis::parse_percent("-1%"));
    EXPECT_FALSE(analysis::parse_percent("%"));
    EXPECT_FALSE(analysis::parse_percent("5%%"));
    EXPECT_FALSE(analysis::parse_percent("inf"));
    EXPECT_EQ(analysis::parse_diff_metric("gpu_busy"), analysis::DiffMetric::gpu_busy);
    EXPECT_FALSE(analysis::parse_diff_metric("latency"));
}

// Shares divide by the step-time change: when the step time did not change (its per-step
// means differ by rounding alone) a share is a dash, never -3147537307607717.5 %.
TEST(TraceDiffRuns, AShareOfAnUnchangedStepTimeIsADash) {
    analysis::TraceDiff diff;
    diff.a_steps = diff.b_steps = 3;
    // Two categories trade 1 ms per step; the step (10 ms) stays: per-step means of
    // totals / 3 whose sums differ in the last bits of a double.
    auto row = [](const char* name, TimeNs a_total, TimeNs b_total) {
        analysis::BreakdownDelta delta;
        delta.name = name;
        delta.a_total_ns = a_total;
        delta.b_total_ns = b_total;
        delta.a_ns = static_cast<double>(a_total) / 3.0;
        delta.b_ns = static_cast<double>(b_total) / 3.0;
        return delta;
    };
    diff.breakdown = {row("compute", 20'000'000, 23'000'001), row("idle", 10'000'000, 6'999'999)};
    double change = 0.0;
    for (const auto& r : diff.breakdown) change += r.delta_ns();
    ASSERT_NE(change, 0.0);              // rounding left a sliver
    ASSERT_LT(std::fabs(change), 1e-6);  // which the old share divided by
    diff.total_step_change_ns = 0;
    analysis::NameDelta kernel;
    kernel.name = "gemm";
    kernel.a_total_ns = 9'000'000;
    kernel.b_total_ns = 12'000'000;
    diff.kernels = {kernel};

    auto share_cells = [](const std::vector<analysis::Table>& tables, const std::string& key) {
        std::vector<analysis::Cell> cells;
        for (const analysis::Table& table : tables) {
            if (table.key != key) continue;
            std::size_t column = 0;
            while (table.columns[column].key != "share_percent") ++column;
            for (const auto& r : table.rows) cells.push_back(r[column]);
        }
        return cells;
    };
    auto tables = analysis::diff_tables(diff, 10);
    for (const auto& cell : share_cells(tables, "breakdown"))
        EXPECT_TRUE(std::holds_alternative<std::monostate>(cell)) << std::get<double>(cell);
    for (const auto& cell : share_cells(tables, "kernels")) EXPECT_TRUE(std::holds_alternative<std::monostate>(cell));
    std::ostringstream text;
    for (const auto& table : tables) analysis::write_text(text, table, analysis::TimeUnit::ms);
    EXPECT_EQ(text.str().find("e+"), std::string::npos) << text.str();

    // Under 0.01% of the step is no change either; a change of 1 ms per step is, and the rows' shares add to 100%.
    diff.breakdown = {row("compute", 20'000'000, 20'001'000), row("idle", 10'000'000, 10'000'000)};
    for (const auto& cell : share_cells(analysis::diff_tables(diff, 10), "breakdown"))
        EXPECT_TRUE(std::holds_alternative<std::monostate>(cell));
    diff.breakdown = {row("compute", 20'000'000, 26'000'000), row("idle", 10'000'000, 7'000'000)};
    diff.total_step_change_ns = 3'000'000;
    auto shares = share_cells(analysis::diff_tables(diff, 10), "breakdown");
    ASSERT_EQ(shares.size(), 2u);
    EXPECT_NEAR(std::get<double>(shares[0]), 200.0, 1e-9);
    EXPECT_NEAR(std::get<double>(shares[1]), -100.0, 1e-9);
    auto kernel_share = share_cells(analysis::diff_tables(diff, 10), "kernels");
    ASSERT_EQ(kernel_share.size(), 1u);
    EXPECT_DOUBLE_EQ(std::get<double>(kernel_share[0]), 100.0);
}

TEST(TraceDiffRuns, JsonHasEverySectionWithItsKeys) {
    TempFiles files;
    const std::string a_path = files.make("diff-json-a"), b_path = files.make("diff-json-b");
    write_gpu_run(a_path, {{100, 100, 100}});
    write_gpu_run(b_path, {{100, 100, 100}, 25.0, true});
    const nlohmann::json json = analysis::diff_json(analysis::diff_runs(profile_of(a_path), profile_of(b_path)));
    for (const char* key : {"headline", "breakdown", "gpu_idle", "host_side", "kernels", "ranges", "api", "notes"})
        EXPECT_TRUE(json.contains(key)) << key;
    EXPECT_EQ(json["headline"]["step"]["verdict"], "unchanged");
    ASSERT_EQ(json["breakdown"].size(), static_cast<std::size_t>(analysis::kDiffCategoryCount));
    for (const nlohmann::json& row : json["breakdown"])
        for (const char* key : {"category", "a_ns", "b_ns", "delta_ns", "a_total_ns", "b_total_ns", "delta_total_ns"})
            EXPECT_TRUE(row.contains(key)) << key;
    ASSERT_EQ(json["kernels"].size(), 3u);
    EXPECT_EQ(json["kernels"][0]["name"], "gemm<...>(float*)");  // 3 × 5 µs
    EXPECT_EQ(json["kernels"][0]["delta_ns"], 3 * us(5));
    EXPECT_EQ(json["kernels"][0]["a_total_ns"], 3 * us(20));
    EXPECT_EQ(json["kernels"][0]["status"], "");
    EXPECT_EQ(json["kernels"][1]["name"], "bias_add");  // 3 × 3 µs
    EXPECT_EQ(json["kernels"][1]["status"], "new");
    EXPECT_EQ(json["kernels"][1]["a_instances"], 0);
    EXPECT_EQ(json["kernels"][1]["b_instances"], 3);
    EXPECT_EQ(json["kernels"][1]["b_total_ns"], 3 * us(3));
    // Sorted by |delta_ns|, largest first.
    for (std::size_t i = 1; i < json["kernels"].size(); ++i)
        EXPECT_GE(std::llabs(json["kernels"][i - 1]["delta_ns"].get<long long>()),
                  std::llabs(json["kernels"][i]["delta_ns"].get<long long>()));
}

// ---------------------------------------------------------------------------
// [SECTION] Job files and traces without steps
// ---------------------------------------------------------------------------

TEST(TraceDiffJobs, WholeJobTakesTheSlowestRankPerStepAndRankSelectsOne) {
    TempFiles files;
    const std::string rank0 = files.make("diff-job-r0"), rank1 = files.make("diff-job-r1"),
                      job = files.make("diff-job");
    {
        TraceBuilder b(rank0, 0, 2);
        for (int i = 0; i < 3; ++i) b.step(i, at(100.0 * i), at(100.0 * i + 60));  // 60 µs steps
        b.close();
    }
    {
        TraceBuilder b(rank1, 1, 2);
        for (int i = 0; i < 3; ++i) b.step(i, at(100.0 * i), at(100.0 * i + (i == 1 ? 90 : 50)));
        b.close();
    }
    merge::merge_traces({rank0, rank1}, job);

    const analysis::RunProfile whole = profile_of(job);
    EXPECT_EQ(whole.ranks, (std::vector<std::int32_t>{0, 1}));
    EXPECT_EQ(whole.scope, "whole job (2 ranks)");
    ASSERT_EQ(whole.steps.size(), 3u);
    EXPECT_EQ(whole.steps[0].length_ns(), us(60));
    EXPECT_EQ(whole.steps[0].rank, 0);
    EXPECT_EQ(whole.steps[1].length_ns(), us(90));  // rank 1 is the slow one in step 1
    EXPECT_EQ(whole.steps[1].rank, 1);
    EXPECT_EQ(whole.steps[2].length_ns(), us(60));

    analysis::DiffOptions only_rank1;
    only_rank1.rank = 1;
    const analysis::RunProfile one = profile_of(job, only_rank1);
    EXPECT_EQ(one.scope, "rank 1");
    ASSERT_EQ(one.steps.size(), 3u);
    EXPECT_EQ(one.steps[0].length_ns(), us(50));
    EXPECT_EQ(one.steps[1].length_ns(), us(90));

    analysis::DiffOptions missing;
    missing.rank = 5;
    try {
        profile_of(job, missing);
        FAIL() << "rank 5 accepted";
    } catch (const store::TraceError& error) {
        EXPECT_NE(std::string(error.what()).find("has no rank 5 (ranks: 0, 1)"), std::string::npos) << error.what();
        EXPECT_NE(std::string(error.what()).find(job), std::string::npos) << error.what();
    }
    // Job totals add ranks, job steps do not: no shares.
    EXPECT_FALSE(analysis::diff_runs(whole, whole).total_step_change_ns);
    EXPECT_TRUE(analysis::diff_runs(one, one).total_step_change_ns);
}

TEST(TraceDiffJobs, TraceWithoutStepsIsOneStep) {
    TempFiles files;
    const std::string path = files.make("diff-no-steps");
    {
        TraceBuilder b(path);
        const trace::StreamId s = b.stream(7);
        b.kernel(s, "k", at(10), at(30), b.call("cudaLaunchKernel", at(0), at(2)));
        b.kernel(s, "k", at(70), at(80), b.call("cudaLaunchKernel", at(3), at(4)));
        b.close();
    }
    const analysis::RunProfile run = profile_of(path);
    EXPECT_FALSE(run.has_step_ranges);
    ASSERT_EQ(run.steps.size(), 1u);
    EXPECT_EQ(run.steps[0].start_ns, at(0));
    EXPECT_EQ(run.steps[0].end_ns, at(80));
    EXPECT_EQ(part(run.steps[0], StepCategory::gpu_compute), us(30));
    EXPECT_EQ(part(run.steps[0], StepCategory::idle_other), us(40));  // launched early, 40 µs gap
    EXPECT_EQ(part(run.steps[0], StepCategory::host_side), us(10));   // before the first kernel
    const analysis::TraceDiff diff = analysis::diff_runs(run, run);
    ASSERT_FALSE(diff.notes.empty());
    EXPECT_NE(diff.notes[0].find("neither run has step ranges"), std::string::npos);
}

// ---------------------------------------------------------------------------
// [SECTION] Real Kineto trace, modified copies
// ---------------------------------------------------------------------------

// The ResNet-50 training trace: 6 steps, one stream, whole-microsecond times.
const std::string kRealTrace = std::string(EMBER_REAL_TRACES_DIR) + "/kineto/v100_resnet50_workers0.json.gz";

#define SKIP_WITHOUT_REAL_TRACES()                                                                             \
    do {                                                                                                       \
        if (!std::filesystem::exists(kRealTrace))                                                              \
            GTEST_SKIP() << "../shared/real-traces is absent (a fresh clone has no ../shared): no real trace"; \
    } while (0)

nlohmann::json read_gzip_json(const std::string& path) {
    return nlohmann::json::parse(test_support::gunzip_file(path));
}

// A time of this trace in ns: µs, whole in the original, whole or halves in the copies.
// Near 1.6e15 µs a double still holds quarters exactly, but 1.6e18 ns it does not, so
// the whole µs and the fraction are converted apart.
TimeNs ns_of(const nlohmann::json& value) {
    if (value.is_number_integer()) return value.get<TimeNs>() * 1000;
    const double micros = value.get<double>();
    const double whole = std::floor(micros);
    return static_cast<TimeNs>(whole) * 1000 + std::llround((micros - whole) * 1000.0);
}
// Back to µs: whole numbers stay integers, halves become doubles (exact).
nlohmann::json us_of(TimeNs ns) {
    if (ns % 1000 == 0) return ns / 1000;
    EXPECT_EQ(ns % 500, 0) << "only whole and half microseconds are written";
    return static_cast<double>(ns / 1000) + static_cast<double>(ns % 1000) / 1000.0;
}

bool is_gpu_event(const nlohmann::json& event) {
    if (event.value("ph", "") != "X") return false;
    const std::string category = event.value("cat", "");
    return category == "Kernel" || category == "Memcpy" || category == "Memset";
}

class RealTraceDiff : public ::testing::Test {
  protected:
    std::string import(const std::string& input) {
        const std::string output = files_.make("diff-real");
        importing::import_file(input, output);
        return output;
    }
    std::string write_json(const nlohmann::json& document) {
        const std::string path = files_.make("diff-real-modified", ".json");
        std::ofstream(path) << document.dump();
        return path;
    }
    TempFiles files_;
};

// Every kernel of one family 1.5x longer, as if the GPU took that much longer to run it
// and the whole program waited: time is inserted at the end of each of its kernels
// (everything at or after that instant moves later by half the kernel's length). The
// family runs alone on the GPU at those instants, so no other GPU event changes, and
// step windows, gaps and launches keep their order: the answer is exact.
TEST_F(RealTraceDiff, OneKernelFamilyOneAndAHalfTimesLonger) {
    SKIP_WITHOUT_REAL_TRACES();
    nlohmann::json document = read_gzip_json(kRealTrace);
    nlohmann::json& events = document["traceEvents"];
    const std::string family = "volta_sgemm_64x64_nt";

    std::vector<std::pair<TimeNs, TimeNs>> insertions;  // (instant, inserted ns)
    std::vector<const nlohmann::json*> gpu;
    for (const nlohmann::json& event : events)
        if (is_gpu_event(event)) gpu.push_back(&event);
    for (const nlohmann::json* event : gpu) {
        if ((*event)["cat"] != "Kernel" || analysis::normalise_name((*event)["name"].get<std::string>()) != family)
            continue;
        const TimeNs end = ns_of((*event)["ts"]) + ns_of((*event)["dur"]);
        for (const nlohmann::json* other : gpu) {
            if (other == event) continue;
            const TimeNs start = ns_of((*other)["ts"]), other_end = start + ns_of((*other)["dur"]);
            ASSERT_FALSE(start < end && end <= other_end) << "the family is not alone on the GPU at " << end;
        }
        insertions.emplace_back(end, ns_of((*event)["dur"]) / 2);
    }
    ASSERT_GT(insertions.size(), 50u);
    std::sort(insertions.begin(), insertions.end());
    TimeNs injected = 0;
    for (const auto& [instant, inserted] : insertions) injected += inserted;
    auto moved = [&](TimeNs t) {
        TimeNs shift = 0;
        for (const auto& [instant, inserted] : insertions)
            if (instant <= t) shift += inserted;
        return t + shift;
    };
    for (nlohmann::json& event : events) {
        if (!event.contains("ts") || event.value("ph", "") == "M") continue;
        const TimeNs start = ns_of(event["ts"]);
        if (event.contains("dur")) event["dur"] = us_of(moved(start + ns_of(event["dur"])) - moved(start));
        event["ts"] = us_of(moved(start));
    }

    const analysis::RunProfile a = profile_of(import(kRealTrace));
    const analysis::RunProfile b = profile_of(import(write_json(document)));
    const analysis::TraceDiff diff = analysis::diff_runs(a, b);
    ASSERT_EQ(diff.a_steps, 6);
    ASSERT_EQ(diff.b_steps, 6);

    // The family is the first kernel row, with exactly the injected time; no other moves.
    ASSERT_FALSE(diff.kernels.empty());
    EXPECT_EQ(diff.kernels[0].name, family);
    EXPECT_EQ(diff.kernels[0].delta_ns(), injected);
    EXPECT_EQ(diff.kernels[0].a_instances, diff.kernels[0].b_instances);
    for (std::size_t i = 1; i < diff.kernels.size(); ++i)
        EXPECT_EQ(diff.kernels[i].delta_ns(), 0) << diff.kernels[i].name;

    // The breakdown puts all of it in compute, and the steps grew by as much.
    EXPECT_EQ(row_of(diff, StepCategory::gpu_compute).delta_total_ns(), injected);
    for (int c = 1; c < analysis::kDiffCategoryCount; ++c)
        EXPECT_EQ(diff.breakdown[c].delta_total_ns(), 0) << analysis::step_category_name(static_cast<StepCategory>(c));
    ASSERT_TRUE(diff.total_step_change_ns);
    EXPECT_EQ(*diff.total_step_change_ns, injected);
    EXPECT_DOUBLE_EQ(diff.metric(analysis::DiffMetric::span).delta_ns, static_cast<double>(injected));
    EXPECT_NEAR(row_of(diff, StepCategory::gpu_compute).delta_ns(), static_cast<double>(injected) / 6.0, 1e-6);
}

// All GPU work after the third step's window 20 ms later, the host as it was. Step
// windows stretch to the GPU work their steps launched, and this trace's last step
// ends with its GPU work, so the steps grow by 20 ms in all; the GPU's busy time, the
// host's ranges and calls do not move. Where the GPU now sits idle changes cause
// (the host no longer launches late, the dataloader wait overlaps late GPU work), but
// the GPU idle time grows by exactly 20 ms.
TEST_F(RealTraceDiff, GpuWorkAfterTheThirdStepTwentyMillisecondsLater) {
    SKIP_WITHOUT_REAL_TRACES();
    const std::string a_path = import(kRealTrace);
    const analysis::RunProfile a = profile_of(a_path);
    ASSERT_EQ(a.steps.size(), 6u);
    const TimeNs third_step_end = a.steps[2].end_ns;
    nlohmann::json document = read_gzip_json(kRealTrace);
    // The import keeps Kineto's clock (µs as ns): the first step starts at ProfilerStep#5.
    for (const nlohmann::json& event : document["traceEvents"])
        if (event.value("name", "") == "ProfilerStep#5") {
            EXPECT_EQ(ns_of(event["ts"]), a.steps[0].start_ns);
        }
    constexpr TimeNs kShift = 20'000'000;
    std::int64_t shifted = 0;
    for (nlohmann::json& event : document["traceEvents"]) {
        if (!is_gpu_event(event) || ns_of(event["ts"]) < third_step_end) continue;
        event["ts"] = us_of(ns_of(event["ts"]) + kShift);
        ++shifted;
    }
    ASSERT_GT(shifted, 1000);

    const analysis::RunProfile b = profile_of(import(write_json(document)));
    const analysis::TraceDiff diff = analysis::diff_runs(a, b);
    ASSERT_TRUE(diff.gpu_idle);
    EXPECT_EQ(diff.gpu_idle->delta_total_ns(), kShift);
    for (StepCategory c : {StepCategory::gpu_compute, StepCategory::exposed_communication, StepCategory::exposed_copies,
                           StepCategory::host_side})
        EXPECT_EQ(row_of(diff, c).delta_total_ns(), 0) << analysis::step_category_name(c);
    ASSERT_TRUE(diff.total_step_change_ns);
    EXPECT_EQ(*diff.total_step_change_ns, kShift);
    EXPECT_DOUBLE_EQ(diff.metric(analysis::DiffMetric::span).delta_ns, static_cast<double>(kShift));
    EXPECT_EQ(diff.metric(analysis::DiffMetric::gpu_busy).delta_ns, 0.0);
    for (const auto* table : {&diff.kernels, &diff.ranges, &diff.api})
        for (const analysis::NameDelta& row : *table) EXPECT_EQ(row.delta_ns(), 0) << row.name;
}

TEST_F(RealTraceDiff, ATraceAgainstItselfIsAllZeros) {
    SKIP_WITHOUT_REAL_TRACES();
    const analysis::RunProfile a = profile_of(import(kRealTrace));
    const analysis::TraceDiff diff = analysis::diff_runs(a, a);
    for (const analysis::MetricComparison& m : diff.metrics) {
        EXPECT_TRUE(m.available);
        EXPECT_EQ(m.delta_ns, 0.0);
        EXPECT_EQ(m.verdict, analysis::Verdict::unchanged);
    }
    for (const analysis::BreakdownDelta& row : diff.breakdown) EXPECT_EQ(row.delta_total_ns(), 0) << row.name;
    for (const auto* table : {&diff.kernels, &diff.ranges, &diff.api}) {
        EXPECT_FALSE(table->empty());
        for (const analysis::NameDelta& row : *table) {
            EXPECT_EQ(row.delta_ns(), 0) << row.name;
            EXPECT_EQ(row.status, analysis::NameStatus::both) << row.name;
        }
    }
    EXPECT_FALSE(analysis::check_gate(diff, analysis::DiffMetric::step, 1.0).failed);
    EXPECT_FALSE(analysis::check_gate(diff, analysis::DiffMetric::gpu_busy, 0.0).failed);
    // The GPU work is found and its categories are the ones this trace has.
    EXPECT_GT(row_of(diff, StepCategory::gpu_compute).a_total_ns, 0);
    EXPECT_GT(row_of(diff, StepCategory::dataloader_wait).a_total_ns, 0);
    EXPECT_NE(find_name(diff.kernels, "[CUDA memcpy HtoD]"), nullptr);
}

}  // namespace
