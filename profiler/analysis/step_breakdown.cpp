// step_breakdown.cpp: the per-step category breakdown (step_breakdown.h), in three
// streaming passes over the trace:
//   1. the step ranges of each rank (a few per second of training: kept in memory);
//   2. the launches: every GPU event joined with the API call of the same correlation
//      id (both read in correlation order), to learn which step launched it and
//      stretch the step windows;
//   3. the sweep: kernels, copies, memsets, API calls and ranges of every track read
//      in start order (one index-ordered cursor per track, merged), each instant
//      between two consecutive starts credited to the highest-priority category that
//      is still running then.
// Memory: the steps, the per-track cursors and a few caches keyed by name; never the
// events.
//
// [SECTION] Names and conventions
// [SECTION] The plugin's float microseconds
// [SECTION] What each event counts as
// [SECTION] Steps
// [SECTION] Launches: which step launched which GPU work
// [SECTION] Step windows
// [SECTION] The priority sweep
// [SECTION] step_breakdown
#include "profiler/analysis/step_breakdown.h"
#include "profiler/trace/step_names.h"

#include "profiler/analysis/gpu_work.h"
#include "profiler/analysis/rank_map.h"

#include "profiler/analysis/rank_summary.h"
#include "profiler/store/table_sql.h"
#include "common/text.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace ember::analysis {

const char* step_breakdown_category_name(StepBreakdownCategory category) {
    static constexpr const char* kNames[kStepBreakdownCategoryCount] = {
        "Kernel", "Memcpy", "Memset", "Communication", "Runtime", "DataLoader", "CPU Exec", "Other"};
    const auto index = static_cast<std::size_t>(category);
    return index < std::size(kNames) ? kNames[index] : "?";
}

// ---------------------------------------------------------------------------
// [SECTION] Names and conventions
// ---------------------------------------------------------------------------

StepConvention step_convention_for(Convention convention) {
    return convention == Convention::tb ? StepConvention::tb : StepConvention::ember;
}

const char* step_convention_name(StepConvention convention) {
    return convention == StepConvention::tb ? "tb" : "ember";
}

namespace {

using trace::TimeNs;

constexpr TimeNs kNever = std::numeric_limits<TimeNs>::min();
constexpr TimeNs kForever = std::numeric_limits<TimeNs>::max();

// The categories in priority order; `other` is what none of the first seven covers.
enum Role : std::uint8_t {
    kernel_role = 0,
    memcpy_role,
    memset_role,
    communication_role,
    runtime_role,
    dataloader_role,
    cpu_exec_role,
    other_role,
    ignored_role,  // takes no part (a step range itself, a driver call under tb, ...)
};
constexpr int kActiveRoles = 7;  // kernel .. cpu_exec: the ones an event can make active
constexpr int kRoles = 8;        // with other

// The host operations the plugin files under Communication (torch_tb_profiler's
// NcclOpNameSet and GlooOpNameSet, compared by exact name).
constexpr std::string_view kCollectiveOpNames[] = {
    "nccl:broadcast", "nccl:reduce", "nccl:all_reduce", "nccl:all_gather", "nccl:reduce_scatter",
    "gloo:broadcast", "gloo:reduce", "gloo:all_reduce", "gloo:all_gather", "gloo:reduce_scatter"};

bool is_collective_op_name(std::string_view name) {
    return std::find(std::begin(kCollectiveOpNames), std::end(kCollectiveOpNames), name) !=
           std::end(kCollectiveOpNames);
}

// CUDA driver calls (cuLaunchKernel, cuMemcpyHtoDAsync, ...) as opposed to runtime calls
// (cudaLaunchKernel, ...). Kineto files them as cuda_driver, a category the plugin does
// not read; the importer stores both kinds as API calls, and the name tells them apart.
bool is_driver_call_name(std::string_view name) {
    return name.starts_with("cu") && !name.starts_with("cuda");
}

// ---------------------------------------------------------------------------
// [SECTION] The plugin's float microseconds
// ---------------------------------------------------------------------------

// The plugin reads Kineto's "ts" and "dur" into Python floats (microseconds) and
// computes end = ts + dur in double. Near 1.7e15 µs (a Unix-epoch Kineto time) a
// double steps by 0.25 µs, so a fractional timestamp moves by up to 0.125 µs and the
// plugin's unions differ from exact ones by that much per piece. On traces imported
// from Kineto JSON the tb convention replays that rounding: each event becomes
// [ns(float(ts)), ns(float(ts) + float(dur))]. Whole-microsecond times (2021 Kineto)
// are exact doubles and pass unchanged.
class PluginClock {
  public:
    explicit PluginClock(bool active) : active_(active) {}
    bool active() const { return active_; }

    void round(TimeNs& start_ns, TimeNs& end_ns) const {
        if (!active_ || (start_ns % 1000 == 0 && end_ns % 1000 == 0)) return;
        const double start_us = microseconds_as_python_float(start_ns);
        const double duration_us = microseconds_as_python_float(end_ns - start_ns);
        start_ns = nearest_ns(start_us);
        end_ns = nearest_ns(start_us + duration_us);
    }

