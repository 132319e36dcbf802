// collectives_report.cpp: see collectives_report.h.
#include "profiler/analysis/collectives_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

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
        {"held_back_ns", "Held Others Back", ColumnKind::time},
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
                              row.arrived_last, row.median_lateness_ns, row.held_back_ns, clock ? clock->offset_ns : 0,
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
    for (const UnmatchedCount& count : job.unmatched)
        unmatched.push_back({{"reason", count.reason}, {"count", count.count}});
    fields["unmatched"] = std::move(unmatched);
    fields["warnings"] = job.warnings;
    table.group_fields = std::move(fields);

    for (const std::string& warning : job.warnings) table.notes.push_back("warning: " + warning);
    if (job.ranks.size() == 1)
        table.notes.push_back(
            "one rank: collectives are matched across the ranks of a job; give every rank's file "
            "(ember stats rank0.db rank1.db ...) or a job file (ember merge)");
    if (!job.ranks.empty()) {
        if (job.straggler) {
            table.notes.push_back("straggler: " + job.straggler_evidence + ".");
            table.notes.push_back(fmt::format(
                "advice: balance the work of rank {}: the other ranks would win back {:.3f} ms of waiting (what "
                "its lateness beyond the next-latest rank's cost them, directly or through ranks it made late)",
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
        const bool point_to_point =
            std::any_of(job.collectives.begin(), job.collectives.end(), [](const CollectiveRow& row) {
                return row.kind == CollectiveKind::send_recv || row.kind == CollectiveKind::send ||
                       row.kind == CollectiveKind::recv;
            });
        if (job.residual_median_ns > 1'000'000)
            table.notes.push_back(fmt::format(
                "warning: matched collectives should end within microseconds of each other, and these end {:.3f} ms "
                "apart at the median: the k-th collectives of these files are probably not the same operations "
                "(traces cut to different windows or sampled{}, or the collectives of several process groups on one "
                "stream in traces that do not name their process group); the waits above are not reliable",
                job.residual_median_ns / 1e6,
                point_to_point ? ", or point-to-point sends and receives between different pairs of ranks" : ""));
        for (const UnmatchedCount& count : job.unmatched)
            table.notes.push_back(fmt::format("not matched: {} collective{}: {}", count.count,
                                              count.count == 1 ? "" : "s", count.reason));
        std::vector<std::string> sources;
        for (const RankWaitRow& row : job.ranks)
            if (std::find(sources.begin(), sources.end(), row.rank_from) == sources.end())
                sources.push_back(row.rank_from);
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
        {"what", "What", ColumnKind::text},          {"straggler_ns", "Straggler", ColumnKind::time},
        {"typical_ns", "Typical", ColumnKind::time}, {"extra_ns", "Extra", ColumnKind::time},
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
        {"members", "Of", ColumnKind::integer},
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
                              std::int64_t{row->ranks}, std::int64_t{row->members}, row->first_arrival_ns - origin,
                              row->last_arrival_ns - row->first_arrival_ns,
                              row->last_rank >= 0 ? Cell{std::int64_t{row->last_rank}} : Cell{std::monostate{}},
                              row->total_wait_ns, row->held_back_ns, row->end_spread_ns, row->longest_ns});
    return table;
}

nlohmann::json job_summary(const JobCollectives& job) {
    TimeNs wait = 0;
    for (const RankWaitRow& row : job.ranks) wait += row.wait_ns;
    nlohmann::json summary = nlohmann::json::object();
    summary["ranks"] = job.ranks.size();
    summary["matched"] = job.matched;
    summary["straggler"] = job.straggler ? nlohmann::json(*job.straggler) : nlohmann::json(nullptr);
    summary["straggler_evidence"] = job.straggler_evidence;
    summary["recoverable_ns"] = job.recoverable_ns;
    summary["wait_ns"] = wait;
    return summary;
}

std::string straggler_text(const JobCollectives& job) {
    return job.straggler
               ? fmt::format("rank {} (holding the others back {:.3f} ms)", *job.straggler, job.recoverable_ns / 1e6)
               : std::string("none");
}

}  // namespace

