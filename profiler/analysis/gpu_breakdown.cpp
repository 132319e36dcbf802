// gpu_breakdown.cpp: the breakdowns of gpu_breakdown.h, as interval arithmetic over
// per-class unions (intervals.h).
#include "profiler/analysis/gpu_breakdown.h"

#include "profiler/analysis/enum_names.h"
#include "profiler/analysis/intervals.h"

#include <algorithm>
#include <array>
#include <map>
#include <unordered_map>

namespace ember::analysis {

namespace {

struct ClassUnions {
    std::array<IntervalUnion, kKernelClassCount> by_class;
    IntervalUnion all;
    trace::TimeNs first_start_ns = 0;
    trace::TimeNs last_end_ns = 0;
};

ClassUnions class_unions(const RankGpuWork& rank) {
    ClassUnions unions;
    std::array<std::vector<Interval>, kKernelClassCount> intervals;
    std::vector<Interval> all;
    all.reserve(rank.events.size() + rank.stream_syncs.size());
    bool first = true;
    auto busy = [&](const GpuEvent& event) {
        all.push_back({event.start_ns, event.end_ns});
        unions.first_start_ns = first ? event.start_ns : std::min(unions.first_start_ns, event.start_ns);
        unions.last_end_ns = first ? event.end_ns : std::max(unions.last_end_ns, event.end_ns);
        first = false;
    };
    for (const GpuEvent& event : rank.events) {
        intervals[static_cast<int>(event.kernel_class)].push_back({event.start_ns, event.end_ns});
        busy(event);
    }
    // HTA's stream synchronizations (hta only): GPU busy time of no class.
    for (const GpuEvent& event : rank.stream_syncs) busy(event);
    for (int k = 0; k < kKernelClassCount; ++k) unions.by_class[k] = union_of(std::move(intervals[k]));
    unions.all = union_of(std::move(all));
    return unions;
}

const IntervalUnion& of(const ClassUnions& unions, KernelClass kind) {
    return unions.by_class[static_cast<int>(kind)];
}

}  // namespace

std::vector<TemporalRow> temporal_breakdown(const std::vector<RankGpuWork>& work) {
    std::vector<TemporalRow> rows;
    for (const RankGpuWork& rank : work) {
        if (rank.events.empty()) continue;
        const ClassUnions unions = class_unions(rank);
        TemporalRow row;
        row.rank = rank.rank;
        row.span_ns = unions.last_end_ns - unions.first_start_ns;
        row.idle_ns = row.span_ns - measure(unions.all);
        row.compute_ns = measure(of(unions, KernelClass::computation));
        row.non_compute_ns = row.span_ns - row.compute_ns - row.idle_ns;
        rows.push_back(row);
    }
    return rows;
}

std::vector<KernelTypeRow> kernel_type_breakdown(const std::vector<RankGpuWork>& work) {
    std::vector<KernelTypeRow> rows;
    for (const RankGpuWork& rank : work) {
        const ClassUnions unions = class_unions(rank);
        // A sweep over the class unions: between two boundaries the set of running
        // classes is constant (a bit mask), and that span belongs to its combination.
        std::vector<std::pair<trace::TimeNs, int>> boundaries;  // time, +bit / -bit
        for (int k = 0; k < kKernelClassCount; ++k)
            for (const Interval& interval : unions.by_class[k]) {
                boundaries.push_back({interval.start_ns, 1 << k});
                boundaries.push_back({interval.end_ns, -(1 << k)});
            }
        std::sort(boundaries.begin(), boundaries.end());
        std::array<trace::TimeNs, 1 << kKernelClassCount> by_mask{};
        int running = 0;
        for (std::size_t i = 0; i + 1 < boundaries.size(); ++i) {
            running += boundaries[i].second;
            by_mask[running] += boundaries[i + 1].first - boundaries[i].first;
        }
        std::vector<KernelTypeRow> rank_rows;
        for (int mask = 1; mask < (1 << kKernelClassCount); ++mask) {
            if (by_mask[mask] <= 0) continue;
            std::string name;
            for (int k = 0; k < kKernelClassCount; ++k)
                if (mask & (1 << k))
                    name += (name.empty() ? "" : " overlapping ") +
                            std::string(kernel_class_name(static_cast<KernelClass>(k)));
            rank_rows.push_back({rank.rank, name, by_mask[mask]});
        }
        std::stable_sort(rank_rows.begin(), rank_rows.end(),
                         [](const KernelTypeRow& a, const KernelTypeRow& b) { return a.total_ns > b.total_ns; });
        rows.insert(rows.end(), rank_rows.begin(), rank_rows.end());
    }
    return rows;
}

std::vector<TopKernelRow> top_kernels_by_type(const store::TraceReader& reader, const std::vector<RankGpuWork>& work,
                                              std::size_t per_type) {
    std::vector<TopKernelRow> rows;
    for (const RankGpuWork& rank : work) {
        // (class, name id or copy kind) -> totals
        std::map<std::pair<int, std::int64_t>, TopKernelRow> totals;
        for (const GpuEvent& event : rank.events) {
            const std::int64_t key = event.kind == GpuEventKind::kernel ? static_cast<std::int64_t>(event.name_id)
                                                                        : -1 - static_cast<std::int64_t>(event.kind);
            TopKernelRow& row = totals[{static_cast<int>(event.kernel_class), key}];
            const trace::TimeNs duration = event.end_ns - event.start_ns;
            if (row.instances == 0) {
                row.rank = rank.rank;
                row.kernel_type = kernel_class_name(event.kernel_class);
                row.name = event.kind == GpuEventKind::kernel   ? std::string(reader.string(event.name_id))
                           : event.kind == GpuEventKind::memcpy ? "memcpy"
                                                                : "memset";
                row.min_ns = row.max_ns = duration;
            }
            row.total_ns += duration;
            ++row.instances;
            row.min_ns = std::min(row.min_ns, duration);
            row.max_ns = std::max(row.max_ns, duration);
        }
        for (int k = 0; k < kKernelClassCount; ++k) {
            std::vector<TopKernelRow> of_class;
            for (const auto& [key, row] : totals)
                if (key.first == k) of_class.push_back(row);
            std::stable_sort(of_class.begin(), of_class.end(),
                             [](const TopKernelRow& a, const TopKernelRow& b) { return a.total_ns > b.total_ns; });
            if (of_class.size() > per_type) of_class.resize(per_type);
            rows.insert(rows.end(), of_class.begin(), of_class.end());
        }
    }
    return rows;
}

std::vector<OverlapRow> communication_overlap(const std::vector<RankGpuWork>& work) {
    std::vector<OverlapRow> rows;
    for (const RankGpuWork& rank : work) {
        const ClassUnions unions = class_unions(rank);
        OverlapRow row;
        row.rank = rank.rank;
        row.communication_ns = measure(of(unions, KernelClass::communication));
        row.overlapped_ns =
            measure(intersection(of(unions, KernelClass::communication), of(unions, KernelClass::computation)));
        if (row.communication_ns > 0)
            row.percent = 100.0 * static_cast<double>(row.overlapped_ns) / static_cast<double>(row.communication_ns);
        rows.push_back(row);
    }
    return rows;
}

const char* idle_category_name(IdleCategory category) {
    static constexpr EnumName<IdleCategory> kNames[] = {
        {IdleCategory::host_wait, "host_wait"},
        {IdleCategory::kernel_wait, "kernel_wait"},
        {IdleCategory::other, "other"},
    };
    return name_in(kNames, category, "other");
}

namespace {

// Calls `visit(rank, stream, gap_start, gap_end, category)` for every gap on every
// stream, and `first(rank, stream)` for each stream's first event (it has no gap
// before it, but makes the stream, and HTA's "other" row, exist).
template <typename Visit, typename First>
void for_each_stream_gap(const std::vector<RankGpuWork>& work, trace::TimeNs threshold_ns, Visit visit, First first) {
    for (const RankGpuWork& rank : work) {
        std::unordered_map<std::uint64_t, trace::TimeNs> previous_end;  // by stream
        for (const GpuEvent& event : rank.events) {                     // by start: per stream, in start order too
            auto [found, inserted] = previous_end.try_emplace(event.cuda_stream, event.end_ns);
            if (inserted) {
                first(rank.rank, event.cuda_stream);
                continue;
            }
            const trace::TimeNs previous = found->second;
            const IdleCategory category =
                idle_gap_cause(event.linked() ? std::optional(event.launch_start_ns) : std::nullopt, previous,
                               event.start_ns, threshold_ns);
            visit(rank.rank, event.cuda_stream, previous, event.start_ns, category);
            found->second = event.end_ns;
        }
    }
}

}  // namespace

std::vector<IdleRow> idle_breakdown(const std::vector<RankGpuWork>& work, trace::TimeNs kernel_wait_threshold_ns) {
    // (rank, stream) in order of first appearance -> per category totals.
    struct StreamTotals {
        std::int32_t rank = 0;
        std::uint64_t stream = 0;
        std::array<trace::TimeNs, 3> idle{};
        std::array<std::int64_t, 3> gaps{};
        std::array<bool, 3> present{};
    };
    std::vector<StreamTotals> streams;
    std::map<std::pair<std::int32_t, std::uint64_t>, std::size_t> index;
    auto totals = [&](std::int32_t rank, std::uint64_t stream) -> StreamTotals& {
        auto [found, inserted] = index.try_emplace({rank, stream}, streams.size());
        if (inserted) streams.push_back({rank, stream, {}, {}, {}});
        return streams[found->second];
    };
    for_each_stream_gap(
        work, kernel_wait_threshold_ns,
        [&](std::int32_t rank, std::uint64_t stream, trace::TimeNs start, trace::TimeNs end, IdleCategory category) {
            StreamTotals& t = totals(rank, stream);
            const int c = static_cast<int>(category);
            t.idle[c] += end - start;
            ++t.gaps[c];
            t.present[c] = true;
        },
        // HTA counts each stream's first event as an "other" gap of unknown length.
        [&](std::int32_t rank, std::uint64_t stream) {
            totals(rank, stream).present[static_cast<int>(IdleCategory::other)] = true;
        });
    std::vector<IdleRow> rows;
    for (const StreamTotals& t : streams) {
        const trace::TimeNs total = t.idle[0] + t.idle[1] + t.idle[2];
        for (int c = 0; c < 3; ++c) {
            if (!t.present[c]) continue;
            IdleRow row{t.rank, t.stream, static_cast<IdleCategory>(c), t.idle[c], t.gaps[c], std::nullopt};
            if (total != 0) row.ratio = static_cast<double>(t.idle[c]) / static_cast<double>(total);
            rows.push_back(row);
        }
    }
    return rows;
}

std::vector<IdleGapSpan> idle_gaps_by_category(const std::vector<RankGpuWork>& work,
                                               trace::TimeNs kernel_wait_threshold_ns) {
    std::vector<IdleGapSpan> spans;
    for_each_stream_gap(
        work, kernel_wait_threshold_ns,
        [&](std::int32_t rank, std::uint64_t stream, trace::TimeNs start, trace::TimeNs end, IdleCategory category) {
            if (end > start) spans.push_back({rank, stream, start, end, category});
        },
        [](std::int32_t, std::uint64_t) {});
    return spans;
}

std::vector<GpuTimelineRow> gpu_timeline(const std::vector<RankGpuWork>& work) {
    std::vector<GpuTimelineRow> rows;
    for (const RankGpuWork& rank : work) {
        if (rank.events.empty()) continue;
        const ClassUnions unions = class_unions(rank);
        const IntervalUnion& computation = of(unions, KernelClass::computation);
        const IntervalUnion& communication = of(unions, KernelClass::communication);
        const IntervalUnion& memory = of(unions, KernelClass::memory);
        const trace::TimeNs total = unions.last_end_ns - unions.first_start_ns;
        const trace::TimeNs busy = measure(unions.all);
        const std::pair<const char*, trace::TimeNs> values[] = {
            {"computation_time", measure(computation)},
            {"exposed_comm_time", measure(difference(communication, computation))},
            {"exposed_memcpy_time", measure(difference(difference(memory, computation), communication))},
            {"busy_time", busy},
            {"idle_time", total - busy},
            {"total_time", total},
            {"total_comm_time", measure(communication)},
            {"total_memcpy_time", measure(memory)},
        };
        for (const auto& [type, time] : values)
            rows.push_back({rank.rank, type, time,
                            total > 0 ? 100.0 * static_cast<double>(time) / static_cast<double>(total) : 0.0});
    }
    return rows;
}

}  // namespace ember::analysis
