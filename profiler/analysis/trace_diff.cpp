// trace_diff.cpp: `ember diff` (trace_diff.h), one run profiled. A run is read in four
// passes: the step windows (step_breakdown), the GPU work (gpu_work), the host ranges of
// the threads that drive each rank, and GROUP BY aggregates of every event table for the
// name tables (trace_diff_name_tables.cpp). The step breakdown is interval arithmetic
// (intervals.h): one union per category, disjoint by construction, each measured inside
// every step window. Two runs compared and the CI gate: trace_diff_compare.cpp; text, CSV
// and JSON: trace_diff_output.cpp; normalise_name: operation_names.cpp.
//
// [SECTION] Names
// [SECTION] Ranks and threads
// [SECTION] The per-rank partition of time
// [SECTION] Steps of the compared scope
// [SECTION] profile_run
#include "profiler/analysis/trace_diff.h"

#include "profiler/analysis/rank_map.h"

#include "profiler/analysis/enum_names.h"
#include "profiler/analysis/gpu_memory.h"
#include "profiler/analysis/gpu_work.h"
#include "profiler/analysis/idle_gaps.h"
#include "profiler/analysis/operation_names.h"
#include "profiler/analysis/range_roles.h"
#include "profiler/analysis/steps.h"
#include "profiler/analysis/intervals.h"
#include "profiler/analysis/rank_summary.h"
#include "profiler/store/table_sql.h"
#include "profiler/analysis/trace_diff_name_tables.h"
#include "profiler/analysis/step_breakdown.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace ember::analysis {

using trace::TimeNs;

// ---------------------------------------------------------------------------
// [SECTION] Names
// ---------------------------------------------------------------------------

namespace {

constexpr EnumName<StepCategory> kStepCategoryNames[] = {
    {StepCategory::gpu_compute, "gpu_compute"},       {StepCategory::exposed_communication, "exposed_communication"},
    {StepCategory::exposed_copies, "exposed_copies"}, {StepCategory::dataloader_wait, "dataloader_wait"},
    {StepCategory::idle_host_wait, "idle_host_wait"}, {StepCategory::idle_kernel_wait, "idle_kernel_wait"},
    {StepCategory::idle_other, "idle_other"},         {StepCategory::host_side, "host_side"},
};

constexpr EnumName<DiffMetric> kDiffMetricNames[] = {
    {DiffMetric::step, "step"},
    {DiffMetric::gpu_busy, "gpu_busy"},
    {DiffMetric::span, "span"},
};

constexpr EnumName<Verdict> kVerdictNames[] = {
    {Verdict::unchanged, "unchanged"},
    {Verdict::noise, "noise"},
    {Verdict::faster, "faster"},
    {Verdict::slower, "slower"},
};

constexpr EnumName<NameStatus> kNameStatusNames[] = {
    {NameStatus::both, ""},
    {NameStatus::appeared, "new"},
    {NameStatus::disappeared, "gone"},
};

}  // namespace

const char* step_category_name(StepCategory category) {
    return name_in(kStepCategoryNames, category, "host_side");
}

std::optional<DiffMetric> parse_diff_metric(std::string_view text) {
    return value_in(kDiffMetricNames, text);
}

const char* diff_metric_name(DiffMetric metric) {
    return name_in(kDiffMetricNames, metric, "step");
}

const char* verdict_name(Verdict verdict) {
    return name_in(kVerdictNames, verdict, "unchanged");
}

const char* name_status_name(NameStatus status) {
    return name_in(kNameStatusNames, status, "");
}

TimeNs DiffStep::gpu_busy_ns() const {
    return parts[static_cast<int>(StepCategory::gpu_compute)] +
           parts[static_cast<int>(StepCategory::exposed_communication)] +
           parts[static_cast<int>(StepCategory::exposed_copies)];
}

std::array<TimeNs, kDiffCategoryCount> RunProfile::category_totals() const {
    std::array<TimeNs, kDiffCategoryCount> totals{};
    for (const DiffStep& step : steps)
        for (int c = 0; c < kDiffCategoryCount; ++c) totals[c] += step.parts[c];
    return totals;
}