std::vector<Table> job_diff_tables(const JobCollectives& a, const JobCollectives& b, std::size_t top) {
    Table table{"ranks", "Waiting in collectives, rank by rank (A -> B)", {}, {}, {}};
    table.group = "job_diff";
    table.columns = {
        {"rank", "Rank", ColumnKind::integer},
        {"a_wait_ns", "Wait A", ColumnKind::time},
        {"b_wait_ns", "Wait B", ColumnKind::time},
        {"delta_wait_ns", "Change", ColumnKind::time},
        {"a_arrived_last", "Last A", ColumnKind::integer},
        {"b_arrived_last", "Last B", ColumnKind::integer},
    };
    struct Pair {
        std::int32_t rank;
        const RankWaitRow *a, *b;
    };
    std::map<std::int32_t, Pair> pairs;
    for (const RankWaitRow& row : a.ranks) pairs[row.rank] = {row.rank, &row, nullptr};
    for (const RankWaitRow& row : b.ranks) {
        auto [pair, inserted] = pairs.try_emplace(row.rank, Pair{row.rank, nullptr, &row});
        if (!inserted) pair->second.b = &row;
    }
    std::vector<Pair> list;
    for (const auto& [rank, pair] : pairs) list.push_back(pair);
    auto wait_of = [](const RankWaitRow* row) { return row ? row->wait_ns : 0; };
    std::stable_sort(list.begin(), list.end(), [&](const Pair& x, const Pair& y) {
        return std::llabs(wait_of(x.b) - wait_of(x.a)) > std::llabs(wait_of(y.b) - wait_of(y.a));
    });
    const std::size_t shown = top > 0 ? std::min(top, list.size()) : list.size();
    for (std::size_t i = 0; i < shown; ++i) {
        const Pair& pair = list[i];
        auto cell = [](const RankWaitRow* row, auto value) -> Cell {
            if (!row) return std::monostate{};
            return static_cast<std::int64_t>(value(*row));
        };
        table.rows.push_back({std::int64_t{pair.rank}, cell(pair.a, [](const RankWaitRow& r) { return r.wait_ns; }),
                              cell(pair.b, [](const RankWaitRow& r) { return r.wait_ns; }),
                              pair.a && pair.b ? Cell{pair.b->wait_ns - pair.a->wait_ns} : Cell{std::monostate{}},
                              cell(pair.a, [](const RankWaitRow& r) { return r.arrived_last; }),
                              cell(pair.b, [](const RankWaitRow& r) { return r.arrived_last; })});
    }
    table.empty_note = "no ranks with matched collectives in either job";
    nlohmann::json fields = nlohmann::json::object();
    fields["a"] = job_summary(a);
    fields["b"] = job_summary(b);
    table.group_fields = std::move(fields);
    TimeNs a_wait = 0, b_wait = 0;
    for (const RankWaitRow& row : a.ranks) a_wait += row.wait_ns;
    for (const RankWaitRow& row : b.ranks) b_wait += row.wait_ns;
    table.notes.push_back(fmt::format("straggler: A {}; B {}", straggler_text(a), straggler_text(b)));
    table.notes.push_back(fmt::format("waiting in collectives, all ranks: A {:.3f} ms, B {:.3f} ms ({:+.3f} ms)",
                                      a_wait / 1e6, b_wait / 1e6, (b_wait - a_wait) / 1e6));
    if (shown < list.size())
        table.notes.push_back(fmt::format("{} of {} ranks listed, the most changed first (--top)", shown, list.size()));
    return {std::move(table)};
}

std::vector<Table> collectives_tables(const JobCollectives& job, std::size_t top, bool text) {
    std::vector<Table> tables;
    tables.push_back(ranks_table(job));
    if (job.straggler) tables.push_back(doing_instead_table(job));
    tables.push_back(collective_rows_table(job, top, text));
    return tables;
}

}  // namespace ember::analysis
