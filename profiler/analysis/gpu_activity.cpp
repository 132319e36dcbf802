// gpu_activity.cpp: unions of GPU intervals per device, streamed from SQL in
// (device, start) order and merged on the fly, then distributed over the step
// windows. Memory: the steps and the NVTX wait ranges, never the GPU events.
#include "profiler/analysis/gpu_activity.h"

#include "common/nvtx_contract.h"
#include "profiler/analysis/communication.h"
#include "profiler/analysis/rank_map.h"
#include "profiler/store/table_sql.h"
#include "profiler/analysis/steps.h"

#include <algorithm>
#include <map>
#include <optional>
#include <queue>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace ember::analysis {

namespace {

struct Window {
    trace::TimeNs start_ns = 0;
    trace::TimeNs end_ns = 0;
    trace::ThreadId thread_id = 0;
};

trace::TimeNs overlap(trace::TimeNs a_start, trace::TimeNs a_end, trace::TimeNs b_start, trace::TimeNs b_end) {
    trace::TimeNs start = std::max(a_start, b_start), end = std::min(a_end, b_end);
    return end > start ? end - start : 0;
}

// Adds the overlap of ascending intervals with every step window to a per-step
// total. Steps are sorted by start; `reach[i]` is the latest end among steps
// 0..i, so steps that end before an interval are skipped for good even when
// steps overlap one another.
class StepDistributor {
  public:
    explicit StepDistributor(const std::vector<Window>& steps) : steps_(steps) {
        trace::TimeNs latest = std::numeric_limits<trace::TimeNs>::min();
        for (const Window& step : steps_) {
            latest = std::max(latest, step.end_ns);
            reach_.push_back(latest);
        }
    }
    void restart() { first_ = 0; }
    void add(trace::TimeNs start, trace::TimeNs end, std::vector<trace::TimeNs>& totals) {
        while (first_ < steps_.size() && reach_[first_] <= start) ++first_;
        for (std::size_t i = first_; i < steps_.size() && steps_[i].start_ns < end; ++i) {
            totals[i] += overlap(start, end, steps_[i].start_ns, steps_[i].end_ns);
        }
    }

  private:
    const std::vector<Window>& steps_;
    std::vector<trace::TimeNs> reach_;
    std::size_t first_ = 0;
};

// Streams `sql` (device, start, end ordered by device, start) and calls
// on_interval(device, start, end) for each interval of the per-device union of the rows
// `keep` accepts (given the query, for a column beyond the third).
template <typename OnInterval, typename Keep>
void for_each_union_interval(const store::TraceReader& reader, store::TableSql sql, OnInterval on_interval, Keep keep) {
    store::Statement query = store::query(reader, sql);
    std::optional<trace::DeviceId> device;
    trace::TimeNs start = 0, end = 0;
    while (query.next_row()) {
        if (!keep(query)) continue;
        auto row_device = static_cast<trace::DeviceId>(query.column_int64(0));
        trace::TimeNs row_start = query.column_int64(1), row_end = query.column_int64(2);
        if (device && *device == row_device && row_start <= end) {
            end = std::max(end, row_end);
            continue;
        }
        if (device) on_interval(*device, start, end);
        device = row_device;
        start = row_start;
        end = row_end;
    }
    if (device) on_interval(*device, start, end);
}

template <typename OnInterval>
void for_each_union_interval(const store::TraceReader& reader, store::TableSql sql, OnInterval on_interval) {
    for_each_union_interval(reader, sql, on_interval, [](const store::Statement&) { return true; });
}

constexpr store::TableSql kKernelsSql =
    "SELECT device_id, start_ns, end_ns, name_id FROM kernels ORDER BY device_id, start_ns";
constexpr store::TableSql kCopiesSql =
    "SELECT device_id, start_ns, end_ns FROM memcpys UNION ALL "
    "SELECT device_id, start_ns, end_ns FROM memsets ORDER BY 1, 2";
constexpr store::TableSql kAllGpuSql =
    "SELECT device_id, start_ns, end_ns FROM kernels UNION ALL "
    "SELECT device_id, start_ns, end_ns FROM memcpys UNION ALL "
    "SELECT device_id, start_ns, end_ns FROM memsets ORDER BY 1, 2";

std::vector<Window> ranges_named(const store::TraceReader& reader, std::string_view name) {
    std::vector<Window> windows;
    std::optional<trace::StringId> name_id = reader.find_string(name);
    if (!name_id) return windows;
    const trace::StringId names[] = {*name_id};
    reader.for_each_range_named(names, [&](const trace::RangeEvent& range) {
        windows.push_back({range.start_ns, range.end_ns, range.thread_id});
        return true;
    });
    return windows;
}

// Per step: the summed overlap of `waits` on the step's own thread.
std::vector<trace::TimeNs> wait_per_step(const std::vector<Window>& steps, const std::vector<Window>& waits) {
    std::map<trace::ThreadId, std::vector<Window>> by_thread;  // each sorted by start
    trace::TimeNs longest = 0;
    for (const Window& wait : waits) {
        by_thread[wait.thread_id].push_back(wait);
        longest = std::max(longest, wait.end_ns - wait.start_ns);
    }
    std::vector<trace::TimeNs> totals(steps.size(), 0);
    for (std::size_t i = 0; i < steps.size(); ++i) {
        auto found = by_thread.find(steps[i].thread_id);
        if (found == by_thread.end()) continue;
        const std::vector<Window>& list = found->second;
        auto first = std::lower_bound(list.begin(), list.end(), steps[i].start_ns - longest,
                                      [](const Window& w, trace::TimeNs t) { return w.start_ns < t; });
        for (auto it = first; it != list.end() && it->start_ns < steps[i].end_ns; ++it) {
            totals[i] += overlap(it->start_ns, it->end_ns, steps[i].start_ns, steps[i].end_ns);
        }
    }
    return totals;
}

struct GapOrder {
    // Top of the heap = the gap to evict first: shortest, then latest.
    bool operator()(const IdleGap& a, const IdleGap& b) const {
        trace::TimeNs la = a.end_ns - a.start_ns, lb = b.end_ns - b.start_ns;
        if (la != lb) return la > lb;
        if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
        return a.device_id < b.device_id;
    }
};

}  // namespace

