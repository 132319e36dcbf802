// trace_diff_output.cpp: `ember diff` as text, CSV and JSON (trace_diff.h).
#include "profiler/analysis/trace_diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace ember::analysis {

using trace::TimeNs;

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
// GPU memory peaks per device (`ember stats --report gpu_memory`), A against B.
Table memory_table(const TraceDiff& diff) {
    Table table("gpu_memory", "GPU memory peaks per device (A vs B)",
                {{"device", "Device", ColumnKind::integer},
                 {"a_peak_allocated_bytes", "A Peak Allocated (B)", ColumnKind::integer},
                 {"b_peak_allocated_bytes", "B Peak Allocated (B)", ColumnKind::integer},
                 {"allocated_change_bytes", "Change (B)", ColumnKind::integer},
                 {"allocated_change_percent", "Change %", ColumnKind::percent},
                 {"a_peak_reserved_bytes", "A Peak Reserved (B)", ColumnKind::integer},
                 {"b_peak_reserved_bytes", "B Peak Reserved (B)", ColumnKind::integer},
                 {"reserved_change_bytes", "Change (B)", ColumnKind::integer}});
    const Cell none = std::monostate{};
    for (const MemoryPeakDelta& d : diff.memory) {
        auto value = [&](const std::optional<MemoryPeak>& peak, bool reserved) -> Cell {
            if (!peak) return none;
            return reserved ? peak->reserved_bytes : peak->allocated_bytes;
        };
        const bool both = d.a && d.b;
        std::optional<double> percent;
        if (both && d.a->allocated_bytes > 0)
            percent = 100.0 * static_cast<double>(d.b->allocated_bytes - d.a->allocated_bytes) /
                      static_cast<double>(d.a->allocated_bytes);
        table.rows.push_back({static_cast<std::int64_t>(d.device), value(d.a, false), value(d.b, false),
                              both ? Cell(d.b->allocated_bytes - d.a->allocated_bytes) : none, optional_real(percent),
                              value(d.a, true), value(d.b, true),
                              both ? Cell(d.b->reserved_bytes - d.a->reserved_bytes) : none});
    }
    if (std::any_of(diff.memory.begin(), diff.memory.end(), [](const MemoryPeakDelta& d) { return !d.a || !d.b; }))
        table.notes.push_back("an empty cell: that run has no GPU memory events on the device");
    return table;
}

// What was live at each device's allocated peak, A against B, largest changes first.
Table memory_places_table(const TraceDiff& diff, std::size_t top) {
    Table table("gpu_memory_at_peak", "Live at the allocated peak, by allocating op (or line), A vs B",
                {{"device", "Device", ColumnKind::integer},
                 {"by", "By", ColumnKind::text},
                 {"place", "Allocated In", ColumnKind::text},
                 {"a_bytes", "A Bytes", ColumnKind::integer},
                 {"b_bytes", "B Bytes", ColumnKind::integer},
                 {"change_bytes", "Change (B)", ColumnKind::integer},
                 {"a_blocks", "A Blocks", ColumnKind::integer},
                 {"b_blocks", "B Blocks", ColumnKind::integer}});
    table.empty_note = "no device has memory events in both runs";
    std::map<trace::DeviceId, std::size_t> shown, left;
    for (const MemoryPlaceDelta& d : diff.memory_places) {
        if (top > 0 && shown[d.device] >= top) {
            ++left[d.device];
            continue;
        }
        ++shown[d.device];
        table.rows.push_back({static_cast<std::int64_t>(d.device), d.by, d.place, d.a_bytes, d.b_bytes,
                              d.change_bytes(), d.a_blocks, d.b_blocks});
    }
    for (const auto& [device, count] : left)
        table.notes.push_back(fmt::format("device {}: {} more places (--top N shows more)", device, count));
    return table;
}