TimeNs RunProfile::step_total_ns() const {
    TimeNs total = 0;
    for (const DiffStep& step : steps) total += step.length_ns();
    return total;
}

// ---------------------------------------------------------------------------
// [SECTION] Ranks and threads
// ---------------------------------------------------------------------------

namespace {

// The steps of a rank, in start order (steps.h).
using HostStep = StepRange;

// A range that holds a whole step (a thread's main function, an epoch) is the step's
// context, not work done in it (step_breakdown.h leaves such ranges out too).
bool spans_a_host_step(const std::vector<HostStep>& steps, TimeNs start, TimeNs end) {
    auto first = std::lower_bound(steps.begin(), steps.end(), start,
                                  [](const HostStep& step, TimeNs t) { return step.start_ns < t; });
    for (; first != steps.end() && first->start_ns < end; ++first)
        if (first->end_ns <= end) return true;
    return false;
}

// ---------------------------------------------------------------------------
// [SECTION] The per-rank partition of time
// ---------------------------------------------------------------------------

// Far enough out that no trace time reaches them, near enough that no sum overflows.
constexpr TimeNs kLineStart = -(TimeNs{1} << 61);
constexpr TimeNs kLineEnd = TimeNs{1} << 61;

// |u ∩ [start, end)|.
TimeNs measure_within(const IntervalUnion& u, TimeNs start, TimeNs end) {
    auto first = std::lower_bound(u.begin(), u.end(), start,
                                  [](const Interval& interval, TimeNs t) { return interval.end_ns <= t; });
    TimeNs total = 0;
    for (; first != u.end() && first->start_ns < end; ++first)
        total += std::min(end, first->end_ns) - std::max(start, first->start_ns);
    return total;
}

// One rank's whole timeline cut into the categories of StepCategory: disjoint unions
// that together cover the line, so any window's parts add up to its length.
struct RankTimeline {
    std::array<IntervalUnion, kDiffCategoryCount> parts;
    // Pieces of parts[host_side], by top-level range name.
    std::vector<std::pair<std::string, IntervalUnion>> host_side_by_range;
};

IntervalUnion& part(RankTimeline& timeline, StepCategory category) {
    return timeline.parts[static_cast<int>(category)];
}

// Why the GPU sat idle in [gap_start, next_start): what was known about the GPU work
// that ended the gap, the events starting at next_start (`events` by start, `cursor`
// moving forward through them). The host was late when none of that work had been
// launched before the gap began (HTA's host_wait, taken over all streams of the rank).
StepCategory gap_cause(const std::vector<GpuEvent>& events, std::size_t& cursor, TimeNs gap_start, TimeNs next_start,
                       TimeNs kernel_wait_threshold_ns) {
    while (cursor < events.size() && events[cursor].start_ns < next_start) ++cursor;
    bool linked = false;
    TimeNs earliest_launch = std::numeric_limits<TimeNs>::max();
    for (std::size_t i = cursor; i < events.size() && events[i].start_ns == next_start; ++i) {
        if (events[i].end_ns <= events[i].start_ns || !events[i].linked()) continue;
        linked = true;
        earliest_launch = std::min(earliest_launch, events[i].launch_start_ns);
    }
    switch (idle_gap_cause(linked ? std::optional(earliest_launch) : std::nullopt, gap_start, next_start,
                           kernel_wait_threshold_ns)) {
        case IdleCategory::host_wait:
            return StepCategory::idle_host_wait;
        case IdleCategory::kernel_wait:
            return StepCategory::idle_kernel_wait;
        case IdleCategory::other:
            break;
    }
    return StepCategory::idle_other;
}

// A host range that matters to the breakdown.
struct HostRange {
    TimeNs start_ns = 0;
    TimeNs end_ns = 0;
    std::string name;  // normalised
};

struct RankHostRanges {
    std::vector<Interval> communication;  // driving threads, GPU or not
    std::vector<Interval> dataloader_wait;
    std::vector<HostRange> top_level;  // the step thread's outermost work, disjoint
};

RankTimeline build_timeline(const RankGpuWork* work, const RankHostRanges& host, TimeNs kernel_wait_threshold_ns) {
    RankTimeline timeline;
    IntervalUnion all;
    if (work != nullptr && !work->events.empty()) {
        std::array<std::vector<Interval>, kKernelClassCount> by_class;
        std::vector<Interval> every;
        every.reserve(work->events.size());
        for (const GpuEvent& event : work->events) {
            by_class[static_cast<int>(event.kernel_class)].push_back({event.start_ns, event.end_ns});
            every.push_back({event.start_ns, event.end_ns});
        }
        const IntervalUnion compute = union_of(std::move(by_class[static_cast<int>(KernelClass::computation)]));
        const IntervalUnion communication = union_of(std::move(by_class[static_cast<int>(KernelClass::communication)]));
        const IntervalUnion memory = union_of(std::move(by_class[static_cast<int>(KernelClass::memory)]));
        all = union_of(std::move(every));
        part(timeline, StepCategory::gpu_compute) = compute;
        part(timeline, StepCategory::exposed_communication) = difference(communication, compute);
        part(timeline, StepCategory::exposed_copies) = difference(difference(memory, compute), communication);
    }
    // With the GPU idle, the host's own waits come first: on communication, then on data.
    const IntervalUnion host_communication = union_of(host.communication);
    const IntervalUnion host_waits = union_with(host_communication, union_of(host.dataloader_wait));
    const IntervalUnion host_communication_exposed = difference(host_communication, all);
    part(timeline, StepCategory::exposed_communication) =
        union_with(part(timeline, StepCategory::exposed_communication), host_communication_exposed);
    part(timeline, StepCategory::dataloader_wait) =
        difference(difference(union_of(host.dataloader_wait), all), host_communication);

    // The rest of the GPU's idle time, by the gap it lies in; before the first and after
    // the last GPU work there is no gap, only the host.
    std::array<std::vector<Interval>, kDiffCategoryCount> gaps;
    std::size_t cursor = 0;
    for (std::size_t i = 0; i + 1 < all.size(); ++i) {
        const StepCategory cause =
            gap_cause(work->events, cursor, all[i].end_ns, all[i + 1].start_ns, kernel_wait_threshold_ns);
        gaps[static_cast<int>(cause)].push_back({all[i].end_ns, all[i + 1].start_ns});
    }
    for (StepCategory cause : {StepCategory::idle_host_wait, StepCategory::idle_kernel_wait, StepCategory::idle_other})
        part(timeline, cause) = difference(union_of(std::move(gaps[static_cast<int>(cause)])), host_waits);
    const IntervalUnion outside =
        all.empty() ? IntervalUnion{{kLineStart, kLineEnd}}
                    : IntervalUnion{{kLineStart, all.front().start_ns}, {all.back().end_ns, kLineEnd}};
    const IntervalUnion host_side = difference(outside, host_waits);
    part(timeline, StepCategory::host_side) = host_side;

    std::map<std::string, std::vector<Interval>> by_name;
    for (const HostRange& range : host.top_level) by_name[range.name].push_back({range.start_ns, range.end_ns});
    for (auto& [name, intervals] : by_name) {
        IntervalUnion piece = intersection(host_side, union_of(std::move(intervals)));
        if (!piece.empty()) timeline.host_side_by_range.emplace_back(name, std::move(piece));
    }
    return timeline;
}

// The ranges of one rank's driving threads (those that hold steps or make CUDA calls)
// that the breakdown reads, and the step thread's top-level ranges.
class HostRangeReader {
  public:
    explicit HostRangeReader(const store::TraceReader& reader) : reader_(reader), roles_(reader) {}

