// flamegraph_view.cpp: the flamegraph view of ViewerApp: source and order pickers,
// click to zoom into a node (right click or the root to zoom out), search highlight,
// percentages on hover, and the difference of two files (red slower, blue faster).
#include "viewer/ui/colors.h"
#include "viewer/ui/viewer_app.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ember::viewer {

namespace {

constexpr float kFlameRowHeight = 20.0f;

std::uint32_t flame_color(const FlameGraph& graph, const FlameNode& node, std::uint32_t name_hash) {
    if (graph.is_difference) {
        // Relative change against the baseline: red slower, blue faster, grey same.
        const double baseline = node.baseline;
        const double change = baseline > 0 ? (node.total - baseline) / baseline : (node.total > 0 ? 1.0 : -1.0);
        // Past the 2% band a frame is clearly tinted (40%), fully so from a 50% change:
        // a proportional tint left a 7% regression looking grey.
        const double strength = 0.4 + 0.6 * std::clamp(std::fabs(change) / 0.5, 0.0, 1.0);
        const std::uint32_t grey = 170;
        const auto mix = [&](std::uint32_t channel) {
            return static_cast<std::uint32_t>(grey + (static_cast<double>(channel) - grey) * strength);
        };
        const std::uint32_t tint = change > 0 ? colors::kDiffSlower : colors::kDiffFaster;
        if (std::fabs(change) < 0.02) return colors::rgb(grey, grey, grey);
        return colors::rgb(mix(colors::red(tint)), mix(colors::green(tint)), mix(colors::blue(tint)));
    }
    // Kernels (the leaves of the GPU graph) in blue, the NVTX stack above them warm.
    if ((graph.source == FlameSource::gpu_kernels && node.children.empty()) ||
        graph.source == FlameSource::gpu_kernel_names)
        return colors::kernel_color(name_hash);
    return colors::range_color(name_hash);
}

std::uint32_t hash_name(const std::string& name) {
    std::uint32_t hash = 2166136261u;
    for (char c : name) hash = (hash ^ static_cast<unsigned char>(c)) * 16777619u;
    return hash;
}

std::string format_value(const FlameGraph& graph, double value) {
    if (graph.unit == "samples") {
        char text[48];
        std::snprintf(text, sizeof text, "%.0f samples", value);
        return text;
    }
    return format_duration(value);
}

}  // namespace

