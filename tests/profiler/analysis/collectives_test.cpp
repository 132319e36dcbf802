// collectives_test.cpp: the job analysis (collectives.h, job/job.h) against answers
// known by construction: NCCL and host names read as collectives; a generated job whose
// straggler, waits and clock offsets are known (ember synth --straggler --clock-skew-ms);
// the same answer from shards exchanged between "processes"; host-call jobs aligned on
// clock anchors; collectives that do not match; ranks numbered by command-line order;
// two-dimensional jobs whose collectives are matched within their process groups.
#include "profiler/analysis/collectives.h"
#include "profiler/analysis/communication.h"
#include "profiler/job/job.h"
#include "profiler/merge/merge.h"
#include "profiler/store/reader.h"
#include "profiler/synth/synthetic_job.h"
#include "profiler/synth/synthetic_trace.h"
#include "tests/support/generated_job.h"
#include "tests/support/temp_dir.h"
#include "tests/support/trace_builder.h"
#include "common/nvtx_contract.h"

#include <gtest/gtest.h>

#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

namespace ember::analysis {
namespace {

using trace::TimeNs;

// ---------------------------------------------------------------------------
// [SECTION] Names
// ---------------------------------------------------------------------------

TEST(Communication, KernelsOfEverySpelling) {
    struct Case {
        const char* name;
        CollectiveKind kind;
    };
    const Case cases[] = {
        {"ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", CollectiveKind::all_reduce},
        {"ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", CollectiveKind::all_gather},
        {"ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
         CollectiveKind::reduce_scatter},
        {"ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
         CollectiveKind::send_recv},
        {"ncclDevKernel_Broadcast_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", CollectiveKind::broadcast},
        {"ncclKernel_Reduce_RING_LL_Sum_half(ncclWorkElem)", CollectiveKind::reduce},
        {"_Z29ncclKernel_AllReduce_RING_LL_SumIfEvP11ncclDevCommmP8ncclWork", CollectiveKind::all_reduce},
        {"_Z33ncclDevKernel_ReduceScatter_Sum_f32P11ncclDevCommmP8ncclWork", CollectiveKind::reduce_scatter},
        {"ncclAllReduceRingLLKernel_sum_f32(ncclWorkElem)", CollectiveKind::all_reduce},
        {"ncclDevKernel_Generic_4(ncclDevComm*, unsigned long, ncclWork*)", CollectiveKind::unknown},
    };
    for (const Case& c : cases) {
        EXPECT_TRUE(is_communication_kernel(c.name)) << c.name;
        EXPECT_EQ(collective_kind_of_kernel(c.name), c.kind) << c.name;
    }
    for (const char* name :
         {"gemm", "void at::native::vectorized_elementwise_kernel<4, add>(int, ...)",
          "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_kernel__5x_cublas", "Memcpy HtoD (Pinned -> Device)"})
        EXPECT_FALSE(is_communication_kernel(name)) << name;
}

TEST(Communication, HostCallsThatIssueCollectives) {
    struct Case {
        const char* name;
        std::optional<CollectiveKind> kind;
    };
    const Case cases[] = {
        {"nccl:all_reduce", CollectiveKind::all_reduce},
        {"nccl:_all_gather_base", CollectiveKind::all_gather},
        {"nccl:all_gather_into_tensor_coalesced", CollectiveKind::all_gather},
        {"nccl:reduce_scatter_tensor_coalesced", CollectiveKind::reduce_scatter},
        {"nccl:all_to_all", CollectiveKind::all_to_all},
        {"gloo:broadcast", CollectiveKind::broadcast},
        {"c10d::allreduce_", CollectiveKind::all_reduce},
        {"c10d::_reduce_scatter_base_", CollectiveKind::reduce_scatter},
        {"ncclAllReduce", CollectiveKind::all_reduce},
        {"ncclSend", CollectiveKind::send},
        {"allreduce/bucket", CollectiveKind::all_reduce},
        {"MPI_Allreduce", CollectiveKind::all_reduce},
        {"MPI_Iallgather", CollectiveKind::all_gather},
        {"MPI_Bcast", CollectiveKind::broadcast},
        {"MPI_Reduce_scatter", CollectiveKind::reduce_scatter},
        {"MPI_Barrier", CollectiveKind::barrier},
        {"MPI_Send", CollectiveKind::send},
        {"MPI_Init", std::nullopt},
        {"MPI_Wait", std::nullopt},
        {"ncclGroupEnd", std::nullopt},
        {"ncclCommInitRank", std::nullopt},
        {"record_param_comms", std::nullopt},
        {"aten::add", std::nullopt},
        {"forward", std::nullopt},
    };
    for (const Case& c : cases) EXPECT_EQ(collective_kind_of_operation(c.name), c.kind) << c.name;
    EXPECT_EQ(collective_kind_of_collective_name("allreduce"), CollectiveKind::all_reduce);
    EXPECT_EQ(collective_kind_of_collective_name("_allgather_base"), CollectiveKind::all_gather);
    EXPECT_EQ(collective_kind_of_collective_name("all_to_allv"), CollectiveKind::all_to_all);
    EXPECT_EQ(collective_kind_of_collective_name("wait"), std::nullopt);
    for (int k = 0; k < kCollectiveKindCount; ++k) {
        const auto kind = static_cast<CollectiveKind>(k);
        EXPECT_EQ(parse_collective_kind(collective_kind_name(kind)), kind);
    }
}

// ---------------------------------------------------------------------------
// [SECTION] A generated job with a known answer
// ---------------------------------------------------------------------------

// Every rank's wait within 5% of the truth (or 0.2% of the largest wait, for waits
// near zero), its clock offset to within 3 µs, and its arrivals-last between those it
// made by more than 10 µs and all of them (closer ones are within the clocks' residual
// disagreement and count as ties).
void expect_truth(const JobCollectives& found, const std::vector<synth::SyntheticJobTruth>& truth) {
    ASSERT_EQ(found.ranks.size(), truth.size());
    TimeNs largest = 0;
    for (const auto& t : truth) largest = std::max(largest, t.wait_ns);
    for (const auto& t : truth) {
        const RankWaitRow* row = found.rank(t.rank);
        ASSERT_NE(row, nullptr) << t.rank;
        EXPECT_EQ(row->collectives, t.collectives) << "rank " << t.rank;
        const double tolerance = std::max(0.05 * static_cast<double>(t.wait_ns), 0.002 * static_cast<double>(largest));
        EXPECT_NEAR(static_cast<double>(row->wait_ns), static_cast<double>(t.wait_ns), tolerance) << "rank " << t.rank;
        EXPECT_GE(row->arrived_last, t.arrived_last_by_10us) << "rank " << t.rank;
        EXPECT_LE(row->arrived_last, t.arrived_last) << "rank " << t.rank;
        // Our offset maps the rank's clock onto the reference rank's (rank 0).
        const TimeNs expected_offset = truth[0].clock_offset_ns - t.clock_offset_ns;
        EXPECT_NEAR(static_cast<double>(found.clocks[static_cast<std::size_t>(t.rank)].offset_ns),
                    static_cast<double>(expected_offset), 3000.0)
            << "rank " << t.rank;
    }
}

TEST(JobCollectives, StragglerWaitsAndClocksOfAGeneratedJob) {
    synth::SyntheticJobOptions options;
    options.ranks = 6;
    options.steps = 12;
    options.seed = 7;
    options.straggler = 4;
    options.straggler_extra_ns = 1'500'000;
    options.clock_skew_ns = 8'000'000;  // clocks disagree by more than the straggler's delay
    const test_support::GeneratedJob generated(options, "job-straggler");
    const JobCollectives job = job::analyze_job_files(generated.files);
    ASSERT_TRUE(job.straggler.has_value()) << job.straggler_evidence;
    EXPECT_EQ(*job.straggler, 4);
    EXPECT_EQ(job.matched, 24);
    EXPECT_TRUE(job.unmatched.empty());
    EXPECT_LE(job.residual_max_ns, 4'000);  // ends agree to 2 µs, the alignment is off by at most 2 more
    expect_truth(job, generated.truth);
    EXPECT_EQ(job.rank(4)->arrived_last, 24);
    // The others waited for it: the straggler itself waits nothing.
    EXPECT_LT(job.rank(4)->wait_ns, 10'000);
    TimeNs others = 0;
    for (const auto& t : generated.truth)
        if (t.rank != 4) others += t.wait_ns;
    EXPECT_NEAR(static_cast<double>(job.recoverable_ns), static_cast<double>(others),
                0.05 * static_cast<double>(others));
    // What it did instead: its longer conv2 forward kernel, 1.5 ms a step.
    ASSERT_FALSE(job.doing_instead.empty());
    EXPECT_EQ(job.doing_instead.front().what, "kernel");
    EXPECT_NE(job.doing_instead.front().name.find("fprop"), std::string::npos) << job.doing_instead.front().name;
    EXPECT_NEAR(static_cast<double>(job.doing_instead.front().extra_ns), 12 * 1.5e6, 0.05 * 12 * 1.5e6);
    EXPECT_EQ(job.reference_ranks.size(), 4u);
}

TEST(JobCollectives, ABalancedJobHasNoStraggler) {
    synth::SyntheticJobOptions options;
    options.ranks = 5;
    options.steps = 15;
    options.seed = 3;
    options.clock_skew_ns = 3'000'000;
    const test_support::GeneratedJob generated(options, "job-balanced");
    const JobCollectives job = job::analyze_job_files(generated.files);
    EXPECT_FALSE(job.straggler.has_value()) << job.straggler_evidence;
    EXPECT_TRUE(job.doing_instead.empty());
    expect_truth(job, generated.truth);
}

// ---------------------------------------------------------------------------
// [SECTION] Shards exchanged between processes give the same answer
// ---------------------------------------------------------------------------

// N "processes" as threads: all_gather waits for every one, then hands out every part.
class ThreadExchange {
  public:
    explicit ThreadExchange(int processes)
        : processes_(processes), parts_(static_cast<std::size_t>(processes)), barrier_(processes) {}
    class Endpoint : public CollectiveExchange {
      public:
        Endpoint(ThreadExchange& shared, int process) : shared_(shared), process_(process) {}
        std::vector<std::string> all_gather(const std::string& mine) override {
            shared_.parts_[static_cast<std::size_t>(process_)] = mine;
            shared_.barrier_.arrive_and_wait();
            std::vector<std::string> all = shared_.parts_;
            shared_.barrier_.arrive_and_wait();  // nobody overwrites a part before all have read
            return all;
        }
        int process() const override { return process_; }
        int processes() const override { return shared_.processes_; }

      private:
        ThreadExchange& shared_;
        int process_;
    };

  private:
    int processes_;
    std::vector<std::string> parts_;
    std::barrier<> barrier_;
};

// The job analysed by `processes` threads standing in for MPI processes, each reading
// its shard of the files: every process's answer.
std::vector<JobCollectives> analyze_sharded(const std::vector<std::string>& files, int processes) {
    ThreadExchange exchange(processes);
    std::vector<JobCollectives> results(static_cast<std::size_t>(processes));
    std::vector<std::thread> threads;
    for (int p = 0; p < processes; ++p)
        threads.emplace_back([&, p] {
            ThreadExchange::Endpoint endpoint(exchange, p);
            job::JobFilesOptions files_options;
            files_options.threads = 1;
            results[static_cast<std::size_t>(p)] = job::analyze_job_files(files, files_options, &endpoint);
        });
    for (std::thread& thread : threads) thread.join();
    return results;
}

// A sharded answer is the one process's, number for number.
void expect_same_answer(const JobCollectives& sharded, const JobCollectives& alone) {
    ASSERT_EQ(sharded.ranks.size(), alone.ranks.size());
    for (std::size_t r = 0; r < alone.ranks.size(); ++r) {
        EXPECT_EQ(sharded.ranks[r].rank, alone.ranks[r].rank);
        EXPECT_EQ(sharded.ranks[r].wait_ns, alone.ranks[r].wait_ns);
        EXPECT_EQ(sharded.ranks[r].arrived_last, alone.ranks[r].arrived_last);
        EXPECT_EQ(sharded.ranks[r].median_lateness_ns, alone.ranks[r].median_lateness_ns);
        EXPECT_EQ(sharded.ranks[r].held_back_ns, alone.ranks[r].held_back_ns);
        EXPECT_EQ(sharded.clocks[r].offset_ns, alone.clocks[r].offset_ns);
        EXPECT_EQ(sharded.clocks[r].how, alone.clocks[r].how);
    }
    ASSERT_EQ(sharded.collectives.size(), alone.collectives.size());
    for (std::size_t c = 0; c < alone.collectives.size(); ++c) {
        EXPECT_EQ(sharded.collectives[c].communicator, alone.collectives[c].communicator);
        EXPECT_EQ(sharded.collectives[c].index, alone.collectives[c].index);
        EXPECT_EQ(sharded.collectives[c].last_rank, alone.collectives[c].last_rank);
        EXPECT_EQ(sharded.collectives[c].total_wait_ns, alone.collectives[c].total_wait_ns);
    }
    EXPECT_EQ(sharded.straggler, alone.straggler);
    EXPECT_EQ(sharded.recoverable_ns, alone.recoverable_ns);
}

TEST(JobCollectives, ShardsOverThreeProcessesGiveTheSameAnswer) {
    synth::SyntheticJobOptions options;
    options.ranks = 7;
    options.steps = 6;
    options.straggler = 2;
    options.clock_skew_ns = 5'000'000;
    const test_support::GeneratedJob generated(options, "job-shards");
    const JobCollectives alone = job::analyze_job_files(generated.files);
    const std::vector<JobCollectives> results = analyze_sharded(generated.files, 3);
    for (const JobCollectives& sharded : results) expect_same_answer(sharded, alone);
    // Only the first process reads what the straggler was doing (it prints).
    EXPECT_EQ(results[0].doing_instead.size(), alone.doing_instead.size());
    EXPECT_TRUE(results[1].doing_instead.empty());
}

// A two-dimensional job (tensor-parallel groups of 2, data-parallel groups of 4), its
// NCCL kernels naming their process groups: each collective matched within its group,
// every rank's wait within 5% of the truth, clocks aligned through shared groups (rank
// 5 shares no group with rank 0), and the straggler named although its tensor-parallel
// partner, late because it waited for it, arrives last at its own data-parallel group.
TEST(JobCollectives, TwoDimensionalJobMatchesWithinProcessGroups) {
    synth::SyntheticJobOptions options;
    options.ranks = 8;
    options.steps = 12;
    options.seed = 3;
    options.tensor_parallel = 2;
    options.straggler = 5;
    options.straggler_extra_ns = 1'500'000;
    options.clock_skew_ns = 8'000'000;
    const test_support::GeneratedJob generated(options, "job-2d");
    const JobCollectives job = job::analyze_job_files(generated.files);
    // 4 tensor-parallel and 2 data-parallel groups, one collective each per step.
    EXPECT_EQ(job.matched, 12 * 6);
    EXPECT_TRUE(job.unmatched.empty());
    std::set<std::string> communicators;
    for (const CollectiveRow& row : job.collectives) {
        communicators.insert(row.communicator);
        EXPECT_EQ(row.members, row.communicator.find("mesh_tp") != std::string::npos ? 2 : 4) << row.communicator;
    }
    EXPECT_EQ(communicators,
              (std::set<std::string>{"pg 1 (mesh_tp) ranks 0-1", "pg 2 (mesh_tp) ranks 2-3", "pg 3 (mesh_tp) ranks 4-5",
                                     "pg 4 (mesh_tp) ranks 6-7", "pg 5 (mesh_dp) ranks 0-6 step 2",
                                     "pg 6 (mesh_dp) ranks 1-7 step 2"}));
    expect_truth(job, generated.truth);
    ASSERT_TRUE(job.straggler.has_value()) << job.straggler_evidence;
    EXPECT_EQ(*job.straggler, 5);
    // Its partner (rank 4) was last at its data-parallel collectives only by inheritance.
    EXPECT_GT(job.rank(4)->arrived_last, 0);
    EXPECT_LT(job.rank(4)->held_back_ns, job.rank(5)->held_back_ns / 20);
    EXPECT_NE(job.clocks[5].how.find("with rank"), std::string::npos) << job.clocks[5].how;

    // The job file (`ember merge`) keeps the process groups: the same answer from it.
    merge::MergeOptions merge_options;
    merge_options.placements = job::rank_placements(generated.files, job);
    const std::string merged = generated.folder + "/merged.db";
    merge::merge_traces(generated.files, merged, merge_options);
    store::TraceReader reader(merged);
    const JobCollectives from_file = job_collectives(reader);
    EXPECT_EQ(from_file.matched, job.matched);
    EXPECT_EQ(from_file.straggler, job.straggler);
    for (const RankWaitRow& row : job.ranks) EXPECT_EQ(from_file.rank(row.rank)->wait_ns, row.wait_ns) << row.rank;
}

TEST(JobCollectives, TwoDimensionalJobShardedGivesTheSameAnswer) {
    synth::SyntheticJobOptions options;
    options.ranks = 8;
    options.steps = 5;
    options.tensor_parallel = 4;
    options.straggler = 6;
    options.clock_skew_ns = 5'000'000;
    const test_support::GeneratedJob generated(options, "job-2d-shards");
    const JobCollectives alone = job::analyze_job_files(generated.files);
    for (const JobCollectives& sharded : analyze_sharded(generated.files, 3)) expect_same_answer(sharded, alone);
    expect_truth(alone, generated.truth);
    EXPECT_EQ(alone.straggler, 6);
}

// ---------------------------------------------------------------------------
// [SECTION] Hand-built jobs
// ---------------------------------------------------------------------------

struct HostRank {
    std::int32_t rank = 0;
    std::string rank_source = "OMPI_COMM_WORLD_RANK environment";
    TimeNs clock_shift = 0;       // its clock minus the reference's
    TimeNs late = 0;              // it posts every all-reduce this much later
    std::vector<int> kinds = {};  // per collective: 0 all-reduce bucket, 1 "nccl:all_gather"
    std::int32_t world_size = 2;
};

// A CPU rank of ember's trainer: 5 steps, an all-reduce bucket in each (host call), and
// a clock anchor after a barrier before the first step.
std::string write_host_rank(const std::string& folder, const HostRank& spec) {
    const std::string path = folder + "/host.rank" + std::to_string(spec.rank) + ".db";
    trace::RunInfo run = ember::testing::TraceBuilder::run_info(spec.clock_shift, spec.rank, spec.world_size);
    run.rank_source = spec.rank_source;
    ember::testing::TraceBuilder b(path, run);
    const trace::ThreadId main = b.thread("main");
    auto at = [&](TimeNs true_ns) { return true_ns + spec.clock_shift; };
    trace::MarkEvent anchor;
    anchor.time_ns = at(500'000);
    anchor.thread_id = main;
    anchor.name_id = b.writer().intern(nvtx::range::kClockAnchor);
    anchor.payload = trace::Payload::of_integer(0);
    b.writer().record_mark(anchor);
    for (int step = 0; step < 5; ++step) {
        const TimeNs start = 1'000'000 + step * 10'000'000;
        b.range(main, "ember", "step", at(start), at(start + 9'000'000), 1, 0, step);
        const TimeNs post = start + 4'000'000 + spec.late;
        const int kind = step < static_cast<int>(spec.kinds.size()) ? spec.kinds[static_cast<std::size_t>(step)] : 0;
        b.range(main, "ember", kind == 0 ? "allreduce/bucket" : "nccl:all_gather", at(post), at(post + 50'000), 4, 1);
    }
    b.close();
    return path;
}

TEST(JobCollectives, HostCallsAlignOnClockAnchors) {
    const test_support::TempDir dir("job-host");
    const std::string& folder = dir.folder();
    const std::string r0 = write_host_rank(folder, {0, "OMPI_COMM_WORLD_RANK environment", 0, 0});
    const std::string r1 = write_host_rank(folder, {1, "OMPI_COMM_WORLD_RANK environment", 7'000'000, 3'000'000});
    const JobCollectives job = job::analyze_job_files({r0, r1});
    EXPECT_TRUE(job.host_arrivals);
    ASSERT_EQ(job.clocks.size(), 2u);
    EXPECT_EQ(job.clocks[1].offset_ns, -7'000'000);
    EXPECT_EQ(job.clocks[1].how, "clock anchor 0");
    EXPECT_EQ(job.rank(0)->wait_ns, 5 * 3'000'000);
    EXPECT_EQ(job.rank(1)->wait_ns, 0);
    EXPECT_EQ(job.rank(1)->arrived_last, 5);
    EXPECT_EQ(job.straggler, 1);
    EXPECT_EQ(job.rank(0)->rank_from, "OMPI_COMM_WORLD_RANK environment");
    // Wait as a share of the step time: 15 ms of 45.
    EXPECT_NEAR(job.rank(0)->wait_percent, 100.0 * 15.0 / 45.0, 1e-9);
}

TEST(JobCollectives, ACollectiveOfAnotherKindIsNotMatched) {
    const test_support::TempDir dir("job-kinds");
    const std::string& folder = dir.folder();
    const std::string r0 = write_host_rank(folder, {0, "synthetic", 0, 0, {0, 0, 0, 0, 0}});
    const std::string r1 = write_host_rank(folder, {1, "synthetic", 0, 1'000'000, {0, 0, 1, 0, 0}});
    const JobCollectives job = job::analyze_job_files({r0, r1});
    ASSERT_EQ(job.unmatched.size(), 2u);
    EXPECT_NE(job.unmatched[0].reason.find("kind differs"), std::string::npos) << job.unmatched[0].reason;
    EXPECT_EQ(job.unmatched[0].count, 1);
    EXPECT_NE(job.unmatched[1].reason.find("only one rank"), std::string::npos) << job.unmatched[1].reason;
    EXPECT_EQ(job.matched, 4);
    EXPECT_EQ(job.rank(0)->wait_ns, 4 * 1'000'000);
}

TEST(JobCollectives, FilesWithoutRanksAreNumberedInCommandLineOrder) {
    const test_support::TempDir dir("job-order");
    const std::string& folder = dir.folder();
    // Two files that both say rank 0 and nothing of where it came from.
    HostRank first{0, "", 0, 2'000'000};
    HostRank second{0, "", 0, 0};
    const std::string a = write_host_rank(folder, first);
    std::filesystem::rename(a, folder + "/a.db");
    const std::string b = write_host_rank(folder, second);
    std::filesystem::rename(b, folder + "/b.db");
    const JobCollectives job = job::analyze_job_files({folder + "/b.db", folder + "/a.db"});
    ASSERT_EQ(job.ranks.size(), 2u);
    EXPECT_EQ(job.ranks[0].path, folder + "/b.db");
    EXPECT_EQ(job.ranks[1].path, folder + "/a.db");
    EXPECT_NE(job.ranks[0].rank_from.find("command-line order"), std::string::npos) << job.ranks[0].rank_from;
    EXPECT_EQ(job.straggler, 1);  // a.db posts 2 ms later
}

// Three ranks: rank 0 always 5 ms early, rank 2 1 ms later than rank 1. The others
// wait 6 + 1 ms at each collective, but rank 2 held them back only 1 ms each: balancing
// it wins back 2 ms a collective, not 7.
TEST(JobCollectives, RecoverableIsWhatTheStragglerHeldTheOthersBack) {
    const test_support::TempDir dir("job-held");
    const std::string& folder = dir.folder();
    HostRank early{0, "synthetic", 0, 0};
    HostRank middle{1, "synthetic", 0, 5'000'000};
    HostRank late{2, "synthetic", 0, 6'000'000};
    early.world_size = middle.world_size = late.world_size = 3;
    const JobCollectives job = job::analyze_job_files(
        {write_host_rank(folder, early), write_host_rank(folder, middle), write_host_rank(folder, late)});
    ASSERT_EQ(job.straggler, 2) << job.straggler_evidence;
    EXPECT_EQ(job.straggler_waits_ns, 5 * (6'000'000 + 1'000'000));
    EXPECT_EQ(job.recoverable_ns, 5 * 2 * 1'000'000);
    for (const CollectiveRow& row : job.collectives) {
        EXPECT_EQ(row.runner_up_arrival_ns - row.first_arrival_ns, 5'000'000);
        EXPECT_EQ(row.held_back_ns, 2'000'000);
    }
    EXPECT_TRUE(job.warnings.empty());
}

TEST(JobCollectives, FilesOfDifferentWorldSizesAreFlagged) {
    const test_support::TempDir dir("job-worlds");
    const std::string& folder = dir.folder();
    HostRank a{0, "synthetic", 0, 0};
    HostRank b{1, "synthetic", 0, 1'000'000};
    b.world_size = 8;
    const JobCollectives job = job::analyze_job_files({write_host_rank(folder, a), write_host_rank(folder, b)});
    ASSERT_EQ(job.warnings.size(), 1u);
    EXPECT_NE(job.warnings[0].find("different world sizes (2, 8)"), std::string::npos) << job.warnings[0];
}

TEST(JobCollectives, TheSameFileTwiceIsRefused) {
    synth::SyntheticJobOptions options;
    options.ranks = 2;
    options.steps = 2;
    const test_support::GeneratedJob generated(options, "job-twice");
    try {
        job::analyze_job_files({generated.files[0], generated.files[1], generated.folder + "/./job.rank0.db"});
        FAIL() << "accepted a file twice";
    } catch (const store::TraceError& error) {
        EXPECT_NE(std::string(error.what()).find("given twice"), std::string::npos) << error.what();
    }
}

TEST(JobCollectives, OneRankMatchesNothing) {
    synth::SyntheticJobOptions options;
    options.ranks = 2;
    options.steps = 3;
    const test_support::GeneratedJob generated(options, "job-one");
    const JobCollectives job = job::analyze_job_files({generated.files[0]});
    ASSERT_EQ(job.ranks.size(), 1u);
    EXPECT_EQ(job.matched, 0);
    EXPECT_FALSE(job.straggler.has_value());
    ASSERT_EQ(job.unmatched.size(), 1u);
    EXPECT_EQ(job.unmatched[0].count, 6);
}

}  // namespace
}  // namespace ember::analysis