    RankHostRanges read(const std::vector<trace::ThreadId>& driving_threads, trace::ThreadId step_thread,
                        const std::vector<HostStep>& host_steps) {
        RankHostRanges host;
        for (trace::ThreadId thread : driving_threads) {
            store::Statement query =
                store::query(reader_,
                             "SELECT start_ns, end_ns, domain_id, name_id, category FROM ranges WHERE thread_id = ?1 "
                             "ORDER BY start_ns, end_ns DESC");
            query.bind(1, thread);
            const bool top_level_thread = thread == step_thread;
            TimeNs open_until = std::numeric_limits<TimeNs>::min();  // end of the open top-level range
            while (query.next_row()) {
                const TimeNs start = query.column_int64(0), end = query.column_int64(1);
                const auto domain = static_cast<trace::StringId>(query.column_int64(2));
                const auto name = static_cast<trace::StringId>(query.column_int64(3));
                const auto category = static_cast<std::uint32_t>(query.column_int64(4));
                const RangeRole role = roles_.of(domain, name, category);
                if (role == RangeRole::step || end <= start || spans_a_host_step(host_steps, start, end)) continue;
                if (role == RangeRole::communication) host.communication.push_back({start, end});
                if (role == RangeRole::dataloader_wait) host.dataloader_wait.push_back({start, end});
                // Ranges come outer before inner: one starting after the open top-level
                // range ended is the next top-level one.
                if (top_level_thread && start >= open_until) {
                    host.top_level.push_back({start, end, normalised(name)});
                    open_until = end;
                }
            }
        }
        return host;
    }

