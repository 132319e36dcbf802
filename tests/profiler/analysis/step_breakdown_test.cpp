// step_breakdown_test.cpp: the per-step category breakdown (profiler/analysis/
// step_breakdown.h) under both conventions, on hand-built traces whose every number is
// worked out in the comments below, on random traces against an instant-by-instant
// oracle, on synthetic and merged job traces, and on the real ResNet-50 trace against
// the TensorBoard plugin's own numbers (skipped when ../shared/real-traces is absent).
//
// [SECTION] Trace building
// [SECTION] An ember-style trace: steps, dataloader wait, a kernel running into the next step
// [SECTION] A Kineto-style trace: the plugin's own rules
// [SECTION] Edge cases: no steps, enclosing ranges, fractional microseconds
// [SECTION] Random traces against an instant-by-instant oracle
// [SECTION] Synthetic and merged job traces
// [SECTION] The real trace against the plugin
#include "profiler/analysis/step_breakdown.h"

#include "common/nvtx_contract.h"
#include "profiler/merge/merge.h"
#include "profiler/store/reader.h"
#include "profiler/store/writer.h"
#include "profiler/synth/synthetic_trace.h"
#include "tests/support/fixture_trace.h"
#include "tests/support/trace_builder.h"

#include "profiler/import/import.h"
#include "tests/support/store.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace {

using namespace ember;
using analysis::StepBreakdownNotes;
using analysis::StepBreakdownRow;
using analysis::StepConvention;
using trace::TimeNs;

// ---------------------------------------------------------------------------
// [SECTION] Trace building
// ---------------------------------------------------------------------------

constexpr TimeNs kBase = 5'000'000'000;  // 5 s: times in the fixtures are µs after it

TimeNs at_us(double micros) {
    return kBase + std::llround(micros * 1000.0);
}
TimeNs us(double micros) {
    return std::llround(micros * 1000.0);
}

// The shared test builder (trace_builder.h), recording from 1 ms before kBase.
class TraceBuilder : public ember::testing::TraceBuilder {
  public:
    explicit TraceBuilder(const std::string& path, const trace::RunInfo& run = default_run())
        : ember::testing::TraceBuilder(path, run) {}
    static trace::RunInfo default_run() { return run_info(kBase - us(1000)); }
};

// ember's categories (common/nvtx_contract.h).
constexpr std::uint32_t kStep = nvtx::number(nvtx::Category::step);
constexpr std::uint32_t kCompute = nvtx::number(nvtx::Category::compute);
constexpr std::uint32_t kDataloader = nvtx::number(nvtx::Category::dataloader);
constexpr std::uint32_t kCommunication = nvtx::number(nvtx::Category::communication);

// A row as microseconds for compact expectations: {start, end, kernel, memcpy, memset,
// communication, runtime, dataloader, cpu_exec, other}, times from kBase.
struct RowUs {
    std::int64_t step;
    double start, end, kernel, memcpy, memset, communication, runtime, dataloader, cpu_exec, other;
};

void expect_row(const StepBreakdownRow& row, const RowUs& want, const char* what) {
    SCOPED_TRACE(std::string(what) + ", step " + std::to_string(want.step));
    EXPECT_EQ(row.step, want.step);
    EXPECT_EQ(row.start_ns, at_us(want.start));
    EXPECT_EQ(row.end_ns, at_us(want.end));
    EXPECT_EQ(row.kernel_ns, us(want.kernel));
    EXPECT_EQ(row.memcpy_ns, us(want.memcpy));
    EXPECT_EQ(row.memset_ns, us(want.memset));
    EXPECT_EQ(row.communication_ns, us(want.communication));
    EXPECT_EQ(row.runtime_ns, us(want.runtime));
    EXPECT_EQ(row.dataloader_ns, us(want.dataloader));
    EXPECT_EQ(row.cpu_exec_ns, us(want.cpu_exec));
    EXPECT_EQ(row.other_ns, us(want.other));
}

TimeNs categories_sum(const StepBreakdownRow& row) {
    return row.kernel_ns + row.memcpy_ns + row.memset_ns + row.communication_ns + row.runtime_ns + row.dataloader_ns +
           row.cpu_exec_ns + row.other_ns;
}

// Every row's categories add up to its window, and a rank's windows follow each other.
void expect_partition(const std::vector<StepBreakdownRow>& rows) {
    for (std::size_t i = 0; i < rows.size(); ++i) {
        EXPECT_EQ(categories_sum(rows[i]), rows[i].end_ns - rows[i].start_ns) << "row " << i;
        EXPECT_LE(rows[i].start_ns, rows[i].end_ns) << "row " << i;
        if (i > 0 && rows[i].rank == rows[i - 1].rank) {
            EXPECT_GE(rows[i].start_ns, rows[i - 1].end_ns) << "row " << i;
        }
    }
}

class StepBreakdown : public ::testing::Test {
  protected:
    std::string temp(const std::string& stem) {
        paths_.push_back(ember::testing::temporary_path(stem, ".db"));
        return paths_.back();
    }
    void TearDown() override {
        for (const std::string& path : paths_) std::filesystem::remove(path);
    }
    std::vector<std::string> paths_;
};

