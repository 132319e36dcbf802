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
    float queue_height = 28.0f;  // the queue-length track under a stream
};

// What stream lanes show below their events once the GPU analysis is there
// (gpu_analysis.h): the idle gaps coloured by category, the queue-length track.
struct StreamTracks {
    bool idle_gaps = true;
    bool queue_length = true;
};

// What thread lanes show below their events once the stack samples are loaded
// (sample_stacks.h): the sampled stacks, with or without the idle samples, at most
// `max_depth` frames deep (the outermost ones; deeper frames are cut, not squeezed).
struct SampleTracks {
    bool stacks = true;
    bool idle = false;  // as `ember stats`: active samples unless asked (--idle)
    int max_depth = 12;
};

struct LanePlacement {
    int lane = -1;      // -1 for a group header
    std::string group;  // headers: the group's title
    float y = 0.0f;     // from the top of the lane area
    float height = 0.0f;
    int rows_shown = 0;  // rows drawn (1 when collapsed: the outermost row)
    // Expanded stream lanes with a GPU analysis: the idle-gap row and the queue-length
    // track below the event rows, as offsets from `y` (-1 when not shown).
    float idle_offset = -1.0f;
    float queue_offset = -1.0f;
    float queue_height = 0.0f;
    // Thread lanes with sampled stacks: the chart's top as an offset from `y` and its
    // rows (depths 0..stack_rows-1); -1 and 0 when not shown. A collapsed lane shows
    // its outermost stack row only when it has no event rows.
    float stack_offset = -1.0f;
    int stack_rows = 0;
};

// Model order: lanes as the model created them (processes, GPUs, counters; per file).
std::vector<LaneDisplay> default_lane_order(const TraceModel& model);
// Adds the lanes `order` does not list yet (made by a live refresh) after the last
// listed lane of their group, or at the end when the group is new.
void extend_lane_order(std::vector<LaneDisplay>& order, const TraceModel& model);
// Moves the entry at `from` to position `to` (both clamped).
void move_lane(std::vector<LaneDisplay>& order, int from, int to);
std::vector<LanePlacement> layout_lanes(const TraceModel& model, const std::vector<LaneDisplay>& order,
                                        const LayoutMetrics& metrics, const StreamTracks& tracks = {},
                                        const SampleTracks& samples = {});
// Total height of a layout.
float layout_height(const std::vector<LanePlacement>& placements);

// --- Drag and drop of lane titles ------------------------------------------------------
// Press on a title, move past a few pixels, release: the lane moves to where the
// pointer is. Below the threshold it stays a click (collapse/expand). All y values
// are in the layout's coordinates (LanePlacement::y, i.e. screen y minus the lane
// area's origin and scroll).
struct LaneDrag {
    int from = -1;  // order index of the pressed lane; -1 when none
    float press_y = 0.0f;
    float pointer_y = 0.0f;
    bool moved = false;  // went past the threshold: a drag, not a click
    bool active() const { return from >= 0 && moved; }
};

void lane_drag_begin(LaneDrag& drag, int order_index, float y);
void lane_drag_update(LaneDrag& drag, float y, float threshold_pixels = 4.0f);
// Where the lane at order index `from` goes when dropped at `y`: the position for
// move_lane(order, from, result), i.e. the number of other lanes whose middle lies
// above `y`. Returns `from` when `from` is out of range.
int lane_drop_index(const std::vector<LaneDisplay>& order, const std::vector<LanePlacement>& placements, int from,
                    float y);
// The y of the insertion line to draw for a drop at position `to` (top of the lane
// that will follow the dropped one, or below the last lane).
float lane_drop_marker_y(const std::vector<LaneDisplay>& order, const std::vector<LanePlacement>& placements, int from,
                         int to);
// Ends the drag: when it moved past the threshold, moves the lane and returns true;
// a click (or no drag) changes nothing and returns false. Resets `drag` either way.
bool lane_drag_end(LaneDrag& drag, std::vector<LaneDisplay>& order, const std::vector<LanePlacement>& placements);

}  // namespace ember::viewer
