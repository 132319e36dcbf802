// lane_layout.h: the order, collapse state and vertical placement of the timeline's
// lanes. The UI owns a LaneDisplay list (what the user reordered/collapsed); the
// layout turns it into y positions, with a header where the group (process, GPU,
// counters of a rank) changes.
#pragma once

#include "viewer/model/trace_model.h"

#include <string>
#include <vector>

namespace ember::viewer {

struct LaneDisplay {
    int lane = 0;
    bool collapsed = false;
};

struct LayoutMetrics {
    float row_height = 18.0f;
    float counter_height = 44.0f;
    float group_header_height = 20.0f;
    float lane_gap = 4.0f;
};

struct LanePlacement {
    int lane = -1;              // -1 for a group header
    std::string group;          // headers: the group's title
    float y = 0.0f;             // from the top of the lane area
    float height = 0.0f;
    int rows_shown = 0;         // rows drawn (1 when collapsed: the outermost row)
};

// Model order: lanes as the model created them (processes, GPUs, counters; per file).
std::vector<LaneDisplay> default_lane_order(const TraceModel& model);
// Moves the entry at `from` to position `to` (both clamped).
void move_lane(std::vector<LaneDisplay>& order, int from, int to);
std::vector<LanePlacement> layout_lanes(const TraceModel& model, const std::vector<LaneDisplay>& order,
                                        const LayoutMetrics& metrics);
// Total height of a layout.
float layout_height(const std::vector<LanePlacement>& placements);

}  // namespace ember::viewer
