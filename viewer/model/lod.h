// lod.h: level of detail for one row of the timeline.
//
// The visible part of a row is found by binary search; then runs of events narrower
// than `min_pixels` are folded into one "N events" item, jumping over each run by
// binary search (Tracy's approach) instead of visiting its events. The work per row
// is O((pixels / min_pixels) * log n) whatever the number of events, so a frame
// draws a few thousand items at any zoom. Folding never hides an event: every
// visible event is either its own item or inside a folded item's time span, and the
// counts of the items add up to the visible events.
#pragma once

#include "viewer/model/gpu_analysis.h"
#include "viewer/model/sample_stacks.h"
#include "viewer/model/trace_model.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ember::viewer {

struct DrawItem {
    trace::TimeNs start_ns = 0;
    trace::TimeNs end_ns = 0;
    std::uint32_t first_index = 0;  // index in the row of the first event
    std::uint32_t count = 0;        // 1: one event; more: a folded run
};

struct LodParams {
    trace::TimeNs view_begin_ns = 0;
    trace::TimeNs view_end_ns = 0;
    double ns_per_pixel = 1.0;
    double min_pixels = 3.0;  // events narrower than this fold with their neighbours
};

// Indexes [first, last) of the row's events that may overlap [begin_ns, end_ns):
// every overlapping event is inside (exactly the overlapping ones for
// non-overlapping rows).
struct IndexRange {
    std::size_t first = 0;
    std::size_t last = 0;
    std::size_t size() const { return last - first; }
};
IndexRange visible_range(const Row& row, trace::TimeNs begin_ns, trace::TimeNs end_ns);

// Appends the items of the visible part of `row` to `out` (which it does not clear,
// so one buffer serves a whole frame without allocating).
void fold_row(const Row& row, const LodParams& params, std::vector<DrawItem>& out);

// The same folding for one depth of a thread's sampled stacks (sample_stacks.h): its
// boxes never overlap, so both ends of the visible part are binary searches, and a run
// of boxes narrower than `min_pixels` (callees that change every sample, zoomed out)
// becomes one item. `first_index` and `count` index the row's boxes.
void fold_stack_row(const StackRow& row, const LodParams& params, std::vector<DrawItem>& out);

// Idle gaps of a stream lane (gpu_analysis.h) for the zoom level. A gap at least
// `min_pixels` wide is its own item. Narrower gaps are binned: each bin is `min_pixels`
// wide, aligned to multiples of its duration (so bins stay put while the view pans),
// and becomes one item carrying the idle time of its gaps per category (from the
// overlay's prefix sums). The UI draws a bin as the share of each category, so a busy
// stream with a little launch overhead reads as a low bar and a host-bound stretch as
// a tall one, column by column, instead of one colour over mostly busy time. Items
// take consecutive gaps in order; their counts add up to the visible gaps; there are
// at most about two per `min_pixels` of width.
struct GapItem {
    trace::TimeNs start_ns = 0;  // a gap: the gap; a bin: the bin
    trace::TimeNs end_ns = 0;
    std::uint32_t first_index = 0;  // index of the first gap in StreamOverlay::gaps
    std::uint32_t count = 0;        // gaps in the item
    bool binned = false;            // a bin of narrow gaps, not one gap
    IdleSplit idle_ns{};            // idle time of the item's gaps per category
};
void fold_gaps(const StreamOverlay& overlay, const LodParams& params, std::vector<GapItem>& out);

// Counter lanes: one (min, max) pair per pixel column, found by binary search per
// column. Columns without samples repeat the last value before them (a step plot).
struct CounterColumn {
    double min_value = 0.0;
    double max_value = 0.0;
    bool has_value = false;
};
void fold_counter(const std::vector<CounterPoint>& points, trace::TimeNs view_begin_ns, double ns_per_pixel,
                  int columns, std::vector<CounterColumn>& out);

}  // namespace ember::viewer