void ViewerApp::draw_flamegraph(float width, float height) {
    const char* sources[kFlameSourceCount];
    for (int index = 0; index < kFlameSourceCount; ++index)
        sources[index] = flame_source_name(static_cast<FlameSource>(index));
    int source = static_cast<int>(flame_source_);
    ImGui::SetNextItemWidth(240);
    if (ImGui::Combo("source", &source, sources, kFlameSourceCount)) {
        flame_source_ = static_cast<FlameSource>(source);
        flame_dirty_ = true;
    }
    ImGui::SameLine();
    int order = static_cast<int>(flame_order_);
    bool order_changed = ImGui::RadioButton("left heavy", &order, 0);
    ImGui::SameLine();
    order_changed |= ImGui::RadioButton("time order", &order, 1);
    if (order_changed) {
        flame_order_ = static_cast<FlameOrder>(order);
        flame_dirty_ = true;
    }
    if (model_->files().size() >= 2) {
        ImGui::SameLine();
        if (ImGui::Checkbox("difference (2nd file vs 1st)", &flame_difference_)) flame_dirty_ = true;
    }
    if (flame_source_ == FlameSource::cpu_samples) {
        ImGui::SameLine();
        // The timeline's setting: one answer to "are idle samples counted" in both views.
        if (ImGui::Checkbox("idle samples", &sample_tracks_.idle)) flame_dirty_ = true;
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip(
                "Also count the samples of threads that slept, blocked or waited for the GIL\n"
                "(off: active samples only, as `ember stats` without --idle).");
    }
    if (!model_->loaded()) {
        ImGui::TextDisabled("loading... the flamegraph is built when the whole trace is in");
        return;
    }
    if (flame_dirty_) {
        if (flame_difference_ && model_->files().size() >= 2) {
            const bool idle = sample_tracks_.idle;
            flame_ = difference_flamegraph(build_flamegraph(*model_, flame_source_, FlameOrder::left_heavy, 0, idle),
                                           build_flamegraph(*model_, flame_source_, FlameOrder::left_heavy, 1, idle));
        } else {
            flame_ = build_flamegraph(*model_, flame_source_, flame_order_, -1, sample_tracks_.idle);
        }
        flame_focus_ = 0;
        flame_dirty_ = false;
    }
    if (flame_.is_difference) {
        // What the colours mean, and the whole graph's change.
        legend_swatch(colors::kDiffSlower, "B slower than A");
        ImGui::SameLine(0, 16);
        legend_swatch(colors::kDiffFaster, "B faster");
        ImGui::SameLine(0, 16);
        legend_swatch(colors::rgb(170, 170, 170), "within 2%");
        ImGui::SameLine(0, 16);
        const FlameNode& root = flame_.nodes[0];
        ImGui::TextDisabled("width: B's time; colour: B - A of the frame, relative to A.  all: %s -> %s (%s%s)",
                            format_value(flame_, root.baseline).c_str(), format_value(flame_, root.total).c_str(),
                            root.delta() >= 0 ? "+" : "-", format_value(flame_, std::fabs(root.delta())).c_str());
    }
    if (flame_.total() <= 0.0) {
        ImGui::TextDisabled("This trace has no %s.", flame_source_name(flame_source_));
        return;
    }

    ImDrawList* draw = ImGui::GetWindowDrawList();
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const float area_height = std::max(50.0f, height - ImGui::GetCursorPosY() + ImGui::GetStyle().WindowPadding.y);
    ImGui::InvisibleButton("flame_area", ImVec2(width, area_height),
                           ImGuiButtonFlags_MouseButtonLeft | ImGuiButtonFlags_MouseButtonRight);
    const bool hovered = ImGui::IsItemHovered();
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    draw->PushClipRect(origin, ImVec2(origin.x + width, origin.y + area_height), true);
    draw->AddRectFilled(origin, ImVec2(origin.x + width, origin.y + area_height), colors::kBackground);
    flame_boxes_ = layout_flamegraph(flame_, flame_focus_, 1.0 / std::max(1.0f, width));
    int hovered_box = -1;
    const double focus_total = flame_.nodes[flame_focus_].total;
    for (std::size_t index = 0; index < flame_boxes_.size(); ++index) {
        const FlameBox& box = flame_boxes_[index];
        const float top = origin.y + static_cast<float>(box.depth) * kFlameRowHeight;
        if (top > origin.y + area_height) continue;
        const float left = origin.x + static_cast<float>(box.x0) * width;
        const float right = std::max(left + 1.0f, origin.x + static_cast<float>(box.x1) * width);
        const FlameNode& node = flame_.nodes[box.node];
        std::uint32_t color = flame_color(flame_, node, hash_name(node.name));
        const bool dimmed =
            !search_.empty() && search_text_[0] != '\0' && node.name.find(search_text_) == std::string::npos;
        if (dimmed) color = colors::folded_color(colors::folded_color(color));
        draw->AddRectFilled(ImVec2(left, top), ImVec2(right - 1, top + kFlameRowHeight - 1), color);
        ++counters_.primitives;
        if (right - left > 30) {
            const ImVec4 clip(left, top, right - 2, top + kFlameRowHeight);
            draw->AddText(nullptr, 0.0f, ImVec2(left + 3, top + 3), colors::rgb(15, 15, 20), node.name.c_str(), nullptr,
                          0.0f, &clip);
            ++counters_.primitives;
        }
        if (hovered && mouse.x >= left && mouse.x < right && mouse.y >= top && mouse.y < top + kFlameRowHeight)
            hovered_box = static_cast<int>(index);
    }
    draw->PopClipRect();
    if (hovered_box >= 0) {
        const FlameNode& node = flame_.nodes[flame_boxes_[static_cast<std::size_t>(hovered_box)].node];
        ImGui::BeginTooltip();
        ImGui::TextUnformatted(node.name.c_str());
        ImGui::Text("total %s (%.1f%% of all, %.1f%% of view)", format_value(flame_, node.total).c_str(),
                    100.0 * node.total / flame_.total(), 100.0 * node.total / focus_total);
        ImGui::Text("self %s", format_value(flame_, node.self()).c_str());
        if (node.count) ImGui::Text("%lld merged", static_cast<long long>(node.count));
        if (flame_.is_difference) {
            ImGui::Text("A (1st file) %s, B (2nd file) %s", format_value(flame_, node.baseline).c_str(),
                        format_value(flame_, node.total).c_str());
            ImGui::Text("B - A %s%s", node.delta() >= 0 ? "+" : "-",
                        format_value(flame_, std::fabs(node.delta())).c_str());
            if (node.baseline > 0)
                ImGui::Text("change %+.1f%%", 100.0 * node.delta() / node.baseline);
            else
                ImGui::TextUnformatted("new in the second file");
        }
        ImGui::EndTooltip();
        if (ImGui::IsMouseClicked(ImGuiMouseButton_Left))
            flame_focus_ = flame_boxes_[static_cast<std::size_t>(hovered_box)].node;
    }
    if (hovered && ImGui::IsMouseClicked(ImGuiMouseButton_Right)) flame_focus_ = flame_.nodes[flame_focus_].parent;
}

}  // namespace ember::viewer
