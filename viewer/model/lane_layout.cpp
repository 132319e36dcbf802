// lane_layout.cpp: lane order and vertical placement (lane_layout.h).
#include "viewer/model/lane_layout.h"

#include <algorithm>
#include <cmath>

namespace ember::viewer {

std::vector<LaneDisplay> default_lane_order(const TraceModel& model) {
    std::vector<LaneDisplay> order;
    for (int lane = 0; lane < model.lane_count(); ++lane) order.push_back({lane, false});
    return order;
}

void extend_lane_order(std::vector<LaneDisplay>& order, const TraceModel& model) {
    std::vector<bool> listed(static_cast<std::size_t>(model.lane_count()), false);
    for (const LaneDisplay& display : order)
        if (display.lane >= 0 && display.lane < model.lane_count())
            listed[static_cast<std::size_t>(display.lane)] = true;
    for (int lane = 0; lane < model.lane_count(); ++lane) {
        if (listed[static_cast<std::size_t>(lane)]) continue;
        const std::string& group = model.lane(lane).group;
        std::size_t position = order.size();
        for (std::size_t index = order.size(); index-- > 0;) {
            const int other = order[index].lane;
            if (other >= 0 && other < model.lane_count() && model.lane(other).group == group) {
                position = index + 1;
                break;
            }
        }
        order.insert(order.begin() + static_cast<std::ptrdiff_t>(position), LaneDisplay{lane, false});
    }
}

void move_lane(std::vector<LaneDisplay>& order, int from, int to) {
    if (order.empty()) return;
    const int last = static_cast<int>(order.size()) - 1;
    from = std::clamp(from, 0, last);
    to = std::clamp(to, 0, last);
    if (from == to) return;
    LaneDisplay moved = order[static_cast<std::size_t>(from)];
    order.erase(order.begin() + from);
    order.insert(order.begin() + to, moved);
}

std::vector<LanePlacement> layout_lanes(const TraceModel& model, const std::vector<LaneDisplay>& order,
                                        const LayoutMetrics& metrics, const StreamTracks& tracks,
                                        const SampleTracks& samples) {
    std::vector<LanePlacement> placements;
    const GpuAnalysis* analysis = model.gpu_analysis();
    float y = 0.0f;
    const std::string* previous_group = nullptr;
    for (const LaneDisplay& display : order) {
        if (display.lane < 0 || display.lane >= model.lane_count()) continue;
        const Lane& lane = model.lane(display.lane);
        if (previous_group == nullptr || *previous_group != lane.group) {
            placements.push_back({-1, lane.group, y, metrics.group_header_height, 0});
            y += metrics.group_header_height;
            previous_group = &lane.group;
        }
        LanePlacement placement;
        placement.lane = display.lane;
        placement.y = y;
        if (lane.plots_values()) {
            placement.rows_shown = 1;
            placement.height = display.collapsed ? metrics.row_height : metrics.counter_height;
        } else {
            const bool ready = lane.ready.load(std::memory_order_acquire);
            const int rows = ready ? static_cast<int>(lane.rows.size()) : 1;
            const SampleStackLane* stacks = samples.stacks ? model.sample_stacks(display.lane) : nullptr;
            const int depth = stacks ? std::min(stacks->depth(samples.idle), std::max(samples.max_depth, 1)) : 0;
            placement.rows_shown = display.collapsed ? 1 : std::max(rows, 1);
            if (depth > 0 && rows == 0) placement.rows_shown = 0;  // samples only: the chart is the lane
            placement.height = static_cast<float>(placement.rows_shown) * metrics.row_height;
            if (depth > 0 && (!display.collapsed || rows == 0)) {
                placement.stack_offset = placement.height;
                placement.stack_rows = display.collapsed ? 1 : depth;
                placement.height += static_cast<float>(placement.stack_rows) * metrics.row_height;
            }
            const StreamOverlay* overlay = analysis && !display.collapsed ? analysis->overlay(display.lane) : nullptr;
            if (overlay && tracks.idle_gaps && !overlay->gaps.empty()) {
                placement.idle_offset = placement.height;
                placement.height += metrics.row_height;
            }
            if (overlay && tracks.queue_length && !overlay->queue.empty()) {
                placement.queue_offset = placement.height;
                placement.queue_height = metrics.queue_height;
                placement.height += metrics.queue_height;
            }
        }
        y += placement.height + metrics.lane_gap;
        placements.push_back(std::move(placement));
    }
    return placements;
}

float layout_height(const std::vector<LanePlacement>& placements) {
    if (placements.empty()) return 0.0f;
    const LanePlacement& last = placements.back();
    return last.y + last.height;
}

void lane_drag_begin(LaneDrag& drag, int order_index, float y) {
    drag.from = order_index;
    drag.press_y = y;
    drag.pointer_y = y;
    drag.moved = false;
}

void lane_drag_update(LaneDrag& drag, float y, float threshold_pixels) {
    if (drag.from < 0) return;
    drag.pointer_y = y;
    if (std::fabs(y - drag.press_y) > threshold_pixels) drag.moved = true;
}

namespace {

// The placement of `lane`, or nullptr when the layout skipped it.
const LanePlacement* placement_of(const std::vector<LanePlacement>& placements, int lane) {
    for (const LanePlacement& placement : placements)
        if (placement.lane == lane) return &placement;
    return nullptr;
}

}  // namespace

int lane_drop_index(const std::vector<LaneDisplay>& order, const std::vector<LanePlacement>& placements, int from,
                    float y) {
    if (from < 0 || from >= static_cast<int>(order.size())) return from;
    // Positions count the list without the dragged lane, as move_lane does.
    int position = 0, to = 0;
    for (int index = 0; index < static_cast<int>(order.size()); ++index) {
        if (index == from) continue;
        const LanePlacement* placement = placement_of(placements, order[static_cast<std::size_t>(index)].lane);
        if (placement != nullptr && placement->y + placement->height * 0.5f < y) to = position + 1;
        ++position;
    }
    return to;
}

float lane_drop_marker_y(const std::vector<LaneDisplay>& order, const std::vector<LanePlacement>& placements, int from,
                         int to) {
    int position = 0;
    float bottom = 0.0f;
    for (int index = 0; index < static_cast<int>(order.size()); ++index) {
        if (index == from) continue;
        const LanePlacement* placement = placement_of(placements, order[static_cast<std::size_t>(index)].lane);
        if (placement == nullptr) continue;
        if (position == to) return placement->y;
        bottom = placement->y + placement->height;
        ++position;
    }
    return bottom;
}

bool lane_drag_end(LaneDrag& drag, std::vector<LaneDisplay>& order, const std::vector<LanePlacement>& placements) {
    const LaneDrag finished = drag;
    drag = LaneDrag{};
    if (!finished.active() || finished.from >= static_cast<int>(order.size())) return false;
    const int to = lane_drop_index(order, placements, finished.from, finished.pointer_y);
    if (to == finished.from) return false;
    move_lane(order, finished.from, to);
    return true;
}

}  // namespace ember::viewer
