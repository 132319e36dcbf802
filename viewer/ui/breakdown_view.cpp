// breakdown_view.cpp: the Breakdown tab of ViewerApp — where the GPU time of each rank
// went (gpu_analysis.h): the temporal split of every rank side by side, then for the
// chosen rank its kernel-type combinations, communication hidden under computation,
// idle time per stream by category, queue length per stream, and its steps as stacked
// bars of the step-breakdown categories. Clicking a step zooms the timeline to it;
// clicking a stream shows its lane.
#include "viewer/ui/colors.h"
#include "viewer/ui/viewer_app.h"

#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace ember::viewer {

void legend_swatch(std::uint32_t color, const char* label) {
    // The square sits on the text's line whether or not the line holds framed widgets.
    const float size = ImGui::GetTextLineHeight() - 4.0f;
    const ImVec2 at = ImGui::GetCursorScreenPos();
    const float offset = (ImGui::GetFrameHeight() - size) * 0.5f;
    ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(at.x, at.y + offset), ImVec2(at.x + size, at.y + offset + size),
                                              color);
    ImGui::Dummy(ImVec2(size, ImGui::GetFrameHeight()));
    ImGui::SameLine(0, 4);
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted(label);
}

namespace {

std::string duration_text(trace::TimeNs ns) {
    return format_duration(static_cast<double>(ns));
}

std::string percent_text(double part, double whole) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f%%", whole > 0 ? 100.0 * part / whole : 0.0);
    return text;
}

struct Segment {
    double value = 0.0;
    std::uint32_t color = 0;
    const char* label = "";
};

// A horizontal bar at the cursor, `width` standing for `scale`, its segments side by
// side; a segment wide enough carries its share of `share_of` as text. Returns the
// hovered segment's index, or -1.
int stacked_bar(const std::vector<Segment>& segments, double scale, double share_of, float width, float height) {
    ImDrawList* draw = ImGui::GetWindowDrawList();
    const ImVec2 at = ImGui::GetCursorScreenPos();
    const float top = at.y + (ImGui::GetFrameHeight() - height) * 0.5f;
    ImGui::Dummy(ImVec2(width, ImGui::GetFrameHeight()));
    draw->AddRectFilled(ImVec2(at.x, top), ImVec2(at.x + width, top + height), colors::rgb(38, 38, 46));
    int hovered = -1;
    float x = at.x;
    for (std::size_t index = 0; index < segments.size(); ++index) {
        const Segment& segment = segments[index];
        if (segment.value <= 0.0 || scale <= 0.0) continue;
        const float w = std::max(1.0f, static_cast<float>(segment.value / scale) * width);
        const float right = std::min(x + w, at.x + width);
        draw->AddRectFilled(ImVec2(x, top), ImVec2(right, top + height), segment.color);
        if (right - x > 46.0f && share_of > 0.0) {
            const std::string text = percent_text(segment.value, share_of);
            const ImVec4 clip(x, top, right, top + height);
            draw->AddText(nullptr, 0.0f, ImVec2(x + 4, top + (height - ImGui::GetTextLineHeight()) * 0.5f),
                          colors::rgb(15, 15, 20), text.c_str(), nullptr, 0.0f, &clip);
        }
        if (ImGui::IsMouseHoveringRect(ImVec2(x, top), ImVec2(right, top + height))) hovered = static_cast<int>(index);
        x = right;
    }
    return hovered;
}

// The height of a row of the ranks and steps tables.
float breakdown_row_height() {
    return ImGui::GetFrameHeight() + 2.0f;
}

void section_title(const char* text) {
    ImGui::Spacing();
    ImGui::TextUnformatted(text);
    ImGui::Separator();
}

}  // namespace