  private:
    // A double number of µs as the nearest integer ns, without multiplying the whole
    // value by 1000 in double (which would round again above 2^53 ns).
    static TimeNs nearest_ns(double us) {
        const double whole = std::floor(us);
        return static_cast<TimeNs>(whole) * 1000 + static_cast<TimeNs>(std::llround((us - whole) * 1000.0));
    }

    bool active_;
};

// ---------------------------------------------------------------------------
// [SECTION] What each event counts as
// ---------------------------------------------------------------------------

// What a range's domain says about it. Kineto categories arrive as the domain
// (docs/import.md); the plugin reads cpu_op/Operator as operators, user_annotation as
// annotations, "Python" as Python ops and ignores python_function. Ranges of any other
// domain (ember's own NVTX, the default domain, a Chrome import) are taken as operators.
enum class RangeSource : std::uint8_t { op, annotation, python_op, python_function };

RangeSource range_source(std::string_view domain) {
    const std::string lower = text::ascii_lowercase(domain);
    if (lower == "python_function") return RangeSource::python_function;
    if (lower == "python") return RangeSource::python_op;
    if (lower == "user_annotation" || lower == "gpu_user_annotation") return RangeSource::annotation;
    return RangeSource::op;
}

// The roles of every kind of event under one convention, each decided once per
// distinct name (a trace repeats a few thousand names millions of times).
class RoleBook {
  public:
    RoleBook(const store::TraceReader& reader, StepConvention convention)
        : reader_(reader), convention_(convention), roles_(reader) {
        for (std::string_view name : kCollectiveOpNames)
            if (std::optional<trace::StringId> id = reader.find_string(name)) collective_op_ids_.push_back(*id);
    }

    const std::vector<trace::StringId>& collective_op_name_ids() const { return collective_op_ids_; }
    bool is_python_function_domain(trace::StringId domain) { return source_of(domain) == RangeSource::python_function; }

    Role kernel(trace::StringId name, trace::CorrelationId correlation,
                const std::unordered_set<trace::CorrelationId>& collective_kernels) {
        if (convention_ == StepConvention::tb)
            return collective_kernels.count(correlation) ? communication_role : kernel_role;
        auto [found, inserted] = kernel_roles_.try_emplace(name, kernel_role);
        if (inserted && classify_kernel(reader_.string(name)) == KernelClass::communication)
            found->second = communication_role;
        return found->second;
    }

    // tb: a driver call is no Runtime (and launches nothing the plugin links).
    bool is_driver_call(trace::StringId name) {
        auto [found, inserted] = driver_calls_.try_emplace(name, false);
        if (inserted) found->second = is_driver_call_name(reader_.string(name));
        return found->second;
    }
    Role api_call(trace::StringId name) {
        return convention_ == StepConvention::tb && is_driver_call(name) ? ignored_role : runtime_role;
    }

    Role range(trace::StringId domain, trace::StringId name, std::uint32_t category) {
        const std::uint64_t key = (static_cast<std::uint64_t>(domain) << 32) | name;
        auto [found, inserted] = range_roles_.try_emplace(key, ignored_role);
        if (inserted) found->second = role_by_name(domain, name);
        // ember files host communication by its NVTX category, which the name does not tell.
        if (found->second == cpu_exec_role && convention_ == StepConvention::ember &&
            roles_.is_communication_category(domain, category))
            return communication_role;
        return found->second;
    }

  private:
    RangeSource source_of(trace::StringId domain) {
        auto [found, inserted] = sources_.try_emplace(domain, RangeSource::op);
        if (inserted) found->second = range_source(reader_.string(domain));
        return found->second;
    }

    Role role_by_name(trace::StringId domain, trace::StringId name_id) {
        const std::string_view name = reader_.string(name_id);
        const RangeSource source = source_of(domain);
        if (convention_ == StepConvention::tb) {
            if (source == RangeSource::python_function) return ignored_role;
            if (is_step_range_name(name)) return ignored_role;  // the steps themselves
            if (source != RangeSource::python_op && is_dataloader_wait_name(name)) return dataloader_role;
            if (is_collective_op_name(name)) return communication_role;
            return cpu_exec_role;
        }
        switch (roles_.of_name(name_id)) {
            case RangeRole::step:
                return ignored_role;  // the steps themselves
            case RangeRole::dataloader_wait:
                return dataloader_role;
            case RangeRole::communication:
                return communication_role;
            default:
                return cpu_exec_role;
        }
    }

