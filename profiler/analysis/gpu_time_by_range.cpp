// gpu_time_by_range.cpp: a sweep over (thread, time) that merges kernel launches
// with the push/pop ranges of the launching thread, keeping the open ranges on a
// stack. Both inputs come sorted from SQL, so the sweep holds only one thread's
// open ranges in memory.
#include "profiler/analysis/gpu_time_by_range.h"

#include "profiler/store/table_sql.h"

#include <algorithm>

namespace ember::analysis {

namespace {

struct OpenRange {
    std::int64_t end_ns;
    std::uint32_t node;
};

}  // namespace

GpuTimeByRange gpu_time_by_range(const store::TraceReader& reader) {
    GpuTimeByRange result;
    StackTree& tree = result.stacks;

    auto attribute = [&](std::uint32_t range_node, trace::StringId kernel_name, std::int64_t kernels, std::int64_t ns) {
        std::uint32_t leaf = tree.child(range_node, std::string(reader.string(kernel_name)));
        tree.add_weight(leaf, ns);
        auto& totals = result.by_range[range_node];
        totals.kernels += kernels;
        totals.gpu_ns += ns;
        result.total_gpu_ns += ns;
    };

    store::Statement launches = store::query(reader,
                                             "SELECT a.thread_id, a.start_ns, k.name_id, k.end_ns - k.start_ns "
                                             "FROM kernels k JOIN api_calls a ON a.correlation_id = k.correlation_id "
                                             "WHERE k.correlation_id != 0 ORDER BY a.thread_id, a.start_ns");
    store::Statement ranges = store::query(reader,
                                           "SELECT thread_id, start_ns, end_ns, name_id FROM ranges WHERE depth >= 0 "
                                           "ORDER BY thread_id, start_ns, depth");
    bool has_range = ranges.next_row();
    std::vector<OpenRange> open;
    std::int64_t current_thread = -1;

    while (launches.next_row()) {
        std::int64_t thread = launches.column_int64(0);
        std::int64_t launch_ns = launches.column_int64(1);
        if (thread != current_thread) {
            open.clear();
            current_thread = thread;
        }
        while (has_range) {
            std::int64_t range_thread = ranges.column_int64(0);
            std::int64_t range_start = ranges.column_int64(1);
            if (range_thread > thread || (range_thread == thread && range_start > launch_ns)) break;
            if (range_thread == thread) {
                while (!open.empty() && open.back().end_ns <= range_start) open.pop_back();
                std::uint32_t parent = open.empty() ? StackTree::kRoot : open.back().node;
                std::string name(reader.string(static_cast<trace::StringId>(ranges.column_int64(3))));
                open.push_back({ranges.column_int64(2), tree.child(parent, name)});
            }
            has_range = ranges.next_row();
        }
        while (!open.empty() && open.back().end_ns <= launch_ns) open.pop_back();
        std::uint32_t node = open.empty() ? tree.child(StackTree::kRoot, kNoRangeName) : open.back().node;
        attribute(node, static_cast<trace::StringId>(launches.column_int64(2)), 1, launches.column_int64(3));
    }

    store::Statement orphans = store::query(reader,
                                            "SELECT k.name_id, COUNT(*), SUM(k.end_ns - k.start_ns) FROM kernels k "
                                            "WHERE k.correlation_id = 0 OR NOT EXISTS "
                                            "(SELECT 1 FROM api_calls a WHERE a.correlation_id = k.correlation_id) "
                                            "GROUP BY k.name_id ORDER BY k.name_id");
    while (orphans.next_row()) {
        std::uint32_t node = tree.child(StackTree::kRoot, kNoLaunchingCallName);
        attribute(node, static_cast<trace::StringId>(orphans.column_int64(0)), orphans.column_int64(1),
                  orphans.column_int64(2));
    }
    return result;
}

std::vector<GpuTimeByRangeRow> gpu_time_by_range_rows(const GpuTimeByRange& result) {
    std::vector<GpuTimeByRangeRow> rows;
    for (const auto& [node, totals] : result.by_range) {
        GpuTimeByRangeRow row;
        for (const std::string& name : result.stacks.path(node)) {
            if (!row.range_path.empty()) row.range_path += " > ";
            row.range_path += name;
        }
        row.kernels = totals.kernels;
        row.gpu_ns = totals.gpu_ns;
        row.gpu_percent = result.total_gpu_ns > 0
                              ? 100.0 * static_cast<double>(totals.gpu_ns) / static_cast<double>(result.total_gpu_ns)
                              : 0.0;
        rows.push_back(std::move(row));
    }
    std::sort(rows.begin(), rows.end(), [](const GpuTimeByRangeRow& a, const GpuTimeByRangeRow& b) {
        if (a.gpu_ns != b.gpu_ns) return a.gpu_ns > b.gpu_ns;
        return a.range_path < b.range_path;
    });
    return rows;
}

}  // namespace ember::analysis
