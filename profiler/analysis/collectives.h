// collectives.h: several ranks as one job. Which rank held the job back, by how much,
// doing what: each rank's collectives, matched across ranks, the ranks' clocks aligned
// on them, each rank's wait, and the straggler.
//
// What a rank's collectives are (communication.h says what communication is):
//   kernels     its communication kernels, on the stream they ran on: NCCL orders the
//               operations of a communicator, and each communicator has its stream;
//   host calls  where the rank has no communication kernel (a CPU job, a trace of the
//               host only): its outermost ranges that issue a collective (`nccl:*`,
//               `c10d::*`, NCCL's NVTX `ncclAllReduce`, ember's `allreduce/bucket`), per
//               thread. Their start is when the rank enqueued the collective.
// Where the trace names the process group of a collective (Kineto's collective
// metadata: `Process Group Name`, `Process Group Ranks`, `Seq`, on the NCCL kernel or
// on record_param_comms inside the host call), the group is the communicator: its key
// names the group ("pg 3 (mesh_tp) ranks 0-1"), only its member ranks run it, and its
// collectives are numbered by their sequence number in the group (`Seq`), else by their
// order. Otherwise each rank's communicators are numbered by their first collective
// ("stream #0", "stream #1", "host #0"), and every rank is a member. The k-th
// collective of a communicator is the same operation on every member. A collective
// whose kind differs from the communicator's reference member's (its lowest rank) is
// not matched, and the report says how many were not, and why.
//
// Clocks: ranks on different hosts disagree by milliseconds. A matched collective ends
// within microseconds on every rank (it cannot end before the last rank's data
// arrived), so a rank's offset to a communicator's reference member is the median, over
// the collectives both ran, of (reference end - rank end). The job's clock is its lowest
// rank's; each rank is aligned to it through the chain of shared communicators that
// used the most collectives (a tensor-parallel rank that shares no group with rank 0 is
// aligned through a rank that does). Host calls end when each rank returns, not
// together: ranks whose collectives are host calls align on their clock anchors
// (`clock/anchor` marks, ember's trainer), else on the recorded wall clock. The
// residual spread of a collective is (latest - earliest end) after alignment.
//
// Waits (aligned clocks): a rank's arrival at a collective is its kernel's start (or
// its host call's). Its wait is (last arrival - its arrival), at most the kernel's
// length; the rest of the kernel is transfer. Lateness is (arrival - first arrival).
// Per rank: total wait, wait as a share of its step time (of its traced span without
// steps), how often it arrived last, and its median lateness. A rank arrived last when
// it came after every other rank by more than twice the clocks' residual disagreement
// (the median end spread, above) and 1 µs: closer arrivals are ties.
//
// The straggler is the rank that most often arrived last, named when it stands out:
// last at 3 or more collectives and at least 1.5 times as often as any other rank, and
// its lateness cost the others at least twice what any other rank's lateness did. A
// last rank's cost at a collective is what it held the others back: had it arrived with
// the next-latest rank, each other rank would have waited (last - runner-up) less. The
// recoverable time is that cost summed over the collectives the straggler was last to
// (the others' whole waits there are reported too: part of them is other ranks being
// early, which balancing the straggler does not win back).
//
// Scale: a rank is read once (rank_collectives); afterwards only its collectives (16
// bytes each) stay, and analyze_job exchanges per-collective summaries between shards
// of ranks (CollectiveExchange), so the same code runs in one process or sharded over
// MPI processes, with the same answer.
#pragma once

#include "profiler/analysis/communication.h"
#include "profiler/store/reader.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ember::analysis {

// One collective as one rank saw it, on the rank's own clock.
struct CollectiveOp {
    trace::TimeNs start_ns = 0;  // arrival: the kernel's start (host calls: the call's)
    trace::TimeNs end_ns = 0;
    CollectiveKind kind = CollectiveKind::unknown;
    // Its number in its communicator, the same on every member: the process group's
    // sequence number where the trace gives one, else its position (0, 1, ...).
    std::int64_t index = 0;
};

