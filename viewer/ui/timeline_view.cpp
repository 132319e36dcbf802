// timeline_view.cpp: the timeline of ViewerApp: ruler, lanes (threads, streams,
// counters) drawn through the model's LOD folding, hover tooltips, selection, flow
// arrows and time-range selection. Below each stream's events, once the GPU analysis
// is there: its idle gaps coloured by category and its queue-length track.
//
// Mouse: wheel zooms at the cursor (shift+wheel scrolls lanes), left drag pans, left
// click selects, double click frames an event, right drag selects a time range.
// Lane titles: click collapses/expands, drag reorders, right click moves.
#include "viewer/ui/colors.h"
#include "viewer/ui/viewer_app.h"

#include <GL/gl.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

namespace ember::viewer {

namespace {

constexpr float kLabelWidth = 230.0f;
constexpr float kRulerHeight = 24.0f;
constexpr double kMinPixels = 3.0;

// Two layers: opaque boxes (events, counter spans, separators, headers) drawn with
// blending off, then everything that needs blending (text, outlines, overlays) on
// top. Software OpenGL pays a read-modify-write per blended pixel (performance.md).
ImDrawListSplitter g_layers;
constexpr int kOpaqueLayer = 0;
constexpr int kBlendedLayer = 1;
void opaque_layer(ImDrawList* draw) {
    g_layers.SetCurrentChannel(draw, kOpaqueLayer);
}
void blended_layer(ImDrawList* draw) {
    g_layers.SetCurrentChannel(draw, kBlendedLayer);
}
void disable_blending(const ImDrawList*, const ImDrawCmd*) {
    glDisable(GL_BLEND);
}

// A box's name, from 3 px inside its left edge (or the track's, when the box starts
// left of it), clipped to the box and the track.
void draw_box_label(ImDrawList* draw, float left, float right, float top, float row_height, const TrackArea& area,
                    std::uint32_t color, const char* text, const char* text_end = nullptr) {
    const ImVec4 text_clip(std::max(left, area.x0), top, std::min(right, area.x0 + area.width), top + row_height);
    draw->AddText(nullptr, 0.0f, ImVec2(std::max(left, area.x0) + 3, top + 2), color, text, text_end, 0.0f, &text_clip);
}

// The selected box's outline, a pixel wider than the box on each side.
void draw_selection_outline(ImDrawList* draw, float left, float right, float top, float row_height) {
    draw->AddRect(ImVec2(left - 1, top), ImVec2(right + 1, top + row_height), colors::kSelection, 0, 0, 2.0f);
}

const char* row_title(const Row& row) {
    switch (row.kind) {
        case RowKind::ranges:
            return "NVTX";
        case RowKind::async_ranges:
            return "NVTX (start/end)";
        case RowKind::api_calls:
            return "CUDA API";
        case RowKind::marks:
            return "marks";
        case RowKind::overhead:
            return "collector";
        case RowKind::gpu_work:
            return "kernels, copies";
        case RowKind::syncs:
            return "waits";
    }
    return "";
}

// The LOD of the visible range at this zoom (lod.h).
LodParams lod_params(const ViewState& view) {
    LodParams params;
    params.view_begin_ns = view.visible().begin_ns;
    params.view_end_ns = view.visible().end_ns;
    params.ns_per_pixel = view.ns_per_pixel();
    params.min_pixels = kMinPixels;
    return params;
}

// Where an item lies on screen: clipped to the axis (2 px to spare), at least a pixel wide.
struct ItemSpan {
    float left = 0, right = 0;
};
ItemSpan item_span(const ViewState& view, trace::TimeNs start_ns, trace::TimeNs end_ns, float x0, float width) {
    ItemSpan span{x0 + static_cast<float>(view.time_to_x(start_ns)), x0 + static_cast<float>(view.time_to_x(end_ns))};
    span.left = std::max(span.left, x0 - 2.0f);
    span.right = std::min(span.right, x0 + width + 2.0f);
    if (span.right - span.left < 1.0f) span.right = span.left + 1.0f;
    return span;
}

// A column's vertical extent on screen.
struct ColumnSpan {
    float top = 0;
    float bottom = 0;
};

// Fills one rectangle per run of neighbouring pixel columns with the same span
// (span_of(column): the column's span, nothing for an empty column), so a chart
// costs one primitive per change on screen, not one per column (software OpenGL
// pays per primitive and per pixel, performance.md). Returns the rectangles drawn.
template <typename SpanOf>
int fill_column_runs(ImDrawList* draw, float x0, int columns, ImU32 color, SpanOf&& span_of) {
    int rectangles = 0;
    bool run_open = false;
    float run_left = 0, run_right = 0;
    ColumnSpan run;
    auto flush = [&]() {
        if (!run_open) return;
        draw->AddRectFilled(ImVec2(run_left, run.top), ImVec2(run_right, run.bottom), color);
        ++rectangles;
        run_open = false;
    };
    for (int column = 0; column < columns; ++column) {
        const std::optional<ColumnSpan> span = span_of(column);
        if (!span) {
            flush();
            continue;
        }
        const float x = x0 + static_cast<float>(column);
        if (run_open && span->top == run.top && span->bottom == run.bottom) {
            run_right = x + 1.0f;
            continue;
        }
        flush();
        run_open = true;
        run_left = x;
        run_right = x + 1.0f;
        run = *span;
    }
    flush();
    return rectangles;
}

}  // namespace

void ViewerApp::draw_ruler(ImDrawList* draw, float x0, float y0, float width) {
    opaque_layer(draw);
    draw->AddRectFilled(ImVec2(x0, y0), ImVec2(x0 + width, y0 + kRulerHeight), colors::kLaneBackground);
    for (const RulerTick& tick : ruler_ticks(view_, model_->begin_ns())) {
        const float x = x0 + static_cast<float>(view_.time_to_x(tick.time_ns));
        if (x < x0 || x > x0 + width) continue;
        opaque_layer(draw);
        draw->AddLine(ImVec2(x, y0 + (tick.major ? 4.0f : 16.0f)), ImVec2(x, y0 + kRulerHeight),
                      colors::rgb(150, 150, 160));
        blended_layer(draw);
        if (tick.major) draw->AddText(ImVec2(x + 3, y0 + 2), colors::rgb(210, 210, 220), tick.label.c_str());
        counters_.primitives += tick.major ? 2 : 1;
    }
    blended_layer(draw);
}

void ViewerApp::draw_counter(ImDrawList* draw, const Lane& lane, float x0, float y0, float width, float height) {
    const int columns = std::max(1, static_cast<int>(width));
    fold_counter(lane.points, view_.visible().begin_ns, view_.ns_per_pixel(), columns, counter_columns_);
    const double low = lane.min_value;
    const double high = lane.max_value > lane.min_value ? lane.max_value : lane.min_value + 1.0;
    auto y_of = [&](double value) {
        return y0 + height - 2.0f - static_cast<float>((value - low) / (high - low)) * (height - 4.0f);
    };
    // Each pixel column is one vertical span from its min to its max, stretched to
    // meet the previous column so the curve stays connected, and neighbouring columns
    // with the same span become one wider rectangle. A polyline would cost an
    // anti-aliased quad and fringe per column, which software OpenGL (llvmpipe)
    // rasterizes slower than the rest of the timeline together (performance.md).
    constexpr float kLineThickness = 1.5f;
    std::optional<ColumnSpan> previous;  // the previous column's own span
    opaque_layer(draw);
    counters_.primitives += fill_column_runs(draw, x0, columns, colors::kCounterLine, [&](int column) {
        const CounterColumn& cell = counter_columns_[static_cast<std::size_t>(column)];
        if (!cell.has_value) {
            previous.reset();
            return std::optional<ColumnSpan>();
        }
        const ColumnSpan own{y_of(cell.max_value), y_of(cell.min_value) + kLineThickness};
        ColumnSpan span = own;
        if (previous) {
            span.top = std::min(span.top, previous->bottom - kLineThickness);
            span.bottom = std::max(span.bottom, previous->top + kLineThickness);
        }
        previous = own;
        return std::optional<ColumnSpan>(span);
    });
    blended_layer(draw);
}

void ViewerApp::draw_idle_gaps(ImDrawList* draw, const StreamOverlay& overlay, const TrackArea& area) {
    const float x0 = area.x0, top = area.y0, width = area.width;
    const float mouse_x = area.mouse_x, mouse_y = area.mouse_y;
    const LodParams params = lod_params(view_);
    gap_items_.clear();
    fold_gaps(overlay, params, gap_items_);
    const float row_height = metrics_.row_height;
    const float bottom = top + row_height - 1.0f;
    const float full_height = row_height - 2.0f;
    const bool mouse_in_row = mouse_y >= top && mouse_y < top + row_height && mouse_x >= x0;
    for (const GapItem& item : gap_items_) {
        auto [left, right] = item_span(view_, item.start_ns, item.end_ns, x0, width);
        opaque_layer(draw);
        if (!item.binned) {
            const IdleGap& gap = overlay.gaps[item.first_index];
            const IdleCategory category = overlay.categories[item.first_index];
            draw->AddRectFilled(ImVec2(left, top + 1.0f), ImVec2(right, bottom), colors::idle_color(category));
            ++counters_.primitives;
            if (right - left > 70.0f) {
                blended_layer(draw);
                char label[96];
                std::snprintf(label, sizeof label, "%s %s", analysis::idle_category_name(category),
                              format_duration(static_cast<double>(gap.duration_ns())).c_str());
                draw_box_label(draw, left, right, top, row_height, area, colors::rgb(15, 15, 20), label);
                ++counters_.primitives;
            }
        } else {
            // A bin of narrow gaps: each category gets the height of its share of the
            // bin's time, stacked from the bottom (at least a pixel when present).
            const double span = static_cast<double>(std::max<trace::TimeNs>(1, item.end_ns - item.start_ns));
            float y = bottom;
            for (int category = 0; category < kIdleCategoryCount; ++category) {
                const trace::TimeNs idle = item.idle_ns[static_cast<std::size_t>(category)];
                if (idle <= 0 || y <= top + 1.0f) continue;
                const float height = std::clamp(full_height * static_cast<float>(static_cast<double>(idle) / span),
                                                1.0f, y - (top + 1.0f));
                draw->AddRectFilled(ImVec2(left, y - height), ImVec2(right, y),
                                    colors::idle_color(static_cast<IdleCategory>(category)));
                ++counters_.primitives;
                y -= height;
            }
        }
        blended_layer(draw);
        if (mouse_in_row && mouse_x >= left - 1 && mouse_x <= right + 1) {
            hovered_gap_ = item;
            hovered_gap_category_.reset();
            if (!item.binned) hovered_gap_category_ = overlay.categories[item.first_index];
        }
    }
}

void ViewerApp::draw_queue(ImDrawList* draw, const StreamOverlay& overlay, const TrackArea& area, float height) {
    const float x0 = area.x0, top = area.y0, width = area.width;
    const float mouse_x = area.mouse_x, mouse_y = area.mouse_y;
    const int columns = std::max(1, static_cast<int>(width));
    fold_counter(overlay.queue, view_.visible().begin_ns, view_.ns_per_pixel(), columns, counter_columns_);
    const double high = std::max(1.0, overlay.queue_max);
    const float baseline = top + height - 2.0f;
    auto y_of = [&](double value) { return baseline - static_cast<float>(value / high) * (height - 5.0f); };
    // An area chart: per pixel column one rectangle from the column's maximum down to
    // the baseline (an empty queue is a thin line), neighbouring columns of the same
    // height merged, so a lane costs one rectangle per change of height on screen.
    constexpr float kLine = 1.5f;
    opaque_layer(draw);
    counters_.primitives += fill_column_runs(draw, x0, columns, colors::kQueueFill, [&](int column) {
        const CounterColumn& cell = counter_columns_[static_cast<std::size_t>(column)];
        if (!cell.has_value) return std::optional<ColumnSpan>();  // before the stream's first launch
        return std::optional<ColumnSpan>(ColumnSpan{std::min(y_of(cell.max_value), baseline - kLine), baseline});
    });
    blended_layer(draw);
    if (mouse_y >= top && mouse_y < top + height && mouse_x >= x0 && mouse_x < x0 + width) {
        const auto column = static_cast<std::size_t>(std::clamp(static_cast<int>(mouse_x - x0), 0, columns - 1));
        const CounterColumn& cell = counter_columns_[column];
        QueueHover hover;
        hover.time_ns = view_.x_to_time(mouse_x - x0);
        hover.min_value = cell.has_value ? cell.min_value : 0.0;
        hover.max_value = cell.has_value ? cell.max_value : 0.0;
        hover.max = overlay.queue_max;
        hovered_queue_ = hover;
    }
}

void ViewerApp::draw_lane_rows(ImDrawList* draw, const Lane& lane, int lane_index, const LanePlacement& placement,
                               const TrackArea& area) {
    const float x0 = area.x0, y0 = area.y0, width = area.width;
    const float mouse_x = area.mouse_x, mouse_y = area.mouse_y;
    const float row_height = metrics_.row_height;
    const LodParams params = lod_params(view_);
    const ImVec4 clip(x0, y0, x0 + width, y0 + placement.height);
    for (int row_index = 0; row_index < placement.rows_shown && row_index < static_cast<int>(lane.rows.size());
         ++row_index) {
        const Row& row = lane.rows[static_cast<std::size_t>(row_index)];
        const float top = y0 + static_cast<float>(row_index) * row_height;
        items_.clear();
        fold_row(row, params, items_);
        const bool mouse_in_row = mouse_y >= top && mouse_y < top + row_height && mouse_x >= x0;
        for (const DrawItem& item : items_) {
            const TimelineEvent& first = row.events[item.first_index];
            auto [left, right] = item_span(view_, item.start_ns, item.end_ns, x0, width);
            std::uint32_t color = colors::event_color(first);
            // A folded run of GPU work mixes kinds: it takes the kernels' blue (the bulk of
            // any stream), not the color of whichever event happens to come first.
            if (item.count > 1)
                color = colors::folded_color(row.kind == RowKind::gpu_work ? colors::kernel_color(0) : color);
            // A folded run is outlined when one of its first events matches, so a highlighted
            // name (search, a clicked diff row) stays visible at any zoom; the scan is
            // bounded so a fold of millions of events costs no more than a few hundred.
            bool matched = false;
            if (!search_.empty() && search_.matches_row(row.kind)) {
                const std::uint32_t scan = std::min<std::uint32_t>(item.count, 256);
                for (std::uint32_t k = 0; k < scan && !matched; ++k)
                    matched = search_.matches(row.events[item.first_index + k].name_id);
            }
            opaque_layer(draw);
            if (first.kind == EventKind::mark && item.count == 1) {
                draw->AddTriangleFilled(ImVec2(left, top + row_height - 2), ImVec2(left - 4, top + 2),
                                        ImVec2(left + 4, top + 2), color);
            } else {
                draw->AddRectFilled(ImVec2(left, top + 1), ImVec2(right, top + row_height - 1), color);
            }
            blended_layer(draw);
            ++counters_.primitives;
            if (matched) {
                draw->AddRect(ImVec2(left, top), ImVec2(right, top + row_height), colors::rgb(255, 255, 0), 0, 0, 2.0f);
                ++counters_.primitives;
            }
            const EventRef ref{lane_index, row_index, item.first_index};
            if (item.count == 1 && ref == selected_) {
                draw_selection_outline(draw, left, right, top, row_height);
                ++counters_.primitives;
            }
            if (right - left > 40.0f) {
                char label[160];
                if (item.count == 1) {
                    const std::string_view name = model_->name(first.name_id);
                    std::snprintf(label, sizeof label, "%.*s",
                                  static_cast<int>(std::min<std::size_t>(name.size(), 150)), name.data());
                } else {
                    std::snprintf(label, sizeof label, "%u events", item.count);
                }
                draw_box_label(draw, left, right, top, row_height, area, colors::rgb(15, 15, 20), label);
                ++counters_.primitives;
            }
            if (mouse_in_row && mouse_x >= left - 1 && mouse_x <= right + 1) {
                if (item.count == 1) {
                    hovered_ = ref;
                    hovered_fold_count_ = 0;
                } else {
                    hovered_ = {};
                    hovered_fold_count_ = static_cast<int>(item.count);
                }
            }
        }
    }
    (void)clip;
}

// A thread's sampled stacks: per depth, the boxes folded for the zoom (fold_stack_row),
// coloured by frame, idle ones dimmed, named when wide enough.
void ViewerApp::draw_sample_stacks(ImDrawList* draw, int lane_index, const SampleStackLane& stacks, int rows,
                                   const TrackArea& area) {
    const float x0 = area.x0, width = area.width;
    const float mouse_x = area.mouse_x, mouse_y = area.mouse_y;
    const float row_height = metrics_.row_height;
    const bool with_idle = sample_tracks_.idle;
    const std::vector<StackRow>& chart = stacks.rows(with_idle);
    const std::vector<std::string>& names =
        model_->files()[static_cast<std::size_t>(model_->lane(lane_index).file_index)].frame_names;
    const LodParams params = lod_params(view_);
    for (int depth = 0; depth < rows && depth < static_cast<int>(chart.size()); ++depth) {
        const StackRow& row = chart[static_cast<std::size_t>(depth)];
        const float top = area.y0 + static_cast<float>(depth) * row_height;
        items_.clear();
        fold_stack_row(row, params, items_);
        const bool mouse_in_row = mouse_y >= top && mouse_y < top + row_height && mouse_x >= x0;
        for (const DrawItem& item : items_) {
            const StackBox& first = row.boxes[item.first_index];
            auto [left, right] = item_span(view_, item.start_ns, item.end_ns, x0, width);
            std::uint32_t color = colors::stack_frame_color(first.frame);
            if (item.count > 1) color = colors::folded_color(color);
            if (first.idle) color = colors::idle_stack_color(color);
            opaque_layer(draw);
            draw->AddRectFilled(ImVec2(left, top + 1), ImVec2(right, top + row_height - 1), color);
            blended_layer(draw);
            ++counters_.primitives;
            const StackBoxRef ref{lane_index, depth, item.first_index, with_idle};
            if (item.count == 1 && ref == selected_stack_) {
                draw_selection_outline(draw, left, right, top, row_height);
                ++counters_.primitives;
            }
            if (right - left > 40.0f) {
                char label[32];
                const char* text = label;
                const char* text_end = nullptr;
                if (item.count == 1 && first.frame < names.size()) {
                    text = names[first.frame].data();
                    text_end = text + names[first.frame].size();
                } else {
                    std::snprintf(label, sizeof label, "%u frames", item.count);
                }
                draw_box_label(draw, left, right, top, row_height, area,
                               first.idle ? colors::rgb(170, 170, 180) : colors::rgb(15, 15, 20), text, text_end);
                ++counters_.primitives;
            }
            if (mouse_in_row && mouse_x >= left - 1 && mouse_x <= right + 1) {
                hovered_stack_ = ref;
                hovered_stack_item_ = item;
            }
        }
    }
}

// The frame under the pointer, its samples and the frames that called it.
void ViewerApp::draw_stack_tooltip() {
    const SampleStackLane* stacks = model_->sample_stacks(hovered_stack_.lane);
    if (stacks == nullptr) return;
    const std::vector<StackRow>& chart = stacks->rows(hovered_stack_.with_idle);
    if (hovered_stack_.depth >= static_cast<int>(chart.size())) return;
    const std::vector<StackBox>& boxes = chart[static_cast<std::size_t>(hovered_stack_.depth)].boxes;
    if (hovered_stack_.index >= boxes.size()) return;
    const std::vector<std::string>& names =
        model_->files()[static_cast<std::size_t>(model_->lane(hovered_stack_.lane).file_index)].frame_names;
    const DrawItem& item = hovered_stack_item_;
    ImGui::BeginTooltip();
    if (item.count > 1) {
        std::uint64_t samples = 0;
        for (std::uint32_t k = 0; k < item.count && k < 4096; ++k) samples += boxes[item.first_index + k].samples;
        ImGui::Text("%u frames at depth %d over %s (zoom in to see them)", item.count, hovered_stack_.depth,
                    format_duration(static_cast<double>(item.end_ns - item.start_ns)).c_str());
        if (item.count <= 4096) ImGui::Text("%llu samples", static_cast<unsigned long long>(samples));
    } else {
        const StackBox& box = boxes[hovered_stack_.index];
        ImGui::TextUnformatted(box.frame < names.size() ? names[box.frame].c_str() : "?");
        ImGui::TextDisabled(box.idle ? "sampled stack frame, thread idle" : "sampled stack frame");
        ImGui::Text("%u sample%s, %s", static_cast<unsigned>(box.samples), box.samples == 1 ? "" : "s",
                    format_duration(static_cast<double>(box.duration_ns())).c_str());
        ImGui::Text("start %s", format_duration(static_cast<double>(box.start_ns - model_->begin_ns())).c_str());
        const std::vector<std::uint32_t> stack = stack_of_box(chart, hovered_stack_.depth, hovered_stack_.index);
        if (stack.size() > 1) {
            ImGui::Separator();
            ImGui::TextDisabled("called from");
            // Innermost caller first, as a traceback reads bottom-up; at most 12 lines.
            const int shown = std::min<int>(static_cast<int>(stack.size()) - 1, 12);
            for (int k = 0; k < shown; ++k) {
                const std::uint32_t frame = stack[stack.size() - 2 - static_cast<std::size_t>(k)];
                ImGui::TextUnformatted(frame < names.size() ? names[frame].c_str() : "?");
            }
            if (shown < static_cast<int>(stack.size()) - 1) ImGui::TextDisabled("...");
        }
    }
    ImGui::EndTooltip();
}

bool ViewerApp::event_position(const EventRef& ref, float x0, float y_origin, float* x, float* y) const {
    const TimelineEvent* event = model_->event(ref);
    if (event == nullptr) return false;
    for (const LanePlacement& placement : placements_) {
        if (placement.lane != ref.lane) continue;
        const int row = std::min(ref.row, placement.rows_shown - 1);
        *x = x0 + static_cast<float>(view_.time_to_x(event->start_ns));
        *y = y_origin + placement.y + (static_cast<float>(row) + 0.5f) * metrics_.row_height;
        return true;
    }
    return false;
}

void ViewerApp::draw_flow(ImDrawList* draw, float x0, float y_origin) {
    if (!flow_partner_ || !selected_.valid()) return;
    const TimelineEvent* selected = model_->event(selected_);
    if (selected == nullptr) return;
    EventRef from = selected_, to = *flow_partner_;
    if (selected->kind != EventKind::api_call) std::swap(from, to);  // arrows point API -> GPU
    float from_x, from_y, to_x, to_y;
    if (!event_position(from, x0, y_origin, &from_x, &from_y) || !event_position(to, x0, y_origin, &to_x, &to_y))
        return;
    draw->AddBezierCubic(ImVec2(from_x, from_y), ImVec2(from_x + 40, from_y), ImVec2(to_x - 40, to_y),
                         ImVec2(to_x, to_y), colors::kFlow, 2.0f);
    const float direction = to_y > from_y ? -1.0f : 1.0f;
    draw->AddTriangleFilled(ImVec2(to_x, to_y), ImVec2(to_x - 5, to_y + direction * 8),
                            ImVec2(to_x + 5, to_y + direction * 8), colors::kFlow);
    counters_.primitives += 2;
}

void ViewerApp::draw_timeline(float width, float height) {
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const float x0 = origin.x + kLabelWidth;
    const float timeline_width = std::max(10.0f, width - kLabelWidth);
    timeline_x0_ = x0;
    if (!view_initialized_) {
        view_.reset({model_->begin_ns(), model_->end_ns()}, timeline_width);
        view_initialized_ = true;
    }
    view_.set_width(timeline_width);

    ImGui::InvisibleButton("timeline_area", ImVec2(width, height),
                           ImGuiButtonFlags_MouseButtonLeft | ImGuiButtonFlags_MouseButtonRight);
    const bool hovered = ImGui::IsItemHovered();
    const ImGuiIO& io = ImGui::GetIO();
    const float mouse_x = io.MousePos.x, mouse_y = io.MousePos.y;
    const float lanes_top = origin.y + kRulerHeight;
    lanes_top_ = lanes_top;

    if (sample_tracks_.idle) model_->include_idle_stacks();  // built once, the first time they are shown
    placements_ = layout_lanes(*model_, lane_order_, metrics_, stream_tracks_, sample_tracks_);

    const TimelineFrame frame{.left = origin.x,
                              .top = origin.y,
                              .width = width,
                              .height = height,
                              .x0 = x0,
                              .timeline_width = timeline_width,
                              .lanes_top = lanes_top,
                              .mouse_x = mouse_x,
                              .mouse_y = mouse_y,
                              .hovered = hovered};
    handle_timeline_input(frame);
    const int clicked_title = draw_timeline_lanes(frame);
    handle_timeline_clicks(frame, clicked_title);
}

// --- Input ---------------------------------------------------------------------
// Wheel zoom (shift: scroll), left-drag pan, right-drag range selection, a lane drag.
void ViewerApp::handle_timeline_input(const TimelineFrame& frame) {
    const float x0 = frame.x0, timeline_width = frame.timeline_width;
    const float mouse_x = frame.mouse_x, mouse_y = frame.mouse_y;
    const bool hovered = frame.hovered;
    const float lanes_top = frame.lanes_top;
    const float content_height = layout_height(placements_);
    const float lanes_height = frame.height - kRulerHeight;
    ImGuiIO& io = ImGui::GetIO();
    static double last_wheel_time = -10.0;
    if (hovered && io.MouseWheel != 0.0f) {
        if (io.KeyShift) {
            scroll_y_ -= io.MouseWheel * 3.0f * metrics_.row_height;
        } else {
            if (ImGui::GetTime() - last_wheel_time > 0.5) view_.commit_history();
            last_wheel_time = ImGui::GetTime();
            view_.zoom(std::pow(0.8, io.MouseWheel), std::clamp(mouse_x - x0, 0.0f, timeline_width));
        }
    }
    if (lane_drag_.from < 0 && ImGui::IsItemActive() && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 2.0f)) {
        dragging_pan_ = true;
        view_.pan_pixels(-io.MouseDelta.x);
        scroll_y_ -= io.MouseDelta.y;
    }
    if (hovered && ImGui::IsMouseClicked(ImGuiMouseButton_Right) && mouse_x >= x0) {
        dragging_select_ = true;
        select_anchor_ns_ = view_.x_to_time(mouse_x - x0);
    }
    if (dragging_select_) {
        const trace::TimeNs now = view_.x_to_time(mouse_x - x0);
        set_selection_range({std::min(select_anchor_ns_, now), std::max(select_anchor_ns_, now)});
        if (!ImGui::IsMouseDown(ImGuiMouseButton_Right)) {
            dragging_select_ = false;
            if (selection_range_->duration_ns() < view_.ns_per_pixel() * 3) selection_range_.reset();
        }
    }
    scroll_y_ = std::clamp(scroll_y_, 0.0f, std::max(0.0f, content_height - lanes_height + 20.0f));
    if (lane_drag_.from >= 0) lane_drag_update(lane_drag_, mouse_y - (lanes_top - scroll_y_));
}