void ViewerApp::show_on_timeline(TimeRange range) {
    // A little room on each side. The timeline sets its view up on the first frame it
    // draws; when it has not drawn one yet, set it up here so that frame keeps this range.
    if (!view_initialized_) {
        view_.reset({model_->begin_ns(), model_->end_ns()}, view_.width_pixels());
        view_initialized_ = true;
    }
    const trace::TimeNs pad = range.duration_ns() / 50 + 1;
    view_.show({range.begin_ns - pad, range.end_ns + pad});
    tab_ = ViewTab::timeline;
    tab_requested_ = true;
}

void ViewerApp::show_step(const StepSplit& step) {
    // Framed and selected, so the details panel lists what ran in the step.
    show_on_timeline({step.start_ns, step.end_ns});
    set_selection_range({step.start_ns, step.end_ns});
}

bool ViewerApp::show_step_number(std::int64_t number) {
    const GpuAnalysis* gpu = model_ ? model_->gpu_analysis() : nullptr;
    if (gpu == nullptr || gpu->ranks.empty()) return false;
    const RankBreakdown& rank =
        gpu->ranks[static_cast<std::size_t>(std::clamp(breakdown_rank_, 0, static_cast<int>(gpu->ranks.size()) - 1))];
    for (const StepSplit& step : rank.steps)
        if (step.step == number) {
            show_step(step);
            return true;
        }
    return false;
}

void ViewerApp::draw_breakdown(float width, float height) {
    const GpuAnalysis* gpu = model_->gpu_analysis();
    ImGui::BeginChild("breakdown", ImVec2(width, height), false);
    ImGui::TextUnformatted("Where the GPU time went");
    ImGui::SameLine();
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextDisabled(
        "(ember's convention: every kernel, copy and memset, exact ns; `ember stats --report "
        "temporal,kernel_types,overlap,idle_breakdown,queue,step_breakdown` prints the same numbers)");
    ImGui::PopTextWrapPos();
    if (gpu == nullptr) {
        const LoadProgress progress = model_->progress();
        ImGui::Spacing();
        ImGui::TextDisabled(progress.analyzing ? "Computing the GPU breakdowns..."
                                               : "The breakdowns are computed once every lane is loaded.");
        ImGui::EndChild();
        return;
    }
    if (!gpu->error.empty()) ImGui::TextColored(ImVec4(1, 0.35f, 0.3f, 1), "analysis failed: %s", gpu->error.c_str());
    if (gpu->ranks.empty()) {
        ImGui::Spacing();
        ImGui::TextDisabled("This trace has no GPU work (kernels, copies, memsets) and no step ranges.");
        ImGui::EndChild();
        return;
    }
    breakdown_rank_ = std::clamp(breakdown_rank_, 0, static_cast<int>(gpu->ranks.size()) - 1);

    draw_breakdown_ranks(*gpu, width);
    const RankBreakdown& rank = gpu->ranks[static_cast<std::size_t>(breakdown_rank_)];
    draw_breakdown_rank(*gpu, rank, width);
    draw_breakdown_steps(*gpu, rank, width);
    ImGui::EndChild();
}