// The collectives of one communicator of one rank, in issue order.
struct CommunicatorOps {
    std::string key;           // the same on every rank: "pg 0 (default_pg) ranks 0-7", "stream #0", "host #0"
    std::string where;         // this rank's own: "device 0 stream 17", "thread 1234 (main)"
    bool host = false;         // arrivals are host calls
    std::int32_t members = 0;  // its ranks (the process group's size); 0: every rank of the job
    std::vector<CollectiveOp> ops;
};

struct RankCollectives {
    std::string path;
    std::int32_t rank = 0;
    std::string rank_from;  // how the rank is known: "run metadata", "job file", ...
    std::int64_t clock_offset_to_wall_ns = 0;
    std::int32_t world_size = 1;                    // as its file records it
    bool wall_clock_known = false;                  // time + clock_offset_to_wall_ns is Unix time
    std::map<std::int64_t, trace::TimeNs> anchors;  // clock/anchor sequence -> time
    std::vector<CommunicatorOps> communicators;
    std::int64_t steps = 0;
    trace::TimeNs step_ns = 0;                                          // summed length of its steps (steps.h)
    std::vector<std::pair<trace::TimeNs, trace::TimeNs>> step_windows;  // its steps, in start order
    trace::TimeNs first_ns = 0, last_ns = 0;                            // its traced span

    std::int64_t collective_count() const;
    bool host_arrivals() const;  // some communicator is host calls
};

// The collectives of every rank in `reader` (a job file holds several; any other file
// is one rank, RunInfo::rank). `path` names the file in the rows (reader.path() when
// empty). Throws TraceError on a read failure.
std::vector<RankCollectives> rank_collectives(const store::TraceReader& reader, const std::string& path = {});

// How the shards of ranks of one job talk (one process: nothing to exchange).
class CollectiveExchange {
  public:
    virtual ~CollectiveExchange() = default;
    // Every process's `mine`, in process order; the same on every process.
    virtual std::vector<std::string> all_gather(const std::string& mine) = 0;
    virtual int process() const = 0;
    virtual int processes() const = 0;
};

// One process holds every rank: its own summary is all there is.
class LocalExchange : public CollectiveExchange {
  public:
    std::vector<std::string> all_gather(const std::string& mine) override { return {mine}; }
    int process() const override { return 0; }
    int processes() const override { return 1; }
};

struct RankClock {
    std::int32_t rank = 0;
    trace::TimeNs offset_ns = 0;  // added to the rank's times
    std::string how;              // "reference", "12 collectives", "clock anchor 3", "wall clock"
    std::int64_t collectives_used = 0;
};

struct CollectiveRow {
    std::string communicator;
    std::int64_t index = 0;  // k: its number in its communicator (CollectiveOp::index)
    CollectiveKind kind = CollectiveKind::unknown;
    std::int32_t ranks = 0;              // ranks that ran it
    std::int32_t members = 0;            // ranks of its communicator (the job's ranks unless a process group says)
    trace::TimeNs first_arrival_ns = 0;  // aligned, on the reference rank's clock
    trace::TimeNs last_arrival_ns = 0;
    std::int32_t last_rank = -1;             // arrived last (by more than the clocks' residual); -1 on a tie
    trace::TimeNs runner_up_arrival_ns = 0;  // the latest arrival but the last rank's
    // What the last rank held the others back: had it arrived with the next-latest,
    // each other rank would have waited (last - runner-up) less: (ranks - 1) times that.
    trace::TimeNs held_back_ns = 0;
    trace::TimeNs end_spread_ns = 0;  // latest - earliest end, aligned
    trace::TimeNs total_wait_ns = 0;  // summed over the ranks
    trace::TimeNs longest_ns = 0;     // the longest kernel (or call) of it
};