    const store::TraceReader& reader_;
    StepConvention convention_;
    RangeRoles roles_;
    std::vector<trace::StringId> collective_op_ids_;
    std::unordered_map<trace::StringId, Role> kernel_roles_;
    std::unordered_map<trace::StringId, bool> driver_calls_;
    std::unordered_map<trace::StringId, RangeSource> sources_;
    std::unordered_map<std::uint64_t, Role> range_roles_;
};

// ---------------------------------------------------------------------------
// [SECTION] Steps
// ---------------------------------------------------------------------------

struct HostStep {
    TimeNs start_ns = 0;
    TimeNs end_ns = 0;
    std::optional<std::int64_t> number;  // ProfilerStep#N, or the step range's integer payload
    trace::ThreadId thread_id = 0;
};

// What the launches of one step's calls reached on the GPU.
struct StepLaunches {
    TimeNs first_start_ns = kForever;
    TimeNs last_end_ns = kNever;
    std::int64_t gpu_events = 0;
    bool any() const { return gpu_events > 0; }
};

struct RankSteps {
    std::vector<HostStep> host;          // by start (ties: file order)
    std::vector<TimeNs> host_end_reach;  // running max of host ends, for the tb lookup
    TimeNs shortest_host_step_ns = kForever;
    std::vector<StepLaunches> launches;  // per host step
    std::vector<std::int64_t> numbers;   // per window
    std::vector<TimeNs> window_start, window_end;
    std::vector<TimeNs> window_end_reach;  // running max of window ends

    // Does [start, end) hold a whole host step (the first step starting inside it)?
    bool spans_a_host_step(TimeNs start, TimeNs end) const {
        if (end - start < shortest_host_step_ns) return false;
        auto first = std::lower_bound(host.begin(), host.end(), start,
                                      [](const HostStep& step, TimeNs t) { return step.start_ns < t; });
        return first != host.end() && first->end_ns <= end;
    }
};

// Every step range of the file by rank (steps.h).
std::map<std::int32_t, RankSteps> read_steps(const store::TraceReader& reader, const RankMap& ranks, RoleBook& roles,
                                             StepConvention convention) {
    std::map<std::int32_t, RankSteps> steps;
    for (const auto& [rank, ranges] : step_ranges(reader, ranks)) {
        for (const StepRange& range : ranges) {
            // The plugin makes steps only of operators and annotations, never Python functions.
            if (convention == StepConvention::tb && roles.is_python_function_domain(range.domain_id)) continue;
            steps[rank].host.push_back(HostStep{range.start_ns, range.end_ns, range.number, range.thread_id});
        }
    }
    return steps;
}

// tb without any step: the plugin's one step "0" from the first start to the last end
// of the host's operators (cpu_op, Operator, Python; not annotations, not Python
// functions).
void add_whole_trace_steps(const store::TraceReader& reader, const RankMap& ranks,
                           std::map<std::int32_t, RankSteps>& steps) {
    std::map<std::int32_t, std::pair<TimeNs, TimeNs>> span;
    store::Statement query = store::query(
        reader, "SELECT thread_id, domain_id, MIN(start_ns), MAX(end_ns) FROM ranges GROUP BY thread_id, domain_id");
    while (query.next_row()) {
        const std::string_view domain = reader.string(static_cast<trace::StringId>(query.column_int64(1)));
        const RangeSource source = range_source(domain);
        if (source == RangeSource::python_function || source == RangeSource::annotation) continue;
        auto [entry, inserted] = span.try_emplace(ranks.of_thread(static_cast<trace::ThreadId>(query.column_int64(0))),
                                                  query.column_int64(2), query.column_int64(3));
        if (!inserted) {
            entry->second.first = std::min(entry->second.first, query.column_int64(2));
            entry->second.second = std::max(entry->second.second, query.column_int64(3));
        }
    }
    for (const auto& [rank, extent] : span) {
        RankSteps& rank_steps = steps[rank];
        rank_steps.host.push_back(HostStep{extent.first, extent.second, 0, 0});
    }
}

// ---------------------------------------------------------------------------
// [SECTION] Launches: which step launched which GPU work
// ---------------------------------------------------------------------------

// The host step a call belongs to, or -1.
//   ember: the step whose host window [start, end) holds the call's start.
//   tb:    the plugin walks calls and steps in time order and takes a call for the
//          current step only when it lies wholly inside it, [start, end]; the current
//          step is the first (in start order) whose end is after the call's start,
//          which a binary search over the running maximum of the ends finds.
std::ptrdiff_t step_of_call(const RankSteps& steps, TimeNs call_start, TimeNs call_end, StepConvention convention) {
    const std::vector<HostStep>& host = steps.host;
    if (convention == StepConvention::tb) {
        auto current = std::upper_bound(steps.host_end_reach.begin(), steps.host_end_reach.end(), call_start);
        if (current == steps.host_end_reach.end()) return -1;
        const auto index = current - steps.host_end_reach.begin();
        const HostStep& step = host[static_cast<std::size_t>(index)];
        return step.start_ns <= call_start && call_end <= step.end_ns ? index : -1;
    }
    auto after = std::upper_bound(host.begin(), host.end(), call_start,
                                  [](TimeNs t, const HostStep& step) { return t < step.start_ns; });
    for (auto it = after; it != host.begin();) {  // latest-starting step that holds it (steps rarely nest)
        --it;
        if (call_start < it->end_ns) return it - host.begin();
        if (steps.host_end_reach[static_cast<std::size_t>(it - host.begin())] <= call_start) break;
    }
    return -1;
}

// The host ranges of the plugin's collective ops (nccl:all_reduce, ...) on one thread,
// with the ranges nested inside them: a kernel is Communication for the plugin when the
// op that launched it (its Kineto "External id") is such an op. The importer does not
// keep external ids, so the launching op is taken as the innermost range around the
// launching call: the collective op itself, not a range nested in it.
struct CollectiveOp {
    TimeNs start_ns = 0;
    TimeNs end_ns = 0;
    std::vector<std::pair<TimeNs, TimeNs>> nested;  // ranges inside it (Python functions excepted)
};

class CollectiveOps {
  public:
    void load(const store::TraceReader& reader, RoleBook& roles) {
        const std::vector<trace::StringId>& names = roles.collective_op_name_ids();
        if (names.empty()) return;
        struct Found {
            trace::ThreadId thread;
            std::int32_t depth;
            CollectiveOp op;
        };
        std::vector<Found> found;
        reader.for_each_range_named(names, [&](const trace::RangeEvent& range) {
            if (!roles.is_python_function_domain(range.domain_id))
                found.push_back({range.thread_id, range.depth, CollectiveOp{range.start_ns, range.end_ns, {}}});
            return true;
        });
        // By thread, then start (then range_id, the order they came in).
        std::stable_sort(found.begin(), found.end(),
                         [](const Found& a, const Found& b) { return a.thread < b.thread; });
        store::Statement nested =
            store::query(reader,
                         "SELECT start_ns, end_ns, domain_id FROM ranges WHERE thread_id = ?1 AND start_ns >= ?2 "
                         "AND start_ns < ?3 AND depth > ?4");
        for (Found& op : found) {
            nested.reset();
            nested.bind(1, op.thread);
            nested.bind(2, op.op.start_ns);
            nested.bind(3, op.op.end_ns);
            nested.bind(4, op.depth);
            while (nested.next_row()) {
                if (roles.is_python_function_domain(static_cast<trace::StringId>(nested.column_int64(2)))) continue;
                op.op.nested.emplace_back(nested.column_int64(0), nested.column_int64(1));
            }
            by_thread_[op.thread].push_back(std::move(op.op));
        }
    }