GpuActivity gpu_activity(const store::TraceReader& reader, std::size_t gap_count) {
    GpuActivity result;
    const RankMap ranks = rank_map(reader);
    std::vector<Window> steps;
    {
        std::vector<StepRange> ordered;
        for (const auto& [rank, ranges] : step_ranges(reader, ranks))
            ordered.insert(ordered.end(), ranges.begin(), ranges.end());
        std::sort(ordered.begin(), ordered.end(), [](const StepRange& a, const StepRange& b) {
            return std::tie(a.start_ns, a.range_id) < std::tie(b.start_ns, b.range_id);
        });
        for (const StepRange& step : ordered) steps.push_back({step.start_ns, step.end_ns, step.thread_id});
    }
    std::vector<trace::TimeNs> dataloader = wait_per_step(steps, ranges_named(reader, nvtx::range::kDataloaderWait));
    std::vector<trace::TimeNs> allreduce = wait_per_step(steps, ranges_named(reader, nvtx::range::kAllreduceWait));

    std::vector<trace::DeviceId> devices;
    {
        store::Statement query = store::query(reader,
                                              "SELECT device_id FROM kernels UNION SELECT device_id FROM memcpys "
                                              "UNION SELECT device_id FROM memsets ORDER BY 1");
        while (query.next_row()) devices.push_back(static_cast<trace::DeviceId>(query.column_int64(0)));
    }
    std::map<trace::DeviceId, std::vector<trace::TimeNs>> compute, communication, copies, active;
    for (trace::DeviceId device : devices) {
        compute[device].assign(steps.size(), 0);
        communication[device].assign(steps.size(), 0);
        copies[device].assign(steps.size(), 0);
        active[device].assign(steps.size(), 0);
    }

    StepDistributor distributor(steps);
    auto distribute_into = [&](std::map<trace::DeviceId, std::vector<trace::TimeNs>>& totals) {
        std::optional<trace::DeviceId> current;
        return
            [&totals, &distributor, current](trace::DeviceId device, trace::TimeNs start, trace::TimeNs end) mutable {
                if (current != device) {
                    distributor.restart();
                    current = device;
                }
                distributor.add(start, end, totals[device]);
            };
    };
    // Kernels split by communication.h's one definition: collective kernels are
    // communication, every other kernel compute.
    std::unordered_set<trace::StringId> communication_names;
    {
        store::Statement query = store::query(reader, "SELECT DISTINCT name_id FROM kernels");
        while (query.next_row()) {
            const auto name = static_cast<trace::StringId>(query.column_int64(0));
            if (is_communication_kernel(reader.string(name))) communication_names.insert(name);
        }
    }
    auto is_communication = [&](const store::Statement& row) {
        return communication_names.count(static_cast<trace::StringId>(row.column_int64(3))) > 0;
    };
    for_each_union_interval(reader, kKernelsSql, distribute_into(compute),
                            [&](const store::Statement& row) { return !is_communication(row); });
    for_each_union_interval(reader, kKernelsSql, distribute_into(communication), is_communication);
    for_each_union_interval(reader, kCopiesSql, distribute_into(copies));

    // The union of everything: steps' active time, busy fraction and idle gaps.
    const trace::RunInfo& run = reader.run();
    bool run_has_end = run.end_ns > run.start_ns;
    std::map<trace::DeviceId, DeviceBusy> busy;
    std::map<trace::DeviceId, trace::TimeNs> previous_end;
    std::priority_queue<IdleGap, std::vector<IdleGap>, GapOrder> gaps;
    auto on_active = distribute_into(active);
    for_each_union_interval(reader, kAllGpuSql, [&](trace::DeviceId device, trace::TimeNs start, trace::TimeNs end) {
        on_active(device, start, end);
        auto [entry, first] = busy.try_emplace(device);
        DeviceBusy& totals = entry->second;
        if (first) {
            totals.device_id = device;
            totals.window_start_ns = run_has_end ? run.start_ns : start;
            totals.window_end_ns = run_has_end ? run.end_ns : end;
        }
        if (!run_has_end) totals.window_end_ns = std::max(totals.window_end_ns, end);
        totals.busy_ns += overlap(start, end, totals.window_start_ns, run_has_end ? totals.window_end_ns : end);
        auto previous = previous_end.find(device);
        if (previous != previous_end.end()) {
            ++totals.idle_gap_count;
            if (gap_count > 0) {
                gaps.push(IdleGap{device, previous->second, start});
                if (gaps.size() > gap_count) gaps.pop();
            }
        }
        previous_end[device] = end;
    });
    for (auto& [device, totals] : busy) {
        trace::TimeNs window = totals.window_end_ns - totals.window_start_ns;
        totals.busy_fraction = window > 0 ? static_cast<double>(totals.busy_ns) / static_cast<double>(window) : 0.0;
        result.devices.push_back(totals);
    }
    while (!gaps.empty()) {
        result.longest_gaps.push_back(gaps.top());
        gaps.pop();
    }
    std::reverse(result.longest_gaps.begin(), result.longest_gaps.end());

    // A job trace of several ranks: each step counts only its own rank's devices.
    const std::unordered_map<trace::ThreadId, std::int32_t>& rank_of_thread = ranks.thread_rank;
    const std::unordered_map<trace::DeviceId, std::int32_t>& rank_of_device = ranks.device_rank;
    std::map<std::int32_t, std::int64_t> steps_of_rank;
    for (std::size_t i = 0; i < steps.size(); ++i) {
        StepBreakdown row;
        row.step_index = static_cast<std::int64_t>(i);
        auto step_rank = rank_of_thread.find(steps[i].thread_id);
        if (step_rank != rank_of_thread.end()) {
            row.rank = step_rank->second;
            row.step_index = steps_of_rank[row.rank]++;
        }
        std::vector<trace::DeviceId> step_devices;
        for (trace::DeviceId device : devices) {
            auto device_rank = rank_of_device.find(device);
            if (row.rank < 0 || device_rank == rank_of_device.end() || device_rank->second == row.rank)
                step_devices.push_back(device);
        }
        row.start_ns = steps[i].start_ns;
        row.wall_ns = steps[i].end_ns - steps[i].start_ns;
        row.dataloader_wait_ns = dataloader[i];
        row.allreduce_wait_ns = allreduce[i];
        if (step_devices.empty()) {
            row.gpu_idle_ns = row.wall_ns;
            result.steps.push_back(row);
            continue;
        }
        for (trace::DeviceId device : step_devices) {
            row.device_id = device;
            row.gpu_compute_ns = compute[device][i];
            row.communication_ns = communication[device][i];
            row.copies_ns = copies[device][i];
            row.gpu_idle_ns = row.wall_ns - active[device][i];
            result.steps.push_back(row);
        }
    }
    return result;
}

}  // namespace ember::analysis