// --- Ranks: the temporal breakdown side by side ------------------------------------
void ViewerApp::draw_breakdown_ranks(const GpuAnalysis& gpu, float width) {
    section_title("Ranks: GPU span split into compute, other GPU work and idle (click a rank for its details)");
    trace::TimeNs longest_span = 1;
    for (const RankBreakdown& rank : gpu.ranks) longest_span = std::max(longest_span, rank.temporal.span_ns);
    const ImGuiTableFlags table_flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV |
                                        ImGuiTableFlags_ScrollY | ImGuiTableFlags_SizingFixedFit;
    const float row_height = breakdown_row_height();
    const float cell_padding = 2.0f * ImGui::GetStyle().CellPadding.y;
    const float ranks_height = ImGui::GetTextLineHeight() + cell_padding +
                               std::min(6.5f, static_cast<float>(gpu.ranks.size())) * (row_height + cell_padding) +
                               2.0f;
    if (ImGui::BeginTable("ranks", 8, table_flags, ImVec2(width - 8, ranks_height))) {
        ImGui::TableSetupScrollFreeze(0, 1);
        ImGui::TableSetupColumn("rank");
        ImGui::TableSetupColumn("GPU span");
        ImGui::TableSetupColumn("compute | non-compute | idle", ImGuiTableColumnFlags_WidthStretch);
        ImGui::TableSetupColumn("compute");
        ImGui::TableSetupColumn("non-compute");
        ImGui::TableSetupColumn("idle");
        ImGui::TableSetupColumn("comm. hidden under compute");
        ImGui::TableSetupColumn("steps");
        ImGui::TableHeadersRow();
        for (int index = 0; index < static_cast<int>(gpu.ranks.size()); ++index) {
            const RankBreakdown& rank = gpu.ranks[static_cast<std::size_t>(index)];
            const analysis::TemporalRow& t = rank.temporal;
            ImGui::TableNextRow(0, row_height);
            ImGui::TableNextColumn();
            ImGui::PushID(index);
            ImGui::AlignTextToFramePadding();
            if (ImGui::Selectable(rank.title.c_str(), index == breakdown_rank_,
                                  ImGuiSelectableFlags_SpanAllColumns | ImGuiSelectableFlags_AllowItemOverlap,
                                  ImVec2(0, row_height - 2.0f)))
                breakdown_rank_ = index;
            ImGui::PopID();
            ImGui::TableNextColumn();
            ImGui::AlignTextToFramePadding();
            ImGui::TextUnformatted(rank.has_gpu_work() ? duration_text(t.span_ns).c_str() : "no GPU work");
            ImGui::TableNextColumn();
            const std::vector<Segment> segments = {
                {static_cast<double>(t.compute_ns), colors::kCompute, "compute"},
                {static_cast<double>(t.non_compute_ns), colors::kNonCompute, "non-compute"},
                {static_cast<double>(t.idle_ns), colors::kIdle, "idle"}};
            const float bar_width = std::max(60.0f, ImGui::GetContentRegionAvail().x - 4.0f);
            const int hovered = stacked_bar(segments, static_cast<double>(longest_span), static_cast<double>(t.span_ns),
                                            bar_width, 14.0f);
            if (hovered >= 0) {
                const Segment& segment = segments[static_cast<std::size_t>(hovered)];
                ImGui::SetTooltip("%s: %s, %s of %s's GPU span\n%s", segment.label,
                                  duration_text(static_cast<trace::TimeNs>(segment.value)).c_str(),
                                  percent_text(segment.value, static_cast<double>(t.span_ns)).c_str(),
                                  rank.title.c_str(),
                                  hovered == 0   ? "time in which a computation kernel ran"
                                  : hovered == 1 ? "GPU busy with communication or memory work only"
                                                 : "no kernel, copy or memset running on any stream");
            }
            const double span = static_cast<double>(t.span_ns);
            for (trace::TimeNs value : {t.compute_ns, t.non_compute_ns, t.idle_ns}) {
                ImGui::TableNextColumn();
                ImGui::AlignTextToFramePadding();
                ImGui::Text("%s  %s", duration_text(value).c_str(),
                            percent_text(static_cast<double>(value), span).c_str());
            }
            ImGui::TableNextColumn();
            ImGui::AlignTextToFramePadding();
            if (rank.overlap.percent)
                ImGui::Text("%.1f%% of %s", *rank.overlap.percent,
                            duration_text(rank.overlap.communication_ns).c_str());
            else
                ImGui::TextDisabled("no communication");
            ImGui::TableNextColumn();
            ImGui::AlignTextToFramePadding();
            ImGui::Text("%zu", rank.steps.size());
        }
        ImGui::EndTable();
    }
}