// ---------------------------------------------------------------------------
// [SECTION] An ember-style trace: steps, dataloader wait, a kernel running into the next step
// ---------------------------------------------------------------------------
//
// Times in µs. Main thread T1, domain "ember":
//   step 10 [100,400)  dataloader/wait [100,150)  forward [150,300)  allreduce/wait [300,340) (communication)
//   step 11 [400,700)  dataloader/wait [400,420)  forward [420,600)
// Loader worker T2 (no CUDA calls): dataloader/load [620,680).
// Calls on T1 and what they launched:
//   c1 cudaLaunchKernel [160,170) -> K1 gemm   stream 7  [200,450)  runs into step 11's host time
//   c2 cudaLaunchKernel [310,315) -> N1 ncclDevKernel_AllReduce stream 13 [320,380)
//   c7 cudaLaunchKernel [398,402) -> K5 gemm   stream 13 [440,480)  the call straddles step 10's end
//   c3 cudaMemsetAsync  [430,435) -> MS1       stream 7  [460,470)
//   c4 cudaMemcpyAsync  [440,450) -> MC1       stream 21 [445,500)
//   c5 cuLaunchKernel   [500,505) -> K2 relu   stream 7  [520,560)  a driver call
//   c6 cudaLaunchKernel [690,698) -> K3 gemm   stream 7  [700,760)  after step 11's host end
//   (none)                        -> K4 gemm   stream 7  [600,620)  no launching call
void write_ember_style_trace(const std::string& path) {
    TraceBuilder b(path);
    const trace::ThreadId main = b.thread("main");
    const trace::ThreadId worker = b.thread("dataloader worker 0");
    const trace::StreamId s7 = b.stream(7), s13 = b.stream(13), s21 = b.stream(21);
    b.range(main, "ember", "step", at_us(100), at_us(400), kStep, 0, 10);
    b.range(main, "ember", "dataloader/wait", at_us(100), at_us(150), kDataloader, 1);
    b.range(main, "ember", "forward", at_us(150), at_us(300), kCompute, 1);
    b.range(main, "ember", "allreduce/wait", at_us(300), at_us(340), kCommunication, 1);
    b.range(main, "ember", "step", at_us(400), at_us(700), kStep, 0, 11);
    b.range(main, "ember", "dataloader/wait", at_us(400), at_us(420), kDataloader, 1);
    b.range(main, "ember", "forward", at_us(420), at_us(600), kCompute, 1);
    b.range(worker, "ember", "dataloader/load", at_us(620), at_us(680), kDataloader, 0);
    b.kernel(s7, "gemm", at_us(200), at_us(450), b.call(main, "cudaLaunchKernel", at_us(160), at_us(170)));
    b.kernel(s13, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", at_us(320),
             at_us(380), b.call(main, "cudaLaunchKernel", at_us(310), at_us(315)));
    b.kernel(s13, "gemm", at_us(440), at_us(480), b.call(main, "cudaLaunchKernel", at_us(398), at_us(402)));
    b.memset(s7, at_us(460), at_us(470), b.call(main, "cudaMemsetAsync", at_us(430), at_us(435)));
    b.memcpy(s21, at_us(445), at_us(500), b.call(main, "cudaMemcpyAsync", at_us(440), at_us(450)));
    b.kernel(s7, "relu", at_us(520), at_us(560), b.call(main, "cuLaunchKernel", at_us(500), at_us(505)));
    b.kernel(s7, "gemm", at_us(700), at_us(760), b.call(main, "cudaLaunchKernel", at_us(690), at_us(698)));
    b.kernel(s7, "gemm", at_us(600), at_us(620), 0);
    b.close();
}

// A test on one hand-built trace, written by `write` into a temporary file.
class StepBreakdownOfTrace : public StepBreakdown {
  protected:
    StepBreakdownOfTrace(std::string stem, void (*write)(const std::string& path))
        : stem_(std::move(stem)), write_(write) {}
    void SetUp() override {
        path_ = temp(stem_);
        write_(path_);
    }
    // The trace's rows under `convention`, each checked to partition its window.
    std::vector<StepBreakdownRow> rows_of(StepConvention convention, StepBreakdownNotes* notes = nullptr) {
        store::TraceReader reader(path_);
        std::vector<StepBreakdownRow> rows = analysis::step_breakdown(reader, convention, notes);
        expect_partition(rows);
        return rows;
    }
    std::string stem_;
    void (*write_)(const std::string& path);
    std::string path_;
};

class StepBreakdownEmberStyle : public StepBreakdownOfTrace {
  protected:
    StepBreakdownEmberStyle() : StepBreakdownOfTrace("step-breakdown-ember", write_ember_style_trace) {}
};

// ember: a call belongs to the step whose host window holds its start (c7 at 398 is
// step 10's), driver calls launch too (c5), so
//   window 10 = [100, max(400, K1 450, N1 380, K5 480)) = [100,480)
//   window 11 = [480, max(700, MS1 470, MC1 500, K2 560, K3 760)) = [480,760)
// Window 10: Kernel = K1 ∪ K5 = [200,480) 280; before 200: dataloader [100,150) 50,
//   runtime c1 [160,170) 10, forward [150,200) less c1 = 40.
// Window 11: Kernel K2 40 + K4 20 + K3 60 = 120; MC1 [480,500) 20; runtime c5 5 + c6 8;
//   forward [505,520) 15 + [560,600) 40; other [620,690) 70 + [698,700) 2. The worker's
//   dataloader/load is not counted: its thread drives no GPU work.
TEST_F(StepBreakdownEmberStyle, EmberConventionCountsEveryInstantOnce) {
    const std::vector<StepBreakdownRow> rows = rows_of(StepConvention::ember);
    ASSERT_EQ(rows.size(), 2u);
    //                 step start end  kernel memcpy memset comm runtime loader cpu other
    expect_row(rows[0], {10, 100, 480, 280, 0, 0, 0, 10, 50, 40, 0}, "ember");
    expect_row(rows[1], {11, 480, 760, 120, 20, 0, 0, 13, 0, 55, 72}, "ember");
    EXPECT_EQ(rows[0].rank, 0);
}