    bool empty() const { return by_thread_.empty(); }

    // Was a call on `thread` over [start, end] made directly inside a collective op?
    bool launched_inside(trace::ThreadId thread, TimeNs start, TimeNs end) const {
        auto ops = by_thread_.find(thread);
        if (ops == by_thread_.end()) return false;
        for (const CollectiveOp& op : ops->second) {  // a few per step
            if (op.start_ns > start) break;
            if (end > op.end_ns) continue;
            bool deeper = false;
            for (const auto& [nested_start, nested_end] : op.nested)
                if (nested_start <= start && end <= nested_end) deeper = true;
            if (!deeper) return true;
        }
        return false;
    }

  private:
    std::map<trace::ThreadId, std::vector<CollectiveOp>> by_thread_;
};

// Joins every GPU event with its launching call and records, per host step, the GPU
// work its calls launched; under tb also which kernels a collective op launched.
//
// A merge join in correlation-id order: the API calls and the three GPU tables are
// each read through their correlation index, so both sides stream in one pass. (A
// nested-loop join in SQL seeks the index once per GPU event: 1.8x the time on the
// 10 M-event synthetic trace.) A correlation id held by several calls (never in one
// process) links to the first of them.
class CorrelationCursor {
  public:
    CorrelationCursor(const store::TraceReader& reader, store::TableSql sql) : query_(store::query(reader, sql)) {
        advance();
    }
    bool done() const { return done_; }
    std::int64_t correlation() const { return correlation_; }
    const store::Statement& row() const { return query_; }
    void advance() {
        done_ = !query_.next_row();
        if (!done_) correlation_ = query_.column_int64(0);
    }