// --- Draw ----------------------------------------------------------------------
// The ruler and the visible lanes; returns the index (in lane_order_) of the lane
// title under the pointer, or -1.
int ViewerApp::draw_timeline_lanes(const TimelineFrame& frame) {
    ImDrawList* draw = ImGui::GetWindowDrawList();
    const ImVec2 origin(frame.left, frame.top);
    const float width = frame.width, height = frame.height;
    const float x0 = frame.x0, timeline_width = frame.timeline_width;
    const float mouse_x = frame.mouse_x, mouse_y = frame.mouse_y;
    const bool hovered = frame.hovered;
    const float lanes_top = frame.lanes_top;
    const GpuAnalysis* gpu_analysis = model_->gpu_analysis();
    draw->PushClipRect(origin, ImVec2(origin.x + width, origin.y + height), true);
    // Everything the timeline draws is axis-aligned (boxes, separators, ticks, outlines,
    // counter spans): without anti-aliasing a line is one quad instead of a quad plus a
    // fringe, which software OpenGL pays per pixel (performance.md, "Viewer").
    constexpr ImDrawListFlags kAntialiasing =
        ImDrawListFlags_AntiAliasedLines | ImDrawListFlags_AntiAliasedLinesUseTex | ImDrawListFlags_AntiAliasedFill;
    const ImDrawListFlags antialiased_flags = draw->Flags;
    draw->Flags = antialiased_flags & ~kAntialiasing;
    g_layers.Split(draw, 2);
    opaque_layer(draw);
    draw->AddCallback(disable_blending, nullptr);
    blended_layer(draw);
    // No full-area background: the frame is cleared to it (software renderers pay per
    // covered pixel, and this area is most of the window).
    draw_ruler(draw, x0, origin.y, timeline_width);
    const EventRef previous_hover = hovered_;
    (void)previous_hover;
    hovered_ = {};
    hovered_fold_count_ = 0;
    hovered_gap_.reset();
    hovered_queue_.reset();
    hovered_stack_ = {};
    lane_rects_.clear();
    const float y_origin = lanes_top - scroll_y_;
    int clicked_title = -1;
    draw->PushClipRect(ImVec2(origin.x, lanes_top), ImVec2(origin.x + width, origin.y + height), true);
    for (std::size_t index = 0; index < placements_.size(); ++index) {
        const LanePlacement& placement = placements_[index];
        const float top = y_origin + placement.y;
        if (top > origin.y + height || top + placement.height < lanes_top) continue;
        if (placement.lane < 0) {
            opaque_layer(draw);
            draw->AddRectFilled(ImVec2(origin.x, top), ImVec2(origin.x + width, top + placement.height),
                                colors::rgb(48, 48, 60));
            blended_layer(draw);
            // In the diff mode each group says which run it belongs to.
            const char* run = nullptr;
            if (diff_mode() && index + 1 < placements_.size() && placements_[index + 1].lane >= 0)
                run = model_->lane(placements_[index + 1].lane).file_index == 0 ? "A" : "B";
            if (run) {
                draw->AddRectFilled(ImVec2(origin.x, top), ImVec2(origin.x + 22, top + placement.height),
                                    *run == 'A' ? colors::kRunA : colors::kRunB);
                draw->AddText(ImVec2(origin.x + 7, top + 3), colors::rgb(15, 15, 20), run);
                counters_.primitives += 2;
            }
            draw->AddText(ImVec2(origin.x + (run ? 28 : 4), top + 3), colors::rgb(235, 235, 245),
                          placement.group.c_str());
            counters_.primitives += 2;
            continue;
        }
        const Lane& lane = model_->lane(placement.lane);
        ++counters_.lanes_drawn;
        // A separator, not a filled background: software renderers pay per covered pixel.
        opaque_layer(draw);
        draw->AddLine(ImVec2(origin.x, top + placement.height + metrics_.lane_gap * 0.5f),
                      ImVec2(x0 + timeline_width, top + placement.height + metrics_.lane_gap * 0.5f),
                      colors::kLaneBackground);
        blended_layer(draw);
        const float events_height =
            lane.plots_values() ? placement.height : static_cast<float>(placement.rows_shown) * metrics_.row_height;
        lane_rects_.push_back({placement.lane, x0, top, x0 + timeline_width, top + events_height});
        const auto display = std::find_if(lane_order_.begin(), lane_order_.end(),
                                          [&](const LaneDisplay& d) { return d.lane == placement.lane; });
        const bool collapsed = display != lane_order_.end() && display->collapsed;
        char title[200];
        std::snprintf(title, sizeof title, "%s %s", collapsed ? "+" : "-", lane.title.c_str());
        const ImVec4 label_clip(origin.x, top, x0 - 4, top + placement.height);
        draw->AddText(nullptr, 0.0f, ImVec2(origin.x + 8, top + 2), colors::rgb(220, 220, 230), title, nullptr, 0.0f,
                      &label_clip);
        counters_.primitives += 2;
        if (mouse_x < x0 && mouse_y >= top && mouse_y < top + placement.height && hovered)
            clicked_title = static_cast<int>(display - lane_order_.begin());
        if (!lane.ready.load(std::memory_order_acquire)) {
            draw->AddText(ImVec2(x0 + 6, top + 2), colors::rgb(140, 140, 150), "loading...");
            continue;
        }
        if (lane.plots_values()) {
            char range_text[96];
            std::snprintf(range_text, sizeof range_text, "%.4g .. %.4g %s", lane.min_value, lane.max_value,
                          lane.unit.c_str());
            if (!collapsed)
                draw->AddText(nullptr, 0.0f, ImVec2(origin.x + 20, top + 18), colors::rgb(150, 150, 160), range_text,
                              nullptr, 0.0f, &label_clip);
            draw_counter(draw, lane, x0, top, timeline_width, placement.height);
        } else {
            if (!collapsed)
                for (int row = 1; row < placement.rows_shown && row < static_cast<int>(lane.rows.size()); ++row) {
                    const Row& lane_row = lane.rows[static_cast<std::size_t>(row)];
                    if (lane_row.kind == RowKind::ranges) continue;
                    draw->AddText(nullptr, 0.0f,
                                  ImVec2(origin.x + 20, top + static_cast<float>(row) * metrics_.row_height + 2),
                                  colors::rgb(140, 140, 150), row_title(lane_row), nullptr, 0.0f, &label_clip);
                }
            draw_lane_rows(draw, lane, placement.lane, placement, {x0, top, timeline_width, mouse_x, mouse_y});
            const StreamOverlay* overlay = gpu_analysis ? gpu_analysis->overlay(placement.lane) : nullptr;
            if (overlay && placement.idle_offset >= 0.0f) {
                const float idle_top = top + placement.idle_offset;
                draw->AddText(nullptr, 0.0f, ImVec2(origin.x + 20, idle_top + 2), colors::rgb(140, 140, 150),
                              "idle gaps", nullptr, 0.0f, &label_clip);
                draw_idle_gaps(draw, *overlay, {x0, idle_top, timeline_width, mouse_x, mouse_y});
                lane_rects_.push_back(
                    {placement.lane, x0, idle_top, x0 + timeline_width, idle_top + metrics_.row_height, "idle"});
            }
            if (overlay && placement.queue_offset >= 0.0f) {
                const float queue_top = top + placement.queue_offset;
                char queue_label[64];
                std::snprintf(queue_label, sizeof queue_label, "queue  0 .. %.0f", overlay->queue_max);
                draw->AddText(nullptr, 0.0f, ImVec2(origin.x + 20, queue_top + 2), colors::rgb(140, 140, 150),
                              queue_label, nullptr, 0.0f, &label_clip);
                draw_queue(draw, *overlay, {x0, queue_top, timeline_width, mouse_x, mouse_y}, placement.queue_height);
                lane_rects_.push_back(
                    {placement.lane, x0, queue_top, x0 + timeline_width, queue_top + placement.queue_height, "queue"});
            }
            const SampleStackLane* stacks = placement.stack_rows > 0 ? model_->sample_stacks(placement.lane) : nullptr;
            if (stacks) {
                const float stack_top = top + placement.stack_offset;
                if (placement.stack_offset > 0.0f)  // a samples-only lane has its title there
                    draw->AddText(nullptr, 0.0f, ImVec2(origin.x + 20, stack_top + 2), colors::rgb(140, 140, 150),
                                  sample_tracks_.idle ? "samples (with idle)" : "samples", nullptr, 0.0f, &label_clip);
                draw_sample_stacks(draw, placement.lane, *stacks, placement.stack_rows,
                                   {x0, stack_top, timeline_width, mouse_x, mouse_y});
                lane_rects_.push_back({placement.lane, x0, stack_top, x0 + timeline_width,
                                       stack_top + static_cast<float>(placement.stack_rows) * metrics_.row_height,
                                       "stacks"});
            }
        }
    }
    if (lane_drag_.active() && lane_drag_.from < static_cast<int>(lane_order_.size())) {
        // Where the dragged lane will land, and its title under the pointer.
        const int to = lane_drop_index(lane_order_, placements_, lane_drag_.from, lane_drag_.pointer_y);
        const float marker_y =
            y_origin + lane_drop_marker_y(lane_order_, placements_, lane_drag_.from, to) - metrics_.lane_gap * 0.5f;
        draw->AddRectFilled(ImVec2(origin.x, marker_y - 1.0f), ImVec2(origin.x + width, marker_y + 1.0f),
                            colors::kSelection);
        const Lane& dragged = model_->lane(lane_order_[static_cast<std::size_t>(lane_drag_.from)].lane);
        draw->AddRectFilled(ImVec2(origin.x, mouse_y - 9.0f), ImVec2(x0 - 4.0f, mouse_y + 9.0f),
                            colors::rgb(60, 60, 80));
        draw->AddText(ImVec2(origin.x + 8, mouse_y - 7.0f), colors::rgb(255, 255, 255), dragged.title.c_str());
        counters_.primitives += 3;
    }
    if (diff_mode()) draw_step_markers(draw, x0, timeline_width, y_origin);
    draw->Flags = antialiased_flags;  // the flow arrow is a curve: smooth it
    draw_flow(draw, x0, y_origin);
    draw->Flags = antialiased_flags & ~kAntialiasing;
    if (selection_range_) {
        const float left = x0 + static_cast<float>(view_.time_to_x(selection_range_->begin_ns));
        const float right = x0 + static_cast<float>(view_.time_to_x(selection_range_->end_ns));
        draw->AddRectFilled(ImVec2(left, lanes_top), ImVec2(right, origin.y + height), IM_COL32(120, 160, 255, 50));
        draw->AddLine(ImVec2(left, lanes_top), ImVec2(left, origin.y + height), IM_COL32(120, 160, 255, 200));
        draw->AddLine(ImVec2(right, lanes_top), ImVec2(right, origin.y + height), IM_COL32(120, 160, 255, 200));
        counters_.primitives += 3;
    }
    opaque_layer(draw);
    draw->AddCallback(ImDrawCallback_ResetRenderState, nullptr);  // blending back on
    g_layers.Merge(draw);
    draw->PopClipRect();
    draw->PopClipRect();
    draw->Flags = antialiased_flags;
    return clicked_title;
}