// tb: only calls wholly inside a host step launch for it (c7 straddles step 10's end and
// counts for none), driver calls are neither launchers nor Runtime (c5), the NCCL kernel
// is a Kernel (no nccl:* op launched it), allreduce/wait is CPU Exec (not an nccl: op
// name), and every thread's ranges count (the worker's dataloader/load).
//   window 10 = [100, max(400, K1 450, N1 380)) = [100,450)
//   window 11 = [450, max(700, MS1 470, MC1 500, K3 760)) = [450,760)
// Window 10: Kernel [200,450) 250; runtime 10, dataloader 50, CPU Exec 40.
// Window 11: Kernel K5 [450,480) 30 + K2 40 + K4 20 + K3 60 = 150; MC1 [480,500) 20;
//   runtime c6 8; CPU Exec forward [500,520) 20 + [560,600) 40 + dataloader/load 60;
//   other [680,690) 10 + [698,700) 2.
TEST_F(StepBreakdownEmberStyle, TbConventionFollowsThePluginsRules) {
    StepBreakdownNotes notes;
    const std::vector<StepBreakdownRow> rows = rows_of(StepConvention::tb, &notes);
    ASSERT_EQ(rows.size(), 2u);
    expect_row(rows[0], {10, 100, 450, 250, 0, 0, 0, 10, 50, 40, 0}, "tb");
    expect_row(rows[1], {11, 450, 760, 150, 20, 0, 0, 8, 0, 120, 12}, "tb");
    EXPECT_EQ(notes.tail_steps_dropped, 0);
    EXPECT_FALSE(notes.whole_trace_as_one_step);
}

TEST(StepBreakdownConventions, LikeSelectsTheConvention) {
    EXPECT_EQ(analysis::step_convention_for(analysis::Convention::tb), StepConvention::tb);
    EXPECT_EQ(analysis::step_convention_for(analysis::Convention::ember), StepConvention::ember);
    EXPECT_EQ(analysis::step_convention_for(analysis::Convention::hta), StepConvention::ember);
    EXPECT_EQ(analysis::step_convention_for(analysis::Convention::tracelens), StepConvention::ember);
    EXPECT_STREQ(analysis::step_convention_name(StepConvention::tb), "tb");
    EXPECT_STREQ(analysis::step_convention_name(StepConvention::ember), "ember");
}

// ---------------------------------------------------------------------------
// [SECTION] A Kineto-style trace: the plugin's own rules
// ---------------------------------------------------------------------------
//
// As the importer writes a PyTorch trace: domains are Kineto categories, ProfilerStep#N
// is "step" with payload N, nccl:* and record_param_comms are category communication.
// Times in µs. Main thread T1, backward thread T2.
//   before profiling: U1 [50,120), U2 [130,140) kernels with no launching call
//   step 5 [100,300): aten::mm [110,116) with c1 [110,115) -> K1 [150,250);
//       python_function model.py forward [120,290); user_annotation ## forward ## [200,280)
//   step 6 [300,500): dataloader/wait [300,305); nccl:all_reduce [310,360) (depth 1) with
//       c2 [320,325) -> N1 ncclKernel_AllReduce [330,420), and inside it
//       record_param_comms [340,355) (depth 2) with c3 [345,350) -> K2 copy [350,370);
//       T2: autograd::backward [400,480) with c4 [410,415) -> K3 [430,460);
//       c5 cuLaunchKernel (driver) [470,475) -> K4 triton [480,520)
//   step 7 [500,600): c6 [510,515) -> K5 [530,540)
void write_kineto_style_trace(const std::string& path) {
    TraceBuilder b(path);
    const trace::ThreadId main = b.thread("python");
    const trace::ThreadId backward = b.thread("autograd");
    const trace::StreamId s7 = b.stream(7), s13 = b.stream(13);
    store::TraceWriter& w = b.writer();
    w.name_nvtx_category(w.intern("user_annotation"), kCommunication, "communication");
    w.name_nvtx_category(w.intern("cpu_op"), kCommunication, "communication");
    b.kernel(s7, "warmup", at_us(50), at_us(120), 0);
    b.kernel(s7, "warmup", at_us(130), at_us(140), 0);
    b.range(main, "user_annotation", "step", at_us(100), at_us(300), kStep, 0, 5);
    b.range(main, "cpu_op", "aten::mm", at_us(110), at_us(116), kCompute, 1);
    b.kernel(s7, "gemm", at_us(150), at_us(250), b.call(main, "cudaLaunchKernel", at_us(110), at_us(115)));
    b.range(main, "python_function", "model.py(10): forward", at_us(120), at_us(290), 0, 1);
    b.range(main, "user_annotation", "## forward ##", at_us(200), at_us(280), 0, 2);
    b.range(main, "user_annotation", "step", at_us(300), at_us(500), kStep, 0, 6);
    b.range(main, "cpu_op", "dataloader/wait", at_us(300), at_us(305), kDataloader, 1);
    b.range(main, "user_annotation", "nccl:all_reduce", at_us(310), at_us(360), kCommunication, 1);
    b.kernel(s13, "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", at_us(330), at_us(420),
             b.call(main, "cudaLaunchKernel", at_us(320), at_us(325)));
    b.range(main, "cpu_op", "record_param_comms", at_us(340), at_us(355), kCommunication, 2);
    b.kernel(s7, "copy", at_us(350), at_us(370), b.call(main, "cudaLaunchKernel", at_us(345), at_us(350)));
    b.range(backward, "cpu_op", "autograd::backward", at_us(400), at_us(480), kCompute, 0);
    b.kernel(s7, "gemm", at_us(430), at_us(460), b.call(backward, "cudaLaunchKernel", at_us(410), at_us(415)));
    b.kernel(s7, "triton_", at_us(480), at_us(520), b.call(main, "cuLaunchKernel", at_us(470), at_us(475)));
    b.range(main, "user_annotation", "step", at_us(500), at_us(600), kStep, 0, 7);
    b.kernel(s7, "gemm", at_us(530), at_us(540), b.call(main, "cudaLaunchKernel", at_us(510), at_us(515)));
    b.close();
}

