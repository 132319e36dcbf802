// run_diff.cpp: the diff mode's model (run_diff.h).
#include "viewer/model/run_diff.h"

#include "profiler/analysis/operation_names.h"
#include "profiler/store/reader.h"

#include <algorithm>
#include <exception>

namespace ember::viewer {

using trace::TimeNs;

std::unique_ptr<RunDiff> compute_run_diff(const std::string& a_path, const std::string& b_path) {
    auto result = std::make_unique<RunDiff>();
    try {
        // Own readers: the loader's are busy with the lanes, the UI's with details.
        const store::TraceReader a_reader(a_path);
        const store::TraceReader b_reader(b_path);
        const analysis::RunProfile a = analysis::profile_run(a_reader);
        const analysis::RunProfile b = analysis::profile_run(b_reader);
        result->diff = analysis::diff_runs(a, b);
        result->a_steps = a.steps;
        result->b_steps = b.steps;
        result->a_has_steps = a.has_step_ranges;
        result->b_has_steps = b.has_step_ranges;
    } catch (const std::exception& error) {
        result->error = error.what();
    }
    return result;
}

std::optional<TimeNs> step_alignment_shift(const RunDiff& diff, const TraceModel& model, std::size_t step_index) {
    if (model.files().size() < 2 || step_index >= diff.a_steps.size() || step_index >= diff.b_steps.size())
        return std::nullopt;
    // Model time of A's step start = B's step start in file time + B's new shift.
    const TimeNs a_start = diff.a_steps[step_index].start_ns + model.files()[0].shift_ns;
    return a_start - diff.b_steps[step_index].start_ns;
}

const char* diff_table_title(DiffTable table) {
    switch (table) {
        case DiffTable::kernels:
            return "Kernels and copies";
        case DiffTable::ranges:
            return "Ranges";
        case DiffTable::api:
            return "API calls";
        case DiffTable::cpu_functions:
            return "CPU functions (sampled)";
    }
    return "";
}

const std::vector<analysis::NameDelta>& diff_rows(const analysis::TraceDiff& diff, DiffTable table) {
    switch (table) {
        case DiffTable::kernels:
            return diff.kernels;
        case DiffTable::ranges:
            return diff.ranges;
        case DiffTable::api:
            return diff.api;
        case DiffTable::cpu_functions:
            return diff.cpu_functions;
    }
    return diff.kernels;
}

std::string diff_table_name(const TraceModel& model, DiffTable table, std::uint32_t name_id) {
    // Copies and memsets by the tables' names (the model knows each one's; its own
    // display names are never parsed back), the rest normalised as `ember diff` does.
    const std::string_view name = model.name(name_id);
    if (table == DiffTable::kernels) {
        const std::string_view operation = model.operation_name(name_id);
        if (operation != name) return std::string(operation);
    }
    return analysis::normalise_name(name);
}

void highlight_diff_row(EventSearch& search, const TraceModel& model, DiffTable table, const std::string& name) {
    std::uint32_t row_kinds = 0;
    const auto bit = [](RowKind kind) { return 1u << static_cast<int>(kind); };
    switch (table) {
        case DiffTable::kernels:
            row_kinds = bit(RowKind::gpu_work);
            break;
        case DiffTable::ranges:
            row_kinds = bit(RowKind::ranges) | bit(RowKind::async_ranges);
            break;
        case DiffTable::api:
            row_kinds = bit(RowKind::api_calls);
            break;
        case DiffTable::cpu_functions:
            row_kinds = 0;
            break;  // stack samples have no timeline rows
    }
    std::vector<bool> matching(model.name_count(), false);
    if (row_kinds != 0) {
        // Decided once per distinct name, as the search does: a million events cost a
        // million bit tests, not a million normalisations.
        for (std::size_t id = 1; id < model.name_count(); ++id)
            matching[id] = diff_table_name(model, table, static_cast<std::uint32_t>(id)) == name;
    }
    search.set_names(std::move(matching), row_kinds);
}

std::vector<std::int64_t> matches_per_file(const EventSearch& search, const TraceModel& model) {
    std::vector<std::int64_t> counts(model.files().size(), 0);
    if (search.empty()) return counts;
    for (int lane_index = 0; lane_index < model.lane_count(); ++lane_index) {
        const Lane& lane = model.lane(lane_index);
        if (!lane.ready.load(std::memory_order_acquire)) continue;
        for (const Row& row : lane.rows) {
            if (!search.matches_row(row.kind)) continue;
            for (const TimelineEvent& event : row.events)
                counts[static_cast<std::size_t>(lane.file_index)] += search.matches(event.name_id) ? 1 : 0;
        }
    }
    return counts;
}

}  // namespace ember::viewer
