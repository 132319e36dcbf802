// statistics.cpp: per-name totals, steps and range summaries (statistics.h).
#include "viewer/model/statistics.h"

#include "viewer/model/lod.h"

#include "profiler/analysis/steps.h"
#include "common/text.h"

#include <algorithm>
#include <unordered_map>

namespace ember::viewer {

using trace::TimeNs;

bool is_stall_name(std::string_view name) {
    const std::string lower = text::ascii_lowercase(name);
    return lower.find("wait") != std::string::npos || lower.find("stall") != std::string::npos;
}

namespace {

class Accumulator {
  public:
    void add(const TimelineEvent& event, TimeNs duration) {
        NameTotal& total = totals_[key(event)];
        if (total.count == 0) {
            total.name_id = event.name_id;
            total.kind = event.kind == EventKind::memset ? EventKind::memcpy : event.kind;
            total.min_ns = duration;
            total.max_ns = duration;
        }
        total.count += 1;
        total.total_ns += duration;
        total.min_ns = std::min(total.min_ns, duration);
        total.max_ns = std::max(total.max_ns, duration);
        total.bytes += event.value;
    }
    std::vector<NameTotal> sorted() const {
        std::vector<NameTotal> rows;
        rows.reserve(totals_.size());
        for (const auto& entry : totals_) rows.push_back(entry.second);
        std::sort(rows.begin(), rows.end(), [](const NameTotal& a, const NameTotal& b) {
            return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name_id < b.name_id;
        });
        return rows;
    }

  private:
    static std::uint64_t key(const TimelineEvent& event) { return event.name_id; }
    std::unordered_map<std::uint64_t, NameTotal> totals_;
};

Statistics collect(const TraceModel& model, const TimeRange* range) {
    Statistics stats;
    Accumulator kernels, copies, ranges, stalls;
    for (int lane_index = 0; lane_index < model.lane_count(); ++lane_index) {
        const Lane& lane = model.lane(lane_index);
        if (!lane.ready.load(std::memory_order_acquire)) continue;
        for (int row_index = 0; row_index < static_cast<int>(lane.rows.size()); ++row_index) {
            const Row& row = lane.rows[static_cast<std::size_t>(row_index)];
            IndexRange visible{0, row.events.size()};
            if (range) visible = visible_range(row, range->begin_ns, range->end_ns);
            for (std::size_t index = visible.first; index < visible.last; ++index) {
                const TimelineEvent& event = row.events[index];
                TimeNs duration = event.duration_ns();
                if (range) {
                    const TimeNs begin = std::max(event.start_ns, range->begin_ns);
                    const TimeNs end = std::min(event.end_ns, range->end_ns);
                    const bool instant_inside = event.start_ns == event.end_ns && event.start_ns >= range->begin_ns &&
                                                event.start_ns < range->end_ns;
                    if (end <= begin && !instant_inside) continue;
                    duration = std::max<TimeNs>(0, end - begin);
                }
                stats.event_count += 1;
                switch (event.kind) {
                    case EventKind::kernel:
                        kernels.add(event, duration);
                        stats.kernel_time_ns += duration;
                        break;
                    case EventKind::memcpy:
                    case EventKind::memset:
                        copies.add(event, duration);
                        stats.copy_time_ns += duration;
                        break;
                    case EventKind::sync:
                        stalls.add(event, duration);
                        break;
                    case EventKind::range: {
                        ranges.add(event, duration);
                        const std::string_view name = model.name(event.name_id);
                        if (is_stall_name(name)) stalls.add(event, duration);
                        // What a step is, as every report decides it (steps.h: by name).
                        if (analysis::is_step_range_name(name))
                            stats.steps.push_back({0,
                                                   EventRef{lane_index, row_index, static_cast<std::uint32_t>(index)},
                                                   event.start_ns, event.duration_ns()});
                        break;
                    }
                    default:
                        break;
                }
            }
        }
    }
    stats.kernels = kernels.sorted();
    stats.copies = copies.sorted();
    stats.ranges = ranges.sorted();
    stats.stalls = stalls.sorted();
    std::sort(stats.steps.begin(), stats.steps.end(),
              [](const StepRow& a, const StepRow& b) { return a.start_ns < b.start_ns; });
    for (std::size_t index = 0; index < stats.steps.size(); ++index)
        stats.steps[index].index = static_cast<std::int64_t>(index);
    return stats;
}

}  // namespace

Statistics compute_statistics(const TraceModel& model) {
    return collect(model, nullptr);
}

Statistics summarize_range(const TraceModel& model, TimeRange range) {
    return collect(model, &range);
}

}  // namespace ember::viewer
