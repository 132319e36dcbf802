// process_groups_test.cpp: collectives matched by the process group a trace names
// (Kineto's collective metadata), on PyTorch-profiler JSON files written here with a
// known answer: a two-dimensional job of 4 ranks (tensor-parallel groups {0,1} and {2,3},
// data-parallel groups {0,2} and {1,3}) whose rank 3 computes 2 ms longer every step.
//
// On the true clock, per step: the tensor-parallel all-reduce starts 3 ms into the step
// (rank 3: 5 ms) and ends 100 µs after its last member arrived; each rank arrives at its
// data-parallel all-reduce 500 µs after its tensor-parallel one ended, which ends 100 µs
// after its last member. So rank 2 waits 2 ms for rank 3 in the tensor-parallel group,
// and ranks 0 and 1 wait 2 ms in the data-parallel groups, for ranks 2 and 3; rank 2 was
// late there only because it waited for rank 3. Each rank records on its own clock
// (off by up to 12 ms); rank 3 shares no group with rank 0, so its clock is aligned
// through a rank that does. Rank 1's trace misses the first tensor-parallel all-reduce:
// the group's sequence numbers ("Seq") still match the rest.
#include "profiler/analysis/collectives.h"
#include "profiler/import/import.h"
#include "profiler/job/job.h"
#include "profiler/store/reader.h"
#include "tests/support/temp_dir.h"

#include <gtest/gtest.h>