struct RankWaitRow {
    std::int32_t rank = 0;
    std::string path;
    std::string rank_from;
    std::int64_t collectives = 0;
    trace::TimeNs wait_ns = 0;
    trace::TimeNs transfer_ns = 0;
    std::int64_t steps = 0;
    trace::TimeNs step_ns = 0;  // its steps' summed length, or its span without steps
    double wait_percent = 0.0;  // wait_ns / step_ns * 100
    std::int64_t arrived_last = 0;
    trace::TimeNs median_lateness_ns = 0;
    // What its lateness cost the others: the held-back time of the collectives it arrived
    // last to, less what it inherited by waiting for another rank just before (that goes
    // to whoever held it back there). Summed, the job's held-back time.
    trace::TimeNs held_back_ns = 0;
    bool host_arrivals = false;
    std::int32_t world_size = 1;     // as its file records it
    std::int64_t wall_start_ns = 0;  // its first event on the wall clock (0: unknown)
    // Its wait per step (steps.h's steps of the rank, in start order): the waits of the
    // collectives it arrived at inside each step. What the steps report shows.
    std::vector<trace::TimeNs> step_waits;
};

struct UnmatchedCount {
    std::string reason;
    std::int64_t count = 0;
};

// What the straggler did longer than the typical rank before the collectives it was
// late to (straggler_activity).
struct ActivityRow {
    std::string what;  // "kernel" or "range"
    std::string name;
    trace::TimeNs straggler_ns = 0;
    trace::TimeNs typical_ns = 0;  // the median over the reference ranks
    trace::TimeNs extra_ns = 0;
};

struct JobCollectives {
    std::vector<RankWaitRow> ranks;          // by rank
    std::vector<RankClock> clocks;           // by rank
    std::vector<CollectiveRow> collectives;  // by first arrival
    std::vector<UnmatchedCount> unmatched;
    std::int64_t matched = 0;                                   // collectives run by two or more ranks
    trace::TimeNs residual_median_ns = 0, residual_max_ns = 0;  // end spreads
    std::optional<std::int32_t> straggler;
    std::string straggler_evidence;  // one sentence with the numbers
    // The others' waits at the collectives the straggler was last to, and what of them
    // its lateness caused (held_back_ns summed): the time to win back by balancing it.
    trace::TimeNs straggler_waits_ns = 0;
    trace::TimeNs recoverable_ns = 0;
    std::vector<std::int32_t> reference_ranks;  // typical ranks the straggler is compared with
    std::vector<ActivityRow> doing_instead;
    bool host_arrivals = false;
    // Signs that the files are not one job: world sizes that differ, recordings hours apart.
    std::vector<std::string> warnings;

    const RankWaitRow* rank(std::int32_t number) const;
};

// The job's analysis from this process's shard of ranks (all of them in one process).
// With `exchange`, every process gets the same result.
JobCollectives analyze_job(std::vector<RankCollectives> shard, CollectiveExchange* exchange = nullptr);

// The job in one file (a job file of several ranks, or one rank's file: then nothing is
// matched): its ranks' collectives analysed, and what the straggler did instead
// (`activity_rows` rows).
JobCollectives job_collectives(const store::TraceReader& reader, std::size_t activity_rows = 10);

// What the straggler did before the collectives it was last to, against the reference
// ranks: kernel and range time per name in the window from its previous collective to
// its arrival, summed over those collectives; rows with the most extra time first
// (`top` rows), keeping those with at least 5% of the largest excess and 10% more than
// the typical rank's time. `readers` hold the straggler and reference ranks (each file read once);
// a job file may hold all of them. `job_rank[i]`, when given, turns reader i's own rank
// numbers into the job's (files numbered by command-line order).
std::vector<ActivityRow> straggler_activity(
    const std::vector<const store::TraceReader*>& readers, const JobCollectives& job, std::size_t top = 10,
    const std::vector<std::map<std::int32_t, std::int32_t>>* job_rank = nullptr);

}  // namespace ember::analysis