  private:
    store::Statement query_;
    bool done_ = false;
    std::int64_t correlation_ = 0;
};

void read_launches(const store::TraceReader& reader, const RankMap& ranks, RoleBook& roles, StepConvention convention,
                   const PluginClock& clock, const CollectiveOps& collectives, std::map<std::int32_t, RankSteps>& steps,
                   std::unordered_set<trace::CorrelationId>& collective_kernels) {
    CorrelationCursor calls(reader,
                            "SELECT correlation_id, start_ns, end_ns, thread_id, name_id FROM api_calls "
                            "WHERE correlation_id != 0 ORDER BY correlation_id");
    std::vector<std::unique_ptr<CorrelationCursor>> gpu;
    constexpr store::TableSql kGpuTables[] = {
        "SELECT correlation_id, start_ns, end_ns, stream_id FROM kernels WHERE correlation_id != 0 ORDER BY "
        "correlation_id",
        "SELECT correlation_id, start_ns, end_ns, stream_id FROM memcpys WHERE correlation_id != 0 ORDER BY "
        "correlation_id",
        "SELECT correlation_id, start_ns, end_ns, stream_id FROM memsets WHERE correlation_id != 0 ORDER BY "
        "correlation_id"};
    for (store::TableSql sql : kGpuTables) gpu.push_back(std::make_unique<CorrelationCursor>(reader, sql));
    while (!calls.done()) {
        // The GPU event with the smallest correlation id next (kernels first on ties).
        std::size_t next = gpu.size();
        for (std::size_t i = 0; i < gpu.size(); ++i)
            if (!gpu[i]->done() && (next == gpu.size() || gpu[i]->correlation() < gpu[next]->correlation())) next = i;
        if (next == gpu.size()) break;
        CorrelationCursor& event = *gpu[next];
        while (!calls.done() && calls.correlation() < event.correlation()) calls.advance();
        if (calls.done()) break;
        if (calls.correlation() == event.correlation()) {
            const store::Statement& call = calls.row();
            const store::Statement& work = event.row();
            const auto thread = static_cast<trace::ThreadId>(call.column_int64(3));
            const std::int32_t rank = ranks.of_stream(static_cast<trace::StreamId>(work.column_int64(3)));
            const bool launcher = ranks.of_thread(thread) == rank &&  // not an id reused by another rank
                                  !(convention == StepConvention::tb &&
                                    roles.is_driver_call(static_cast<trace::StringId>(call.column_int64(4))));
            auto rank_steps = steps.find(rank);
            if (launcher) {
                TimeNs call_start = call.column_int64(1), call_end = call.column_int64(2);
                if (next == 0 && !collectives.empty() && collectives.launched_inside(thread, call_start, call_end))
                    collective_kernels.insert(static_cast<trace::CorrelationId>(event.correlation()));
                if (rank_steps != steps.end()) {
                    TimeNs gpu_start = work.column_int64(1), gpu_end = work.column_int64(2);
                    clock.round(gpu_start, gpu_end);
                    clock.round(call_start, call_end);
                    const std::ptrdiff_t step = step_of_call(rank_steps->second, call_start, call_end, convention);
                    if (step >= 0) {
                        StepLaunches& launched = rank_steps->second.launches[static_cast<std::size_t>(step)];
                        launched.first_start_ns = std::min(launched.first_start_ns, gpu_start);
                        launched.last_end_ns = std::max(launched.last_end_ns, gpu_end);
                        ++launched.gpu_events;
                    }
                }
            }
        }
        event.advance();
    }
}

// tb: the plugin starts the first step after the GPU work that no step launched and
// that ended before the first step's own GPU work began (work queued before profiling).
// Only GPU events starting before that point are read.
TimeNs first_step_start_like_tb(const store::TraceReader& reader, const RankMap& ranks, RoleBook& roles,
                                const PluginClock& clock, std::int32_t rank, const RankSteps& steps) {
    TimeNs start = steps.host.front().start_ns;
    const TimeNs first_gpu_start = steps.launches.front().first_start_ns;
    if (!steps.launches.front().any()) return start;
    auto consider = [&](TimeNs gpu_start, TimeNs gpu_end, trace::StreamId stream, trace::CorrelationId correlation) {
        if (ranks.of_stream(stream) != rank) return true;
        clock.round(gpu_start, gpu_end);
        if (gpu_end >= first_gpu_start) return true;
        if (correlation != 0) {
            if (std::optional<trace::ApiEvent> call = reader.api_call_by_correlation(correlation)) {
                TimeNs call_start = call->start_ns, call_end = call->end_ns;
                clock.round(call_start, call_end);
                const bool launcher = !roles.is_driver_call(call->name_id) && ranks.of_thread(call->thread_id) == rank;
                if (launcher && step_of_call(steps, call_start, call_end, StepConvention::tb) >= 0) return true;
            }
        }
        start = std::max(start, gpu_end);
        return true;
    };
    store::EventQuery before;
    before.end_ns = first_gpu_start + 1000;  // raw times lie within 1 µs of the rounded ones
    reader.for_each_kernel(before, [&](const trace::KernelEvent& e) {
        return consider(e.start_ns, e.end_ns, e.stream_id, e.correlation_id);
    });
    reader.for_each_memcpy(before, [&](const trace::MemcpyEvent& e) {
        return consider(e.start_ns, e.end_ns, e.stream_id, e.correlation_id);
    });
    reader.for_each_memset(before, [&](const trace::MemsetEvent& e) {
        return consider(e.start_ns, e.end_ns, e.stream_id, e.correlation_id);
    });
    return start;
}

// ---------------------------------------------------------------------------
// [SECTION] Step windows
// ---------------------------------------------------------------------------

// Each step runs from its host start (or the previous window's end, if later) to its
// host end or the end of the GPU work it launched, whichever is later.
void stretch_windows(RankSteps& steps, TimeNs first_start) {
    TimeNs previous_end = first_start;
    for (std::size_t i = 0; i < steps.host.size(); ++i) {
        const TimeNs start = std::max(previous_end, steps.host[i].start_ns);
        TimeNs end = std::max(steps.host[i].end_ns, start);
        if (steps.launches[i].any()) end = std::max(end, steps.launches[i].last_end_ns);
        steps.window_start.push_back(start);
        steps.window_end.push_back(end);
        previous_end = end;
    }
}

// tb: the plugin drops trailing steps that launched no GPU work, and then the last
// one as well when it launched fewer than 0.8 times the GPU events of the one before
// (the profiler may have stopped before its kernels were recorded).
std::size_t steps_kept_like_tb(const RankSteps& steps) {
    const std::size_t count = steps.host.size();
    if (count <= 1) return count;
    std::ptrdiff_t last = static_cast<std::ptrdiff_t>(count) - 1;
    while (last >= 0 && !steps.launches[static_cast<std::size_t>(last)].any()) --last;
    if (last < 0) return count;
    std::size_t keep = static_cast<std::size_t>(last) + 1;
    if (last > 0) {
        // The same double arithmetic as the plugin's `previous * 0.8 > last`.
        const double previous = static_cast<double>(steps.launches[static_cast<std::size_t>(last) - 1].gpu_events);
        if (previous * 0.8 > static_cast<double>(steps.launches[static_cast<std::size_t>(last)].gpu_events))
            keep = static_cast<std::size_t>(last);
    }
    return keep;
}

void build_windows(const store::TraceReader& reader, const RankMap& ranks, RoleBook& roles, StepConvention convention,
                   const PluginClock& clock, std::int32_t rank, RankSteps& steps, std::int64_t& tail_steps_dropped) {
    bool any_launch = false;
    for (const StepLaunches& launched : steps.launches) any_launch = any_launch || launched.any();
    if (convention == StepConvention::ember) {
        stretch_windows(steps, steps.host.front().start_ns);
    } else if (any_launch) {
        stretch_windows(steps, first_step_start_like_tb(reader, ranks, roles, clock, rank, steps));
        const std::size_t keep = steps_kept_like_tb(steps);
        tail_steps_dropped += static_cast<std::int64_t>(steps.host.size() - keep);
        steps.window_start.resize(keep);
        steps.window_end.resize(keep);
    } else {
        // No GPU work launched in any step: the plugin keeps the host steps as they are.
        for (const HostStep& step : steps.host) {
            steps.window_start.push_back(step.start_ns);
            steps.window_end.push_back(step.end_ns);
        }
    }
    for (std::size_t i = 0; i < steps.window_start.size(); ++i) {
        steps.numbers.push_back(steps.host[i].number.value_or(static_cast<std::int64_t>(i)));
        steps.window_end_reach.push_back(
            std::max(i == 0 ? kNever : steps.window_end_reach.back(), steps.window_end[i]));
    }
}

// ---------------------------------------------------------------------------
// [SECTION] The priority sweep
// ---------------------------------------------------------------------------

// Events of one rank arrive in start order. Any interval that covers an instant t has
// started by t, so between two consecutive starts a and b a category is active exactly
// on [a, min(b, reach)), where reach is the latest end of its intervals so far: every
// category's active part of [a, b) is a prefix, and the priorities split [a, b) into at
// most eight pieces, each credited to the windows it overlaps.
class PrioritySweep {
  public:
    explicit PrioritySweep(const RankSteps& steps) : steps_(steps), totals_(steps.window_start.size()) {
        reach_.fill(kNever);
        cursor_ = steps.window_start.empty() ? kForever : steps.window_start.front();
    }