#include <array>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace ember::analysis {
namespace {

using trace::TimeNs;

constexpr int kRanks = 4;
constexpr int kSteps = 5;
constexpr long long kOrigin = 1'700'000'000'000'000;  // µs since the Unix epoch

struct Spec {
    bool host_only = false;  // gloo-style: no kernels, host calls with record_param_comms inside
    std::array<long long, kRanks> clock_offset_us = {0, 7000, -4000, 12000};  // recorded = true + this
};

int tp_group(int rank) {
    return rank / 2;
}
int dp_group(int rank) {
    return rank % 2;
}

// One rank's Kineto JSON.
std::string rank_json(int rank, const Spec& spec) {
    std::string events;
    auto add = [&](const std::string& event) { events += (events.empty() ? "" : ",\n") + event; };
    const long long offset = spec.clock_offset_us[static_cast<std::size_t>(rank)];
    int correlation = 1;
    auto metadata = [&](bool tp, int step) {
        const int group = tp ? tp_group(rank) : dp_group(rank);
        const std::string name = tp ? std::to_string(1 + group) : std::to_string(3 + group);
        // PyTorch writes the ranks as a string; some writers as an array.
        const std::string ranks = tp ? (group == 0 ? "\"[0, 1]\"" : "\"[2, 3]\"") : (group == 0 ? "[0, 2]" : "[1,3]");
        std::string text =
            "\"Collective name\": \"allreduce\", \"In msg nelems\": 4096, \"Out msg nelems\": 4096, "
            "\"Group size\": 2, \"dtype\": \"BFloat16\", \"Process Group Name\": \"" +
            name + "\", \"Process Group Description\": \"" + (tp ? "mesh_tp" : "mesh_dp") +
            "\", \"Process Group Ranks\": " + ranks;
        if (tp) text += ", \"Seq\": " + std::to_string(step + 1);  // only the tensor-parallel group numbers them
        return text;
    };
    for (int step = 0; step < kSteps; ++step) {
        const long long start = kOrigin + 1000 + step * 10000LL;
        // Arrivals and ends on the true clock, in µs.
        auto tp_arrival = [&](int r) { return start + 3000 + (r == 3 ? 2000 : 0); };
        auto tp_end = [&](int r) {
            const int g = tp_group(r);
            return std::max(tp_arrival(2 * g), tp_arrival(2 * g + 1)) + 100;
        };
        auto dp_arrival = [&](int r) { return tp_end(r) + 500; };
        auto dp_end = [&](int r) {
            const int g = dp_group(r);
            return std::max(dp_arrival(g), dp_arrival(g + 2)) + 100;
        };
        add("{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#" + std::to_string(step) +
            "\", \"pid\": 100, \"tid\": 100, \"ts\": " + std::to_string(start + offset) + ", \"dur\": 9000}");
        for (int which = 0; which < 2; ++which) {
            const bool tp = which == 0;
            if (rank == 1 && tp && step == 0) continue;  // its trace misses this one
            const long long arrival = (tp ? tp_arrival(rank) : dp_arrival(rank)) + offset;
            const long long end = (tp ? tp_end(rank) : dp_end(rank)) + offset;
            const std::string kernel =
                tp ? "ncclDevKernel_Generic_4(ncclDevComm*, unsigned long, ncclWork*)"
                   : "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)";
            if (spec.host_only) {
                add("{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"gloo:all_reduce\", \"pid\": 100, \"tid\": 100, "
                    "\"ts\": " +
                    std::to_string(arrival) + ", \"dur\": " + std::to_string(end - arrival) + "}");
                add("{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"record_param_comms\", \"pid\": 100, \"tid\": 100, "
                    "\"ts\": " +
                    std::to_string(arrival + 1) + ", \"dur\": 5, \"args\": {" + metadata(tp, step) + "}}");
            } else {
                add("{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"record_param_comms\", \"pid\": 100, \"tid\": 100, "
                    "\"ts\": " +
                    std::to_string(arrival - 20) + ", \"dur\": 10, \"args\": {" + metadata(tp, step) + "}}");
                add("{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"" + kernel +
                    "\", \"pid\": 0, \"tid\": " + std::to_string(tp ? 20 : 24) +
                    ", \"ts\": " + std::to_string(arrival) + ", \"dur\": " + std::to_string(end - arrival) +
                    ", \"args\": {\"device\": 0, \"stream\": " + std::to_string(tp ? 20 : 24) +
                    ", \"correlation\": " + std::to_string(correlation++) + ", " + metadata(tp, step) + "}}");
            }
        }
    }
    return "{\n\"schemaVersion\": 1,\n\"distributedInfo\": {\"backend\": \"nccl\", \"rank\": " + std::to_string(rank) +
           ", \"world_size\": 4},\n\"traceEvents\": [\n" + events + "\n]\n}\n";
}

struct Job {
    explicit Job(const std::string& name) : dir(name) {}
    test_support::TempDir dir;
    std::vector<std::string> files;
};

std::unique_ptr<Job> write_job(const std::string& name, const Spec& spec) {
    auto job = std::make_unique<Job>(name);
    for (int r = 0; r < kRanks; ++r) {
        const std::string path = job->dir.path("rank" + std::to_string(r) + ".pt.trace.json");
        std::ofstream(path) << rank_json(r, spec);
        job->files.push_back(path);
    }
    return job;
}

JobCollectives analyze(const Job& job) {
    job::JobFilesOptions options;
    options.ember_trace_for = [](const std::string& path) {
        importing::OpenTraceOptions open;
        open.cache = importing::CachePlace::beside_input;
        return importing::open_as_ember_trace(path, open);
    };
    return job::analyze_job_files(job.files, options);
}

constexpr TimeNs kMs = 1'000'000;

void expect_the_answer(const JobCollectives& found, const Spec& spec) {
    ASSERT_EQ(found.ranks.size(), 4u);
    // Every rank's wait: ranks 0 and 1 in the data-parallel groups, rank 2 in the
    // tensor-parallel group, 2 ms a step; rank 3 never waits.
    EXPECT_EQ(found.rank(0)->wait_ns, kSteps * 2 * kMs);
    EXPECT_EQ(found.rank(1)->wait_ns, kSteps * 2 * kMs);
    EXPECT_EQ(found.rank(2)->wait_ns, kSteps * 2 * kMs);
    EXPECT_EQ(found.rank(3)->wait_ns, 0);
    // Rank 3 was last at every collective of its groups, rank 2 at its data-parallel ones.
    EXPECT_EQ(found.rank(3)->arrived_last, 2 * kSteps);
    EXPECT_EQ(found.rank(2)->arrived_last, kSteps);
    EXPECT_EQ(found.rank(0)->arrived_last, 0);
    ASSERT_TRUE(found.straggler.has_value()) << found.straggler_evidence;
    EXPECT_EQ(*found.straggler, 3);
    // Its lateness cost the others every millisecond they waited: 2 ms a step for rank 2
    // directly, for rank 1 directly, and for rank 0 through rank 2.
    EXPECT_EQ(found.rank(3)->held_back_ns, 3 * kSteps * 2 * kMs);
    EXPECT_EQ(found.rank(2)->held_back_ns, 0);
    EXPECT_EQ(found.recoverable_ns, 3 * kSteps * 2 * kMs);
    // 4 groups x 5 steps, less the one rank 1 missed (rank 0 ran it alone).
    EXPECT_EQ(found.matched, 4 * kSteps - 1);
    ASSERT_EQ(found.unmatched.size(), 1u);
    EXPECT_NE(found.unmatched[0].reason.find("only one rank"), std::string::npos) << found.unmatched[0].reason;
    std::map<std::string, int> per_communicator;
    for (const CollectiveRow& row : found.collectives) {
        ++per_communicator[row.communicator];
        EXPECT_EQ(row.kind, CollectiveKind::all_reduce) << row.communicator;  // ncclDevKernel_Generic too
        EXPECT_EQ(row.members, 2) << row.communicator;
    }
    EXPECT_EQ(per_communicator, (std::map<std::string, int>{{"pg 1 (mesh_tp) ranks 0-1", kSteps - 1},
                                                            {"pg 2 (mesh_tp) ranks 2-3", kSteps},
                                                            {"pg 3 (mesh_dp) ranks 0,2", kSteps},
                                                            {"pg 4 (mesh_dp) ranks 1,3", kSteps}}));
    // The tensor-parallel collectives are numbered by their Seq (1..5), the data-parallel
    // ones by position (0..4).
    for (const CollectiveRow& row : found.collectives) {
        if (row.communicator.find("mesh_tp") != std::string::npos) {
            EXPECT_GE(row.index, 1);
            EXPECT_LE(row.index, kSteps);
        } else {
            EXPECT_LT(row.index, kSteps);
        }
    }
    if (!spec.host_only) {
        // The clocks, from the collectives' ends: exact here (every member's kernel ends
        // at the same true time). Rank 3 shares no group with rank 0.
        for (int r = 0; r < kRanks; ++r)
            EXPECT_EQ(found.clocks[static_cast<std::size_t>(r)].offset_ns,
                      (spec.clock_offset_us[0] - spec.clock_offset_us[static_cast<std::size_t>(r)]) * 1000)
                << "rank " << r;
        EXPECT_NE(found.clocks[3].how.find("with rank"), std::string::npos) << found.clocks[3].how;
        EXPECT_EQ(found.residual_max_ns, 0);
    }
}

TEST(ProcessGroups, KernelsOfTwoDimensionalJobMatchWithinTheirGroups) {
    const Spec spec;
    auto job = write_job("pg-kernels", spec);
    expect_the_answer(analyze(*job), spec);
}

// Host calls (a CPU job over gloo): the group named by the record_param_comms inside each
// gloo:all_reduce. Host calls align on the wall clock, so the ranks' clocks must agree.
TEST(ProcessGroups, HostCallsTakeTheGroupOfTheRecordInside) {
    Spec spec;
    spec.host_only = true;
    spec.clock_offset_us = {0, 0, 0, 0};
    auto job = write_job("pg-host", spec);
    const JobCollectives found = analyze(*job);
    EXPECT_TRUE(found.host_arrivals);
    for (const RankClock& clock : found.clocks) EXPECT_EQ(clock.offset_ns, 0) << clock.rank << " " << clock.how;
    // Host calls wait for the last rank in full: the same waits as the kernels'.
    EXPECT_EQ(found.rank(0)->wait_ns, kSteps * 2 * kMs);
    EXPECT_EQ(found.rank(2)->wait_ns, kSteps * 2 * kMs);
    EXPECT_EQ(found.rank(3)->wait_ns, 0);
    ASSERT_TRUE(found.straggler.has_value()) << found.straggler_evidence;
    EXPECT_EQ(*found.straggler, 3);
    EXPECT_EQ(found.matched, 4 * kSteps - 1);
}

// The importer keeps the metadata as the file gives it, on the kernel and on the range.
TEST(ProcessGroups, ImportKeepsTheCollectiveMetadata) {
    auto job = write_job("pg-import", {});
    const std::string output = job->dir.path("rank2.db");
    importing::ImportOptions options;
    const importing::ImportCounts counts = importing::import_file(job->files[2], output, options).counts;
    EXPECT_EQ(counts.collective_calls, 2 * (2 * kSteps));  // a kernel and a record_param_comms per collective
    store::TraceReader reader(output);
    const std::vector<trace::CollectiveCall> calls = reader.collective_calls();
    ASSERT_EQ(calls.size(), 20u);
    int on_kernels = 0;
    for (const trace::CollectiveCall& call : calls) {
        on_kernels += call.on_stream;
        EXPECT_EQ(reader.string(call.name_id), "allreduce");
        EXPECT_EQ(call.group_size, 2);
        EXPECT_EQ(call.in_elements, 4096);
        EXPECT_EQ(reader.string(call.dtype_id), "BFloat16");
        const std::string description(reader.string(call.group_desc_id));
        if (description == "mesh_tp") {
            EXPECT_EQ(reader.string(call.group_name_id), "2");
            EXPECT_EQ(reader.string(call.group_ranks_id), "[2, 3]");
            EXPECT_GE(call.sequence, 1);
        } else {
            EXPECT_EQ(description, "mesh_dp");
            EXPECT_EQ(reader.string(call.group_ranks_id), "[0, 2]");  // an array's JSON text
            EXPECT_EQ(call.sequence, -1);
        }
    }
    EXPECT_EQ(on_kernels, 10);
    // Each kernel's metadata sits at the kernel's own stream and start.
    std::int64_t described = 0;
    reader.for_each_kernel({}, [&](const trace::KernelEvent& kernel) {
        for (const trace::CollectiveCall& call : calls)
            described += call.on_stream && call.track_id == kernel.stream_id && call.start_ns == kernel.start_ns;
        return true;
    });
    EXPECT_EQ(described, 10);
}

// Without the metadata the same files are matched by stream, k-th to k-th over every
// rank: collectives of different groups are taken for one, and their ends, which lie
// within microseconds for one collective, lie a millisecond apart (the report's warning).
TEST(ProcessGroups, WithoutTheMetadataTheMismatchShows) {
    auto job = write_job("pg-none", {});
    for (const std::string& file : job->files) {
        std::ifstream in(file);
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        for (const char* key : {"\"Process Group Name\"", "\"Process Group Ranks\"", "\"Collective name\""}) {
            for (std::size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + 1))
                text.replace(at, 2, "\"X");
        }
        std::ofstream(file) << text;
    }
    const JobCollectives found = analyze(*job);
    for (const CollectiveRow& row : found.collectives)
        EXPECT_EQ(row.communicator.rfind("stream #", 0), 0u) << row.communicator;
    // Matched collectives end within microseconds; these are a millisecond apart.
    EXPECT_GE(found.residual_median_ns, kMs / 2);
}

}  // namespace
}  // namespace ember::analysis
