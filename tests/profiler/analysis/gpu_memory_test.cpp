// The gpu_memory report (gpu_memory.h) on a hand-built trace whose answers are known:
// two steps, memory allocated before the trace began, a block freed in one step and
// its bytes released only at free_completed, segments, an OOM, and the allocator state.
#include "profiler/analysis/gpu_memory.h"
#include "profiler/analysis/stats_report.h"
#include "profiler/store/reader.h"
#include "tests/support/trace_builder.h"
#include "tests/support/temp_path.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

namespace {

using namespace ember;
using trace::MemoryAction;
using trace::TimeNs;

constexpr TimeNs kOrigin = 1'000'000'000;
constexpr TimeNs us(TimeNs micros) { return kOrigin + micros * 1000; }
constexpr std::int64_t MiB = 1 << 20;

class GpuMemoryTest : public ::testing::Test {
protected:
    void SetUp() override {
        path_ = test_support::unique_temp_path("gpu_memory", ".db").string();
        ember::testing::TraceBuilder b(path_, ember::testing::TraceBuilder::run_info(kOrigin));
        store::TraceWriter& w = b.writer();
        const trace::ThreadId main = b.thread("main");
        b.range(main, "", "ProfilerStep#1", us(10), us(100));
        b.range(main, "", "ProfilerStep#2", us(100), us(200));
        b.range(main, "", "forward", us(110), us(150), 0, 1);
        const trace::FrameId module = w.intern_frame("<module>", "/home/user/train.py", 0, 3);
        const trace::FrameId forward = w.intern_frame("forward", "/home/user/model.py", 0, 21);
        const trace::FrameId linear = w.intern_frame("forward", "/usr/lib/python3/dist-packages/torch/nn/linear.py", 0, 114);
        const trace::FrameId malloc = w.intern_frame("c10::cuda::CUDACachingAllocator::Native::malloc()", "", 0);
        const trace::FrameId model_frames[] = {module, forward, linear, malloc};
        model_stack_ = w.intern_stack(model_frames);
        auto event = [&](TimeNs time, MemoryAction action, std::uint64_t address, std::int64_t bytes,
                         trace::StackId stack = 0, std::int64_t device_free = -1) {
            trace::MemoryEvent e;
            e.time_ns = time;
            e.action = action;
            e.address = address;
            e.bytes = bytes;
            e.stack_id = stack;
            e.device_free_bytes = device_free;
            ASSERT_TRUE(w.record_memory_event(e));
        };
        event(us(1), MemoryAction::segment_live_at_start, 0x1000000, 64 * MiB);
        event(us(1), MemoryAction::live_at_start, 0x1000000, 8 * MiB);
        event(us(20), MemoryAction::alloc, 0x2000000, 4 * MiB, model_stack_);           // step 1
        event(us(30), MemoryAction::free_requested, 0x2000000, 4 * MiB, model_stack_);  // still counted
        event(us(40), MemoryAction::segment_alloc, 0x8000000, 32 * MiB);
        event(us(120), MemoryAction::alloc, 0x8000000, 16 * MiB, model_stack_);  // step 2: the peak, 28 MiB
        event(us(130), MemoryAction::free_completed, 0x2000000, 4 * MiB, model_stack_);
        event(us(140), MemoryAction::oom, 0, 512 * MiB, model_stack_, 3 * MiB);
        event(us(160), MemoryAction::free_completed, 0x8000000, 16 * MiB, model_stack_);
        event(us(170), MemoryAction::segment_free, 0x8000000, 32 * MiB);
        trace::MemoryBlock free_block;
        free_block.time_ns = us(170);
        free_block.state = trace::MemoryBlockState::inactive;
        free_block.segment_address = 0x1000000;
        free_block.segment_bytes = 64 * MiB;
        free_block.address = 0x1800000;
        free_block.bytes = 56 * MiB;
        ASSERT_TRUE(w.record_memory_block(free_block));
        b.close();
    }
    void TearDown() override { std::filesystem::remove(path_); }