    const RankSteps& steps() const { return steps_; }
    TimeNs last_window_end() const { return steps_.window_end_reach.empty() ? kNever : steps_.window_end_reach.back(); }

    void add(TimeNs start, TimeNs end, Role role) {
        if (start > cursor_) advance_to(start);
        if (end > reach_[role]) reach_[role] = end;
    }

    void finish() { advance_to(kForever); }

    const std::vector<std::array<TimeNs, kRoles>>& totals() const { return totals_; }

  private:
    void advance_to(TimeNs until) {
        const TimeNs until_in_steps = std::min(until, last_window_end());
        TimeNs covered = cursor_;
        for (int role = 0; role < kActiveRoles && covered < until_in_steps; ++role) {
            const TimeNs active_until = std::min(until_in_steps, reach_[role]);
            if (active_until > covered) {
                credit(role, covered, active_until);
                covered = active_until;
            }
        }
        if (covered < until_in_steps) credit(other_role, covered, until_in_steps);
        cursor_ = std::max(cursor_, until);
    }

    // Adds [start, end) to `role` of every window it overlaps; pieces come in time order.
    void credit(int role, TimeNs start, TimeNs end) {
        const std::vector<TimeNs>& window_start = steps_.window_start;
        const std::vector<TimeNs>& window_end = steps_.window_end;
        while (first_window_ < window_start.size() && steps_.window_end_reach[first_window_] <= start) ++first_window_;
        for (std::size_t i = first_window_; i < window_start.size() && window_start[i] < end; ++i) {
            const TimeNs from = std::max(start, window_start[i]), to = std::min(end, window_end[i]);
            if (to > from) totals_[i][static_cast<std::size_t>(role)] += to - from;
        }
    }

