// duration_summary.cpp: exact per-name duration statistics, grouped in C++ from
// one SQL scan per table (durations per name are kept to get the exact median).
#include "profiler/analysis/duration_summary.h"

#include "profiler/analysis/operation_names.h"
#include "profiler/store/table_sql.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace ember::analysis {

DurationStats summarize_durations(std::vector<std::int64_t>& durations) {
    DurationStats stats;
    if (durations.empty()) return stats;
    std::sort(durations.begin(), durations.end());
    std::size_t n = durations.size();
    stats.instances = static_cast<std::int64_t>(n);
    for (std::int64_t d : durations) stats.total_ns += d;
    stats.min_ns = durations.front();
    stats.max_ns = durations.back();
    stats.average_ns = static_cast<double>(stats.total_ns) / static_cast<double>(n);
    stats.median_ns = n % 2 == 1
                          ? static_cast<double>(durations[n / 2])
                          : (static_cast<double>(durations[n / 2 - 1]) + static_cast<double>(durations[n / 2])) / 2.0;
    if (n > 1) {
        double squares = 0.0;
        for (std::int64_t d : durations) {
            double deviation = static_cast<double>(d) - stats.average_ns;
            squares += deviation * deviation;
        }
        stats.stddev_ns = std::sqrt(squares / static_cast<double>(n - 1));
    }
    return stats;
}

std::optional<SummarySort> parse_summary_sort(std::string_view text) {
    if (text == "total") return SummarySort::total;
    if (text == "instances") return SummarySort::instances;
    if (text == "avg") return SummarySort::average;
    if (text == "med") return SummarySort::median;
    if (text == "min") return SummarySort::min;
    if (text == "max") return SummarySort::max;
    if (text == "name") return SummarySort::name;
    return std::nullopt;
}

void sort_and_cut(std::vector<DurationSummaryRow>& rows, SummarySort sort, std::size_t top) {
    auto key = [sort](const DurationSummaryRow& row) -> double {
        switch (sort) {
            case SummarySort::total:
                return static_cast<double>(row.stats.total_ns);
            case SummarySort::instances:
                return static_cast<double>(row.stats.instances);
            case SummarySort::average:
                return row.stats.average_ns;
            case SummarySort::median:
                return row.stats.median_ns;
            case SummarySort::min:
                return static_cast<double>(row.stats.min_ns);
            case SummarySort::max:
                return static_cast<double>(row.stats.max_ns);
            case SummarySort::name:
                return 0.0;
        }
        return 0.0;
    };
    std::stable_sort(rows.begin(), rows.end(), [&](const DurationSummaryRow& a, const DurationSummaryRow& b) {
        double ka = key(a), kb = key(b);
        if (ka != kb) return ka > kb;
        return std::tie(a.name, a.domain, a.style) < std::tie(b.name, b.domain, b.style);
    });
    if (top > 0 && rows.size() > top) rows.resize(top);
}

namespace {

// Groups `SELECT key1, key2, key3, duration` rows and summarizes each group.
struct GroupKey {
    std::int64_t a = 0, b = 0, c = 0;
    bool operator<(const GroupKey& other) const { return std::tie(a, b, c) < std::tie(other.a, other.b, other.c); }
};

std::map<GroupKey, DurationStats> grouped_stats(const store::TraceReader& reader, store::TableSql sql) {
    std::map<GroupKey, std::vector<std::int64_t>> durations;
    store::Statement query = store::query(reader, sql);
    while (query.next_row()) {
        durations[GroupKey{query.column_int64(0), query.column_int64(1), query.column_int64(2)}].push_back(
            query.column_int64(3));
    }
    std::map<GroupKey, DurationStats> stats;
    for (auto& [key, values] : durations) {
        stats[key] = summarize_durations(values);
        std::vector<std::int64_t>().swap(values);  // free as we go: 10^7 durations are 80 MB
    }
    return stats;
}

void fill_percent(std::vector<DurationSummaryRow>& rows) {
    std::int64_t grand_total = 0;
    for (const auto& row : rows) grand_total += row.stats.total_ns;
    for (auto& row : rows) {
        row.time_percent =
            grand_total > 0 ? 100.0 * static_cast<double>(row.stats.total_ns) / static_cast<double>(grand_total) : 0.0;
    }
}

// One row per group of `sql`'s rows, named by describe(key, row), with its share of the
// total, largest total first.
template <class Describe>
std::vector<DurationSummaryRow> summary_rows(const store::TraceReader& reader, store::TableSql sql, Describe describe) {
    std::vector<DurationSummaryRow> rows;
    for (const auto& [key, stats] : grouped_stats(reader, sql)) {
        DurationSummaryRow row;
        describe(key, row);
        row.stats = stats;
        rows.push_back(std::move(row));
    }
    fill_percent(rows);
    sort_and_cut(rows, SummarySort::total, 0);
    return rows;
}

// key.a: the name's string id.
std::vector<DurationSummaryRow> named_rows(const store::TraceReader& reader, store::TableSql sql) {
    return summary_rows(reader, sql, [&](const GroupKey& key, DurationSummaryRow& row) {
        row.name = std::string(reader.string(static_cast<trace::StringId>(key.a)));
    });
}

}  // namespace

std::vector<DurationSummaryRow> kernel_summary(const store::TraceReader& reader) {
    return named_rows(reader, "SELECT name_id, 0, 0, end_ns - start_ns FROM kernels");
}

std::vector<DurationSummaryRow> api_summary(const store::TraceReader& reader) {
    return named_rows(reader, "SELECT name_id, 0, 0, end_ns - start_ns FROM api_calls");
}

std::vector<DurationSummaryRow> range_summary(const store::TraceReader& reader) {
    return summary_rows(reader, "SELECT name_id, domain_id, depth < 0, end_ns - start_ns FROM ranges",
                        [&](const GroupKey& key, DurationSummaryRow& row) {
                            row.name = std::string(reader.string(static_cast<trace::StringId>(key.a)));
                            row.domain = std::string(reader.string(static_cast<trace::StringId>(key.b)));
                            row.style = key.c != 0 ? "start/end" : "push/pop";
                        });
}

namespace {

// key.a: direction (memcpys) or -1 (memsets); the fourth column is what is summarized.
std::vector<DurationSummaryRow> memory_rows(const store::TraceReader& reader, store::TableSql sql) {
    return summary_rows(reader, sql, [](const GroupKey& key, DurationSummaryRow& row) {
        row.name = key.a < 0 ? std::string(kMemsetOperationName)
                             : memcpy_operation_name(static_cast<trace::MemcpyDirection>(key.a));
    });
}

}  // namespace

std::vector<DurationSummaryRow> memory_time_summary(const store::TraceReader& reader) {
    return memory_rows(reader,
                       "SELECT direction, 0, 0, end_ns - start_ns FROM memcpys UNION ALL "
                       "SELECT -1, 0, 0, end_ns - start_ns FROM memsets");
}

std::vector<DurationSummaryRow> memory_size_summary(const store::TraceReader& reader) {
    return memory_rows(reader,
                       "SELECT direction, 0, 0, bytes FROM memcpys UNION ALL SELECT -1, 0, 0, bytes FROM memsets");
}

}  // namespace ember::analysis
