// diff_view.cpp: the Diff tab of ViewerApp (`ember view A B --diff`): run A's and run
// B's lanes stacked on one timeline with B shifted so a chosen step starts where A's
// does, and below them the numbers of `ember diff A B` (run_diff.h): the headline, the
// breakdown of the step time, and the kernels, ranges, API calls and CPU functions that
// moved. Clicking a name row outlines its events in both runs' lanes.
#include "viewer/ui/colors.h"
#include "viewer/ui/viewer_app.h"

#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <future>

namespace ember::viewer {

namespace {

constexpr float kSummaryWidth = 560.0f;

std::string file_name(const std::string& path) {
    return std::filesystem::path(path).filename().string();
}

// "+1.25 ms", "-300 us": a signed duration.
std::string signed_duration(double nanoseconds) {
    if (nanoseconds == 0.0) return "0";
    return (nanoseconds > 0 ? "+" : "-") + format_duration(std::fabs(nanoseconds));
}

ImVec4 change_color(double delta_ns, double reference_ns) {
    // Red slower, blue faster (as the difference flamegraph), grey for changes under 2%.
    if (reference_ns > 0 && std::fabs(delta_ns) < 0.02 * reference_ns) return ImVec4(0.7f, 0.7f, 0.7f, 1);
    if (delta_ns > 0) return ImVec4(1.0f, 0.42f, 0.36f, 1);
    if (delta_ns < 0) return ImVec4(0.45f, 0.62f, 1.0f, 1);
    return ImVec4(0.7f, 0.7f, 0.7f, 1);
}

ImVec4 verdict_color(analysis::Verdict verdict) {
    switch (verdict) {
        case analysis::Verdict::slower:
            return ImVec4(1.0f, 0.42f, 0.36f, 1);
        case analysis::Verdict::faster:
            return ImVec4(0.45f, 0.62f, 1.0f, 1);
        default:
            return ImVec4(0.7f, 0.7f, 0.7f, 1);
    }
}

// A table of one thing a row in both runs: `what`, A, B, B - A, then `last` taking the
// rest of the width; false when ImGui skips it (EndTable only after true).
bool begin_a_b_table(const char* id, const char* what, const char* last, ImGuiTableFlags flags) {
    if (!ImGui::BeginTable(id, 5, flags)) return false;
    ImGui::TableSetupColumn(what);
    ImGui::TableSetupColumn("A");
    ImGui::TableSetupColumn("B");
    ImGui::TableSetupColumn("B - A");
    ImGui::TableSetupColumn(last, ImGuiTableColumnFlags_WidthStretch);
    ImGui::TableHeadersRow();
    return true;
}

}  // namespace

void ViewerApp::start_diff(int align_step) {
    diff_wanted_ = true;
    diff_align_step_ = align_step;
    if (model_ && model_->files().size() >= 2) {
        tab_ = ViewTab::diff;
        tab_requested_ = true;
    }
}

void ViewerApp::update_run_diff() {
    using namespace std::chrono_literals;
    if (!model_ || model_->files().size() < 2) return;
    // The Diff tab asks for the diff the first time it is shown.
    if (tab_ == ViewTab::diff) diff_wanted_ = true;
    if (!diff_wanted_) return;
    if (!run_diff_ && !diff_pending_.valid() && model_->loaded()) {
        // After loading: the loader's readers and the diff's would otherwise share the
        // two cores, and the shift needs every lane loaded.
        diff_clock_shift_ = model_->files()[1].shift_ns;
        diff_pending_ =
            std::async(std::launch::async, compute_run_diff, model_->files()[0].path, model_->files()[1].path);
    }
    if (diff_pending_.valid() && diff_pending_.wait_for(0s) == std::future_status::ready) {
        run_diff_ = diff_pending_.get();
        // Counters (loss, lr, ...) are tall and say little about where time went: folded,
        // both runs' threads and streams fit one screen.
        for (LaneDisplay& display : lane_order_)
            if (display.lane >= 0 && display.lane < model_->lane_count() && model_->lane(display.lane).plots_values())
                display.collapsed = true;
        if (!align_diff(diff_align_step_, false)) align_diff(-1, false);
    }
}

bool ViewerApp::wait_for_diff(std::string* error) {
    diff_wanted_ = true;
    if (!model_ || model_->files().size() < 2) {
        *error = "--diff needs two trace files (A B)";
        return false;
    }
    if (!model_->loaded()) model_->load_all();
    update_run_diff();
    if (diff_pending_.valid()) diff_pending_.wait();
    update_run_diff();
    if (!run_diff_ || !run_diff_->error.empty()) {
        *error = run_diff_ ? run_diff_->error : "the diff was not computed";
        return false;
    }
    return true;
}

bool ViewerApp::align_diff(int step_index, bool frame_step) {
    if (!run_diff_ || !model_ || model_->files().size() < 2) return false;
    // A background analysis (a live file that grew) was computed at the old shift: take
    // it in first, so the shift below moves it with the lanes.
    if (analysis_pending_.valid()) model_->set_gpu_analysis(analysis_pending_.get());
    trace::TimeNs shift = diff_clock_shift_;
    if (step_index >= 0) {
        const auto aligned = step_alignment_shift(*run_diff_, *model_, static_cast<std::size_t>(step_index));
        if (!aligned) return false;
        shift = *aligned;
    }
    model_->shift_file(1, shift);
    diff_align_step_ = step_index;
    // What was kept in model time is stale; the view shows the new extent.
    stats_.reset();
    stats_lanes_ready_ = -1;
    range_summary_.reset();
    selection_range_.reset();
    flame_dirty_ = true;
    view_.reset({model_->begin_ns(), model_->end_ns()}, view_.width_pixels());
    view_initialized_ = true;  // the timeline must not reset it again on its first frame
    if (frame_step && step_index >= 0 && static_cast<std::size_t>(step_index) < run_diff_->a_steps.size()) {
        // Frame the aligned step and a little around it: both runs' versions of it are
        // then under each other.
        const analysis::DiffStep& step = run_diff_->a_steps[static_cast<std::size_t>(step_index)];
        const trace::TimeNs start = step.start_ns + model_->files()[0].shift_ns;
        const trace::TimeNs length = std::max<trace::TimeNs>(step.length_ns(), 1000);
        view_.show({start - length / 10, start + length + length / 2});
    }
    return true;
}

void ViewerApp::select_diff_row(DiffTable table, const std::string& name) {
    diff_row_table_ = table;
    diff_row_name_ = name;
    highlight_diff_row(search_, *model_, table, name);
    diff_row_matches_ = matches_per_file(search_, *model_);
    search_text_[0] = '\0';  // the outline is the row's, not the search box's
    search_count_ = -1;
    search_error_.clear();
}

bool ViewerApp::select_diff_row(const std::string& name) {
    if (!run_diff_) return false;
    for (int table = 0; table < 4; ++table) {
        for (const analysis::NameDelta& row : diff_rows(run_diff_->diff, static_cast<DiffTable>(table))) {
            if (row.name != name) continue;
            diff_table_ = table;
            select_diff_row(static_cast<DiffTable>(table), name);
            return true;
        }
    }
    return false;
}

void ViewerApp::draw_diff(float width, float height) {
    const TraceFile& a = model_->files()[0];
    const TraceFile& b = model_->files()[1];
    // --- Header: the runs, the alignment, the verdict ------------------------------------
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kRunA), "A");
    ImGui::SameLine();
    ImGui::TextUnformatted(file_name(a.shown_as).c_str());
    ImGui::SameLine(0, 16);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kRunB), "B");
    ImGui::SameLine();
    ImGui::TextUnformatted(file_name(b.shown_as).c_str());
    if (model_->files().size() > 2) {
        ImGui::SameLine();
        ImGui::TextDisabled("(the first two files are compared)");
    }
    if (!model_->loaded()) {
        ImGui::TextDisabled("loading the traces... the diff is computed once both are in");
        return;
    }
    if (!run_diff_) {
        ImGui::TextDisabled("comparing the runs (ember diff A B)...");
        return;
    }
    if (!run_diff_->error.empty()) {
        ImGui::TextColored(ImVec4(1, 0.3f, 0.3f, 1), "cannot compare the runs: %s", run_diff_->error.c_str());
        return;
    }
    const analysis::TraceDiff& diff = run_diff_->diff;
    ImGui::SameLine(0, 24);
    ImGui::TextUnformatted("align B on");
    ImGui::SameLine();
    const std::size_t steps = std::min(run_diff_->a_steps.size(), run_diff_->b_steps.size());
    char current[64];
    if (diff_align_step_ < 0)
        std::snprintf(current, sizeof current, "the recorded clocks");
    else
        std::snprintf(current, sizeof current, "step %lld (#%d)",
                      static_cast<long long>(run_diff_->a_steps[static_cast<std::size_t>(diff_align_step_)].step),
                      diff_align_step_ + 1);
    ImGui::SetNextItemWidth(190);
    if (ImGui::BeginCombo("##align", current)) {
        if (ImGui::Selectable("the recorded clocks", diff_align_step_ < 0)) align_diff(-1, false);
        for (std::size_t index = 0; index < steps; ++index) {
            char label[64];
            std::snprintf(label, sizeof label, "step %lld (#%zu)",
                          static_cast<long long>(run_diff_->a_steps[index].step), index + 1);
            if (ImGui::Selectable(label, diff_align_step_ == static_cast<int>(index)))
                align_diff(static_cast<int>(index), true);
        }
        ImGui::EndCombo();
    }
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("B's lanes are shifted so this step starts where A's does (its n-th step under A's n-th)");
    if (steps > 0) {
        ImGui::SameLine();
        if (ImGui::ArrowButton("##align_previous", ImGuiDir_Left) && diff_align_step_ > 0)
            align_diff(diff_align_step_ - 1, true);
        ImGui::SameLine();
        if (ImGui::ArrowButton("##align_next", ImGuiDir_Right) && diff_align_step_ + 1 < static_cast<int>(steps))
            align_diff(diff_align_step_ + 1, true);
    }
    ImGui::SameLine();
    ImGui::TextDisabled("B shifted by %s", signed_duration(static_cast<double>(b.shift_ns - a.shift_ns)).c_str());
    const analysis::MetricComparison& step = diff.metric(analysis::DiffMetric::step);
    ImGui::SameLine(0, 24);
    char percent[32] = "";
    if (step.delta_percent) std::snprintf(percent, sizeof percent, " (%+.1f%%)", *step.delta_percent);
    char headline[200];
    std::snprintf(headline, sizeof headline, "step time (median): %s -> %s, %s%s: %s",
                  format_duration(step.a.median_ns).c_str(), format_duration(step.b.median_ns).c_str(),
                  signed_duration(step.delta_ns).c_str(), percent, analysis::verdict_name(step.verdict));
    ImGui::TextColored(verdict_color(step.verdict), "%s", headline);

    // --- Timelines (top) and tables (bottom) ----------------------------------------
    const float tables_height = std::clamp(height * 0.42f, 220.0f, 420.0f);
    const float timeline_height = std::max(120.0f, ImGui::GetContentRegionAvail().y - tables_height - 6.0f);
    draw_timeline(width, timeline_height);
    ImGui::Spacing();
    const float bottom = std::max(100.0f, ImGui::GetContentRegionAvail().y);
    const float summary_width = std::min(kSummaryWidth, width * 0.42f);
    ImGui::BeginChild("diff_summary", ImVec2(summary_width, bottom), true);
    draw_diff_summary(summary_width, bottom);
    ImGui::EndChild();
    ImGui::SameLine();
    ImGui::BeginChild("diff_names", ImVec2(std::max(100.0f, width - summary_width - 8.0f), bottom), true);
    draw_diff_names(width - summary_width - 8.0f, bottom);
    ImGui::EndChild();
}

