// collectives_report.cpp: see collectives_report.h.
#include "profiler/analysis/collectives_report.h"

#include <fmt/format.h>

#include <algorithm>

using ember::trace::TimeNs;

namespace ember::analysis {

namespace {

constexpr const char* kGroup = "collectives";

Table ranks_table(const JobCollectives& job) {
    std::int64_t communicators = 0;
    {
        std::vector<std::string> keys;
        for (const CollectiveRow& row : job.collectives) keys.push_back(row.communicator);
        std::sort(keys.begin(), keys.end());
        communicators = std::unique(keys.begin(), keys.end()) - keys.begin();
    }
    Table table{"ranks",
                fmt::format("Collectives across ranks ({} ranks, {} collectives matched on {} communicator{}; "
                            "arrival = {})",
                            job.ranks.size(), job.matched, communicators, communicators == 1 ? "" : "s",
                            job.host_arrivals ? "the host call's start" : "the collective kernel's start"),
                {},
                {},
                {}};
    table.group = kGroup;
    table.columns = {
        {"rank", "Rank", ColumnKind::integer},
        {"collectives", "Collectives", ColumnKind::integer},
        {"wait_ns", "Wait", ColumnKind::time},
        {"wait_percent", "Wait (% of step)", ColumnKind::percent},
        {"transfer_ns", "Transfer", ColumnKind::time},
        {"arrived_last", "Arrived Last", ColumnKind::integer},
        {"median_lateness_ns", "Median Lateness", ColumnKind::time},
        {"clock_offset_ns", "Clock Offset", ColumnKind::time},
        {"aligned_on", "Aligned On", ColumnKind::text},
        {"file", "File", ColumnKind::text},
    };
    table.empty_note = "no collectives: no communication kernels and no host collective calls in these files";
    for (const RankWaitRow& row : job.ranks) {
        const RankClock* clock = nullptr;
        for (const RankClock& c : job.clocks)
            if (c.rank == row.rank) clock = &c;
        table.rows.push_back({std::int64_t{row.rank}, row.collectives, row.wait_ns,
                              row.step_ns > 0 ? Cell{row.wait_percent} : Cell{std::monostate{}}, row.transfer_ns,
                              row.arrived_last, row.median_lateness_ns, clock ? clock->offset_ns : 0,
                              clock ? clock->how : std::string("-"), row.path});
    }
    nlohmann::json fields = nlohmann::json::object();
    fields["straggler"] = job.straggler ? nlohmann::json(*job.straggler) : nlohmann::json(nullptr);
    fields["straggler_evidence"] = job.straggler_evidence;
    fields["recoverable_ns"] = job.recoverable_ns;
    fields["straggler_waits_ns"] = job.straggler_waits_ns;
    fields["matched"] = job.matched;
    fields["residual_median_ns"] = job.residual_median_ns;
    fields["residual_max_ns"] = job.residual_max_ns;
    fields["arrivals"] = job.host_arrivals ? "host calls" : "kernels";
    nlohmann::json unmatched = nlohmann::json::array();
    for (const UnmatchedCount& count : job.unmatched) unmatched.push_back({{"reason", count.reason}, {"count", count.count}});
    fields["unmatched"] = std::move(unmatched);
    fields["warnings"] = job.warnings;
    table.group_fields = std::move(fields);

    for (const std::string& warning : job.warnings) table.notes.push_back("warning: " + warning);
    if (job.ranks.size() == 1)
        table.notes.push_back("one rank: collectives are matched across the ranks of a job; give every rank's file "
                              "(ember stats rank0.db rank1.db ...) or a job file (ember merge)");
    if (!job.ranks.empty()) {
        if (job.straggler) {
            table.notes.push_back("straggler: " + job.straggler_evidence + ".");
            table.notes.push_back(fmt::format(
                "advice: balance the work of rank {}: the other ranks would win back {:.3f} ms of waiting (what "
                "its lateness beyond the next-latest rank's cost them)",
                *job.straggler, job.recoverable_ns / 1e6));
        } else if (job.ranks.size() >= 2 && job.matched > 0) {
            table.notes.push_back("no straggler: no rank arrived last markedly more often than the others.");
        }
        if (job.residual_median_ns > 0 || job.residual_max_ns > 0)
            table.notes.push_back(fmt::format(
                "clocks: after alignment the collectives' ends lie within {:.3f} us of each other at the median "
                "({:.3f} us at most)",
                job.residual_median_ns / 1e3, job.residual_max_ns / 1e3));
        // The same collective ends within microseconds on every rank; ends a millisecond
        // apart say the k-th collectives matched are not one operation.
        const bool point_to_point = std::any_of(job.collectives.begin(), job.collectives.end(), [](const CollectiveRow& row) {
            return row.kind == CollectiveKind::send_recv || row.kind == CollectiveKind::send ||
                   row.kind == CollectiveKind::recv;
        });
        if (job.residual_median_ns > 1'000'000)
            table.notes.push_back(fmt::format(
                "warning: matched collectives should end within microseconds of each other, and these end {:.3f} ms "
                "apart at the median: the k-th collectives of these files are probably not the same operations "
                "(traces cut to different windows or sampled{}); the waits above are not reliable",
                job.residual_median_ns / 1e6,
                point_to_point ? ", or point-to-point sends and receives between different pairs of ranks" : ""));
        for (const UnmatchedCount& count : job.unmatched)
            table.notes.push_back(fmt::format("not matched: {} collective{}: {}", count.count, count.count == 1 ? "" : "s",
                                              count.reason));
        std::vector<std::string> sources;
        for (const RankWaitRow& row : job.ranks)
            if (std::find(sources.begin(), sources.end(), row.rank_from) == sources.end()) sources.push_back(row.rank_from);
        std::string known;
        for (const std::string& source : sources) known += (known.empty() ? "" : ", ") + source;
        table.notes.push_back("ranks from: " + known);
    }
    return table;
}

Table doing_instead_table(const JobCollectives& job) {
    std::string references;
    for (std::int32_t rank : job.reference_ranks) references += (references.empty() ? "" : ", ") + std::to_string(rank);
    Table table{"doing_instead",
                job.straggler ? fmt::format("What rank {} did longer before the collectives it arrived last to "
                                            "(against the median of ranks {})",
                                            *job.straggler, references)
                              : std::string("What the straggler did longer (no straggler)"),
                {},
                {},
                {}};
    table.group = kGroup;
    table.columns = {
        {"what", "What", ColumnKind::text},
        {"straggler_ns", "Straggler", ColumnKind::time},
        {"typical_ns", "Typical", ColumnKind::time},
        {"extra_ns", "Extra", ColumnKind::time},
        {"name", "Name", ColumnKind::text},
    };
    table.empty_note = job.straggler ? "nothing in its kernels or ranges ran clearly longer than on the typical ranks "
                                       "(5% of its lateness or more): look at its host (data loading, the Python loop, "
                                       "other processes) and at what came before the trace"
                                     : "no straggler";
    for (const ActivityRow& row : job.doing_instead)
        table.rows.push_back({row.what, row.straggler_ns, row.typical_ns, row.extra_ns, row.name});
    return table;
}

Table collective_rows_table(const JobCollectives& job, std::size_t top, bool text) {
    std::vector<const CollectiveRow*> rows;
    for (const CollectiveRow& row : job.collectives) rows.push_back(&row);
    const bool cut = text && top > 0 && rows.size() > top;
    if (cut) {
        std::stable_sort(rows.begin(), rows.end(), [](const CollectiveRow* a, const CollectiveRow* b) {
            return a->total_wait_ns > b->total_wait_ns;
        });
        rows.resize(top);
    }
    Table table{"collectives",
                cut ? fmt::format("The {} collectives with the most waiting (of {}; --format json lists all)", top,
                                  job.collectives.size())
                    : std::string("Every matched collective (At: its first arrival, since the job's first collective)"),
                {},
                {},
                {}};
    table.group = kGroup;
    table.columns = {
        {"communicator", "Communicator", ColumnKind::text},
        {"index", "#", ColumnKind::integer},
        {"kind", "Kind", ColumnKind::text},
        {"ranks", "Ranks", ColumnKind::integer},
        {"at_ns", "At", ColumnKind::time},
        {"arrival_spread_ns", "Arrival Spread", ColumnKind::time},
        {"last_rank", "Last Rank", ColumnKind::integer},
        {"total_wait_ns", "Total Wait", ColumnKind::time},
        {"held_back_ns", "Held Back", ColumnKind::time},
        {"end_spread_ns", "End Spread", ColumnKind::time},
        {"longest_ns", "Longest", ColumnKind::time},
    };
    // "At": the first arrival, since the job's first collective (aligned clocks).
    const TimeNs origin = job.collectives.empty() ? 0 : job.collectives.front().first_arrival_ns;
    for (const CollectiveRow* row : rows)
        table.rows.push_back({row->communicator, row->index, std::string(collective_kind_name(row->kind)),
                              std::int64_t{row->ranks}, row->first_arrival_ns - origin,
                              row->last_arrival_ns - row->first_arrival_ns,
                              row->last_rank >= 0 ? Cell{std::int64_t{row->last_rank}} : Cell{std::monostate{}},
                              row->total_wait_ns, row->held_back_ns, row->end_spread_ns, row->longest_ns});
    return table;
}

}  // namespace

std::vector<Table> collectives_tables(const JobCollectives& job, std::size_t top, bool text) {
    std::vector<Table> tables;
    tables.push_back(ranks_table(job));
    if (job.straggler) tables.push_back(doing_instead_table(job));
    tables.push_back(collective_rows_table(job, top, text));
    return tables;
}

}  // namespace ember::analysis
