// launches.cpp: launch statistics and queue lengths (launches.h).
#include "profiler/analysis/launches.h"

#include <algorithm>
#include <map>

namespace ember::analysis {

LaunchOptions launch_options_for(Convention convention) {
    LaunchOptions options;
    options.negative_delay_is_zero = convention == Convention::hta;
    return options;
}

std::vector<LaunchRow> launch_statistics(const store::TraceReader& reader, const std::vector<RankGpuWork>& work,
                                         const LaunchOptions& options) {
    std::vector<LaunchRow> rows;
    for (const RankGpuWork& rank : work) {
        std::map<std::int64_t, LaunchRow> by_name;  // name id, or -1 / -2 for copies / memsets
        for (const GpuEvent& event : rank.events) {
            if (!event.linked()) continue;
            const std::int64_t key = event.kind == GpuEventKind::kernel ? static_cast<std::int64_t>(event.name_id)
                                                                        : -1 - static_cast<std::int64_t>(event.kind);
            LaunchRow& row = by_name[key];
            if (row.launches == 0) {
                row.rank = rank.rank;
                row.name = event.kind == GpuEventKind::kernel   ? std::string(reader.string(event.name_id))
                           : event.kind == GpuEventKind::memcpy ? "memcpy"
                                                                : "memset";
            }
            const trace::TimeNs launch = event.launch_end_ns - event.launch_start_ns;
            trace::TimeNs delay = event.start_ns - event.launch_end_ns;
            if (options.negative_delay_is_zero) delay = std::max<trace::TimeNs>(delay, 0);
            const trace::TimeNs gpu = event.end_ns - event.start_ns;
            ++row.launches;
            row.launch_total_ns += launch;
            row.launch_max_ns = std::max(row.launch_max_ns, launch);
            row.delay_total_ns += delay;
            row.delay_max_ns = std::max(row.delay_max_ns, delay);
            row.gpu_total_ns += gpu;
            if (launch <= options.runtime_cutoff_ns && gpu < launch) ++row.short_kernels;
            if (launch > options.runtime_cutoff_ns) ++row.launch_outliers;
            if (delay > options.launch_delay_cutoff_ns) ++row.delay_outliers;
        }
        std::vector<LaunchRow> rank_rows;
        for (auto& [key, row] : by_name) rank_rows.push_back(std::move(row));
        std::stable_sort(rank_rows.begin(), rank_rows.end(), [](const LaunchRow& a, const LaunchRow& b) {
            return a.launch_total_ns != b.launch_total_ns ? a.launch_total_ns > b.launch_total_ns : a.name < b.name;
        });
        rows.insert(rows.end(), rank_rows.begin(), rank_rows.end());
    }
    return rows;
}

std::vector<QueueSeries> queue_length_series(const std::vector<RankGpuWork>& work) {
    std::vector<QueueSeries> result;
    for (const RankGpuWork& rank : work) {
        // (stream) -> (time, +1 launch / -1 start); a launch sorts before a start at
        // the same instant, so the queue never reads negative.
        std::map<std::uint64_t, std::vector<std::pair<trace::TimeNs, int>>> changes;
        for (const GpuEvent& event : rank.events) {
            if (!event.linked()) continue;
            auto& stream = changes[event.cuda_stream];
            stream.push_back({event.launch_start_ns, +1});
            stream.push_back({event.start_ns, -1});
        }
        for (auto& [stream, points] : changes) {
            std::sort(points.begin(), points.end(), [](const auto& a, const auto& b) {
                return a.first != b.first ? a.first < b.first : a.second > b.second;
            });
            QueueSeries series{rank.rank, stream, {}};
            series.points.reserve(points.size());
            std::int64_t length = 0;
            for (const auto& [time, delta] : points) {
                length += delta;
                series.points.push_back({time, length});
            }
            result.push_back(std::move(series));
        }
    }
    return result;
}

std::vector<QueueRow> queue_length_summary(const std::vector<RankGpuWork>& work) {
    std::vector<QueueRow> rows;
    for (const QueueSeries& series : queue_length_series(work)) {
        QueueRow row{series.rank, series.stream, static_cast<std::int64_t>(series.points.size()), 0.0, 0.0, 0.0, 0};
        if (series.points.empty()) continue;
        std::vector<std::int64_t> values;
        values.reserve(series.points.size());
        double sum = 0.0, weighted = 0.0;
        for (std::size_t i = 0; i < series.points.size(); ++i) {
            const QueuePoint& point = series.points[i];
            values.push_back(point.length);
            sum += static_cast<double>(point.length);
            row.max = std::max(row.max, point.length);
            if (i + 1 < series.points.size())
                weighted += static_cast<double>(point.length) *
                            static_cast<double>(series.points[i + 1].time_ns - point.time_ns);
        }
        row.mean = sum / static_cast<double>(values.size());
        const trace::TimeNs span = series.points.back().time_ns - series.points.front().time_ns;
        row.time_weighted_mean = span > 0 ? weighted / static_cast<double>(span) : row.mean;
        std::sort(values.begin(), values.end());
        const std::size_t n = values.size();
        row.median = n % 2 ? static_cast<double>(values[n / 2])
                           : (static_cast<double>(values[n / 2 - 1]) + static_cast<double>(values[n / 2])) / 2.0;
        rows.push_back(row);
    }
    return rows;
}

}  // namespace ember::analysis
