// merge_test.cpp: merge::merge_traces on two hand-built rank traces whose every number
// is known: all events arrive, on rank 0's time base, with per-rank devices and
// correlation ids that still link each API call to its own GPU work; and the per-rank
// summary (`ember stats --report ranks`) names the rank the other one waited for.
#include "profiler/analysis/gpu_activity.h"
#include "profiler/analysis/rank_summary.h"
#include "profiler/analysis/stats_report.h"
#include "profiler/merge/merge.h"
#include "profiler/store/reader.h"
#include "profiler/store/writer.h"
#include "tests/support/fixture_trace.h"
#include "tests/support/trace_ranges.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

namespace {

using namespace ember;
using trace::TimeNs;

constexpr std::uint32_t kComputeCategory = 2;  // engine/core/nvtx.h: Category::compute

struct RankPlan {
    int rank = 0;
    std::int64_t pid = 0;
    TimeNs anchor_ns = 0;   // when this rank's clock/anchor mark says the barrier was left
    TimeNs compute_ns = 0;  // forward length in each of the two steps
    TimeNs wait_ns = 0;     // allreduce/wait length in each step
};

// Two steps: step [t, t+compute+wait+10) holding forward (compute, with a layer range
// inside it that must not count twice) and allreduce/wait; one API call + kernel +
// memcpy per step on device 0, correlation ids 1 and 2 (equal on both ranks); one
// stack sample.
void write_rank_trace(const std::string& path, const RankPlan& plan) {
    trace::RunInfo run;
    run.command_line = "rank trace";
    run.pid = plan.pid;
    run.rank = plan.rank;
    run.world_size = 2;
    run.start_ns = plan.anchor_ns - 100;
    store::TraceWriter writer(path, run);
    writer.register_process({plan.pid, "ember"});
    const trace::ThreadId main_thread = writer.register_thread({0, plan.pid, plan.pid, "main"});
    writer.register_device({0, "Test GPU", "GPU-test", 9, 0, 132, 80ll << 30, 3.35e12});
    const trace::StreamId stream = writer.register_stream({0, 0, 1, 7, 0, "default"});
    const trace::StringId ember_domain = writer.intern("ember");
    writer.name_nvtx_category(ember_domain, kComputeCategory, "compute");

    trace::MarkEvent anchor;
    anchor.time_ns = plan.anchor_ns;
    anchor.thread_id = main_thread;
    anchor.domain_id = ember_domain;
    anchor.name_id = writer.intern("clock/anchor");
    anchor.payload = trace::Payload::of_integer(0);
    writer.record_mark(anchor);

    TimeNs t = plan.anchor_ns + 1000;
    for (int step = 0; step < 2; ++step) {
        const TimeNs step_end = t + plan.compute_ns + plan.wait_ns + 10;
        const trace::RangeEvent step_range =
            test_support::record_range(writer, main_thread, "step", t, step_end, ember_domain, 1);
        const trace::RangeEvent forward = test_support::record_child_range(writer, step_range, "forward", t + 5,
                                                                           t + 5 + plan.compute_ns, kComputeCategory);
        test_support::record_child_range(writer, forward, "conv1", forward.start_ns + 1, forward.end_ns - 1,
                                         kComputeCategory);
        test_support::record_child_range(writer, step_range, "allreduce/wait", forward.end_ns,
                                         forward.end_ns + plan.wait_ns, 4);

        const trace::CorrelationId correlation = static_cast<trace::CorrelationId>(step + 1);
        writer.record_api_call({t + 6, t + 8, main_thread, correlation, writer.intern("cudaLaunchKernel"), 0});
        trace::KernelEvent kernel;
        kernel.start_ns = t + 7;
        kernel.end_ns = t + 20;
        kernel.stream_id = stream;
        kernel.correlation_id = correlation;
        kernel.name_id = writer.intern("gemm");
        kernel.launch.grid_x = 64;
        writer.record_kernel(kernel);
        trace::MemcpyEvent copy;
        copy.start_ns = t + 21;
        copy.end_ns = t + 30;
        copy.stream_id = stream;
        copy.direction = trace::MemcpyDirection::host_to_device;
        copy.bytes = 4096;
        copy.source_kind = trace::MemoryKind::pinned;
        copy.destination_kind = trace::MemoryKind::device;
        writer.record_memcpy(copy);
        t = step_end + 100;
    }
    const trace::FrameId outer = writer.intern_frame("main", "/bin/test", 0x1000);
    const trace::FrameId inner = writer.intern_frame("train_step", "/bin/test", 0x2000);
    const trace::FrameId frames[] = {outer, inner};
    writer.record_stack_sample({plan.anchor_ns + 50, main_thread, writer.intern_stack(frames)});
    writer.close();
}

// The merge as `ember merge` runs it; ranks in merged order.
merge::MergeResult run_merge(const std::vector<std::string>& inputs, const std::string& output) {
    return merge::merge_traces(inputs, output);
}

class Merge : public ::testing::Test {
  protected:
    void SetUp() override {
        rank0_ = ember::testing::temporary_path("merge-rank0", ".db");
        rank1_ = ember::testing::temporary_path("merge-rank1", ".db");
        job_ = ember::testing::temporary_path("merge-job", ".db");
        // Rank 1's clock reads 5,000,000 ns later than rank 0's for the same instant.
        // Rank 1 computes 3x longer; rank 0 waits for it.
        write_rank_trace(rank0_, {0, 4242, 10'000'000, 1'000, 2'000});
        write_rank_trace(rank1_, {1, 4242, 15'000'000, 3'000, 50});
    }
    void TearDown() override {
        for (const std::string& path : {rank0_, rank1_, job_}) std::filesystem::remove(path);
    }
    std::string rank0_, rank1_, job_;
};

TEST_F(Merge, CopiesEveryEventOnRankZerosTimeBase) {
    // Files given in the wrong order: ranks come from the files, not the argument order.
    const merge::MergeResult result = run_merge({rank1_, rank0_}, job_);
    ASSERT_EQ(result.ranks.size(), 2u);
    EXPECT_EQ(result.ranks[0].rank, 0);
    EXPECT_EQ(result.ranks[0].path, rank0_);
    EXPECT_EQ(result.ranks[0].how, "reference");
    EXPECT_EQ(result.ranks[1].shift_ns, -5'000'000);
    EXPECT_EQ(result.ranks[1].how, "clock anchor 0");

    store::TraceReader job(job_);
    EXPECT_EQ(job.run().world_size, 2);
    EXPECT_EQ(job.event_count("kernels"), 4);
    EXPECT_EQ(job.event_count("memcpys"), 4);
    EXPECT_EQ(job.event_count("api_calls"), 4);
    EXPECT_EQ(job.event_count("ranges"), 16);
    EXPECT_EQ(job.event_count("marks"), 2);
    EXPECT_EQ(job.event_count("stack_samples"), 2);
    EXPECT_EQ(job.total_dropped(), 0u);
    EXPECT_EQ(job.nvtx_category_name(*job.find_string("ember"), kComputeCategory), "compute");

    // Same pid on both "hosts": still two processes, named by rank.
    ASSERT_EQ(job.processes().size(), 2u);
    // Each rank's GPU 0 is its own device.
    ASSERT_EQ(job.devices().size(), 2u);
    EXPECT_EQ(job.devices()[0].name, "rank 0: Test GPU");
    EXPECT_EQ(job.devices()[1].name, "rank 1: Test GPU");
    EXPECT_NE(job.devices()[0].device_id, job.devices()[1].device_id);
    ASSERT_EQ(job.streams().size(), 2u);

    // Both anchors now at rank 0's time.
    job.for_each_mark({}, [&](const trace::MarkEvent& mark) {
        EXPECT_EQ(mark.time_ns, 10'000'000);
        return true;
    });
    // Every kernel links to the API call of its own rank, which encloses it in time.
    int kernels = 0;
    job.for_each_kernel({}, [&](const trace::KernelEvent& kernel) {
        ++kernels;
        std::optional<trace::ApiEvent> call = job.api_call_by_correlation(kernel.correlation_id);
        EXPECT_TRUE(call.has_value());
        if (!call) return true;
        EXPECT_LE(call->start_ns, kernel.start_ns);
        EXPECT_EQ(kernel.start_ns - call->start_ns, 1);
        const trace::ThreadInfo* thread = job.thread(call->thread_id);
        const trace::StreamInfo* stream = job.stream(kernel.stream_id);
        EXPECT_TRUE(thread != nullptr && stream != nullptr);
        if (!thread || !stream) return true;
        // The call's process and the kernel's device belong to the same rank.
        const std::string process = thread->name.substr(0, 6);
        const std::string device = job.device(stream->device_id)->name.substr(0, 6);
        EXPECT_EQ(process, device);
        EXPECT_EQ(kernel.launch.grid_x, 64u);
        return true;
    });
    EXPECT_EQ(kernels, 4);
    // Stack samples keep their frames.
    job.for_each_stack_sample({}, [&](const trace::StackSample& sample) {
        std::vector<trace::FrameInfo> frames = job.stack_frames(sample.stack_id);
        EXPECT_EQ(frames.size(), 2u);
        if (frames.size() == 2) {
            EXPECT_EQ(frames[1].function, "train_step");
        }
        EXPECT_EQ(sample.time_ns, 10'000'050);
        return true;
    });
}

TEST_F(Merge, RankSummaryNamesTheRankTheOthersWaitFor) {
    run_merge({rank0_, rank1_}, job_);

    store::TraceReader job(job_);
    analysis::RankSummary summary = analysis::rank_summary(job);
    ASSERT_EQ(summary.ranks.size(), 2u);
    EXPECT_EQ(summary.ranks[0].rank, 0);
    EXPECT_EQ(summary.ranks[1].rank, 1);
    // forward only: the layer inside it is not counted again.
    EXPECT_EQ(summary.ranks[0].compute_ns, 2 * 1'000);
    EXPECT_EQ(summary.ranks[1].compute_ns, 2 * 3'000);
    EXPECT_EQ(summary.ranks[0].allreduce_wait_ns, 2 * 2'000);
    EXPECT_EQ(summary.ranks[1].allreduce_wait_ns, 2 * 50);
    EXPECT_EQ(summary.ranks[0].steps, 2);
    EXPECT_EQ(summary.ranks[0].step_ns, 2 * (1'000 + 2'000 + 10));
    ASSERT_TRUE(summary.straggler.has_value());
    EXPECT_EQ(*summary.straggler, 1u);
    EXPECT_EQ(summary.others_wait_ns, 4'000);

    // `ember stats` shows the table and the advice for a merged file by default.
    std::ostringstream text;
    analysis::write_stats(text, job, {});
    EXPECT_NE(text.str().find("Ranks (compute, all-reduce wait, straggler)"), std::string::npos);
    EXPECT_NE(text.str().find("rank 1 is the straggler"), std::string::npos) << text.str();
}

// Each step of a job trace belongs to its rank and counts only that rank's GPU.
TEST_F(Merge, StepsCountOnlyTheirOwnRanksDevice) {
    run_merge({rank0_, rank1_}, job_);
    store::TraceReader job(job_);
    analysis::GpuActivity activity = analysis::gpu_activity(job, 5);
    ASSERT_EQ(activity.steps.size(), 4u);  // 2 steps x 2 ranks, one device row each
    std::map<std::int32_t, std::vector<std::int64_t>> indices;
    for (const analysis::StepBreakdown& step : activity.steps) {
        ASSERT_GE(step.rank, 0);
        const std::string device = job.device(step.device_id)->name;
        EXPECT_EQ(device, "rank " + std::to_string(step.rank) + ": Test GPU");
        EXPECT_EQ(step.gpu_compute_ns, 13);  // its own kernel [t+7, t+20)
        EXPECT_EQ(step.copies_ns, 9);        // its own copy [t+21, t+30)
        indices[step.rank].push_back(step.step_index);
    }
    EXPECT_EQ(indices[0], (std::vector<std::int64_t>{0, 1}));
    EXPECT_EQ(indices[1], (std::vector<std::int64_t>{0, 1}));
    analysis::StatsOptions steps_only;
    steps_only.reports = {"steps"};
    std::ostringstream text;
    analysis::write_stats(text, job, steps_only);
    EXPECT_NE(text.str().find("Rank"), std::string::npos) << text.str();
}

// Ranks that wait alike: nobody is named the straggler.
TEST_F(Merge, EqualWaitsNameNoStraggler) {
    write_rank_trace(rank1_, {1, 4242, 15'000'000, 1'000, 2'000});  // the same work and wait as rank 0
    run_merge({rank0_, rank1_}, job_);
    store::TraceReader job(job_);
    EXPECT_FALSE(analysis::rank_summary(job).straggler.has_value());
}

TEST(RankNames, ParseOnlyMergeNames) {
    EXPECT_EQ(analysis::rank_of_process_name("rank 12"), 12);
    EXPECT_EQ(analysis::rank_of_process_name("rank 1: main"), std::nullopt);
    EXPECT_EQ(analysis::rank_of_process_name("python"), std::nullopt);
    EXPECT_EQ(analysis::rank_of_device_name("rank 3: NVIDIA H100"), 3);
    EXPECT_EQ(analysis::rank_of_device_name("rank 3"), std::nullopt);
    EXPECT_EQ(analysis::rank_of_device_name("NVIDIA H100"), std::nullopt);
}

// Bad input is a TraceError that names the file, and leaves no output behind.
TEST_F(Merge, UnreadableInputNamesTheFile) {
    const std::string missing = rank0_ + ".missing";
    try {
        run_merge({rank0_, missing}, job_);
        FAIL() << "expected a TraceError";
    } catch (const store::TraceError& error) {
        EXPECT_NE(std::string(error.what()).find(missing), std::string::npos) << error.what();
    }
    EXPECT_THROW(run_merge({}, job_), store::TraceError);
}

TEST_F(Merge, SingleRankFileHasNoRanksTableUnlessAsked) {
    store::TraceReader rank0(rank0_);
    std::ostringstream all;
    analysis::write_stats(all, rank0, {});
    EXPECT_EQ(all.str().find("Ranks (compute"), std::string::npos);
    analysis::StatsOptions only_ranks;
    only_ranks.reports = {"ranks"};
    std::ostringstream asked;
    analysis::write_stats(asked, rank0, only_ranks);
    EXPECT_NE(asked.str().find("Ranks (compute"), std::string::npos);
    analysis::RankSummary summary = analysis::rank_summary(rank0);
    ASSERT_EQ(summary.ranks.size(), 1u);
    EXPECT_EQ(summary.ranks[0].rank, 0);
    EXPECT_FALSE(summary.straggler.has_value());
}

// Ranks keep the numbers their files record (two ranks sampled from a larger job stay
// 3 and 77, as HTA and the files say); files repeating a rank are numbered in order.
TEST_F(Merge, RanksKeepTheNumbersTheirFilesRecord) {
    const std::string rank3 = ember::testing::temporary_path("merge-rank3", ".db");
    const std::string rank77 = ember::testing::temporary_path("merge-rank77", ".db");
    write_rank_trace(rank3, {3, 4242, 10'000'000, 1'000, 2'000});
    write_rank_trace(rank77, {77, 4242, 15'000'000, 3'000, 50});
    const merge::MergeResult result = run_merge({rank77, rank3}, job_);
    ASSERT_EQ(result.ranks.size(), 2u);
    EXPECT_EQ(result.ranks[0].rank, 3);
    EXPECT_EQ(result.ranks[0].path, rank3);
    EXPECT_EQ(result.ranks[1].rank, 77);
    {
        store::TraceReader job(job_);
        ASSERT_EQ(job.devices().size(), 2u);
        EXPECT_EQ(job.devices()[0].name, "rank 3: Test GPU");
        EXPECT_EQ(job.devices()[1].name, "rank 77: Test GPU");
        const analysis::RankSummary summary = analysis::rank_summary(job);
        ASSERT_EQ(summary.ranks.size(), 2u);
        EXPECT_EQ(summary.ranks[0].rank, 3);
        EXPECT_EQ(summary.ranks[1].rank, 77);
    }
    // The same rank twice: numbered 0 and 1 in merged order.
    const merge::MergeResult repeated = run_merge({rank3, rank3}, job_);
    ASSERT_EQ(repeated.ranks.size(), 2u);
    EXPECT_EQ(repeated.ranks[0].rank, 0);
    EXPECT_EQ(repeated.ranks[1].rank, 1);
    std::filesystem::remove(rank3);
    std::filesystem::remove(rank77);
}

}  // namespace