// --- Clicks, tooltip, title menu -------------------------------------------------
void ViewerApp::handle_timeline_clicks(const TimelineFrame& frame, int clicked_title) {
    const float x0 = frame.x0;
    const float mouse_x = frame.mouse_x, mouse_y = frame.mouse_y;
    const bool hovered = frame.hovered;
    const float y_origin = frame.lanes_top - scroll_y_;
    // A press on a lane title may become a drag that reorders lanes (lane_layout.h);
    // released within a few pixels it is a click that collapses/expands the lane.
    if (hovered && ImGui::IsMouseClicked(ImGuiMouseButton_Left) && mouse_x < x0 && clicked_title >= 0)
        lane_drag_begin(lane_drag_, clicked_title, mouse_y - y_origin);
    bool lane_dragged = false;
    if (lane_drag_.from >= 0 && !ImGui::IsMouseDown(ImGuiMouseButton_Left)) {
        lane_dragged = lane_drag_.active();
        lane_drag_end(lane_drag_, lane_order_, placements_);
    }
    if (ImGui::IsItemDeactivated() && !dragging_pan_ && !lane_dragged &&
        ImGui::IsMouseReleased(ImGuiMouseButton_Left)) {
        if (mouse_x < x0 && clicked_title >= 0) {
            lane_order_[static_cast<std::size_t>(clicked_title)].collapsed =
                !lane_order_[static_cast<std::size_t>(clicked_title)].collapsed;
        } else if (hovered_.valid()) {
            select_event(hovered_, false);
        } else if (hovered_stack_.valid() && hovered_stack_item_.count == 1) {
            select_stack_box(hovered_stack_);
        } else if (auto memory = std::find_if(lane_rects_.begin(), lane_rects_.end(),
                                              [&](const LaneRect& r) {
                                                  return mouse_x >= r.x0 && mouse_x < r.x1 && mouse_y >= r.y0 &&
                                                         mouse_y < r.y1 &&
                                                         model_->lane(r.lane).kind == LaneKind::memory;
                                              });
                   memory != lane_rects_.end()) {
            select_memory_time(memory->lane, view_.x_to_time(mouse_x - memory->x0));
        } else {
            clear_selection();
        }
    }
    if (!ImGui::IsMouseDown(ImGuiMouseButton_Left) && dragging_pan_) {
        dragging_pan_ = false;
        view_.commit_history();
    }
    if (hovered && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left) && hovered_.valid()) {
        const TimelineEvent* event = model_->event(hovered_);
        const trace::TimeNs pad = event->duration_ns() / 10 + 1;
        view_.show({event->start_ns - pad, event->end_ns + pad});
    } else if (hovered && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left) && hovered_stack_.valid()) {
        const trace::TimeNs pad = (hovered_stack_item_.end_ns - hovered_stack_item_.start_ns) / 10 + 1;
        view_.show({hovered_stack_item_.start_ns - pad, hovered_stack_item_.end_ns + pad});
    } else if (hovered && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left) && hovered_gap_) {
        const trace::TimeNs pad = (hovered_gap_->end_ns - hovered_gap_->start_ns) / 10 + 1;
        view_.show({hovered_gap_->start_ns - pad, hovered_gap_->end_ns + pad});
    }
    static int menu_lane = -1;
    if (hovered && ImGui::IsMouseClicked(ImGuiMouseButton_Right) && mouse_x < x0 && clicked_title >= 0) {
        menu_lane = clicked_title;
        ImGui::OpenPopup("lane_menu");
    }
    if (ImGui::BeginPopup("lane_menu")) {
        const int last = static_cast<int>(lane_order_.size()) - 1;
        if (menu_lane >= 0 && menu_lane <= last) {
            if (ImGui::MenuItem("Move up")) move_lane(lane_order_, menu_lane, menu_lane - 1);
            if (ImGui::MenuItem("Move down")) move_lane(lane_order_, menu_lane, menu_lane + 1);
            if (ImGui::MenuItem("Move to top")) move_lane(lane_order_, menu_lane, 0);
            if (ImGui::MenuItem("Move to bottom")) move_lane(lane_order_, menu_lane, last);
        }
        ImGui::EndPopup();
    }
    if (hovered && !dragging_pan_ && !hovered_.valid() && hovered_fold_count_ == 0 && hovered_gap_) {
        const GapItem& item = *hovered_gap_;
        ImGui::BeginTooltip();
        if (hovered_gap_category_) {
            ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::idle_color(*hovered_gap_category_)), "%s",
                               analysis::idle_category_name(*hovered_gap_category_));
            ImGui::SameLine();
            ImGui::Text("idle %s", format_duration(static_cast<double>(item.end_ns - item.start_ns)).c_str());
            ImGui::TextDisabled("%s", idle_category_meaning(*hovered_gap_category_));
            ImGui::Text("start %s", format_duration(static_cast<double>(item.start_ns - model_->begin_ns())).c_str());
        } else {
            const trace::TimeNs idle = item.idle_ns[0] + item.idle_ns[1] + item.idle_ns[2];
            const double span = static_cast<double>(std::max<trace::TimeNs>(1, item.end_ns - item.start_ns));
            ImGui::Text("%u idle gap%s starting in these %s: %s idle (%.0f%%)", item.count, item.count == 1 ? "" : "s",
                        format_duration(span).c_str(), format_duration(static_cast<double>(idle)).c_str(),
                        std::min(100.0, 100.0 * static_cast<double>(idle) / span));
            for (int category = 0; category < kIdleCategoryCount; ++category) {
                const trace::TimeNs time = item.idle_ns[static_cast<std::size_t>(category)];
                if (time <= 0) continue;
                const auto kind = static_cast<IdleCategory>(category);
                ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::idle_color(kind)), "  %-11s",
                                   analysis::idle_category_name(kind));
                ImGui::SameLine();
                ImGui::Text("%s", format_duration(static_cast<double>(time)).c_str());
            }
            ImGui::TextDisabled("zoom in to see each gap");
        }
        ImGui::EndTooltip();
    } else if (hovered && !dragging_pan_ && !hovered_.valid() && hovered_fold_count_ == 0 && hovered_queue_) {
        const QueueHover& queue = *hovered_queue_;
        ImGui::BeginTooltip();
        if (queue.min_value == queue.max_value)
            ImGui::Text("queue length %.0f", queue.max_value);
        else
            ImGui::Text("queue length %.0f to %.0f within this pixel", queue.min_value, queue.max_value);
        ImGui::TextDisabled("operations launched on this stream and not started yet (at most %.0f)", queue.max);
        ImGui::Text("at %s", format_duration(static_cast<double>(queue.time_ns - model_->begin_ns())).c_str());
        ImGui::EndTooltip();
    }
    if (hovered && !dragging_pan_ && hovered_stack_.valid()) draw_stack_tooltip();
    if (hovered && (hovered_.valid() || hovered_fold_count_ > 0) && !dragging_pan_) {
        ImGui::BeginTooltip();
        if (hovered_.valid()) {
            const TimelineEvent* event = model_->event(hovered_);
            ImGui::TextUnformatted(std::string(model_->name(event->name_id)).c_str());
            ImGui::TextDisabled("%s", event_kind_name(event->kind));
            ImGui::Text("duration %s", format_duration(static_cast<double>(event->duration_ns())).c_str());
            ImGui::Text("start %s", format_duration(static_cast<double>(event->start_ns - model_->begin_ns())).c_str());
            if ((event->kind == EventKind::memcpy || event->kind == EventKind::memset) && event->value) {
                ImGui::Text("%s", format_bytes(static_cast<double>(event->value)).c_str());
                if (event->duration_ns() > 0)
                    ImGui::Text("%s/s", format_bytes(static_cast<double>(event->value) * 1e9 /
                                                     static_cast<double>(event->duration_ns()))
                                            .c_str());
            }
        } else {
            ImGui::Text("%d events (zoom in to see them)", hovered_fold_count_);
        }
        ImGui::EndTooltip();
    }
}