    const RankSteps& steps_;
    std::vector<std::array<TimeNs, kRoles>> totals_;
    std::array<TimeNs, kActiveRoles> reach_{};
    TimeNs cursor_ = kForever;
    std::size_t first_window_ = 0;
};

// One (table, track) of the trace read in start order through its (track, start) index.
enum class EventTable : std::uint8_t { kernels, memcpys, memsets, api_calls, ranges };

struct TrackCursor {
    EventTable table = EventTable::kernels;
    PrioritySweep* sweep = nullptr;
    std::unique_ptr<store::Statement> query;
    // The current row, rounded and classified.
    TimeNs raw_start_ns = 0;
    TimeNs start_ns = 0;
    TimeNs end_ns = 0;
    Role role = ignored_role;
};

class TrackMerger {
  public:
    TrackMerger(const store::TraceReader& reader, const RankMap& ranks, RoleBook& roles, StepConvention convention,
                const PluginClock& clock, std::map<std::int32_t, PrioritySweep>& sweeps,
                const std::unordered_set<trace::CorrelationId>& collective_kernels)
        : roles_(roles), convention_(convention), clock_(clock), collective_kernels_(collective_kernels) {
        // Nothing starting after the last window matters (+1 µs: the tb rounding).
        struct TableQuery {
            std::string_view table;
            EventTable kind;
            store::TableSql sql;
        };
        static constexpr TableQuery kTables[] = {
            {"kernels", EventTable::kernels,
             "SELECT start_ns, end_ns, name_id, correlation_id FROM kernels WHERE stream_id = ?1 "
             "AND start_ns < ?2 ORDER BY start_ns"},
            {"memcpys", EventTable::memcpys,
             "SELECT start_ns, end_ns FROM memcpys WHERE stream_id = ?1 AND start_ns < ?2 ORDER BY start_ns"},
            {"memsets", EventTable::memsets,
             "SELECT start_ns, end_ns FROM memsets WHERE stream_id = ?1 AND start_ns < ?2 ORDER BY start_ns"},
            {"api_calls", EventTable::api_calls,
             "SELECT start_ns, end_ns, name_id FROM api_calls WHERE thread_id = ?1 AND start_ns < ?2 ORDER BY "
             "start_ns"},
            {"ranges", EventTable::ranges,
             "SELECT start_ns, end_ns, domain_id, name_id, category FROM ranges WHERE thread_id = "
             "?1 AND start_ns < ?2 ORDER BY start_ns"},
        };
        // ember reads the host ranges only of the threads that drive the GPU: those that
        // run steps or make CUDA calls. A loader worker's or a monitor thread's ranges run
        // beside the step and say nothing of where its time went.
        std::unordered_set<trace::ThreadId> driving_threads;
        for (const store::TrackSummary& track : reader.tracks())
            if (track.event_table == "api_calls" && track.event_count > 0) driving_threads.insert(track.track.id);
        for (const auto& [rank, sweep] : sweeps)
            for (const HostStep& step : sweep.steps().host) driving_threads.insert(step.thread_id);
        for (const store::TrackSummary& track : reader.tracks()) {
            const TableQuery* table = std::find_if(std::begin(kTables), std::end(kTables),
                                                   [&](const TableQuery& t) { return t.table == track.event_table; });
            if (table == std::end(kTables) || track.event_count == 0) continue;
            const EventTable kind = table->kind;
            if (kind == EventTable::ranges && convention == StepConvention::ember &&
                !driving_threads.count(track.track.id))
                continue;
            const bool on_stream =
                kind == EventTable::kernels || kind == EventTable::memcpys || kind == EventTable::memsets;
            const std::int32_t rank = on_stream ? ranks.of_stream(track.track.id) : ranks.of_thread(track.track.id);
            auto sweep = sweeps.find(rank);
            if (sweep == sweeps.end() || sweep->second.last_window_end() == kNever) continue;
            auto cursor = std::make_unique<TrackCursor>();
            cursor->table = kind;
            cursor->sweep = &sweep->second;
            cursor->query = std::make_unique<store::Statement>(store::query(reader, table->sql));
            cursor->query->bind(1, track.track.id);
            cursor->query->bind(2, sweep->second.last_window_end() + 1000);
            cursors_.push_back(std::move(cursor));
        }
    }

    // Feeds every event, in start order, to its rank's sweep.
    void run() {
        auto later = [](const TrackCursor* a, const TrackCursor* b) { return a->raw_start_ns > b->raw_start_ns; };
        std::priority_queue<TrackCursor*, std::vector<TrackCursor*>, decltype(later)> heap(later);
        for (auto& cursor : cursors_)
            if (next(*cursor)) heap.push(cursor.get());
        while (!heap.empty()) {
            TrackCursor* cursor = heap.top();
            heap.pop();
            // Drain this track while it stays the earliest: most rows need no heap work.
            const TimeNs next_other = heap.empty() ? kForever : heap.top()->raw_start_ns;
            bool more = true;
            while (more && cursor->raw_start_ns <= next_other) {
                if (cursor->role != ignored_role) cursor->sweep->add(cursor->start_ns, cursor->end_ns, cursor->role);
                more = next(*cursor);
            }
            if (more) heap.push(cursor);
        }
    }

