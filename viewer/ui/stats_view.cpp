// stats_view.cpp: the sortable tables of ViewerApp (kernels, copies, ranges, stalls,
// steps). Double-clicking a row jumps to the next instance on the timeline.
#include "viewer/ui/viewer_app.h"

#include <imgui.h>

#include <algorithm>

namespace ember::viewer {

namespace {

// Sorts by the table's current sort column (the column's user id names the field).
void sort_rows(std::vector<NameTotal>& rows, const TraceModel& model, ImGuiTableSortSpecs* specs) {
    if (specs == nullptr || specs->SpecsCount == 0) return;
    const ImGuiTableColumnSortSpecs& spec = specs->Specs[0];
    const bool ascending = spec.SortDirection == ImGuiSortDirection_Ascending;
    auto key = [&](const NameTotal& row) -> double {
        switch (spec.ColumnUserID) {
            case 1:
                return static_cast<double>(row.count);
            case 2:
                return static_cast<double>(row.total_ns);
            case 3:
                return row.average_ns();
            case 4:
                return static_cast<double>(row.min_ns);
            case 5:
                return static_cast<double>(row.max_ns);
            case 6:
                return static_cast<double>(row.bytes);
            case 7:
                return row.bandwidth();
            default:
                return 0.0;
        }
    };
    std::stable_sort(rows.begin(), rows.end(), [&](const NameTotal& a, const NameTotal& b) {
        if (spec.ColumnUserID == 0) {
            const auto name_a = model.name(a.name_id), name_b = model.name(b.name_id);
            return ascending ? name_a < name_b : name_a > name_b;
        }
        return ascending ? key(a) < key(b) : key(a) > key(b);
    });
    specs->SpecsDirty = false;
}

}  // namespace

void ViewerApp::draw_stats(float width, float height) {
    const LoadProgress progress = model_->progress();
    if (!stats_ || stats_lanes_ready_ != progress.lanes_ready) {
        stats_ = compute_statistics(*model_);
        stats_lanes_ready_ = progress.lanes_ready;
    }
    Statistics& stats = *stats_;
    const trace::TimeNs span = std::max<trace::TimeNs>(1, model_->end_ns() - model_->begin_ns());
    ImGui::Text("%lld events; kernels %s (%.1f%% of the trace), copies %s", static_cast<long long>(stats.event_count),
                format_duration(static_cast<double>(stats.kernel_time_ns)).c_str(),
                100.0 * static_cast<double>(stats.kernel_time_ns) / static_cast<double>(span),
                format_duration(static_cast<double>(stats.copy_time_ns)).c_str());
    const float table_height = std::max(120.0f, (height - 60.0f) / 2.0f);
    auto name_table = [&](const char* id, const char* title, std::vector<NameTotal>& rows, bool bytes) {
        ImGui::TextUnformatted(title);
        const int columns = bytes ? 8 : 6;
        const ImGuiTableFlags flags = ImGuiTableFlags_Sortable | ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY |
                                      ImGuiTableFlags_Borders | ImGuiTableFlags_Resizable;
        if (!ImGui::BeginTable(id, columns, flags, ImVec2(width / 2 - 6, table_height))) return;
        ImGui::TableSetupScrollFreeze(0, 1);
        ImGui::TableSetupColumn("name", ImGuiTableColumnFlags_WidthStretch, 0.0f, 0);
        ImGui::TableSetupColumn("count", 0, 0.0f, 1);
        ImGui::TableSetupColumn("total", ImGuiTableColumnFlags_DefaultSort | ImGuiTableColumnFlags_PreferSortDescending,
                                0.0f, 2);
        ImGui::TableSetupColumn("average", 0, 0.0f, 3);
        ImGui::TableSetupColumn("min", 0, 0.0f, 4);
        ImGui::TableSetupColumn("max", 0, 0.0f, 5);
        if (bytes) {
            ImGui::TableSetupColumn("bytes", 0, 0.0f, 6);
            ImGui::TableSetupColumn("bandwidth", 0, 0.0f, 7);
        }
        ImGui::TableHeadersRow();
        if (ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs(); specs && specs->SpecsDirty)
            sort_rows(rows, *model_, specs);
        ImGuiListClipper clipper;
        clipper.Begin(static_cast<int>(rows.size()));
        while (clipper.Step()) {
            for (int index = clipper.DisplayStart; index < clipper.DisplayEnd; ++index) {
                const NameTotal& row = rows[static_cast<std::size_t>(index)];
                ImGui::TableNextRow();
                ImGui::TableNextColumn();
                ImGui::PushID(index);
                const std::string name(model_->name(row.name_id));
                if (ImGui::Selectable(name.c_str(), false,
                                      ImGuiSelectableFlags_SpanAllColumns | ImGuiSelectableFlags_AllowDoubleClick) &&
                    ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) {
                    search_.set_name(*model_, row.name_id);
                    if (auto next = search_.next(*model_, selected_, view_.visible().begin_ns))
                        select_event(*next, true);
                    else if (auto first = search_.next(*model_, {}, model_->begin_ns() - 1))
                        select_event(*first, true);
                }
                ImGui::PopID();
                ImGui::TableNextColumn();
                ImGui::Text("%lld", static_cast<long long>(row.count));
                ImGui::TableNextColumn();
                ImGui::TextUnformatted(format_duration(static_cast<double>(row.total_ns)).c_str());
                ImGui::TableNextColumn();
                ImGui::TextUnformatted(format_duration(row.average_ns()).c_str());
                ImGui::TableNextColumn();
                ImGui::TextUnformatted(format_duration(static_cast<double>(row.min_ns)).c_str());
                ImGui::TableNextColumn();
                ImGui::TextUnformatted(format_duration(static_cast<double>(row.max_ns)).c_str());
                if (bytes) {
                    ImGui::TableNextColumn();
                    ImGui::TextUnformatted(format_bytes(static_cast<double>(row.bytes)).c_str());
                    ImGui::TableNextColumn();
                    ImGui::Text("%s/s", format_bytes(row.bandwidth()).c_str());
                }
            }
        }
        ImGui::EndTable();
    };
    ImGui::BeginGroup();
    name_table("kernels", "Kernels", stats.kernels, false);
    name_table("ranges", "NVTX ranges", stats.ranges, false);
    ImGui::EndGroup();
    ImGui::SameLine();
    ImGui::BeginGroup();
    name_table("copies", "Copies and memsets", stats.copies, true);
    ImGui::TextUnformatted("Steps");
    if (ImGui::BeginTable(
            "steps", 3,
            ImGuiTableFlags_Sortable | ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_Borders,
            ImVec2(width / 2 - 6, table_height - 20))) {
        ImGui::TableSetupScrollFreeze(0, 1);
        ImGui::TableSetupColumn("step", ImGuiTableColumnFlags_DefaultSort, 0.0f, 0);
        ImGui::TableSetupColumn("start", 0, 0.0f, 1);
        ImGui::TableSetupColumn("duration", ImGuiTableColumnFlags_PreferSortDescending, 0.0f, 2);
        ImGui::TableHeadersRow();
        if (ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs(); specs && specs->SpecsDirty && specs->SpecsCount) {
            const ImGuiTableColumnSortSpecs& spec = specs->Specs[0];
            const bool ascending = spec.SortDirection == ImGuiSortDirection_Ascending;
            std::stable_sort(stats.steps.begin(), stats.steps.end(), [&](const StepRow& a, const StepRow& b) {
                const double ka =
                    spec.ColumnUserID == 2 ? static_cast<double>(a.duration_ns) : static_cast<double>(a.index);
                const double kb =
                    spec.ColumnUserID == 2 ? static_cast<double>(b.duration_ns) : static_cast<double>(b.index);
                return ascending ? ka < kb : ka > kb;
            });
            specs->SpecsDirty = false;
        }
        ImGuiListClipper clipper;
        clipper.Begin(static_cast<int>(stats.steps.size()));
        while (clipper.Step()) {
            for (int index = clipper.DisplayStart; index < clipper.DisplayEnd; ++index) {
                const StepRow& step = stats.steps[static_cast<std::size_t>(index)];
                ImGui::TableNextRow();
                ImGui::TableNextColumn();
                ImGui::PushID(index);
                char label[32];
                std::snprintf(label, sizeof label, "%lld", static_cast<long long>(step.index));
                if (ImGui::Selectable(label, false,
                                      ImGuiSelectableFlags_SpanAllColumns | ImGuiSelectableFlags_AllowDoubleClick) &&
                    ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left))
                    select_event(step.ref, true);
                ImGui::PopID();
                ImGui::TableNextColumn();
                ImGui::TextUnformatted(
                    format_duration(static_cast<double>(step.start_ns - model_->begin_ns())).c_str());
                ImGui::TableNextColumn();
                ImGui::TextUnformatted(format_duration(static_cast<double>(step.duration_ns)).c_str());
            }
        }
        ImGui::EndTable();
    }
    ImGui::EndGroup();
}

}  // namespace ember::viewer