Table headline_table(const TraceDiff& diff) {
    Table table;
    table.key = "headline";
    table.title = "A vs B over their steps (" + diff.scope + "): median, p10-p90 and median absolute deviation";
    table.columns = {{"metric", "Metric", ColumnKind::text},      {"run", "Run", ColumnKind::text},
                     {"median_ns", "Median", ColumnKind::time},   {"p10_ns", "p10", ColumnKind::time},
                     {"p90_ns", "p90", ColumnKind::time},         {"mad_ns", "MAD", ColumnKind::time},
                     {"delta_ns", "Change", ColumnKind::time},    {"delta_percent", "Change %", ColumnKind::percent},
                     {"noise_ns", "Noise +/-", ColumnKind::time}, {"verdict", "Verdict", ColumnKind::text}};
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
        table.rows.push_back({row.name, row.a_ns, row.b_ns, row.delta_ns(),
                              share_of(row.delta_ns(), mean_change, mean_step_ns), row.a_total_ns, row.b_total_ns,
                              row.delta_total_ns()});
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
        for (Cell cell : std::initializer_list<Cell>{
                 std::string(name_status_name(row.status)), row.a_total_ns, row.b_total_ns, row.delta_ns(),
                 share_of(static_cast<double>(row.delta_ns()), change, total_step_ns), row.a_instances, row.b_instances,
                 mean(row.a_total_ns, row.a_instances), mean(row.b_total_ns, row.b_instances)})
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
        lines.push_back(fmt::format("  {:<14}{} {:+.3f} {} per step", "breakdown", category->name,
                                    category->delta_ns() / per, unit_name));
    const std::pair<const char*, const std::vector<NameDelta>*> tables[] = {{"kernels", &diff.kernels},
                                                                            {"ranges", &diff.ranges},
                                                                            {"api", &diff.api},
                                                                            {"cpu_functions", &diff.cpu_functions}};
    for (const auto& [label, rows] : tables) {
        // The step ranges only repeat the headline.
        auto first = std::find_if(rows->begin(), rows->end(), [](const NameDelta& row) {
            return !is_step_range_name(row.name) && row.name != "ProfilerStep";
        });
        if (first == rows->end() || first->delta_ns() == 0) continue;
        const NameDelta& row = *first;
        const std::string status =
            row.status == NameStatus::both ? "" : std::string(" (") + name_status_name(row.status) + ")";
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
        tables.push_back(breakdown_table("gpu_idle",
                                         "GPU idle: dataloader_wait + idle_host_wait + idle_kernel_wait + idle_other",
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
    if (!diff.memory.empty()) {
        tables.push_back(memory_table(diff));
        tables.push_back(memory_places_table(diff, top));
    }
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
        if (table.key == "gpu_idle")
            document[table.key] = to_json(table, TimeUnit::ns).at(0);
        else if (table.key != "headline")
            document[table.key] = to_json(table, TimeUnit::ns);
    if (!document.contains("gpu_idle")) document["gpu_idle"] = nullptr;
    if (!document.contains("host_side")) document["host_side"] = nlohmann::json::array();
    if (!document.contains("cpu_functions")) document["cpu_functions"] = nullptr;
    if (!document.contains("gpu_memory")) document["gpu_memory"] = nlohmann::json::array();
    if (!document.contains("gpu_memory_at_peak")) document["gpu_memory_at_peak"] = nlohmann::json::array();
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
                if (step.verdict == Verdict::unchanged)
                    out << "unchanged";
                else if (step.verdict == Verdict::noise)
                    out << "within the noise";
                else
                    out << (step.verdict == Verdict::slower ? "slower" : "faster");
                out << fmt::format(" (median {:.3f} -> {:.3f} {}, {:+.3f} {}", step.a.median_ns / unit,
                                   step.b.median_ns / unit, unit_name, step.delta_ns / unit, unit_name);
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
        case OutputFormat::json:
            out << diff_json(diff, 0).dump(2) << '\n';
            break;
    }
}

}  // namespace ember::analysis