void ViewerApp::draw_step_markers(ImDrawList* draw, float x0, float width, float y_origin) {
    // A thin line at each step start over the lanes of its run: after alignment the
    // aligned step's lines meet, and a step that drifts shows how far.
    if (!run_diff_ || !run_diff_->error.empty()) return;
    for (int file = 0; file < 2; ++file) {
        float top = 1e30f, bottom = -1e30f;
        for (const LanePlacement& placement : placements_) {
            if (placement.lane < 0 || model_->lane(placement.lane).file_index != file) continue;
            top = std::min(top, y_origin + placement.y);
            bottom = std::max(bottom, y_origin + placement.y + placement.height);
        }
        if (top > bottom) continue;
        const auto& steps = file == 0 ? run_diff_->a_steps : run_diff_->b_steps;
        const trace::TimeNs shift = model_->files()[static_cast<std::size_t>(file)].shift_ns;
        for (std::size_t index = 0; index < steps.size(); ++index) {
            const float x = x0 + static_cast<float>(view_.time_to_x(steps[index].start_ns + shift));
            if (x < x0 || x > x0 + width) continue;
            const bool aligned = static_cast<int>(index) == diff_align_step_;
            draw->AddLine(ImVec2(x, top), ImVec2(x, bottom), aligned ? colors::kStepMarkerAligned : colors::kStepMarker,
                          aligned ? 2.0f : 1.0f);
            ++counters_.primitives;
        }
    }
}

}  // namespace ember::viewer