// --- The chosen rank: its GPU work, kernel types, idle per stream, queues ----------
void ViewerApp::draw_breakdown_rank(const GpuAnalysis& gpu, const RankBreakdown& rank, float width) {
    const float row_height = breakdown_row_height();
    ImGui::Spacing();
    ImGui::Text("%s:", rank.title.c_str());
    ImGui::SameLine();
    if (rank.has_gpu_work()) {
        char unlinked[96] = "";
        if (rank.unlinked_events > 0)
            std::snprintf(unlinked, sizeof unlinked, " (%lld without a launching call: never host_wait, not queued)",
                          static_cast<long long>(rank.unlinked_events));
        ImGui::TextDisabled("%lld GPU operations%s, GPU span %s from %s", static_cast<long long>(rank.gpu_events),
                            unlinked, duration_text(rank.temporal.span_ns).c_str(),
                            duration_text(rank.gpu_begin_ns - model_->begin_ns()).c_str());
        ImGui::SameLine();
        if (ImGui::SmallButton("show on the timeline")) show_on_timeline({rank.gpu_begin_ns, rank.gpu_end_ns});
    } else {
        ImGui::TextDisabled("no GPU work; the steps below come from the host alone");
    }

    // The middle boxes get what their rows need, as long as the steps keep room for a
    // few rows; a long step list then scrolls in what is left.
    const float line = ImGui::GetTextLineHeightWithSpacing();
    const float frame = ImGui::GetFrameHeightWithSpacing();
    const float left_needs = 2 * frame + static_cast<float>(rank.kernel_types.size() + 1) * frame + 3 * line +
                             static_cast<float>(rank.top_kernels.size() + 1) * line + 24.0f;
    const float right_needs = 2 * frame + static_cast<float>(rank.streams.size()) * frame + 2 * line +
                              static_cast<float>(rank.queues.size() + 1) * line + 24.0f;
    const float steps_keep = std::min(static_cast<float>(rank.steps.size()) + 2.0f, 8.0f) * row_height + 3 * frame;
    const float middle_room = ImGui::GetContentRegionAvail().y - ImGui::GetFrameHeightWithSpacing() - steps_keep;
    const float middle_height =
        rank.has_gpu_work() ? std::clamp(std::max(left_needs, right_needs), 150.0f, std::max(150.0f, middle_room))
                            : 0.0f;
    const float column_width = (width - 24.0f) / 2.0f;
    if (rank.has_gpu_work()) {
        // Left: kernel-type combinations over the GPU span, then the top kernels per class.
        ImGui::BeginChild("kernel_types", ImVec2(column_width, middle_height), true);
        ImGui::TextUnformatted("Kernel types");
        ImGui::SameLine();
        ImGui::PushTextWrapPos(0.0f);
        ImGui::TextDisabled("(exclusive combinations of computation, communication, memory over the GPU span)");
        ImGui::PopTextWrapPos();
        std::vector<Segment> types;
        for (const analysis::KernelTypeRow& row : rank.kernel_types)
            types.push_back({static_cast<double>(row.total_ns), colors::kernel_type_color(row.kernel_type),
                             row.kernel_type.c_str()});
        types.push_back({static_cast<double>(rank.temporal.idle_ns), colors::kIdle, "idle"});
        const double span = static_cast<double>(rank.temporal.span_ns);
        const int hovered_type = stacked_bar(types, span, span, ImGui::GetContentRegionAvail().x, 16.0f);
        if (hovered_type >= 0)
            ImGui::SetTooltip(
                "%s: %s (%s of the GPU span)", types[static_cast<std::size_t>(hovered_type)].label,
                duration_text(static_cast<trace::TimeNs>(types[static_cast<std::size_t>(hovered_type)].value)).c_str(),
                percent_text(types[static_cast<std::size_t>(hovered_type)].value, span).c_str());
        if (ImGui::BeginTable("kernel_type_rows", 3, ImGuiTableFlags_SizingStretchProp | ImGuiTableFlags_RowBg)) {
            for (const Segment& type : types) {
                ImGui::TableNextRow();
                ImGui::TableNextColumn();
                legend_swatch(type.color, type.label);
                ImGui::TableNextColumn();
                ImGui::AlignTextToFramePadding();
                ImGui::TextUnformatted(duration_text(static_cast<trace::TimeNs>(type.value)).c_str());
                ImGui::TableNextColumn();
                ImGui::AlignTextToFramePadding();
                ImGui::TextUnformatted(percent_text(type.value, span).c_str());
            }
            ImGui::EndTable();
        }
        if (rank.overlap.percent)
            ImGui::Text("Communication %s, of which %s (%.1f%%) hidden under computation",
                        duration_text(rank.overlap.communication_ns).c_str(),
                        duration_text(rank.overlap.overlapped_ns).c_str(), *rank.overlap.percent);
        else
            ImGui::TextDisabled("No communication kernels (nccl*): nothing to overlap.");
        if (!rank.top_kernels.empty()) {
            ImGui::Spacing();
            ImGui::TextUnformatted("Longest kernels of each class");
            if (ImGui::BeginTable("top_kernels", 4, ImGuiTableFlags_SizingStretchProp | ImGuiTableFlags_RowBg)) {
                ImGui::TableSetupColumn("class", ImGuiTableColumnFlags_WidthFixed);
                ImGui::TableSetupColumn("name", ImGuiTableColumnFlags_WidthStretch);
                ImGui::TableSetupColumn("total", ImGuiTableColumnFlags_WidthFixed);
                ImGui::TableSetupColumn("count", ImGuiTableColumnFlags_WidthFixed);
                ImGui::TableHeadersRow();
                for (const analysis::TopKernelRow& row : rank.top_kernels) {
                    ImGui::TableNextRow();
                    ImGui::TableNextColumn();
                    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kernel_type_color(row.kernel_type)), "%s",
                                       row.kernel_type.c_str());
                    ImGui::TableNextColumn();
                    ImGui::TextUnformatted(row.name.c_str());
                    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", row.name.c_str());
                    ImGui::TableNextColumn();
                    ImGui::TextUnformatted(duration_text(row.total_ns).c_str());
                    ImGui::TableNextColumn();
                    ImGui::Text("%lld", static_cast<long long>(row.instances));
                }
                ImGui::EndTable();
            }
        }
        ImGui::EndChild();
        ImGui::SameLine();

        // Right: idle time per stream by category, then the queue length per stream.
        ImGui::BeginChild("idle_streams", ImVec2(column_width, middle_height), true);
        ImGui::TextUnformatted("Idle time per stream");
        for (int category = 0; category < kIdleCategoryCount; ++category) {
            const auto kind = static_cast<IdleCategory>(category);
            ImGui::SameLine(0, 12);
            legend_swatch(colors::idle_color(kind), analysis::idle_category_name(kind));
            if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", idle_category_meaning(kind));
        }
        ImGui::SameLine(0, 12);
        ImGui::AlignTextToFramePadding();
        ImGui::TextDisabled("(kernel_wait: < %s)", duration_text(gpu.options.kernel_wait_threshold_ns).c_str());
        trace::TimeNs most_idle = 1;
        for (const StreamIdleRow& stream : rank.streams) most_idle = std::max(most_idle, stream.total_ns());
        if (ImGui::BeginTable("idle_rows", 5, ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_RowBg)) {
            ImGui::TableSetupColumn("stream");
            ImGui::TableSetupColumn("host_wait | kernel_wait | other", ImGuiTableColumnFlags_WidthStretch);
            ImGui::TableSetupColumn("idle");
            ImGui::TableSetupColumn("host_wait");
            ImGui::TableSetupColumn("gaps");
            ImGui::TableHeadersRow();
            for (std::size_t index = 0; index < rank.streams.size(); ++index) {
                const StreamIdleRow& stream = rank.streams[index];
                ImGui::TableNextRow();
                ImGui::TableNextColumn();
                ImGui::PushID(static_cast<int>(index));
                ImGui::AlignTextToFramePadding();
                if (ImGui::Selectable(stream.title.c_str(), false,
                                      ImGuiSelectableFlags_SpanAllColumns | ImGuiSelectableFlags_AllowItemOverlap) &&
                    stream.lane >= 0) {
                    // Its lane on the timeline, scrolled into view.
                    for (const LanePlacement& placement : placements_)
                        if (placement.lane == stream.lane) scroll_y_ = std::max(0.0f, placement.y - 40.0f);
                    tab_ = ViewTab::timeline;
                }
                if (ImGui::IsItemHovered() && stream.lane < 0)
                    ImGui::SetTooltip(
                        "Several streams of this rank have this id (one per GPU); the row is over all of them.");
                ImGui::PopID();
                ImGui::TableNextColumn();
                std::vector<Segment> split;
                for (int category = 0; category < kIdleCategoryCount; ++category) {
                    const auto kind = static_cast<IdleCategory>(category);
                    split.push_back({static_cast<double>(stream.idle_ns[static_cast<std::size_t>(category)]),
                                     colors::idle_color(kind), analysis::idle_category_name(kind)});
                }
                const int hovered =
                    stacked_bar(split, static_cast<double>(most_idle), static_cast<double>(stream.total_ns()),
                                std::max(60.0f, ImGui::GetContentRegionAvail().x - 4.0f), 12.0f);
                if (hovered >= 0) {
                    const auto c = static_cast<std::size_t>(hovered);
                    ImGui::SetTooltip("%s: %s in %lld gaps (%s of the stream's idle time)\n%s", split[c].label,
                                      duration_text(stream.idle_ns[c]).c_str(), static_cast<long long>(stream.gaps[c]),
                                      percent_text(split[c].value, static_cast<double>(stream.total_ns())).c_str(),
                                      idle_category_meaning(static_cast<IdleCategory>(hovered)));
                }
                ImGui::TableNextColumn();
                ImGui::AlignTextToFramePadding();
                ImGui::TextUnformatted(duration_text(stream.total_ns()).c_str());
                ImGui::TableNextColumn();
                ImGui::AlignTextToFramePadding();
                ImGui::TextUnformatted(
                    percent_text(static_cast<double>(stream.idle_ns[0]), static_cast<double>(stream.total_ns()))
                        .c_str());
                ImGui::TableNextColumn();
                ImGui::AlignTextToFramePadding();
                ImGui::Text("%lld", static_cast<long long>(stream.gaps[0] + stream.gaps[1] + stream.gaps[2]));
            }
            ImGui::EndTable();
        }
        if (!rank.queues.empty()) {
            ImGui::Spacing();
            ImGui::TextUnformatted("Queue length per stream");
            ImGui::SameLine();
            ImGui::TextDisabled("(operations launched and not started yet)");
            if (ImGui::BeginTable("queue_rows", 4, ImGuiTableFlags_SizingStretchProp | ImGuiTableFlags_RowBg)) {
                ImGui::TableSetupColumn("stream");
                ImGui::TableSetupColumn("mean of changes");
                ImGui::TableSetupColumn("mean over time");
                ImGui::TableSetupColumn("max");
                ImGui::TableHeadersRow();
                for (const QueueSummaryRow& queue : rank.queues) {
                    ImGui::TableNextRow();
                    ImGui::TableNextColumn();
                    ImGui::TextUnformatted(queue.title.c_str());
                    ImGui::TableNextColumn();
                    ImGui::Text("%.2f", queue.mean);
                    ImGui::TableNextColumn();
                    ImGui::Text("%.2f", queue.time_weighted_mean);
                    ImGui::TableNextColumn();
                    ImGui::Text("%lld", static_cast<long long>(queue.max));
                }
                ImGui::EndTable();
            }
        }
        ImGui::EndChild();
    }
}