void ViewerApp::draw_diff_summary(float /*width*/, float /*height*/) {
    const analysis::TraceDiff& diff = run_diff_->diff;
    constexpr ImGuiTableFlags flags =
        ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingFixedFit;
    ImGui::TextUnformatted("Headline: median over steps (p10-p90)");
    if (begin_a_b_table("diff_headline", "metric", "verdict", flags)) {
        for (const analysis::MetricComparison& metric : diff.metrics) {
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(analysis::diff_metric_name(metric.metric));
            if (!metric.available) {
                ImGui::TableNextColumn();
                ImGui::TextDisabled("-");
                ImGui::TableNextColumn();
                ImGui::TextDisabled("-");
                ImGui::TableNextColumn();
                ImGui::TableNextColumn();
                ImGui::TextDisabled("n/a (no GPU work)");
                continue;
            }
            auto stats = [](const analysis::MetricStats& value) {
                ImGui::TableNextColumn();
                ImGui::TextUnformatted(format_duration(value.median_ns).c_str());
                if (ImGui::IsItemHovered())
                    ImGui::SetTooltip("p10 %s, p90 %s, MAD %s, %lld samples", format_duration(value.p10_ns).c_str(),
                                      format_duration(value.p90_ns).c_str(), format_duration(value.mad_ns).c_str(),
                                      static_cast<long long>(value.samples));
            };
            stats(metric.a);
            stats(metric.b);
            ImGui::TableNextColumn();
            ImGui::TextColored(change_color(metric.delta_ns, metric.a.median_ns), "%s",
                               signed_duration(metric.delta_ns).c_str());
            ImGui::TableNextColumn();
            if (metric.noise_ns > 0)
                ImGui::TextColored(verdict_color(metric.verdict), "%s (noise +/-%s)",
                                   analysis::verdict_name(metric.verdict), format_duration(metric.noise_ns).c_str());
            else
                ImGui::TextColored(verdict_color(metric.verdict), "%s", analysis::verdict_name(metric.verdict));
        }
        ImGui::EndTable();
    }
    for (const std::string& note : diff.notes) ImGui::TextWrapped("note: %s", note.c_str());
    ImGui::Spacing();
    ImGui::TextUnformatted("Where the step time went (mean per step)");
    // Bars to one scale: the longest per-step value of either run.
    double scale = 1.0;
    for (const analysis::BreakdownDelta& row : diff.breakdown) scale = std::max({scale, row.a_ns, row.b_ns});
    const double step_mean = std::max(1.0, diff.metric(analysis::DiffMetric::step).a.mean_ns);
    if (begin_a_b_table("diff_breakdown", "category", "A / B", flags)) {
        auto row_of = [&](const analysis::BreakdownDelta& row, bool indent) {
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            ImGui::Text("%s%s", indent ? "  " : "", row.name.c_str());
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(format_duration(row.a_ns).c_str());
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(format_duration(row.b_ns).c_str());
            ImGui::TableNextColumn();
            ImGui::TextColored(change_color(row.delta_ns(), step_mean), "%s", signed_duration(row.delta_ns()).c_str());
            ImGui::TableNextColumn();
            // Two thin bars, A over B, so a category that grew is seen at a glance.
            ImDrawList* draw = ImGui::GetWindowDrawList();
            const ImVec2 at = ImGui::GetCursorScreenPos();
            const float room = std::max(20.0f, ImGui::GetContentRegionAvail().x - 4.0f);
            const float line = ImGui::GetTextLineHeight();
            draw->AddRectFilled(at, ImVec2(at.x + room * static_cast<float>(row.a_ns / scale), at.y + line * 0.45f),
                                colors::kRunA);
            draw->AddRectFilled(ImVec2(at.x, at.y + line * 0.5f),
                                ImVec2(at.x + room * static_cast<float>(row.b_ns / scale), at.y + line * 0.95f),
                                colors::kRunB);
            ImGui::Dummy(ImVec2(room, line));
        };
        for (std::size_t index = 0; index < diff.breakdown.size(); ++index) {
            const analysis::BreakdownDelta& row = diff.breakdown[index];
            // Categories neither run has are noise in the table.
            if (row.a_total_ns == 0 && row.b_total_ns == 0) continue;
            row_of(row, false);
            if (row.name == "host_side")
                for (const analysis::BreakdownDelta& range : diff.host_side) row_of(range, true);
        }
        ImGui::EndTable();
    }
}