  private:
    const std::string& normalised(trace::StringId name) {
        auto [found, inserted] = names_.try_emplace(name);
        if (inserted) found->second = normalise_name(reader_.string(name));
        return found->second;
    }

    const store::TraceReader& reader_;
    RangeRoles roles_;
    std::unordered_map<trace::StringId, std::string> names_;
};

// ---------------------------------------------------------------------------
// [SECTION] Steps of the compared scope
// ---------------------------------------------------------------------------

struct Window {
    std::int64_t step = 0;
    TimeNs start_ns = 0;
    TimeNs end_ns = 0;
};

DiffStep measure_step(const RankTimeline& timeline, const Window& window, std::int32_t rank) {
    DiffStep step;
    step.step = window.step;
    step.rank = rank;
    step.start_ns = window.start_ns;
    step.end_ns = window.end_ns;
    for (int c = 0; c < kDiffCategoryCount; ++c)
        step.parts[c] = measure_within(timeline.parts[c], window.start_ns, window.end_ns);
    TimeNs named = 0;
    for (const auto& [name, piece] : timeline.host_side_by_range) {
        const TimeNs time = measure_within(piece, window.start_ns, window.end_ns);
        if (time == 0) continue;
        step.host_side_by_range[name] += time;
        named += time;
    }
    const TimeNs unnamed = step.parts[static_cast<int>(StepCategory::host_side)] - named;
    if (unnamed > 0) step.host_side_by_range["(no range)"] += unnamed;
    return step;
}

// Steps of several ranks as the job's steps: step N is the slowest rank's step N.
// Repeated numbers on one rank (a trace numbering its steps by position twice) are
// told apart by their order.
std::vector<DiffStep> combine_ranks(std::map<std::int32_t, std::vector<DiffStep>> by_rank) {
    std::map<std::pair<std::int64_t, int>, DiffStep> slowest;
    for (auto& [rank, steps] : by_rank) {
        std::map<std::int64_t, int> seen;
        for (DiffStep& step : steps) {
            const std::pair<std::int64_t, int> key{step.step, seen[step.step]++};
            auto [found, inserted] = slowest.try_emplace(key, step);
            if (!inserted && step.length_ns() > found->second.length_ns()) found->second = std::move(step);
        }
    }
    std::vector<DiffStep> steps;
    for (auto& [key, step] : slowest) steps.push_back(std::move(step));
    std::stable_sort(steps.begin(), steps.end(),
                     [](const DiffStep& a, const DiffStep& b) { return a.start_ns < b.start_ns; });
    return steps;
}

}  // namespace

// ---------------------------------------------------------------------------
// [SECTION] profile_run
// ---------------------------------------------------------------------------

