// job_overview.h: the viewer's picture of a job of many ranks — one compact row per
// rank on the job's aligned clock, each instant coloured by what the rank did: compute
// (its non-communication kernels), waiting in a collective for the last rank,
// transferring (the rest of the collective), or nothing (idle). Readable at 1024 ranks:
// each row keeps its activity in fixed bins over the job's span (3 bytes a bin) and its
// collectives exactly (arrival, end of its wait, end), so drawing a frame costs the
// pixels on screen, whatever the events.
//
// The numbers are the job analysis's (analysis/collectives.h through job/job.h): the
// clock offsets, each collective's last arrival, each rank's wait and the straggler;
// the rows only place them in time. Model time here is the timeline's: file time plus
// the rank's clock offset (TraceModel built with job_shifts()).
#pragma once

#include "profiler/analysis/collectives.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ember::viewer {

enum class JobActivity : std::uint8_t { compute = 0, wait = 1, transfer = 2 };
inline constexpr int kJobActivityCount = 3;

// One collective of one rank, on the job's clock.
struct JobCollectiveMark {
    std::uint32_t collective = 0;  // index into JobOverview::job.collectives
    trace::TimeNs arrival_ns = 0;
    trace::TimeNs wait_end_ns = 0;  // arrival + its wait
    trace::TimeNs end_ns = 0;
};

struct JobRankRow {
    std::int32_t rank = 0;
    std::string trace;            // the ember trace read
    std::string shown_as;         // the file as the user named it
    trace::TimeNs offset_ns = 0;  // added to the file's times
    // Per bin, the share (0..255) of the bin each activity fills.
    std::vector<std::array<std::uint8_t, kJobActivityCount>> bins;
    std::vector<JobCollectiveMark> collectives;      // by arrival
    std::vector<std::int32_t> mark_of_collective;    // collective index -> index into `collectives`, -1: none
    const analysis::RankWaitRow* numbers = nullptr;  // into JobOverview::job.ranks
};

enum class JobOrder : std::uint8_t { rank = 0, lateness = 1, wait = 2 };

struct JobOverview {
    analysis::JobCollectives job;
    std::vector<JobRankRow> ranks;  // by rank
    trace::TimeNs begin_ns = 0, end_ns = 0;
    int bin_count = 0;

    trace::TimeNs bin_ns() const {
        return bin_count > 0 ? std::max<trace::TimeNs>(1, (end_ns - begin_ns) / bin_count + 1) : 1;
    }
    // The shares of the activities over [start, end) of row `row` (0..1 each), from its bins.
    std::array<double, kJobActivityCount> activity(int row, trace::TimeNs start, trace::TimeNs end) const;
    // Row indexes in `order` (lateness and wait: largest first; ties by rank).
    std::vector<int> row_order(JobOrder order) const;
    // The collective of row `row` drawn at `time` (within `slack` of its box), if any.
    std::optional<std::uint32_t> collective_at(int row, trace::TimeNs time, trace::TimeNs slack) const;
    // The clock shift of each trace, for TraceModel (same order as `traces`).
    std::vector<trace::TimeNs> shifts_for(const std::vector<std::string>& traces) const;
    std::size_t memory_bytes() const;
};

// Reads the rank files (ember traces; `shown_as` names them as the user did) twice, in
// parallel over the cores: once for the job analysis, once for each rank's activity.
// Throws store::TraceError naming a file that cannot be read.
JobOverview build_job_overview(const std::vector<std::string>& traces, const std::vector<std::string>& shown_as,
                               int bin_count = 4096);

}  // namespace ember::viewer