// --- Steps ---------------------------------------------------------------------------
void ViewerApp::draw_breakdown_steps(const GpuAnalysis& gpu, const RankBreakdown& rank, float width) {
    const float row_height = breakdown_row_height();
    ImGui::Spacing();
    ImGui::Text("Steps of %s", rank.title.c_str());
    ImGui::SameLine();
    ImGui::TextDisabled("(each instant to the first category active then; click a step to zoom the timeline to it)");
    if (rank.steps.empty()) {
        ImGui::TextDisabled("No step ranges (NVTX \"step\", PyTorch \"ProfilerStep#N\") on this rank.");
        return;
    }
    for (int category = 0; category < kStepCategoryCount; ++category) {
        if (category) ImGui::SameLine(0, 12);
        legend_swatch(colors::step_category_color(category), step_category_name(category));
    }
    trace::TimeNs longest_step = 1;
    std::array<trace::TimeNs, kStepCategoryCount> mean{};
    for (const StepSplit& step : rank.steps) {
        longest_step = std::max(longest_step, step.duration_ns());
        for (int category = 0; category < kStepCategoryCount; ++category)
            mean[static_cast<std::size_t>(category)] += step.ns[static_cast<std::size_t>(category)];
    }
    for (trace::TimeNs& value : mean) value /= static_cast<trace::TimeNs>(rank.steps.size());
    const trace::TimeNs mean_duration = std::accumulate(mean.begin(), mean.end(), trace::TimeNs{0});

    // Rows in window order unless a column header sorts them; a new analysis or another
    // rank starts from window order again, sorted by the header's current choice.
    const bool new_rows =
        step_order_for_ != &gpu || step_order_rank_ != breakdown_rank_ || step_order_.size() != rank.steps.size();
    if (new_rows) {
        step_order_.resize(rank.steps.size());
        std::iota(step_order_.begin(), step_order_.end(), std::size_t{0});
        step_order_for_ = &gpu;
        step_order_rank_ = breakdown_rank_;
    }
    std::vector<std::size_t>& order = step_order_;
    const int columns = 4 + kStepCategoryCount;
    const ImGuiTableFlags step_flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_ScrollY |
                                       ImGuiTableFlags_Sortable | ImGuiTableFlags_SizingFixedFit;
    if (ImGui::BeginTable("steps", columns, step_flags,
                          ImVec2(width - 8, std::max(120.0f, ImGui::GetContentRegionAvail().y - 4)))) {
        ImGui::TableSetupScrollFreeze(0, 2);
        ImGui::TableSetupColumn("step", ImGuiTableColumnFlags_DefaultSort, 0.0f, 0);
        ImGui::TableSetupColumn("start", ImGuiTableColumnFlags_NoSort, 0.0f, 1);
        ImGui::TableSetupColumn("duration", ImGuiTableColumnFlags_PreferSortDescending, 0.0f, 2);
        ImGui::TableSetupColumn("breakdown (bar length: duration)",
                                ImGuiTableColumnFlags_WidthStretch | ImGuiTableColumnFlags_NoSort, 0.0f, 3);
        for (int category = 0; category < kStepCategoryCount; ++category)
            ImGui::TableSetupColumn(step_category_name(category), ImGuiTableColumnFlags_PreferSortDescending, 0.0f,
                                    static_cast<ImGuiID>(4 + category));
        ImGui::TableHeadersRow();
        if (ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs();
            specs && (specs->SpecsDirty || new_rows) && specs->SpecsCount) {
            const ImGuiTableColumnSortSpecs& spec = specs->Specs[0];
            const bool ascending = spec.SortDirection == ImGuiSortDirection_Ascending;
            auto key = [&](std::size_t index) -> double {
                const StepSplit& step = rank.steps[index];
                if (spec.ColumnUserID == 2) return static_cast<double>(step.duration_ns());
                if (spec.ColumnUserID >= 4) return static_cast<double>(step.ns[spec.ColumnUserID - 4]);
                return static_cast<double>(index);  // window order
            };
            std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
                return ascending ? key(a) < key(b) : key(a) > key(b);
            });
            specs->SpecsDirty = false;
        }
        auto category_cells = [&](const std::array<trace::TimeNs, kStepCategoryCount>& ns, trace::TimeNs total) {
            for (int category = 0; category < kStepCategoryCount; ++category) {
                ImGui::TableNextColumn();
                ImGui::AlignTextToFramePadding();
                const trace::TimeNs value = ns[static_cast<std::size_t>(category)];
                if (value == 0)
                    ImGui::TextDisabled("-");
                else
                    ImGui::TextUnformatted(duration_text(value).c_str());
                if (ImGui::IsItemHovered() && value > 0)
                    ImGui::SetTooltip("%s: %s of the step", step_category_name(category),
                                      percent_text(static_cast<double>(value), static_cast<double>(total)).c_str());
            }
        };
        auto bar = [&](const std::array<trace::TimeNs, kStepCategoryCount>& ns, trace::TimeNs total) {
            std::vector<Segment> segments;
            for (int category = 0; category < kStepCategoryCount; ++category)
                segments.push_back({static_cast<double>(ns[static_cast<std::size_t>(category)]),
                                    colors::step_category_color(category), step_category_name(category)});
            const int hovered = stacked_bar(segments, static_cast<double>(longest_step), static_cast<double>(total),
                                            std::max(60.0f, ImGui::GetContentRegionAvail().x - 4.0f), 14.0f);
            if (hovered >= 0)
                ImGui::SetTooltip(
                    "%s: %s (%s of the step)", segments[static_cast<std::size_t>(hovered)].label,
                    duration_text(ns[static_cast<std::size_t>(hovered)]).c_str(),
                    percent_text(segments[static_cast<std::size_t>(hovered)].value, static_cast<double>(total))
                        .c_str());
        };
        // The mean step first (frozen with the header), as the TensorBoard plugin's overview.
        ImGui::TableNextRow(0, row_height);
        ImGui::TableNextColumn();
        ImGui::AlignTextToFramePadding();
        ImGui::TextDisabled("mean");
        ImGui::TableNextColumn();
        ImGui::TableNextColumn();
        ImGui::AlignTextToFramePadding();
        ImGui::TextUnformatted(duration_text(mean_duration).c_str());
        ImGui::TableNextColumn();
        bar(mean, mean_duration);
        category_cells(mean, mean_duration);

        ImGuiListClipper clipper;
        clipper.Begin(static_cast<int>(order.size()), row_height);
        while (clipper.Step()) {
            for (int row = clipper.DisplayStart; row < clipper.DisplayEnd; ++row) {
                const StepSplit& step = rank.steps[order[static_cast<std::size_t>(row)]];
                ImGui::TableNextRow(0, row_height);
                ImGui::TableNextColumn();
                ImGui::PushID(row);
                char label[32];
                std::snprintf(label, sizeof label, "%lld", static_cast<long long>(step.step));
                ImGui::AlignTextToFramePadding();
                if (ImGui::Selectable(label, false,
                                      ImGuiSelectableFlags_SpanAllColumns | ImGuiSelectableFlags_AllowItemOverlap,
                                      ImVec2(0, row_height - 2.0f)))
                    show_step(step);
                ImGui::PopID();
                ImGui::TableNextColumn();
                ImGui::AlignTextToFramePadding();
                ImGui::TextUnformatted(duration_text(step.start_ns - model_->begin_ns()).c_str());
                ImGui::TableNextColumn();
                ImGui::AlignTextToFramePadding();
                ImGui::TextUnformatted(duration_text(step.duration_ns()).c_str());
                ImGui::TableNextColumn();
                bar(step.ns, step.duration_ns());
                category_cells(step.ns, step.duration_ns());
            }
        }
        ImGui::EndTable();
    }
}

}  // namespace ember::viewer