namespace {

std::string rank_list(const std::set<std::int32_t>& ranks) {
    std::string list;
    for (std::int32_t rank : ranks) list += (list.empty() ? "" : ", ") + std::to_string(rank);
    return list;
}

// The thread each rank's top-level ranges are read on: the one holding the most steps,
// else the one making the most CUDA calls, else the one with the most ranges.
std::map<std::int32_t, trace::ThreadId> step_threads(const store::TraceReader& reader, const RankMap& ranks,
                                                     const std::map<std::int32_t, std::vector<HostStep>>& host_steps) {
    std::map<std::int32_t, trace::ThreadId> chosen;
    for (const auto& [rank, steps] : host_steps) {
        std::map<trace::ThreadId, std::int64_t> count;
        for (const HostStep& step : steps) ++count[step.thread_id];
        chosen[rank] = std::max_element(count.begin(), count.end(), [](const auto& a, const auto& b) {
                           return a.second < b.second;
                       })->first;
    }
    for (const char* table : {"api_calls", "ranges"}) {
        std::map<std::int32_t, std::pair<trace::ThreadId, std::int64_t>> best;  // thread, events
        for (const store::TrackSummary& track : reader.tracks()) {
            if (track.event_table != table || track.event_count == 0) continue;
            std::pair<trace::ThreadId, std::int64_t>& candidate = best[ranks.of_thread(track.track.id)];
            if (track.event_count > candidate.second) candidate = {track.track.id, track.event_count};
        }
        for (const auto& [rank, thread_count] : best) chosen.try_emplace(rank, thread_count.first);
    }
    return chosen;
}

// The threads of each rank whose ranges say where its step time went.
std::map<std::int32_t, std::vector<trace::ThreadId>> driving_threads(
    const store::TraceReader& reader, const RankMap& ranks,
    const std::map<std::int32_t, std::vector<HostStep>>& host_steps,
    const std::map<std::int32_t, trace::ThreadId>& step_thread) {
    std::map<std::int32_t, std::set<trace::ThreadId>> threads;
    for (const auto& [rank, steps] : host_steps)
        for (const HostStep& step : steps) threads[rank].insert(step.thread_id);
    for (const store::TrackSummary& track : reader.tracks())
        if (track.event_table == "api_calls" && track.event_count > 0)
            threads[ranks.of_thread(track.track.id)].insert(track.track.id);
    for (const auto& [rank, thread] : step_thread) threads[rank].insert(thread);
    std::map<std::int32_t, std::vector<trace::ThreadId>> result;
    for (const auto& [rank, set] : threads) result[rank].assign(set.begin(), set.end());
    return result;
}

// A trace without steps is one step: from its rank's first event to its last.
std::map<std::int32_t, Window> whole_trace_windows(const store::TraceReader& reader, const RankMap& ranks) {
    std::map<std::int32_t, Window> windows;
    for (const store::TrackSummary& track : reader.tracks()) {
        if (track.event_count == 0 || track.track.kind == trace::TrackKind::counter) continue;
        const std::int32_t rank = track.track.kind == trace::TrackKind::stream ? ranks.of_stream(track.track.id)
                                                                               : ranks.of_thread(track.track.id);
        auto [found, inserted] = windows.try_emplace(rank, Window{0, track.first_start_ns, track.last_end_ns});
        if (!inserted) {
            found->second.start_ns = std::min(found->second.start_ns, track.first_start_ns);
            found->second.end_ns = std::max(found->second.end_ns, track.last_end_ns);
        }
    }
    return windows;
}

}  // namespace

namespace {

// The step windows of each rank in scope; a trace without step ranges (in scope) is one
// window per rank.
std::map<std::int32_t, std::vector<Window>> step_windows(const store::TraceReader& reader, const RankMap& ranks,
                                                         std::optional<std::int32_t> rank, bool& has_step_ranges) {
    auto in_scope = [&](std::int32_t candidate) { return !rank || candidate == *rank; };
    std::map<std::int32_t, std::vector<Window>> windows;
    for (const StepBreakdownRow& row : step_breakdown(reader, StepConvention::ember))
        if (in_scope(row.rank)) windows[row.rank].push_back({row.step, row.start_ns, row.end_ns});
    has_step_ranges = !windows.empty();
    if (!has_step_ranges)
        for (const auto& [candidate, window] : whole_trace_windows(reader, ranks))
            if (in_scope(candidate)) windows[candidate].push_back(window);
    return windows;
}

TimeNs span_of(const std::map<std::int32_t, std::vector<DiffStep>>& steps_by_rank) {
    TimeNs first_start = std::numeric_limits<TimeNs>::max(), last_end = std::numeric_limits<TimeNs>::min();
    for (const auto& [rank, steps] : steps_by_rank)
        for (const DiffStep& step : steps) {
            first_start = std::min(first_start, step.start_ns);
            last_end = std::max(last_end, step.end_ns);
        }
    return last_end > first_start ? last_end - first_start : 0;
}

template <typename Map>
const typename Map::mapped_type& value_or(const Map& map, std::int32_t key, const typename Map::mapped_type& fallback) {
    auto found = map.find(key);
    return found == map.end() ? fallback : found->second;
}

}  // namespace