class StepBreakdownKinetoStyle : public StepBreakdownOfTrace {
  protected:
    StepBreakdownKinetoStyle() : StepBreakdownOfTrace("step-breakdown-kineto", write_kineto_style_trace) {}
};

// tb. Launches wholly inside host steps: step 5 {c1: K1}, step 6 {c2: N1, c3: K2, c4: K3},
// step 7 {c6: K5}; c5 is a driver call. Step 5's own GPU work starts at 150; the
// unlaunched U1, U2 ended before that, so step 5 starts at U2's end, 140. Step 7
// launched 1 GPU event, fewer than 0.8 x 3: the plugin drops it as cut off.
//   window 5 = [140, 300): Kernel K1 100; CPU Exec ## forward ## [250,280) 30 (the Python
//       function is ignored); other [140,150) + [280,300) 30.
//   window 6 = [300, 500): Kernel K2 20 + K3 30 + K4 [480,500) 20 = 70; Communication
//       N1 (launched directly inside nccl:all_reduce) ∪ nccl:all_reduce = [310,420) less K2
//       = 90; dataloader 5; CPU Exec autograd::backward [420,430) + [460,480) 30; other
//       [305,310) 5. K2 was launched inside record_param_comms, so it is a Kernel.
TEST_F(StepBreakdownKinetoStyle, TbShiftsTheFirstStepDropsACutOffLastStepAndFindsCollectiveKernels) {
    StepBreakdownNotes notes;
    const std::vector<StepBreakdownRow> rows = rows_of(StepConvention::tb, &notes);
    ASSERT_EQ(rows.size(), 2u);
    expect_row(rows[0], {5, 140, 300, 100, 0, 0, 0, 0, 0, 30, 30}, "tb");
    expect_row(rows[1], {6, 300, 500, 70, 0, 0, 90, 0, 5, 30, 5}, "tb");
    EXPECT_EQ(notes.tail_steps_dropped, 1);
}

// ember. Windows: step 5 [100,300); step 6 [300, K4's 520) (the driver call launches
// too); step 7 [520,600). Python functions are CPU Exec; the NCCL kernel is
// Communication by its name; nccl:all_reduce and record_param_comms by their category.
//   window 5: Kernel U1 [100,120) + U2 + K1 = 130; CPU Exec (the Python function)
//       [120,130) + [140,150) + [250,290) = 60; other [290,300) 10.
//   window 6: Kernel K2 + K3 + K4 [480,520) = 90; Communication [310,420) less K2 = 90;
//       runtime c5 5; dataloader 5; CPU Exec [420,430) + [460,470) + [475,480) = 25; other 5.
//   window 7: Kernel K5 10; other 70.
TEST_F(StepBreakdownKinetoStyle, EmberKeepsEveryStepAndEveryCall) {
    StepBreakdownNotes notes;
    const std::vector<StepBreakdownRow> rows = rows_of(StepConvention::ember, &notes);
    ASSERT_EQ(rows.size(), 3u);
    expect_row(rows[0], {5, 100, 300, 130, 0, 0, 0, 0, 0, 60, 10}, "ember");
    expect_row(rows[1], {6, 300, 520, 90, 0, 0, 90, 5, 5, 25, 5}, "ember");
    expect_row(rows[2], {7, 520, 600, 10, 0, 0, 0, 0, 0, 0, 70}, "ember");
    EXPECT_EQ(notes.tail_steps_dropped, 0);
}

// ---------------------------------------------------------------------------
// [SECTION] Edge cases: no steps, enclosing ranges, fractional microseconds
// ---------------------------------------------------------------------------

// No step range. tb: the plugin's one step "0" over the host operators, [100,200) of
// aten::add (annotations and Python functions do not count for it), stretched to the
// kernel its call launched: [100,260). Kernel [170,260) 90; runtime [150,160) 10; CPU
// Exec [100,150) + [160,170) 60. ember: no rows.
TEST_F(StepBreakdown, WithoutStepsTbMakesOneStepAndEmberNone) {
    const std::string path = temp("step-breakdown-nosteps");
    {
        TraceBuilder b(path);
        const trace::ThreadId main = b.thread("python");
        const trace::StreamId s7 = b.stream(7);
        b.range(main, "python_function", "train.py(1): <module>", at_us(0), at_us(400));
        b.range(main, "user_annotation", "## eval ##", at_us(50), at_us(300), 0, 1);
        b.range(main, "cpu_op", "aten::add", at_us(100), at_us(200), kCompute, 2);
        b.kernel(s7, "add", at_us(170), at_us(260), b.call(main, "cudaLaunchKernel", at_us(150), at_us(160)));
        b.close();
    }
    store::TraceReader reader(path);
    StepBreakdownNotes notes;
    const std::vector<StepBreakdownRow> tb = analysis::step_breakdown(reader, StepConvention::tb, &notes);
    ASSERT_EQ(tb.size(), 1u);
    expect_row(tb[0], {0, 100, 260, 90, 0, 0, 0, 10, 0, 60, 0}, "tb");
    EXPECT_TRUE(notes.whole_trace_as_one_step);
    EXPECT_TRUE(analysis::step_breakdown(reader, StepConvention::ember).empty());
}