  private:
    bool next(TrackCursor& cursor) {
        store::Statement& query = *cursor.query;
        if (!query.next_row()) return false;
        cursor.raw_start_ns = query.column_int64(0);
        cursor.start_ns = cursor.raw_start_ns;
        cursor.end_ns = query.column_int64(1);
        clock_.round(cursor.start_ns, cursor.end_ns);
        switch (cursor.table) {
            case EventTable::kernels:
                cursor.role =
                    roles_.kernel(static_cast<trace::StringId>(query.column_int64(2)),
                                  static_cast<trace::CorrelationId>(query.column_int64(3)), collective_kernels_);
                break;
            case EventTable::memcpys:
                cursor.role = memcpy_role;
                break;
            case EventTable::memsets:
                cursor.role = memset_role;
                break;
            case EventTable::api_calls:
                cursor.role = roles_.api_call(static_cast<trace::StringId>(query.column_int64(2)));
                break;
            case EventTable::ranges:
                // ember: a range holding a whole step (a thread's main function, an epoch)
                // is its context, not work done in it; it would mark every instant CPU Exec.
                if (convention_ == StepConvention::ember &&
                    cursor.sweep->steps().spans_a_host_step(cursor.start_ns, cursor.end_ns))
                    cursor.role = ignored_role;
                else
                    cursor.role = roles_.range(static_cast<trace::StringId>(query.column_int64(2)),
                                               static_cast<trace::StringId>(query.column_int64(3)),
                                               static_cast<std::uint32_t>(query.column_int64(4)));
                break;
        }
        return true;
    }

    RoleBook& roles_;
    StepConvention convention_;
    const PluginClock& clock_;
    const std::unordered_set<trace::CorrelationId>& collective_kernels_;
    std::vector<std::unique_ptr<TrackCursor>> cursors_;
};

}  // namespace

// ---------------------------------------------------------------------------
// [SECTION] step_breakdown
// ---------------------------------------------------------------------------

std::vector<StepBreakdownRow> step_breakdown(const store::TraceReader& reader, StepConvention convention,
                                             StepBreakdownNotes* notes) {
    StepBreakdownNotes local_notes;
    StepBreakdownNotes& said = notes ? *notes : local_notes;
    said = {};
    const RankMap ranks = rank_map(reader);
    RoleBook roles(reader, convention);
    const PluginClock clock(convention == StepConvention::tb && reader.metadata("import_source_format") == "kineto");

    std::map<std::int32_t, RankSteps> steps = read_steps(reader, ranks, roles, convention);
    if (steps.empty() && convention == StepConvention::tb) {
        add_whole_trace_steps(reader, ranks, steps);
        said.whole_trace_as_one_step = !steps.empty();
    }
    if (steps.empty()) return {};
    for (auto& [rank, rank_steps] : steps) {
        for (HostStep& step : rank_steps.host) clock.round(step.start_ns, step.end_ns);
        for (const HostStep& step : rank_steps.host) {
            rank_steps.shortest_host_step_ns = std::min(rank_steps.shortest_host_step_ns, step.end_ns - step.start_ns);
            rank_steps.host_end_reach.push_back(
                std::max(rank_steps.host_end_reach.empty() ? kNever : rank_steps.host_end_reach.back(), step.end_ns));
        }
        rank_steps.launches.assign(rank_steps.host.size(), StepLaunches{});
    }

    std::unordered_set<trace::CorrelationId> collective_kernels;
    CollectiveOps collectives;  // tb: kernels launched by nccl:/gloo: ops are Communication
    if (convention == StepConvention::tb) collectives.load(reader, roles);
    read_launches(reader, ranks, roles, convention, clock, collectives, steps, collective_kernels);
    for (auto& [rank, rank_steps] : steps)
        build_windows(reader, ranks, roles, convention, clock, rank, rank_steps, said.tail_steps_dropped);

    std::map<std::int32_t, PrioritySweep> sweeps;
    for (const auto& [rank, rank_steps] : steps) sweeps.emplace(rank, PrioritySweep(rank_steps));
    TrackMerger(reader, ranks, roles, convention, clock, sweeps, collective_kernels).run();

    std::vector<StepBreakdownRow> rows;
    for (auto& [rank, sweep] : sweeps) {
        sweep.finish();
        const RankSteps& rank_steps = steps.at(rank);
        for (std::size_t i = 0; i < rank_steps.window_start.size(); ++i) {
            const std::array<TimeNs, kRoles>& total = sweep.totals()[i];
            StepBreakdownRow row;
            row.step = rank_steps.numbers[i];
            row.rank = rank;
            row.start_ns = rank_steps.window_start[i];
            row.end_ns = rank_steps.window_end[i];
            row.kernel_ns = total[kernel_role];
            row.memcpy_ns = total[memcpy_role];
            row.memset_ns = total[memset_role];
            row.communication_ns = total[communication_role];
            row.runtime_ns = total[runtime_role];
            row.dataloader_ns = total[dataloader_role];
            row.cpu_exec_ns = total[cpu_exec_role];
            row.other_ns = total[other_role];
            rows.push_back(row);
        }
    }
    return rows;
}

}  // namespace ember::analysis