RunProfile profile_run(const store::TraceReader& reader, const DiffOptions& options) {
    RunProfile profile;
    profile.path = reader.path();
    const RankMap ranks = rank_map(reader);
    profile.ranks.assign(ranks.ranks.begin(), ranks.ranks.end());
    if (options.rank && !ranks.ranks.count(*options.rank))
        throw store::TraceError(
            store::TraceErrorKind::bad_value, reader.path(),
            "has no rank " + std::to_string(*options.rank) + " (ranks: " + rank_list(ranks.ranks) + ")");
    profile.scope = options.rank              ? "rank " + std::to_string(*options.rank)
                    : ranks.ranks.size() == 1 ? "rank " + std::to_string(*ranks.ranks.begin())
                                              : "whole job (" + std::to_string(ranks.ranks.size()) + " ranks)";

    const std::map<std::int32_t, std::vector<Window>> windows =
        step_windows(reader, ranks, options.rank, profile.has_step_ranges);
    const std::map<std::int32_t, std::vector<HostStep>> host_steps = step_ranges(reader, ranks);
    const std::map<std::int32_t, trace::ThreadId> step_thread = step_threads(reader, ranks, host_steps);
    const std::map<std::int32_t, std::vector<trace::ThreadId>> threads =
        driving_threads(reader, ranks, host_steps, step_thread);
    const std::vector<RankGpuWork> work = gpu_work(reader, Convention::ember);
    HostRangeReader host_ranges(reader);

    std::map<std::int32_t, std::vector<DiffStep>> steps_by_rank;
    for (const auto& [rank, rank_windows] : windows) {
        const RankGpuWork* rank_work = nullptr;
        for (const RankGpuWork& candidate : work)
            if (candidate.rank == rank && !candidate.events.empty()) rank_work = &candidate;
        profile.has_gpu_work = profile.has_gpu_work || rank_work != nullptr;
        const RankHostRanges host = host_ranges.read(value_or(threads, rank, {}), value_or(step_thread, rank, 0),
                                                     value_or(host_steps, rank, {}));
        const RankTimeline timeline = build_timeline(rank_work, host, options.kernel_wait_threshold_ns);
        for (const Window& window : rank_windows) steps_by_rank[rank].push_back(measure_step(timeline, window, rank));
    }
    profile.span_ns = span_of(steps_by_rank);
    profile.steps = combine_ranks(std::move(steps_by_rank));

    read_name_tables(reader, ranks, options.rank, profile);  // no rank: every rank adds up
    if (reader.memory_event_count() > 0) {
        for (const GpuMemoryDevice& device : gpu_memory(reader).devices) {
            if (options.rank && ranks.of_device(device.device) != *options.rank) continue;
            // Places named as the name tables name them, so the same op matches across runs.
            auto normalised = [](const std::vector<GpuMemoryPlace>& places) {
                std::map<std::string, GpuMemoryPlace> merged;
                for (const GpuMemoryPlace& place : places) {
                    const std::string name =
                        place.place.empty() || place.place.front() == '(' ? place.place : normalise_name(place.place);
                    GpuMemoryPlace& row = merged[name];
                    row.place = name;
                    row.blocks += place.blocks;
                    row.bytes += place.bytes;
                    row.largest_block_bytes = std::max(row.largest_block_bytes, place.largest_block_bytes);
                }
                std::vector<GpuMemoryPlace> rows;
                for (auto& [name, row] : merged) rows.push_back(std::move(row));
                return rows;
            };
            profile.memory.push_back({device.device, device.peak_allocated_bytes, device.peak_reserved_bytes,
                                      normalised(device.at_peak_by_op), normalised(device.at_peak_by_line)});
        }
    }
    return profile;
}

}  // namespace ember::analysis