// An "epoch" range holding both steps, and a monitor thread whose range spans the run.
// ember leaves out ranges that hold a whole step (context, not work) and threads that
// drive no GPU work; tb counts both as CPU Exec. No GPU work: windows are the host steps.
//   ember: step 0 [100,200): forward [120,150) 30, other 70; step 1 [200,300): other 100.
//   tb:    every instant is CPU Exec.
TEST_F(StepBreakdown, RangesHoldingAWholeStepAreContextForEmber) {
    const std::string path = temp("step-breakdown-epoch");
    {
        TraceBuilder b(path);
        const trace::ThreadId main = b.thread("main");
        const trace::ThreadId monitor = b.thread("monitor");
        b.range(main, "ember", "epoch", at_us(0), at_us(1000));
        b.range(main, "ember", "step", at_us(100), at_us(200), kStep, 1, 0);
        b.range(main, "ember", "forward", at_us(120), at_us(150), kCompute, 2);
        b.range(main, "ember", "step", at_us(200), at_us(300), kStep, 1, 1);
        b.range(monitor, "ember", "watch", at_us(150), at_us(250));
        b.close();
    }
    store::TraceReader reader(path);
    const std::vector<StepBreakdownRow> ember = analysis::step_breakdown(reader, StepConvention::ember);
    ASSERT_EQ(ember.size(), 2u);
    expect_row(ember[0], {0, 100, 200, 0, 0, 0, 0, 0, 0, 30, 70}, "ember");
    expect_row(ember[1], {1, 200, 300, 0, 0, 0, 0, 0, 0, 0, 100}, "ember");
    const std::vector<StepBreakdownRow> tb = analysis::step_breakdown(reader, StepConvention::tb);
    ASSERT_EQ(tb.size(), 2u);
    expect_row(tb[0], {0, 100, 200, 0, 0, 0, 0, 0, 0, 100, 0}, "tb");
    expect_row(tb[1], {1, 200, 300, 0, 0, 0, 0, 0, 0, 100, 0}, "tb");
}