    std::string path_;
    trace::StackId model_stack_ = 0;
};

TEST_F(GpuMemoryTest, PeaksWhenAndWhere) {
    store::TraceReader reader(path_);
    const analysis::GpuMemoryReport report = analysis::gpu_memory(reader);
    ASSERT_EQ(report.devices.size(), 1u);
    const analysis::GpuMemoryDevice& d = report.devices[0];
    EXPECT_EQ(d.peak_allocated_bytes, 28 * MiB);  // 8 before the trace + 4 (freed only at 130 us) + 16
    EXPECT_EQ(d.peak_allocated_ns, us(120));
    EXPECT_EQ(d.peak_step, "step 2");
    EXPECT_EQ(d.peak_range, "forward");
    EXPECT_EQ(d.peak_reserved_bytes, 96 * MiB);
    EXPECT_EQ(d.peak_reserved_ns, us(40));
    EXPECT_EQ(d.reserved_at_peak_bytes, 96 * MiB);
    EXPECT_EQ(d.allocated_before_trace_bytes, 8 * MiB);
    EXPECT_EQ(d.largest_free_block_bytes, 56 * MiB);
    EXPECT_EQ(d.live_blocks_at_peak, 3);
    // By line: the program's own frame (model.py), not the installed package's.
    ASSERT_EQ(d.at_peak_by_line.size(), 2u);
    EXPECT_EQ(d.at_peak_by_line[0].place, "forward (/home/user/model.py:21)");
    EXPECT_EQ(d.at_peak_by_line[0].bytes, 20 * MiB);
    EXPECT_EQ(d.at_peak_by_line[0].blocks, 2);
    EXPECT_EQ(d.at_peak_by_line[1].place, "(allocated before the trace began)");
    EXPECT_EQ(d.at_peak_by_stack[0].place,
              "<module> (/home/user/train.py:3);forward (/home/user/model.py:21);"
              "forward (/usr/lib/python3/dist-packages/torch/nn/linear.py:114)");
    // Churn per step.
    ASSERT_EQ(d.churn.size(), 2u);
    EXPECT_EQ(d.churn[0].step, "step 1");
    EXPECT_EQ(d.churn[0].allocs, 1);
    EXPECT_EQ(d.churn[0].frees, 0);
    EXPECT_EQ(d.churn[1].step, "step 2");
    EXPECT_EQ(d.churn[1].allocs, 1);
    EXPECT_EQ(d.churn[1].frees, 2);
    EXPECT_EQ(d.churn[1].freed_bytes, 20 * MiB);
    // The OOM: 24 MiB live (8 + 16), none releasable.
    ASSERT_EQ(d.ooms.size(), 1u);
    EXPECT_EQ(d.ooms[0].request_bytes, 512 * MiB);
    EXPECT_EQ(d.ooms[0].device_free_bytes, 3 * MiB);
    EXPECT_EQ(d.ooms[0].allocated_bytes, 24 * MiB);
    EXPECT_EQ(d.ooms[0].live_blocks, 2);
}

TEST_F(GpuMemoryTest, JsonRowsCarryTheDeviceAndItsPeaks) {
    store::TraceReader reader(path_);
    analysis::StatsOptions options;
    options.reports = {"gpu_memory"};
    options.format = analysis::OutputFormat::json;
    std::ostringstream out;
    analysis::write_stats(out, reader, options);
    const nlohmann::json document = nlohmann::json::parse(out.str());
    const nlohmann::json& row = document["reports"]["gpu_memory"][0];
    EXPECT_EQ(row["device"], 0);
    EXPECT_EQ(row["peak_allocated_bytes"], 28 * MiB);
    EXPECT_EQ(row["peak_reserved_bytes"], 96 * MiB);
    EXPECT_EQ(row["peak_allocated_at_ns"], 120'000);
    EXPECT_EQ(document["reports"]["gpu_memory_oom"][0]["request_bytes"], 512 * MiB);
}

TEST(GpuMemory, ATraceWithoutMemoryEventsSaysSo) {
    const std::string path = test_support::unique_temp_path("gpu_memory_none", ".db").string();
    {
        ember::testing::TraceBuilder b(path, ember::testing::TraceBuilder::run_info(kOrigin));
        b.range(b.thread("main"), "", "step", us(0), us(10));
        b.close();
    }
    store::TraceReader reader(path);
    EXPECT_TRUE(analysis::gpu_memory(reader).devices.empty());
    analysis::StatsOptions options;
    options.reports = {"gpu_memory"};
    std::ostringstream out;
    analysis::write_stats(out, reader, options);
    EXPECT_NE(out.str().find("no GPU memory events"), std::string::npos) << out.str();
    std::filesystem::remove(path);
}

}  // namespace
