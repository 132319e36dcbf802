// trace_diff.cpp: `ember diff` (trace_diff.h). A run is read in four passes: the step
// windows (step_breakdown), the GPU work (gpu_work), the host ranges of the threads that
// drive each rank, and GROUP BY aggregates of every event table for the name tables.
// The step breakdown is interval arithmetic (intervals.h): one union per category,
// disjoint by construction, each measured inside every step window.
//
// [SECTION] Names
// [SECTION] Ranks and threads
// [SECTION] The per-rank partition of time
// [SECTION] Steps of the compared scope
// [SECTION] Name tables
// [SECTION] profile_run
// [SECTION] Comparing two runs
// [SECTION] The CI gate
// [SECTION] Output
#include "profiler/analysis/trace_diff.h"

#include "profiler/analysis/cpu_profile.h"
#include "profiler/analysis/rank_map.h"

#include "profiler/analysis/gpu_work.h"
#include "profiler/analysis/idle_gaps.h"
#include "profiler/analysis/operation_names.h"
#include "profiler/analysis/range_roles.h"
#include "profiler/analysis/steps.h"
#include "profiler/analysis/intervals.h"
#include "profiler/analysis/rank_summary.h"
#include "profiler/analysis/sql_query.h"
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

bool is_identifier_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == ':';
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex_digit(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool ends_with(std::string_view text, std::string_view suffix) {
    return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// The '>' closing the template argument list opened at `open`, or npos.
std::size_t closing_angle(std::string_view name, std::size_t open) {
    int depth = 0;
    for (std::size_t i = open; i < name.size(); ++i) {
        if (name[i] == '<') ++depth;
        else if (name[i] == '>' && --depth == 0) return i;
    }
    return std::string_view::npos;
}

}  // namespace

std::string normalise_name(std::string_view name) {
    std::string out;
    out.reserve(name.size());
    for (std::size_t i = 0; i < name.size();) {
        const char c = name[i];
        // A template argument list follows its template's name ("gemm<"); "operator<",
        // a leading "<built-in method ...>" and "a < b" are no such list.
        if (c == '<' && !out.empty() && is_identifier_char(out.back()) && !ends_with(out, "operator")) {
            const std::size_t close = closing_angle(name, i);
            if (close != std::string_view::npos) {
                out += "<...>";
                i = close + 1;
                continue;
            }
        }
        // Object addresses in Python names ("<method of X object at 0x7f3a...>") change
        // from run to run.
        if (c == '0' && i + 2 < name.size() && name[i + 1] == 'x' && is_hex_digit(name[i + 2]) &&
            (out.empty() || !is_identifier_char(out.back()))) {
            std::size_t end = i + 2;
            while (end < name.size() && is_hex_digit(name[end])) ++end;
            if (end - i - 2 >= 6) {
                out += "0x...";
                i = end;
                continue;
            }
        }
        out += c;
        ++i;
    }
    // One trailing per-launch number: "#12" or "_12" after at least one other character.
    std::size_t digits = out.size();
    while (digits > 0 && is_digit(out[digits - 1])) --digits;
    if (digits < out.size() && digits >= 2 && (out[digits - 1] == '#' || out[digits - 1] == '_'))
        out.resize(digits - 1);
    return out;
}

const char* step_category_name(StepCategory category) {
    switch (category) {
        case StepCategory::gpu_compute: return "gpu_compute";
        case StepCategory::exposed_communication: return "exposed_communication";
        case StepCategory::exposed_copies: return "exposed_copies";
        case StepCategory::dataloader_wait: return "dataloader_wait";
        case StepCategory::idle_host_wait: return "idle_host_wait";
        case StepCategory::idle_kernel_wait: return "idle_kernel_wait";
        case StepCategory::idle_other: return "idle_other";
        case StepCategory::host_side: return "host_side";
    }
    return "host_side";
}

std::optional<DiffMetric> parse_diff_metric(std::string_view text) {
    if (text == "step") return DiffMetric::step;
    if (text == "gpu_busy") return DiffMetric::gpu_busy;
    if (text == "span") return DiffMetric::span;
    return std::nullopt;
}

const char* diff_metric_name(DiffMetric metric) {
    switch (metric) {
        case DiffMetric::step: return "step";
        case DiffMetric::gpu_busy: return "gpu_busy";
        case DiffMetric::span: return "span";
    }
    return "step";
}

const char* verdict_name(Verdict verdict) {
    switch (verdict) {
        case Verdict::unchanged: return "unchanged";
        case Verdict::noise: return "noise";
        case Verdict::faster: return "faster";
        case Verdict::slower: return "slower";
    }
    return "unchanged";
}

const char* name_status_name(NameStatus status) {
    switch (status) {
        case NameStatus::both: return "";
        case NameStatus::appeared: return "new";
        case NameStatus::disappeared: return "gone";
    }
    return "";
}

TimeNs DiffStep::gpu_busy_ns() const {
    return parts[static_cast<int>(StepCategory::gpu_compute)] +
           parts[static_cast<int>(StepCategory::exposed_communication)] +
           parts[static_cast<int>(StepCategory::exposed_copies)];
}

std::array<TimeNs, kStepCategoryCount> RunProfile::category_totals() const {
    std::array<TimeNs, kStepCategoryCount> totals{};
    for (const DiffStep& step : steps)
        for (int c = 0; c < kStepCategoryCount; ++c) totals[c] += step.parts[c];
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
    std::array<IntervalUnion, kStepCategoryCount> parts;
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
        case IdleCategory::host_wait: return StepCategory::idle_host_wait;
        case IdleCategory::kernel_wait: return StepCategory::idle_kernel_wait;
        case IdleCategory::other: break;
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
    std::vector<Interval> communication;   // driving threads, GPU or not
    std::vector<Interval> dataloader_wait;
    std::vector<HostRange> top_level;      // the step thread's outermost work, disjoint
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
    std::array<std::vector<Interval>, kStepCategoryCount> gaps;
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
            SqlQuery query(reader_.database(), reader_.path(),
                           "SELECT start_ns, end_ns, domain_id, name_id, category FROM ranges WHERE thread_id = ?1 "
                           "ORDER BY start_ns, end_ns DESC");
            query.bind_int64(1, thread);
            const bool top_level_thread = thread == step_thread;
            TimeNs open_until = std::numeric_limits<TimeNs>::min();  // end of the open top-level range
            while (query.next_row()) {
                const TimeNs start = query.int64(0), end = query.int64(1);
                const auto domain = static_cast<trace::StringId>(query.int64(2));
                const auto name = static_cast<trace::StringId>(query.int64(3));
                const auto category = static_cast<std::uint32_t>(query.int64(4));
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
    for (int c = 0; c < kStepCategoryCount; ++c)
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
    std::stable_sort(steps.begin(), steps.end(), [](const DiffStep& a, const DiffStep& b) { return a.start_ns < b.start_ns; });
    return steps;
}

// ---------------------------------------------------------------------------
// [SECTION] Name tables
// ---------------------------------------------------------------------------

// Totals by (domain, normalised name), filled from GROUP BY rows.
class NameTotals {
public:
    void add(const std::string& domain, const std::string& name, TimeNs total, std::int64_t instances) {
        NameTotal& row = rows_[{domain, name}];
        row.domain = domain;
        row.name = name;
        row.total_ns += total;
        row.instances += instances;
    }
    std::vector<NameTotal> rows() const {
        std::vector<NameTotal> rows;
        for (const auto& [key, row] : rows_) rows.push_back(row);
        return rows;
    }

private:
    std::map<std::pair<std::string, std::string>, NameTotal> rows_;
};

class NameTableReader {
public:
    NameTableReader(const store::TraceReader& reader, const RankMap& ranks, std::optional<std::int32_t> rank)
        : reader_(reader), ranks_(ranks), rank_(rank) {}

    std::vector<NameTotal> gpu_operations() {
        NameTotals totals;
        SqlQuery kernels(reader_.database(), reader_.path(),
                         "SELECT name_id, stream_id, SUM(end_ns - start_ns), COUNT(*) FROM kernels GROUP BY name_id, stream_id");
        while (kernels.next_row())
            if (stream_in_scope(kernels.int64(1)))
                totals.add("", normalised(kernels.int64(0)), kernels.int64(2), kernels.int64(3));
        SqlQuery copies(reader_.database(), reader_.path(),
                        "SELECT direction, stream_id, SUM(end_ns - start_ns), COUNT(*) FROM memcpys GROUP BY direction, stream_id");
        while (copies.next_row())
            if (stream_in_scope(copies.int64(1)))
                totals.add("", memcpy_name(copies.int64(0)), copies.int64(2), copies.int64(3));
        SqlQuery memsets(reader_.database(), reader_.path(),
                         "SELECT stream_id, SUM(end_ns - start_ns), COUNT(*) FROM memsets GROUP BY stream_id");
        while (memsets.next_row())
            if (stream_in_scope(memsets.int64(0)))
                totals.add("", std::string(kMemsetOperationName), memsets.int64(1), memsets.int64(2));
        return totals.rows();
    }

    std::vector<NameTotal> api_calls() {
        NameTotals totals;
        SqlQuery query(reader_.database(), reader_.path(),
                       "SELECT name_id, thread_id, SUM(end_ns - start_ns), COUNT(*) FROM api_calls GROUP BY name_id, thread_id");
        while (query.next_row())
            if (thread_in_scope(query.int64(1))) totals.add("", normalised(query.int64(0)), query.int64(2), query.int64(3));
        return totals.rows();
    }

    std::vector<NameTotal> ranges() {
        NameTotals totals;
        SqlQuery query(reader_.database(), reader_.path(),
                       "SELECT domain_id, name_id, thread_id, SUM(end_ns - start_ns), COUNT(*) FROM ranges "
                       "GROUP BY domain_id, name_id, thread_id");
        while (query.next_row())
            if (thread_in_scope(query.int64(2)))
                totals.add(std::string(reader_.string(static_cast<trace::StringId>(query.int64(0)))),
                           normalised(query.int64(1)), query.int64(3), query.int64(4));
        return totals.rows();
    }

    // Self time of the sampled stacks: each sample is one sampling period of CPU time,
    // charged to its innermost frame. Empty when the file has no samples or no period.
    std::vector<NameTotal> cpu_functions(bool& sampled) {
        NameTotals totals;
        sampled = false;
        const std::optional<std::string> period_text = reader_.metadata("cpu_sample_period_ns");
        const TimeNs period = period_text ? std::strtoll(period_text->c_str(), nullptr, 10) : 0;
        if (period <= 0 || reader_.event_count("stack_samples") == 0) return {};
        sampled = true;
        SqlQuery query(reader_.database(), reader_.path(),
                       "SELECT stack_id, thread_id, COUNT(*) FROM stack_samples GROUP BY stack_id, thread_id");
        while (query.next_row()) {
            if (!thread_in_scope(query.int64(1))) continue;
            const std::vector<trace::FrameInfo> frames = reader_.stack_frames(static_cast<trace::StackId>(query.int64(0)));
            const std::string name = frames.empty() ? "(empty stack)" : frame_name(frames.back());
            totals.add("", name, query.int64(2) * period, query.int64(2));
        }
        return totals.rows();
    }

private:
    bool stream_in_scope(std::int64_t stream) const {
        return !rank_ || ranks_.of_stream(static_cast<trace::StreamId>(stream)) == *rank_;
    }
    bool thread_in_scope(std::int64_t thread) const {
        return !rank_ || ranks_.of_thread(static_cast<trace::ThreadId>(thread)) == *rank_;
    }
    const std::string& normalised(std::int64_t name) {
        auto [found, inserted] = names_.try_emplace(static_cast<trace::StringId>(name));
        if (inserted) found->second = normalise_name(reader_.string(static_cast<trace::StringId>(name)));
        return found->second;
    }
    // Nsight Systems' names, as `ember stats memory` prints them.
    static std::string memcpy_name(std::int64_t direction) {
        return memcpy_operation_name(static_cast<trace::MemcpyDirection>(direction));
    }
    // The name `ember stats` gives the frame (cpu_profile.h), with templates
    // collapsed so builds that differ only in template arguments match.
    static std::string frame_name(const trace::FrameInfo& frame) { return normalise_name(cpu_frame_name(frame)); }

    const store::TraceReader& reader_;
    const RankMap& ranks_;
    std::optional<std::int32_t> rank_;
    std::unordered_map<trace::StringId, std::string> names_;
};

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
    const store::TraceReader& reader, const RankMap& ranks, const std::map<std::int32_t, std::vector<HostStep>>& host_steps,
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
        throw store::TraceError(store::TraceErrorKind::bad_value, reader.path(),
                                "has no rank " + std::to_string(*options.rank) + " (ranks: " + rank_list(ranks.ranks) + ")");
    profile.scope = options.rank ? "rank " + std::to_string(*options.rank)
                    : ranks.ranks.size() == 1 ? "rank " + std::to_string(*ranks.ranks.begin())
                                              : "whole job (" + std::to_string(ranks.ranks.size()) + " ranks)";

    const std::map<std::int32_t, std::vector<Window>> windows = step_windows(reader, ranks, options.rank, profile.has_step_ranges);
    const std::map<std::int32_t, std::vector<HostStep>> host_steps = step_ranges(reader, ranks);
    const std::map<std::int32_t, trace::ThreadId> step_thread = step_threads(reader, ranks, host_steps);
    const std::map<std::int32_t, std::vector<trace::ThreadId>> threads = driving_threads(reader, ranks, host_steps, step_thread);
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

    NameTableReader tables(reader, ranks, options.rank);  // no rank: every rank adds up
    profile.kernels = tables.gpu_operations();
    profile.ranges = tables.ranges();
    profile.api = tables.api_calls();
    profile.cpu_functions = tables.cpu_functions(profile.cpu_sampled);
    return profile;
}

// ---------------------------------------------------------------------------
// [SECTION] Comparing two runs
// ---------------------------------------------------------------------------

namespace {

// Linear interpolation between the closest ranks (numpy's default percentile).
double percentile(const std::vector<TimeNs>& sorted, double fraction) {
    if (sorted.empty()) return 0.0;
    const double position = fraction * static_cast<double>(sorted.size() - 1);
    const auto below = static_cast<std::size_t>(std::floor(position));
    const std::size_t above = std::min(below + 1, sorted.size() - 1);
    const double weight = position - static_cast<double>(below);
    return static_cast<double>(sorted[below]) * (1.0 - weight) + static_cast<double>(sorted[above]) * weight;
}

MetricStats stats_of(std::vector<TimeNs> values) {
    MetricStats stats;
    std::sort(values.begin(), values.end());
    stats.samples = static_cast<std::int64_t>(values.size());
    if (values.empty()) return stats;
    stats.median_ns = percentile(values, 0.5);
    stats.p10_ns = percentile(values, 0.1);
    stats.p90_ns = percentile(values, 0.9);
    std::vector<double> deviations;
    for (TimeNs value : values) deviations.push_back(std::fabs(static_cast<double>(value) - stats.median_ns));
    std::sort(deviations.begin(), deviations.end());
    const std::size_t middle = deviations.size() / 2;
    stats.mad_ns = deviations.size() % 2 == 1 ? deviations[middle] : (deviations[middle - 1] + deviations[middle]) / 2.0;
    long double sum = 0;
    for (TimeNs value : values) sum += value;
    stats.mean_ns = static_cast<double>(sum / static_cast<long double>(values.size()));
    return stats;
}

MetricComparison compare_metric(DiffMetric metric, std::vector<TimeNs> a, std::vector<TimeNs> b, bool available) {
    MetricComparison comparison;
    comparison.metric = metric;
    comparison.available = available && !a.empty() && !b.empty();
    if (!comparison.available) return comparison;
    comparison.a = stats_of(std::move(a));
    comparison.b = stats_of(std::move(b));
    comparison.delta_ns = comparison.b.median_ns - comparison.a.median_ns;
    if (comparison.a.median_ns > 0) comparison.delta_percent = comparison.delta_ns / comparison.a.median_ns * 100.0;
    // One value per run (span) has no spread: only the threshold can judge it.
    if (metric != DiffMetric::span) comparison.noise_ns = 2.0 * std::max(comparison.a.mad_ns, comparison.b.mad_ns);
    if (comparison.delta_ns == 0.0) comparison.verdict = Verdict::unchanged;
    else if (std::fabs(comparison.delta_ns) <= comparison.noise_ns) comparison.verdict = Verdict::noise;
    else comparison.verdict = comparison.delta_ns > 0 ? Verdict::slower : Verdict::faster;
    return comparison;
}

// A row from its two totals; its per-step means divide by each run's step count.
BreakdownDelta breakdown_row(std::string name, TimeNs a_total, std::int64_t a_steps, TimeNs b_total, std::int64_t b_steps) {
    BreakdownDelta row;
    row.name = std::move(name);
    row.a_total_ns = a_total;
    row.b_total_ns = b_total;
    row.a_ns = a_steps > 0 ? static_cast<double>(a_total) / static_cast<double>(a_steps) : 0.0;
    row.b_ns = b_steps > 0 ? static_cast<double>(b_total) / static_cast<double>(b_steps) : 0.0;
    return row;
}

std::vector<NameDelta> diff_names(const std::vector<NameTotal>& a, const std::vector<NameTotal>& b) {
    std::map<std::pair<std::string, std::string>, NameDelta> merged;
    for (const NameTotal& row : a) {
        NameDelta& delta = merged[{row.domain, row.name}];
        delta.name = row.name;
        delta.domain = row.domain;
        delta.a_total_ns = row.total_ns;
        delta.a_instances = row.instances;
    }
    for (const NameTotal& row : b) {
        NameDelta& delta = merged[{row.domain, row.name}];
        delta.name = row.name;
        delta.domain = row.domain;
        delta.b_total_ns = row.total_ns;
        delta.b_instances = row.instances;
    }
    std::vector<NameDelta> rows;
    for (auto& [key, delta] : merged) {
        delta.status = delta.a_instances == 0 ? NameStatus::appeared
                       : delta.b_instances == 0 ? NameStatus::disappeared
                                                : NameStatus::both;
        rows.push_back(std::move(delta));
    }
    std::stable_sort(rows.begin(), rows.end(), [](const NameDelta& x, const NameDelta& y) {
        const TimeNs dx = std::llabs(x.delta_ns()), dy = std::llabs(y.delta_ns());
        return dx != dy ? dx > dy : x.name < y.name;
    });
    return rows;
}

}  // namespace

TraceDiff diff_runs(const RunProfile& a, const RunProfile& b) {
    TraceDiff diff;
    diff.a_path = a.path;
    diff.b_path = b.path;
    diff.scope = a.scope == b.scope ? a.scope : "A: " + a.scope + ", B: " + b.scope;
    diff.a_steps = static_cast<std::int64_t>(a.steps.size());
    diff.b_steps = static_cast<std::int64_t>(b.steps.size());

    auto values = [](const RunProfile& run, DiffMetric metric) {
        std::vector<TimeNs> values;
        if (metric == DiffMetric::span) {
            if (!run.steps.empty()) values.push_back(run.span_ns);
            return values;
        }
        for (const DiffStep& step : run.steps) values.push_back(metric == DiffMetric::step ? step.length_ns() : step.gpu_busy_ns());
        return values;
    };
    for (DiffMetric metric : {DiffMetric::step, DiffMetric::gpu_busy, DiffMetric::span}) {
        const bool available = metric != DiffMetric::gpu_busy || (a.has_gpu_work && b.has_gpu_work);
        diff.metrics[static_cast<int>(metric)] = compare_metric(metric, values(a, metric), values(b, metric), available);
    }

    // The breakdown of the step time, and of its host-side part by top-level range.
    const auto a_totals = a.category_totals(), b_totals = b.category_totals();
    for (int c = 0; c < kStepCategoryCount; ++c)
        diff.breakdown.push_back(breakdown_row(step_category_name(static_cast<StepCategory>(c)), a_totals[c], diff.a_steps,
                                               b_totals[c], diff.b_steps));
    if (a.has_gpu_work && b.has_gpu_work) {
        TimeNs a_idle = 0, b_idle = 0;
        for (StepCategory c : {StepCategory::dataloader_wait, StepCategory::idle_host_wait, StepCategory::idle_kernel_wait,
                               StepCategory::idle_other}) {
            a_idle += a_totals[static_cast<int>(c)];
            b_idle += b_totals[static_cast<int>(c)];
        }
        diff.gpu_idle = breakdown_row("gpu_idle", a_idle, diff.a_steps, b_idle, diff.b_steps);
    }
    std::map<std::string, std::pair<TimeNs, TimeNs>> host_ranges;
    for (const DiffStep& step : a.steps)
        for (const auto& [name, time] : step.host_side_by_range) host_ranges[name].first += time;
    for (const DiffStep& step : b.steps)
        for (const auto& [name, time] : step.host_side_by_range) host_ranges[name].second += time;
    for (const auto& [name, totals] : host_ranges)
        diff.host_side.push_back(breakdown_row(name, totals.first, diff.a_steps, totals.second, diff.b_steps));
    std::stable_sort(diff.host_side.begin(), diff.host_side.end(), [](const BreakdownDelta& x, const BreakdownDelta& y) {
        return std::fabs(x.delta_ns()) > std::fabs(y.delta_ns());
    });

    diff.kernels = diff_names(a.kernels, b.kernels);
    diff.ranges = diff_names(a.ranges, b.ranges);
    diff.api = diff_names(a.api, b.api);
    diff.cpu_sampled = a.cpu_sampled && b.cpu_sampled;
    if (diff.cpu_sampled) diff.cpu_functions = diff_names(a.cpu_functions, b.cpu_functions);

    const bool one_rank = a.scope.rfind("rank ", 0) == 0 && b.scope.rfind("rank ", 0) == 0;
    if (diff.a_steps == diff.b_steps && one_rank) diff.total_step_change_ns = b.step_total_ns() - a.step_total_ns();

    if (!a.has_step_ranges || !b.has_step_ranges)
        diff.notes.push_back(std::string(!a.has_step_ranges && !b.has_step_ranges ? "neither run has" : !a.has_step_ranges ? "A has no" : "B has no") +
                             " step ranges: such a run is one step, from its first event to its last");
    if (diff.a_steps != diff.b_steps)
        diff.notes.push_back("A has " + std::to_string(diff.a_steps) + " steps, B " + std::to_string(diff.b_steps) +
                             ": the breakdown compares mean steps; the name tables compare totals, so no shares");
    else if (!one_rank)
        diff.notes.push_back("name tables add every rank; their shares of the step-time change need --rank N");
    if (a.cpu_sampled != b.cpu_sampled)
        diff.notes.push_back(std::string("only ") + (a.cpu_sampled ? "A" : "B") + " has sampled CPU stacks: no CPU function table");
    return diff;
}

// ---------------------------------------------------------------------------
// [SECTION] The CI gate
// ---------------------------------------------------------------------------

std::optional<double> parse_percent(std::string_view text) {
    while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
    if (!text.empty() && text.back() == '%') text.remove_suffix(1);
    while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    if (text.empty()) return std::nullopt;
    const std::string copy(text);
    char* end = nullptr;
    const double value = std::strtod(copy.c_str(), &end);
    if (end != copy.c_str() + copy.size() || !std::isfinite(value) || value < 0) return std::nullopt;
    return value;
}

GateResult check_gate(const TraceDiff& diff, DiffMetric metric, double max_slower_percent) {
    const MetricComparison& m = diff.metric(metric);
    if (!m.available)
        throw std::invalid_argument(std::string("--metric ") + diff_metric_name(metric) + ": " +
                                    (metric == DiffMetric::gpu_busy ? "a run has no GPU work" : "a run has no steps"));
    GateResult result;
    const double percent = m.delta_percent ? *m.delta_percent : (m.delta_ns > 0 ? INFINITY : 0.0);
    const bool beyond_threshold = m.delta_ns > 0 && percent > max_slower_percent;
    const bool beyond_noise = m.delta_ns > m.noise_ns;
    result.failed = beyond_threshold && beyond_noise;
    const std::string change = fmt::format("{} median {:+.3f} ms ({:+.2f}%)", diff_metric_name(metric), m.delta_ns / 1e6,
                                           m.delta_percent.value_or(0.0));
    const std::string noise = fmt::format("noise band ±{:.3f} ms", m.noise_ns / 1e6);
    if (result.failed)
        result.reason = fmt::format("FAIL: B is slower: {}, beyond the {}% threshold and the {}", change,
                                    max_slower_percent, noise);
    else if (beyond_threshold)
        result.reason = fmt::format("pass: {} is within the {} (threshold {}%)", change, noise, max_slower_percent);
    else
        result.reason = fmt::format("pass: {} (threshold {}%, {})", change, max_slower_percent, noise);
    return result;
}

// ---------------------------------------------------------------------------
// [SECTION] Output
// ---------------------------------------------------------------------------

namespace {

// Under this fraction of A's step time, the step time did not change (shares are dashes).
constexpr double kShareOfNoChange = 1e-4;

// A row's share of the step-time change. When the step time did not change (less than
// a nanosecond, or under 0.01% of A's step time: the sum of per-step means differs by
// rounding alone) a share is a division by almost nothing, `-3147537307607717.5`%:
// none is given (a dash).
Cell share_of(double delta, std::optional<double> change, double step_ns) {
    if (!change || std::fabs(*change) < std::max(1.0, std::fabs(step_ns) * kShareOfNoChange)) return std::monostate{};
    return delta / *change * 100.0;
}

Cell optional_real(std::optional<double> value) {
    if (!value) return std::monostate{};
    return *value;
}

// Two rows per metric, A then B; the change, the noise band and the verdict on B's row.
Table headline_table(const TraceDiff& diff) {
    Table table;
    table.key = "headline";
    table.title = "A vs B over their steps (" + diff.scope + "): median, p10-p90 and median absolute deviation";
    table.columns = {{"metric", "Metric", ColumnKind::text},        {"run", "Run", ColumnKind::text},
                     {"median_ns", "Median", ColumnKind::time},     {"p10_ns", "p10", ColumnKind::time},
                     {"p90_ns", "p90", ColumnKind::time},           {"mad_ns", "MAD", ColumnKind::time},
                     {"delta_ns", "Change", ColumnKind::time},      {"delta_percent", "Change %", ColumnKind::percent},
                     {"noise_ns", "Noise +/-", ColumnKind::time},   {"verdict", "Verdict", ColumnKind::text}};
    const Cell none = std::monostate{};
    for (const MetricComparison& m : diff.metrics) {
        const std::string metric = diff_metric_name(m.metric);
        if (!m.available) {
            table.rows.push_back({metric, std::string("A, B"), none, none, none, none, none, none, none,
                                  std::string(m.metric == DiffMetric::gpu_busy ? "n/a: no GPU work" : "n/a")});
            continue;
        }
        table.rows.push_back({metric, std::string("A"), m.a.median_ns, m.a.p10_ns, m.a.p90_ns, m.a.mad_ns, none, none,
                              none, std::string()});
        table.rows.push_back({std::string(), std::string("B"), m.b.median_ns, m.b.p10_ns, m.b.p90_ns, m.b.mad_ns,
                              m.delta_ns, optional_real(m.delta_percent), m.noise_ns,
                              std::string(verdict_name(m.verdict))});
    }
    return table;
}

Table breakdown_table(const std::string& key, const std::string& title, const std::string& first_column,
                      const std::vector<BreakdownDelta>& rows, double mean_change, double mean_step_ns) {
    Table table;
    table.key = key;
    table.title = title;
    table.columns = {{first_column, first_column == "category" ? "Category" : "Range", ColumnKind::text},
                     {"a_ns", "A per step", ColumnKind::time},
                     {"b_ns", "B per step", ColumnKind::time},
                     {"delta_ns", "Change", ColumnKind::time},
                     {"share_percent", "Share %", ColumnKind::percent},
                     {"a_total_ns", "A total", ColumnKind::time},
                     {"b_total_ns", "B total", ColumnKind::time},
                     {"delta_total_ns", "Total change", ColumnKind::time}};
    for (const BreakdownDelta& row : rows)
        table.rows.push_back({row.name, row.a_ns, row.b_ns, row.delta_ns(), share_of(row.delta_ns(), mean_change, mean_step_ns),
                              row.a_total_ns, row.b_total_ns, row.delta_total_ns()});
    return table;
}

Table names_table(const std::string& key, const std::string& title, const std::vector<NameDelta>& rows,
                  std::optional<double> change, double total_step_ns, bool with_domain, std::size_t top,
                  const std::string& empty_note) {
    Table table;
    table.key = key;
    table.title = title;
    table.empty_note = empty_note;
    table.columns.push_back({"name", "Name", ColumnKind::text});
    if (with_domain) table.columns.push_back({"domain", "Domain", ColumnKind::text});
    for (Column column : std::initializer_list<Column>{{"status", "Status", ColumnKind::text},
                                                       {"a_total_ns", "A total", ColumnKind::time},
                                                       {"b_total_ns", "B total", ColumnKind::time},
                                                       {"delta_ns", "Change", ColumnKind::time},
                                                       {"share_percent", "Share %", ColumnKind::percent},
                                                       {"a_instances", "A count", ColumnKind::integer},
                                                       {"b_instances", "B count", ColumnKind::integer},
                                                       {"a_mean_ns", "A mean", ColumnKind::time},
                                                       {"b_mean_ns", "B mean", ColumnKind::time}})
        table.columns.push_back(column);
    auto mean = [](TimeNs total, std::int64_t count) -> Cell {
        if (count == 0) return std::monostate{};
        return static_cast<double>(total) / static_cast<double>(count);
    };
    for (const NameDelta& row : rows) {
        if (top != 0 && table.rows.size() == top) break;
        std::vector<Cell> cells{row.name};
        if (with_domain) cells.push_back(row.domain);
        for (Cell cell : std::initializer_list<Cell>{std::string(name_status_name(row.status)), row.a_total_ns,
                                                     row.b_total_ns, row.delta_ns(),
                                                     share_of(static_cast<double>(row.delta_ns()), change, total_step_ns),
                                                     row.a_instances, row.b_instances, mean(row.a_total_ns, row.a_instances),
                                                     mean(row.b_total_ns, row.b_instances)})
            cells.push_back(std::move(cell));
        table.rows.push_back(std::move(cells));
    }
    return table;
}

double mean_step_change(const TraceDiff& diff) {
    double change = 0.0;
    for (const BreakdownDelta& row : diff.breakdown) change += row.delta_ns();
    return change;
}

std::optional<double> total_step_change(const TraceDiff& diff) {
    if (!diff.total_step_change_ns) return std::nullopt;
    return static_cast<double>(*diff.total_step_change_ns);
}

// Long demangled kernel names make an unreadable text table; CSV and JSON keep them whole.
void shorten_names(Table& table, std::size_t limit) {
    for (auto& row : table.rows)
        if (auto* text = std::get_if<std::string>(&row[0]); text != nullptr && text->size() > limit)
            *text = text->substr(0, limit - 3) + "...";
}

// The largest move of the breakdown and of each name table, one line each: where a
// reader looks first.
void write_biggest_moves(std::ostream& out, const TraceDiff& diff, TimeUnit unit) {
    const double per = nanoseconds_per(unit);
    const char* unit_name = time_unit_name(unit);
    std::vector<std::string> lines;
    const BreakdownDelta* category = nullptr;
    for (const BreakdownDelta& row : diff.breakdown)
        if (category == nullptr || std::fabs(row.delta_ns()) > std::fabs(category->delta_ns())) category = &row;
    if (category != nullptr && category->delta_total_ns() != 0)
        lines.push_back(fmt::format("  {:<14}{} {:+.3f} {} per step", "breakdown", category->name, category->delta_ns() / per,
                                    unit_name));
    const std::pair<const char*, const std::vector<NameDelta>*> tables[] = {
        {"kernels", &diff.kernels}, {"ranges", &diff.ranges}, {"api", &diff.api}, {"cpu_functions", &diff.cpu_functions}};
    for (const auto& [label, rows] : tables) {
        // The step ranges only repeat the headline.
        auto first = std::find_if(rows->begin(), rows->end(), [](const NameDelta& row) {
            return !is_step_range_name(row.name) && row.name != "ProfilerStep";
        });
        if (first == rows->end() || first->delta_ns() == 0) continue;
        const NameDelta& row = *first;
        const std::string status = row.status == NameStatus::both ? "" : std::string(" (") + name_status_name(row.status) + ")";
        std::string name = row.name.size() > 80 ? row.name.substr(0, 77) + "..." : row.name;
        lines.push_back(fmt::format("  {:<14}{} {:+.3f} {} in total{}", label, name,
                                    static_cast<double>(row.delta_ns()) / per, unit_name, status));
    }
    if (lines.empty()) return;
    out << "\nBiggest moves:\n";
    for (const std::string& line : lines) out << line << '\n';
}

}  // namespace

std::vector<Table> diff_tables(const TraceDiff& diff, std::size_t top) {
    std::vector<Table> tables;
    tables.push_back(headline_table(diff));
    const double change = mean_step_change(diff);
    // A's step time, mean per step and summed: what "did not change" is measured against.
    double a_step_ns = 0.0, a_total_ns = 0.0;
    for (const BreakdownDelta& row : diff.breakdown) {
        a_step_ns += row.a_ns;
        a_total_ns += static_cast<double>(row.a_total_ns);
    }
    tables.push_back(breakdown_table("breakdown", "Where the step time went (mean per step; rows add up to the step)",
                                     "category", diff.breakdown, change, a_step_ns));
    if (diff.gpu_idle)
        tables.push_back(breakdown_table("gpu_idle", "GPU idle: dataloader_wait + idle_host_wait + idle_kernel_wait + idle_other",
                                         "category", {*diff.gpu_idle}, change, a_step_ns));
    if (!diff.host_side.empty())
        tables.push_back(breakdown_table("host_side", "Host-side time by top-level range (mean per step)", "range",
                                         diff.host_side, change, a_step_ns));
    tables.push_back(names_table("kernels", "GPU kernels and copies that moved most (totals)", diff.kernels,
                                 total_step_change(diff), a_total_ns, false, top, "no GPU work in either run"));
    tables.push_back(names_table("ranges", "NVTX and host ranges that moved most (totals)", diff.ranges,
                                 total_step_change(diff), a_total_ns, true, top, "no ranges in either run"));
    tables.push_back(names_table("api", "CUDA API calls that moved most (totals)", diff.api, total_step_change(diff),
                                 a_total_ns, false, top, "no CUDA API calls in either run"));
    if (diff.cpu_sampled)
        tables.push_back(names_table("cpu_functions", "CPU functions that moved most (sampled self time)",
                                     diff.cpu_functions, total_step_change(diff), a_total_ns, false, top, "(none)"));
    return tables;
}

nlohmann::json diff_json(const TraceDiff& diff, std::size_t top) {
    nlohmann::json document = nlohmann::json::object();
    document["a"] = {{"file", diff.a_path}, {"steps", diff.a_steps}};
    document["b"] = {{"file", diff.b_path}, {"steps", diff.b_steps}};
    document["scope"] = diff.scope;
    document["notes"] = diff.notes;
    nlohmann::json headline = nlohmann::json::object();
    for (const MetricComparison& m : diff.metrics) {
        if (!m.available) {
            headline[diff_metric_name(m.metric)] = nullptr;
            continue;
        }
        auto side = [](const MetricStats& s) {
            return nlohmann::json{{"samples", s.samples}, {"median_ns", s.median_ns}, {"p10_ns", s.p10_ns},
                                  {"p90_ns", s.p90_ns},   {"mad_ns", s.mad_ns},       {"mean_ns", s.mean_ns}};
        };
        headline[diff_metric_name(m.metric)] = {
            {"a", side(m.a)},
            {"b", side(m.b)},
            {"delta_ns", m.delta_ns},
            {"delta_percent", m.delta_percent ? nlohmann::json(*m.delta_percent) : nlohmann::json(nullptr)},
            {"noise_ns", m.noise_ns},
            {"verdict", verdict_name(m.verdict)}};
    }
    document["headline"] = std::move(headline);
    for (const Table& table : diff_tables(diff, top))
        if (table.key == "gpu_idle") document[table.key] = to_json(table, TimeUnit::ns).at(0);
        else if (table.key != "headline") document[table.key] = to_json(table, TimeUnit::ns);
    if (!document.contains("gpu_idle")) document["gpu_idle"] = nullptr;
    if (!document.contains("host_side")) document["host_side"] = nlohmann::json::array();
    if (!document.contains("cpu_functions")) document["cpu_functions"] = nullptr;
    return document;
}

void write_diff(std::ostream& out, const TraceDiff& diff, const DiffOutputOptions& options) {
    switch (options.format) {
        case OutputFormat::text: {
            out << "A: " << diff.a_path << " (" << diff.a_steps << " steps)\n";
            out << "B: " << diff.b_path << " (" << diff.b_steps << " steps)\n";
            for (const std::string& note : diff.notes) out << "note: " << note << "\n";
            const MetricComparison& step = diff.metric(DiffMetric::step);
            if (step.available) {
                const double unit = nanoseconds_per(options.time_unit);
                const char* unit_name = time_unit_name(options.time_unit);
                out << "\nStep time: B is ";
                if (step.verdict == Verdict::unchanged) out << "unchanged";
                else if (step.verdict == Verdict::noise) out << "within the noise";
                else out << (step.verdict == Verdict::slower ? "slower" : "faster");
                out << fmt::format(" (median {:.3f} -> {:.3f} {}, {:+.3f} {}", step.a.median_ns / unit, step.b.median_ns / unit,
                                   unit_name, step.delta_ns / unit, unit_name);
                if (step.delta_percent) out << fmt::format(", {:+.1f}%", *step.delta_percent);
                out << fmt::format("; noise band +/-{:.3f} {})\n", step.noise_ns / unit, unit_name);
            }
            write_biggest_moves(out, diff, options.time_unit);
            for (Table& table : diff_tables(diff, options.top)) {
                shorten_names(table, 96);
                out << '\n';
                write_text(out, table, options.time_unit);
            }
            break;
        }
        case OutputFormat::csv: {
            bool first = true;
            for (const Table& table : diff_tables(diff, options.top)) {
                if (!first) out << "\r\n";
                first = false;
                out << "# " << table.key << "\r\n";
                write_csv(out, table, options.time_unit);
            }
            break;
        }
        case OutputFormat::json: out << diff_json(diff, 0).dump(2) << '\n'; break;
    }
}

}  // namespace ember::analysis