// A trace imported from Kineto JSON with fractional microseconds near 1.7e15 µs, where
// a double steps by 0.25 µs. The plugin's floats (Python, checked by hand):
//   step   ts T+0.1  -> T+0.0,   end ts + 100.2 -> T+100.25
//   call   ts T+10.3 -> T+10.25, end + 5.1      -> T+15.25   (5.0 µs)
//   kernel ts T+20.6 -> T+20.5,  end + 30.35    -> T+50.75   (30.25 µs)
// so tb gives the window [T, T+100.25) with Kernel 30.25, Runtime 5.0, Other 65.0, and
// ember the exact [T+0.1, T+100.3) with 30.35, 5.1 and 64.75.
TEST_F(StepBreakdown, TbRoundsKinetoTimesAsThePluginsFloatsDo) {
    const std::string path = temp("step-breakdown-float");
    constexpr TimeNs kT = 1'712'195'495'519'000'000;  // ns
    {
        trace::RunInfo run = TraceBuilder::default_run();
        run.start_ns = kT;
        TraceBuilder b(path, run);
        b.writer().set_metadata("import_source_format", "kineto");
        const trace::ThreadId main = b.thread("python");
        const trace::StreamId s7 = b.stream(7);
        b.range(main, "user_annotation", "step", kT + 100, kT + 100'300, kStep, 0, 1);
        b.kernel(s7, "gemm", kT + 20'600, kT + 50'950, b.call(main, "cudaLaunchKernel", kT + 10'300, kT + 15'400));
        b.close();
    }
    store::TraceReader reader(path);
    const std::vector<StepBreakdownRow> tb = analysis::step_breakdown(reader, StepConvention::tb);
    ASSERT_EQ(tb.size(), 1u);
    EXPECT_EQ(tb[0].start_ns, kT);
    EXPECT_EQ(tb[0].end_ns, kT + 100'250);
    EXPECT_EQ(tb[0].kernel_ns, 30'250);
    EXPECT_EQ(tb[0].runtime_ns, 5'000);
    EXPECT_EQ(tb[0].other_ns, 65'000);
    const std::vector<StepBreakdownRow> ember = analysis::step_breakdown(reader, StepConvention::ember);
    ASSERT_EQ(ember.size(), 1u);
    EXPECT_EQ(ember[0].start_ns, kT + 100);
    EXPECT_EQ(ember[0].end_ns, kT + 100'300);
    EXPECT_EQ(ember[0].kernel_ns, 30'350);
    EXPECT_EQ(ember[0].runtime_ns, 5'100);
    EXPECT_EQ(ember[0].other_ns, 64'750);
}

// ---------------------------------------------------------------------------
// [SECTION] Random traces against an instant-by-instant oracle
// ---------------------------------------------------------------------------

// A random single-rank trace in small integer nanoseconds, and, independently of the
// implementation, what each convention says about it: windows by the rules of
// docs/stats.md, then every nanosecond of every window classified on its own.
struct RandomTrace {
    struct Interval {
        TimeNs start, end;
    };
    struct Call {
        TimeNs start, end;
        bool driver;
    };
    struct Gpu {
        TimeNs start, end;
        int kind;  // 0 kernel, 1 nccl kernel, 2 memcpy, 3 memset
        int call;  // index into calls, -1: none
    };
    std::vector<Interval> steps;                   // main thread, contiguous
    std::vector<Interval> waits, forwards, comms;  // main thread
    std::vector<Interval> worker_ranges;           // a thread with no CUDA calls
    std::vector<Call> calls;                       // main thread
    std::vector<Gpu> gpu;
};

RandomTrace make_random_trace(std::uint32_t seed) {
    std::mt19937 random(seed);
    auto uniform = [&](TimeNs low, TimeNs high) { return std::uniform_int_distribution<TimeNs>(low, high)(random); };
    RandomTrace t;
    TimeNs time = 1000;
    for (int s = 0; s < 6; ++s) {
        const TimeNs length = uniform(200, 600);
        t.steps.push_back({time, time + length});
        time += length + (uniform(0, 2) == 0 ? uniform(1, 50) : 0);  // sometimes a gap
    }
    const TimeNs end = time;
    for (int i = 0; i < 25; ++i) {
        const TimeNs start = uniform(900, end), length = uniform(1, 120);
        switch (uniform(0, 3)) {
            case 0:
                t.waits.push_back({start, start + length});
                break;
            case 1:
                t.comms.push_back({start, start + length});
                break;
            case 2:
                t.worker_ranges.push_back({start, start + length});
                break;
            default:
                t.forwards.push_back({start, start + length});
                break;
        }
    }
    for (int i = 0; i < 40; ++i) {
        const TimeNs start = uniform(900, end);
        t.calls.push_back({start, start + uniform(0, 15), uniform(0, 9) == 0});
        const int launched = static_cast<int>(uniform(0, 2));  // 0, 1 or 2 GPU events
        for (int k = 0; k < launched; ++k) {
            const TimeNs gpu_start = start + uniform(0, 400);
            t.gpu.push_back({gpu_start, gpu_start + uniform(1, 150), static_cast<int>(uniform(0, 3)), i});
        }
    }
    for (int i = 0; i < 5; ++i) {
        const TimeNs start = uniform(800, end);
        t.gpu.push_back({start, start + uniform(1, 100), 0, -1});
    }
    return t;
}

std::string write_random_trace(const RandomTrace& t, const std::string& path) {
    TraceBuilder b(path);
    const trace::ThreadId main = b.thread("main");
    const trace::ThreadId worker = b.thread("worker");
    const trace::StreamId streams[] = {b.stream(7), b.stream(13), b.stream(21), b.stream(22)};
    for (std::size_t s = 0; s < t.steps.size(); ++s)
        b.range(main, "ember", "step", t.steps[s].start, t.steps[s].end, kStep, 0, static_cast<std::int64_t>(s));
    for (const auto& r : t.waits) b.range(main, "ember", "dataloader/wait", r.start, r.end, kDataloader, 1);
    for (const auto& r : t.forwards) b.range(main, "ember", "forward", r.start, r.end, kCompute, 1);
    for (const auto& r : t.comms) b.range(main, "ember", "allreduce/wait", r.start, r.end, kCommunication, 1);
    for (const auto& r : t.worker_ranges) b.range(worker, "ember", "dataloader/load", r.start, r.end, kDataloader, 0);
    std::vector<trace::CorrelationId> correlation;
    for (const auto& c : t.calls)
        correlation.push_back(b.call(main, c.driver ? "cuLaunchKernel" : "cudaLaunchKernel", c.start, c.end));
    for (const auto& g : t.gpu) {
        const trace::CorrelationId id = g.call < 0 ? 0 : correlation[static_cast<std::size_t>(g.call)];
        const trace::StreamId stream = streams[g.kind];
        if (g.kind == 0) b.kernel(stream, "gemm", g.start, g.end, id);
        if (g.kind == 1) b.kernel(stream, "ncclKernel_AllReduce", g.start, g.end, id);
        if (g.kind == 2) b.memcpy(stream, g.start, g.end, id);
        if (g.kind == 3) b.memset(stream, g.start, g.end, id);
    }
    b.close();
    return path;
}

// The oracle: {window start, end, eight category totals} per step, by the documented rules.
std::vector<std::array<TimeNs, 10>> oracle(const RandomTrace& t, StepConvention convention) {
    const bool tb = convention == StepConvention::tb;
    const std::size_t n = t.steps.size();
    std::vector<TimeNs> last_end(n, INT64_MIN), first_start(n, INT64_MAX);
    std::vector<int> launched(n, 0);
    std::vector<bool> matched(t.gpu.size(), false);
    // Which step launched each call. ember: the step holding the call's start. tb: the
    // plugin's walk over calls sorted by start and steps in order, literally.
    std::vector<int> step_of_call(t.calls.size(), -1);
    if (tb) {
        std::vector<std::size_t> order(t.calls.size());
        for (std::size_t c = 0; c < order.size(); ++c) order[c] = c;
        std::stable_sort(order.begin(), order.end(),
                         [&](std::size_t a, std::size_t b) { return t.calls[a].start < t.calls[b].start; });
        std::size_t s = 0, c = 0;
        while (s < n && c < order.size()) {
            const RandomTrace::Call& call = t.calls[order[c]];
            if (call.start < t.steps[s].start)
                ++c;
            else if (call.end <= t.steps[s].end)
                step_of_call[order[c++]] = static_cast<int>(s);
            else if (call.start < t.steps[s].end)
                ++c;
            else
                ++s;
        }
    } else {
        for (std::size_t c = 0; c < t.calls.size(); ++c)
            for (std::size_t s = 0; s < n; ++s)
                if (t.steps[s].start <= t.calls[c].start && t.calls[c].start < t.steps[s].end)
                    step_of_call[c] = static_cast<int>(s);
    }
    for (std::size_t g = 0; g < t.gpu.size(); ++g) {
        const RandomTrace::Gpu& work = t.gpu[g];
        if (work.call < 0) continue;
        if (tb && t.calls[static_cast<std::size_t>(work.call)].driver) continue;
        const int s = step_of_call[static_cast<std::size_t>(work.call)];
        if (s < 0) continue;
        last_end[static_cast<std::size_t>(s)] = std::max(last_end[static_cast<std::size_t>(s)], work.end);
        first_start[static_cast<std::size_t>(s)] = std::min(first_start[static_cast<std::size_t>(s)], work.start);
        ++launched[static_cast<std::size_t>(s)];
        matched[g] = true;
    }
    const bool any_launch = std::any_of(launched.begin(), launched.end(), [](int k) { return k > 0; });
    std::vector<std::pair<TimeNs, TimeNs>> windows;
    if (tb && !any_launch) {
        for (const auto& s : t.steps) windows.emplace_back(s.start, s.end);
    } else {
        TimeNs previous = t.steps[0].start;
        if (tb && launched[0] > 0)
            for (std::size_t g = 0; g < t.gpu.size(); ++g)
                if (!matched[g] && t.gpu[g].end < first_start[0]) previous = std::max(previous, t.gpu[g].end);
        for (std::size_t s = 0; s < n; ++s) {
            const TimeNs start = std::max(previous, t.steps[s].start);
            TimeNs end = std::max(t.steps[s].end, start);
            if (launched[s] > 0) end = std::max(end, last_end[s]);
            windows.emplace_back(start, end);
            previous = end;
        }
        if (tb) {
            int last = static_cast<int>(n) - 1;
            while (last >= 0 && launched[static_cast<std::size_t>(last)] == 0) --last;
            std::size_t keep = n;
            if (last >= 0) {
                keep = static_cast<std::size_t>(last) + 1;
                if (last > 0 &&
                    launched[static_cast<std::size_t>(last) - 1] * 0.8 > launched[static_cast<std::size_t>(last)])
                    keep = static_cast<std::size_t>(last);
            }
            windows.resize(keep);
        }
    }
    auto inside = [](const std::vector<RandomTrace::Interval>& list, TimeNs at) {
        return std::any_of(list.begin(), list.end(), [&](const auto& r) { return r.start <= at && at < r.end; });
    };
    auto gpu_active = [&](int kind, TimeNs at) {
        return std::any_of(t.gpu.begin(), t.gpu.end(), [&](const auto& g) {
            const int category = tb && kind == 0 && g.kind == 1 ? 0 : g.kind;  // tb: an NCCL kernel is a Kernel
            return category == kind && g.start <= at && at < g.end;
        });
    };
    std::vector<std::array<TimeNs, 10>> rows;
    for (const auto& [start, end] : windows) {
        std::array<TimeNs, 10> row{};
        row[0] = start;
        row[1] = end;
        for (TimeNs at = start; at < end; ++at) {
            int category = 7;
            if (gpu_active(0, at))
                category = 0;
            else if (gpu_active(2, at))
                category = 1;
            else if (gpu_active(3, at))
                category = 2;
            else if (!tb && (gpu_active(1, at) || inside(t.comms, at)))
                category = 3;
            else if (std::any_of(t.calls.begin(), t.calls.end(),
                                 [&](const auto& c) { return (!tb || !c.driver) && c.start <= at && at < c.end; }))
                category = 4;
            else if (inside(t.waits, at))
                category = 5;
            else if (inside(t.forwards, at) || (tb && (inside(t.comms, at) || inside(t.worker_ranges, at))))
                category = 6;
            ++row[2 + static_cast<std::size_t>(category)];
        }
        rows.push_back(row);
    }
    return rows;
}

TEST_F(StepBreakdown, RandomTracesMatchAnInstantByInstantOracle) {
    for (std::uint32_t seed = 1; seed <= 40; ++seed) {
        SCOPED_TRACE("seed " + std::to_string(seed));
        const RandomTrace t = make_random_trace(seed);
        store::TraceReader reader(write_random_trace(t, temp("step-breakdown-random")));
        for (StepConvention convention : {StepConvention::ember, StepConvention::tb}) {
            SCOPED_TRACE(analysis::step_convention_name(convention));
            const std::vector<StepBreakdownRow> rows = analysis::step_breakdown(reader, convention);
            const std::vector<std::array<TimeNs, 10>> want = oracle(t, convention);
            ASSERT_EQ(rows.size(), want.size());
            for (std::size_t i = 0; i < rows.size(); ++i) {
                const StepBreakdownRow& r = rows[i];
                const std::array<TimeNs, 10> got = {r.start_ns,    r.end_ns,           r.kernel_ns,  r.memcpy_ns,
                                                    r.memset_ns,   r.communication_ns, r.runtime_ns, r.dataloader_ns,
                                                    r.cpu_exec_ns, r.other_ns};
                EXPECT_EQ(got, want[i]) << "row " << i;
                EXPECT_EQ(r.step, static_cast<std::int64_t>(i));
            }
        }
    }
}

// ---------------------------------------------------------------------------
// [SECTION] Synthetic and merged job traces
// ---------------------------------------------------------------------------

TEST_F(StepBreakdown, SyntheticTraceHasOneRowPerStep) {
    const std::string path = temp("step-breakdown-synth");
    synth::SyntheticTraceOptions options;
    options.events = 20'000;
    const std::vector<synth::SyntheticRankSummary> written = synth::write_synthetic_traces(path, options);
    store::TraceReader reader(path);
    for (StepConvention convention : {StepConvention::ember, StepConvention::tb}) {
        SCOPED_TRACE(analysis::step_convention_name(convention));
        StepBreakdownNotes notes;
        const std::vector<StepBreakdownRow> rows = analysis::step_breakdown(reader, convention, &notes);
        ASSERT_EQ(static_cast<std::int64_t>(rows.size()) + notes.tail_steps_dropped, written[0].steps);
        expect_partition(rows);
        TimeNs kernel = 0, dataloader = 0;
        for (std::size_t i = 0; i < rows.size(); ++i) {
            EXPECT_EQ(rows[i].step, static_cast<std::int64_t>(i));  // the step range's payload
            kernel += rows[i].kernel_ns;
            dataloader += rows[i].dataloader_ns;
        }
        EXPECT_GT(kernel, 0);
        EXPECT_GT(dataloader, 0);
    }
}

// `ember merge` of two synthetic ranks: each rank's steps, windows and events apart.
TEST_F(StepBreakdown, JobTraceHasRowsPerRank) {
    const std::string ranks_path = temp("step-breakdown-ranks");
    synth::SyntheticTraceOptions options;
    options.events = 10'000;
    options.ranks = 2;
    const std::vector<synth::SyntheticRankSummary> written = synth::write_synthetic_traces(ranks_path, options);
    const std::vector<std::string> inputs = synth::synthetic_rank_paths(ranks_path, 2);
    for (const std::string& input : inputs) paths_.push_back(input);
    const std::string job = temp("step-breakdown-job");
    merge::merge_traces(inputs, job);

    store::TraceReader job_reader(job);
    const std::vector<StepBreakdownRow> rows = analysis::step_breakdown(job_reader, StepConvention::ember);
    expect_partition(rows);
    std::map<std::int32_t, std::vector<StepBreakdownRow>> by_rank;
    for (const StepBreakdownRow& row : rows) by_rank[row.rank].push_back(row);
    ASSERT_EQ(by_rank.size(), 2u);
    for (int rank = 0; rank < 2; ++rank) {
        SCOPED_TRACE("rank " + std::to_string(rank));
        EXPECT_EQ(static_cast<std::int64_t>(by_rank[rank].size()), written[static_cast<std::size_t>(rank)].steps);
        // The rank alone, from its own file: the same categories (merge shifts times only).
        store::TraceReader own(inputs[static_cast<std::size_t>(rank)]);
        const std::vector<StepBreakdownRow> alone = analysis::step_breakdown(own, StepConvention::ember);
        ASSERT_EQ(alone.size(), by_rank[rank].size());
        for (std::size_t i = 0; i < alone.size(); ++i) {
            const StepBreakdownRow& a = alone[i];
            const StepBreakdownRow& j = by_rank[rank][i];
            EXPECT_EQ(a.step, j.step);
            EXPECT_EQ(a.end_ns - a.start_ns, j.end_ns - j.start_ns) << "step " << i;
            EXPECT_EQ(a.kernel_ns, j.kernel_ns) << "step " << i;
            EXPECT_EQ(a.communication_ns, j.communication_ns) << "step " << i;
            EXPECT_EQ(a.runtime_ns, j.runtime_ns) << "step " << i;
            EXPECT_EQ(a.dataloader_ns, j.dataloader_ns) << "step " << i;
            EXPECT_EQ(a.cpu_exec_ns, j.cpu_exec_ns) << "step " << i;
        }
    }
}

// ---------------------------------------------------------------------------
// [SECTION] The real trace against the plugin
// ---------------------------------------------------------------------------

// ResNet-50 on a V100 (Kineto 2021, whole microseconds), with the plugin's per-step
// overview as torch-tb-profiler computed it: equal within 1 µs per step and category.
TEST_F(StepBreakdown, TbEqualsThePluginOnTheRealResNet50Trace) {
    const std::filesystem::path root = EMBER_REAL_TRACES_DIR;
    const std::filesystem::path trace_file = root / "kineto" / "v100_resnet50_workers0.json.gz";
    const std::filesystem::path expected_file = root / "expected" / "v100_resnet50_workers0.tb_profiler.json";
    if (!std::filesystem::exists(trace_file) || !std::filesystem::exists(expected_file))
        GTEST_SKIP() << root << " is absent (a fresh clone has no ../shared): nothing to compare with";
    const std::string imported = temp("step-breakdown-resnet50");
    importing::import_file(trace_file.string(), imported);
    nlohmann::json expected;
    std::ifstream(expected_file) >> expected;
    const nlohmann::json& columns = expected.at("steps_columns");
    const nlohmann::json& want = expected.at("steps_rows_us");

    store::TraceReader reader(imported);
    StepBreakdownNotes notes;
    const std::vector<StepBreakdownRow> rows = analysis::step_breakdown(reader, StepConvention::tb, &notes);
    ASSERT_EQ(rows.size(), want.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const StepBreakdownRow& row = rows[i];
        const std::map<std::string, TimeNs> got = {
            {"Kernel", row.kernel_ns},     {"Memcpy", row.memcpy_ns},
            {"Memset", row.memset_ns},     {"Communication", row.communication_ns},
            {"Runtime", row.runtime_ns},   {"DataLoader", row.dataloader_ns},
            {"CPU Exec", row.cpu_exec_ns}, {"Other", row.other_ns}};
        EXPECT_EQ(std::to_string(row.step), want[i][0].get<std::string>());
        for (std::size_t c = 1; c < columns.size(); ++c) {
            const std::string name = columns[c].get<std::string>();
            const double plugin_us = want[i][c].get<double>();
            EXPECT_NEAR(static_cast<double>(got.at(name)) / 1000.0, plugin_us, 1.0)
                << "step " << row.step << " " << name;
        }
        // The plugin shows no Communication column for a trace without communication.
        EXPECT_EQ(row.communication_ns, 0);
    }
    EXPECT_EQ(notes.tail_steps_dropped, 0);
    expect_partition(rows);
}

}  // namespace