void ViewerApp::draw_diff_names(float /*width*/, float /*height*/) {
    const analysis::TraceDiff& diff = run_diff_->diff;
    // Table picker: one button per table, with its row count.
    for (int table = 0; table < 4; ++table) {
        const auto& rows = diff_rows(diff, static_cast<DiffTable>(table));
        if (table == static_cast<int>(DiffTable::cpu_functions) && !diff.cpu_sampled) continue;
        if (table) ImGui::SameLine();
        char label[80];
        std::snprintf(label, sizeof label, "%s (%zu)", diff_table_title(static_cast<DiffTable>(table)), rows.size());
        const bool active = diff_table_ == table;
        if (active) ImGui::PushStyleColor(ImGuiCol_Button, ImGui::GetStyleColorVec4(ImGuiCol_ButtonActive));
        if (ImGui::Button(label)) diff_table_ = table;
        if (active) ImGui::PopStyleColor();
    }
    if (diff_row_table_) {
        ImGui::SameLine(0, 16);
        if (*diff_row_table_ == DiffTable::cpu_functions) {
            ImGui::TextDisabled("sampled stacks are not on the timeline: see the Flamegraph tab (CPU, difference)");
        } else {
            const std::int64_t in_a = diff_row_matches_.size() > 0 ? diff_row_matches_[0] : 0;
            const std::int64_t in_b = diff_row_matches_.size() > 1 ? diff_row_matches_[1] : 0;
            ImGui::Text("outlined: %lld in A, %lld in B", static_cast<long long>(in_a), static_cast<long long>(in_b));
            ImGui::SameLine();
            if (ImGui::SmallButton("next")) {
                auto found = search_.next(*model_, selected_, view_.visible().begin_ns);
                if (found) select_event(*found, true);
            }
            ImGui::SameLine();
            if (ImGui::SmallButton("clear")) {
                diff_row_table_.reset();
                search_ = {};
            }
        }
    }
    const DiffTable table = static_cast<DiffTable>(diff_table_);
    const auto& rows = diff_rows(diff, table);
    if (rows.empty()) {
        ImGui::TextDisabled(table == DiffTable::kernels ? "no GPU work in either run" : "no rows");
        return;
    }
    constexpr ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_ScrollY |
                                      ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_Resizable;
    double largest = 1.0;
    for (const analysis::NameDelta& row : rows)
        largest = std::max(largest, std::fabs(static_cast<double>(row.delta_ns())));
    if (ImGui::BeginTable("diff_rows", 8, flags, ImVec2(0, ImGui::GetContentRegionAvail().y))) {
        ImGui::TableSetupScrollFreeze(0, 1);
        ImGui::TableSetupColumn("name", ImGuiTableColumnFlags_WidthStretch);
        ImGui::TableSetupColumn("status");
        ImGui::TableSetupColumn("A total");
        ImGui::TableSetupColumn("B total");
        ImGui::TableSetupColumn("B - A");
        ImGui::TableSetupColumn("change", ImGuiTableColumnFlags_WidthFixed, 110.0f);
        ImGui::TableSetupColumn("A count");
        ImGui::TableSetupColumn("B count");
        ImGui::TableHeadersRow();
        ImGuiListClipper clipper;
        clipper.Begin(static_cast<int>(rows.size()));
        while (clipper.Step()) {
            for (int index = clipper.DisplayStart; index < clipper.DisplayEnd; ++index) {
                const analysis::NameDelta& row = rows[static_cast<std::size_t>(index)];
                ImGui::TableNextRow();
                ImGui::TableNextColumn();
                const bool selected = diff_row_table_ == table && diff_row_name_ == row.name;
                ImGui::PushID(index);
                if (ImGui::Selectable(row.name.c_str(), selected, ImGuiSelectableFlags_SpanAllColumns))
                    select_diff_row(table, row.name);
                if (ImGui::IsItemHovered() && !row.domain.empty()) ImGui::SetTooltip("domain %s", row.domain.c_str());
                ImGui::PopID();
                ImGui::TableNextColumn();
                if (row.status != analysis::NameStatus::both)
                    ImGui::TextColored(row.status == analysis::NameStatus::appeared ? ImVec4(1.0f, 0.42f, 0.36f, 1)
                                                                                    : ImVec4(0.45f, 0.62f, 1.0f, 1),
                                       "%s", analysis::name_status_name(row.status));
                ImGui::TableNextColumn();
                ImGui::TextUnformatted(format_duration(static_cast<double>(row.a_total_ns)).c_str());
                ImGui::TableNextColumn();
                ImGui::TextUnformatted(format_duration(static_cast<double>(row.b_total_ns)).c_str());
                ImGui::TableNextColumn();
                const double delta = static_cast<double>(row.delta_ns());
                ImGui::TextColored(change_color(delta, static_cast<double>(row.a_total_ns)), "%s",
                                   signed_duration(delta).c_str());
                ImGui::TableNextColumn();
                // The change as a bar from the middle: right and red slower, left and blue faster.
                ImDrawList* draw = ImGui::GetWindowDrawList();
                const ImVec2 at = ImGui::GetCursorScreenPos();
                const float half = 52.0f, line = ImGui::GetTextLineHeight();
                const float length = half * static_cast<float>(std::fabs(delta) / largest);
                const float middle = at.x + half;
                if (delta > 0)
                    draw->AddRectFilled(ImVec2(middle, at.y + 2), ImVec2(middle + length, at.y + line - 2),
                                        colors::kDiffSlower);
                else if (delta < 0)
                    draw->AddRectFilled(ImVec2(middle - length, at.y + 2), ImVec2(middle, at.y + line - 2),
                                        colors::kDiffFaster);
                draw->AddLine(ImVec2(middle, at.y), ImVec2(middle, at.y + line), colors::rgb(120, 120, 130));
                ImGui::Dummy(ImVec2(2 * half, line));
                ImGui::TableNextColumn();
                ImGui::Text("%lld", static_cast<long long>(row.a_instances));
                ImGui::TableNextColumn();
                ImGui::Text("%lld", static_cast<long long>(row.b_instances));
            }
        }
        ImGui::EndTable();
    }
}

}  // namespace ember::viewer
