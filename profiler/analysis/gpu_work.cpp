// gpu_work.cpp: GPU events per rank under a convention (gpu_work.h).
//
// The event tables are scanned without ORDER BY (a full scan is the fastest read
// SQLite has) and sorted in memory; launching calls are looked up only for the
// correlation ids the GPU events carry, so memory stays proportional to the GPU
// work, whatever the number of host events.
#include "profiler/analysis/gpu_work.h"

#include "profiler/analysis/communication.h"
#include "profiler/analysis/enum_names.h"
#include "profiler/analysis/rank_map.h"

#include "profiler/analysis/rank_summary.h"
#include "profiler/store/table_sql.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

namespace ember::analysis {

namespace {

constexpr EnumName<Convention> kConventionNames[] = {
    {Convention::ember, "ember"},
    {Convention::hta, "hta"},
    {Convention::tb, "tb"},
    {Convention::tracelens, "tracelens"},
};

constexpr EnumName<KernelClass> kKernelClassNames[] = {
    {KernelClass::computation, "COMPUTATION"},
    {KernelClass::communication, "COMMUNICATION"},
    {KernelClass::memory, "MEMORY"},
};

}  // namespace

std::optional<Convention> parse_convention(std::string_view text) {
    return value_in(kConventionNames, text);
}

const char* convention_name(Convention convention) {
    return name_in(kConventionNames, convention, "ember");
}

const char* kernel_class_name(KernelClass kind) {
    return name_in(kKernelClassNames, kind, "COMPUTATION");
}

KernelClass classify_kernel(std::string_view name) {
    if (is_communication_kernel(name)) return KernelClass::communication;
    if (name.starts_with("Memcpy") || name.starts_with("Memset") || name.starts_with("dma")) return KernelClass::memory;
    return KernelClass::computation;
}

// ---------------------------------------------------------------------------
// [SECTION] HTA's microsecond rounding
// ---------------------------------------------------------------------------

// The double Python's json module makes of a Kineto timestamp, the way it makes it:
// strtod of the decimal number of microseconds (ns / 1000, exact in decimal).
static double decimal_microseconds_by_text(std::int64_t ns) {
    char text[40];
    const bool negative = ns < 0;
    const unsigned long long magnitude =
        negative ? 0ull - static_cast<unsigned long long>(ns) : static_cast<unsigned long long>(ns);
    std::snprintf(text, sizeof(text), "%s%llu.%03llu", negative ? "-" : "", magnitude / 1000, magnitude % 1000);
    return std::strtod(text, nullptr);
}

// The same double without the text (printing and parsing it per event was a quarter of
// the time of --like hta on 10 M events): the double nearest to ns / 1000.
//   |ns| < 2^53: ns is an exact double and IEEE division rounds the exact quotient
//     once, to the nearest double.
//   else (Unix-epoch times in ns): ns = 1000 q + r with q exact (|q| >= 2^43, so the
//     doubles near q are at least 2^-9 apart and their halfway points are multiples of
//     2^-10 from q). r/1000 is either a multiple of 1/8 (exact, so q + r/1000 rounds
//     once, ties to even as strtod does) or at least 1/1024000 from every such halfway
//     point, far more than the 2^-53 error of r/1000 as a double: q + r/1000 rounds to
//     the same double as the exact value.
double microseconds_as_python_float(trace::TimeNs ns) {
    constexpr std::int64_t kExactInteger = std::int64_t{1} << 53;
    if (ns > -kExactInteger && ns < kExactInteger) return static_cast<double>(ns) / 1000.0;
    const std::int64_t q = ns / 1000, r = ns % 1000;
    if (q > -kExactInteger && q < kExactInteger) return static_cast<double>(q) + static_cast<double>(r) / 1000.0;
    return decimal_microseconds_by_text(ns);  // beyond the year 2255 in Unix ns
}

namespace {

// HTA's parser rounds float timestamps inward: ts = ceil(ts), end = floor(ts + dur),
// with ts + dur computed in double, on the numbers of the file (before it shifts every
// rank to start at 0, by a whole microsecond). The importer stores a Kineto time as
// exactly its microseconds × 1000 (counted from baseTimeNanoseconds when the file has
// it, as Kineto writes them), so ns / 1000 here is the file's number. (In a job file
// whose ranks had different time bases, the ranks after the first are shifted by the
// difference, and rounded as shifted.)
trace::TimeNs ceil_like_hta(trace::TimeNs ns) {
    return static_cast<trace::TimeNs>(std::ceil(microseconds_as_python_float(ns))) * 1000;
}
void round_like_hta(trace::TimeNs& start_ns, trace::TimeNs& end_ns) {
    const double start_us = microseconds_as_python_float(start_ns);
    const double duration_us = microseconds_as_python_float(end_ns - start_ns);
    start_ns = static_cast<trace::TimeNs>(std::ceil(start_us)) * 1000;
    end_ns = static_cast<trace::TimeNs>(std::floor(start_us + duration_us)) * 1000;
}

// ---------------------------------------------------------------------------
// [SECTION] Ranks
// ---------------------------------------------------------------------------

// Orders `events` by start time, equal starts keeping their present order (what
// std::stable_sort gives), by sorting (start, index) pairs and then moving each event
// once along the cycles of that permutation: stable_sort's buffer would be a second
// copy of every event (180 MB for the GPU work of 10 M events).
void sort_by_start(std::vector<GpuEvent>& events) {
    std::vector<std::pair<trace::TimeNs, std::uint32_t>> order(events.size());
    for (std::size_t i = 0; i < events.size(); ++i) order[i] = {events[i].start_ns, static_cast<std::uint32_t>(i)};
    if (std::is_sorted(order.begin(), order.end())) return;
    std::sort(order.begin(), order.end());
    // Position i takes the event now at order[i].second; a placed position is marked
    // with its own index.
    for (std::size_t i = 0; i < events.size(); ++i) {
        if (order[i].second == i) continue;
        const GpuEvent held = events[i];
        std::size_t to = i;
        for (;;) {
            const std::size_t from = order[to].second;
            order[to].second = static_cast<std::uint32_t>(to);
            if (from == i) {
                events[to] = held;
                break;
            }
            events[to] = events[from];
            to = from;
        }
    }
}

struct Launch {
    trace::TimeNs start_ns = 0;
    trace::TimeNs end_ns = 0;
    trace::StringId name_id = trace::kNoString;
    bool found = false;
};

}  // namespace

// ---------------------------------------------------------------------------
// [SECTION] Collection
// ---------------------------------------------------------------------------

std::vector<RankGpuWork> gpu_work(const store::TraceReader& reader, Convention convention) {
    const RankMap ranks = rank_map(reader);
    std::map<trace::StreamId, std::pair<std::uint64_t, std::int32_t>> streams;  // cuda stream id, rank
    for (const trace::StreamInfo& stream : reader.streams())
        streams[stream.stream_id] = {stream.cuda_stream_id, ranks.of_device(stream.device_id)};

    // Kernel names classified once per distinct name.
    std::unordered_map<trace::StringId, KernelClass> classes;
    auto class_of = [&](trace::StringId name) {
        auto [found, inserted] = classes.try_emplace(name, KernelClass::computation);
        if (inserted) found->second = classify_kernel(reader.string(name));
        return found->second;
    };

    std::map<std::int32_t, RankGpuWork> by_rank;
    auto rank_work = [&](std::int32_t rank) -> RankGpuWork& {
        RankGpuWork& work = by_rank[rank];
        work.rank = rank;
        return work;
    };
    // HTA's GPU work includes the synchronizations recorded on a stream (see gpu_work.h),
    // kept apart in stream_syncs.
    auto read_table = [&](store::TableSql sql, GpuEventKind kind) {
        const bool kernels = kind == GpuEventKind::kernel;
        store::Statement query = store::query(reader, sql);
        while (query.next_row()) {
            GpuEvent event;
            event.start_ns = query.column_int64(0);
            event.end_ns = query.column_int64(1);
            const auto stream = streams.find(static_cast<trace::StreamId>(query.column_int64(2)));
            const std::int32_t rank = stream == streams.end() ? ranks.single_rank : stream->second.second;
            event.cuda_stream = stream == streams.end() ? 0 : stream->second.first;
            event.correlation = static_cast<trace::CorrelationId>(query.column_int64(3));
            event.kind = kind;
            if (kernels) {
                event.name_id = static_cast<trace::StringId>(query.column_int64(4));
                event.kernel_class = class_of(event.name_id);
            } else {
                event.kernel_class = KernelClass::memory;
            }
            (kind == GpuEventKind::sync ? rank_work(rank).stream_syncs : rank_work(rank).events).push_back(event);
        }
    };
    read_table("SELECT start_ns, end_ns, stream_id, correlation_id, name_id FROM kernels", GpuEventKind::kernel);
    read_table("SELECT start_ns, end_ns, stream_id, correlation_id FROM memcpys", GpuEventKind::memcpy);
    read_table("SELECT start_ns, end_ns, stream_id, correlation_id FROM memsets", GpuEventKind::memset);
    const std::optional<std::string> from_calls = reader.metadata(trace::kSynchronizationsFromCallsKey);
    if (convention == Convention::hta && (!from_calls || std::strtoll(from_calls->c_str(), nullptr, 10) == 0))
        read_table("SELECT start_ns, end_ns, stream_id, correlation_id FROM synchronizations WHERE stream_id != 0",
                   GpuEventKind::sync);

    // The launching calls of exactly these events.
    std::unordered_map<trace::CorrelationId, Launch> launches;
    for (const auto& [rank, work] : by_rank) {
        for (const GpuEvent& event : work.events)
            if (event.correlation != 0) launches.try_emplace(event.correlation);
        for (const GpuEvent& event : work.stream_syncs)
            if (event.correlation != 0) launches.try_emplace(event.correlation);
    }
    if (!launches.empty()) {
        store::Statement query = store::query(
            reader, "SELECT start_ns, end_ns, correlation_id, name_id FROM api_calls WHERE correlation_id != 0");
        while (query.next_row()) {
            auto found = launches.find(static_cast<trace::CorrelationId>(query.column_int64(2)));
            if (found == launches.end()) continue;
            found->second = {query.column_int64(0), query.column_int64(1),
                             static_cast<trace::StringId>(query.column_int64(3)), true};
        }
    }

    // Profiler steps per rank (HTA drops the last, incomplete one).
    std::map<std::int32_t, std::vector<trace::TimeNs>> step_starts;
    for (const auto& [rank, steps] : step_ranges(reader, ranks))
        for (const StepRange& step : steps) step_starts[rank].push_back(step.start_ns);

    std::vector<RankGpuWork> result;
    for (auto& [rank, work] : by_rank) {
        const std::vector<trace::TimeNs>& steps = step_starts[rank];
        work.profiler_steps = static_cast<std::int64_t>(steps.size());
        trace::TimeNs last_step_start = steps.empty() ? 0 : *std::max_element(steps.begin(), steps.end());
        if (convention == Convention::hta) last_step_start = ceil_like_hta(last_step_start);
        // HTA filters only with two or more steps (one step cannot be told from a partial one).
        const bool filter_last_step = convention == Convention::hta && steps.size() >= 2;
        const bool linked_only = convention == Convention::tracelens || filter_last_step;
        // Filtered in place: a second vector of every event would double the memory.
        auto keep = [&](std::vector<GpuEvent>& events, bool counted) {
            std::size_t kept = 0;
            for (GpuEvent& event : events) {
                if (event.correlation != 0) {
                    auto found = launches.find(event.correlation);
                    if (found != launches.end() && found->second.found) {
                        event.launch_start_ns = found->second.start_ns;
                        event.launch_end_ns = found->second.end_ns;
                        event.launch_name_id = found->second.name_id;
                    }
                }
                if (convention == Convention::hta) {
                    round_like_hta(event.start_ns, event.end_ns);
                    if (event.linked()) round_like_hta(event.launch_start_ns, event.launch_end_ns);
                }
                if (linked_only && !event.linked()) {
                    if (counted) ++work.dropped_unlinked;
                    continue;
                }
                if (filter_last_step && event.launch_start_ns >= last_step_start) {
                    if (counted) ++work.dropped_after_last_step;
                    continue;
                }
                events[kept++] = event;
            }
            events.resize(kept);
            sort_by_start(events);
        };
        keep(work.events, true);
        keep(work.stream_syncs, false);
        result.push_back(std::move(work));
    }
    return result;
}

}  // namespace ember::analysis
