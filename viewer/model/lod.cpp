// lod.cpp: visible ranges and folding of tiny events (lod.h).
#include "viewer/model/lod.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ember::viewer {

using trace::TimeNs;

namespace {

// Events starting at or after the window's end are never visible: [0, last).
template <typename Interval>
std::size_t visible_end(const std::vector<Interval>& events, TimeNs end_ns) {
    return static_cast<std::size_t>(std::partition_point(events.begin(), events.end(),
                                                         [end_ns](const Interval& e) { return e.start_ns < end_ns; }) -
                                    events.begin());
}

// Intervals sorted by start that never overlap: ends are sorted too, so everything
// that ended before the window is skipped by binary search.
template <typename Interval>
IndexRange non_overlapping_range(const std::vector<Interval>& events, TimeNs begin_ns, TimeNs end_ns) {
    IndexRange range;
    range.last = visible_end(events, end_ns);
    range.first = static_cast<std::size_t>(
        std::partition_point(events.begin(), events.begin() + static_cast<std::ptrdiff_t>(range.last),
                             [begin_ns](const Interval& e) { return e.start_ns < begin_ns && e.end_ns <= begin_ns; }) -
        events.begin());
    return range;
}

}  // namespace

IndexRange visible_range(const Row& row, TimeNs begin_ns, TimeNs end_ns) {
    const std::vector<TimelineEvent>& events = row.events;
    if (row.non_overlapping) return non_overlapping_range(events, begin_ns, end_ns);
    IndexRange range;
    range.last = visible_end(events, end_ns);
    if (row.running_max_end.size() == events.size()) {
        // Everything up to the first index whose running max end passes begin_ns ended
        // before the window (instants at begin_ns excepted: they stay).
        const auto& ends = row.running_max_end;
        range.first = static_cast<std::size_t>(
            std::partition_point(ends.begin(), ends.begin() + static_cast<std::ptrdiff_t>(range.last),
                                 [begin_ns](TimeNs end) { return end < begin_ns; }) -
            ends.begin());
    } else {
        // No event lasts longer than max_duration: nothing starting before
        // begin - max_duration can reach the window.
        const TimeNs earliest = begin_ns - row.max_duration_ns - 1;
        range.first = static_cast<std::size_t>(
            std::partition_point(events.begin(), events.begin() + static_cast<std::ptrdiff_t>(range.last),
                                 [earliest](const TimelineEvent& e) { return e.start_ns < earliest; }) -
            events.begin());
    }
    if (range.first > range.last) range.first = range.last;
    return range;
}

namespace {

// The folding of fold_row over the visible `range` of `events` (sorted by start); for
// rows that may overlap, `running_max_end` as Row keeps it (empty: scan).
template <typename Interval>
void fold_intervals(const std::vector<Interval>& events, IndexRange range, bool non_overlapping,
                    const std::vector<TimeNs>& running_max_end, const LodParams& params, std::vector<DrawItem>& out) {
    const double min_ns_real = std::max(1.0, params.min_pixels * params.ns_per_pixel);
    const TimeNs min_ns = static_cast<TimeNs>(std::min(min_ns_real, 9.0e18));
    auto tiny = [min_ns](const Interval& e) { return e.end_ns - e.start_ns < min_ns; };
    // Galloping search: the answer is usually a few events ahead, so probe 1, 2, 4, ...
    // ahead first and binary-search only the last doubling. On rows of millions of
    // events this keeps the probes near each other (in cache) instead of spreading
    // log2(n) cache misses over the whole row for every folded run.
    auto first_starting_at_or_after = [&events](std::size_t from, std::size_t to, TimeNs time) {
        std::size_t low = from, step = 1;
        while (low + step < to && events[low + step].start_ns < time) {
            low += step;
            step *= 2;
        }
        const std::size_t high = std::min(to, low + step);
        return static_cast<std::size_t>(std::partition_point(events.begin() + static_cast<std::ptrdiff_t>(low),
                                                             events.begin() + static_cast<std::ptrdiff_t>(high),
                                                             [time](const Interval& e) { return e.start_ns < time; }) -
                                        events.begin());
    };

    std::size_t index = range.first;
    while (index < range.last) {
        const Interval& event = events[index];
        if (!tiny(event)) {
            out.push_back({event.start_ns, event.end_ns, static_cast<std::uint32_t>(index), 1});
            ++index;
            continue;
        }
        // A run of tiny events: take every event that starts within min_ns of the
        // run's end, by binary search, until the gap is wider than min_ns or a wide
        // event comes.
        TimeNs group_end = event.end_ns;
        std::size_t next = index + 1;
        while (next < range.last) {
            const TimeNs reach = group_end > std::numeric_limits<TimeNs>::max() - min_ns
                                     ? std::numeric_limits<TimeNs>::max()
                                     : group_end + min_ns;
            std::size_t beyond = first_starting_at_or_after(next, range.last, reach);
            if (beyond == next) break;  // a gap of at least min_ns
            bool stop = false;
            if (!tiny(events[beyond - 1])) {  // a wide event ends the run; it draws itself
                --beyond;
                stop = true;
            }
            if (beyond > next) {
                if (non_overlapping)
                    group_end = std::max(group_end, events[beyond - 1].end_ns);
                else if (running_max_end.size() == events.size())
                    group_end = std::max(group_end, running_max_end[beyond - 1]);
                else
                    for (std::size_t k = next; k < beyond; ++k) group_end = std::max(group_end, events[k].end_ns);
            }
            next = beyond;
            if (stop) break;
        }
        out.push_back(
            {event.start_ns, group_end, static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(next - index)});
        index = next;
    }
}

}  // namespace

void fold_row(const Row& row, const LodParams& params, std::vector<DrawItem>& out) {
    fold_intervals(row.events, visible_range(row, params.view_begin_ns, params.view_end_ns), row.non_overlapping,
                   row.running_max_end, params, out);
}

void fold_stack_row(const StackRow& row, const LodParams& params, std::vector<DrawItem>& out) {
    static const std::vector<TimeNs> kNoRunningMax;
    fold_intervals(row.boxes, non_overlapping_range(row.boxes, params.view_begin_ns, params.view_end_ns), true,
                   kNoRunningMax, params, out);
}

void fold_gaps(const StreamOverlay& overlay, const LodParams& params, std::vector<GapItem>& out) {
    const std::vector<IdleGap>& gaps = overlay.gaps;
    // Gaps are sorted and disjoint, so their ends are sorted too: both bounds of the
    // visible part are binary searches.
    const std::size_t first = static_cast<std::size_t>(
        std::partition_point(gaps.begin(), gaps.end(),
                             [&](const IdleGap& gap) { return gap.end_ns <= params.view_begin_ns; }) -
        gaps.begin());
    const std::size_t last = static_cast<std::size_t>(
        std::partition_point(gaps.begin() + static_cast<std::ptrdiff_t>(first), gaps.end(),
                             [&](const IdleGap& gap) { return gap.start_ns < params.view_end_ns; }) -
        gaps.begin());
    const double min_ns_real = std::max(1.0, params.min_pixels * params.ns_per_pixel);
    const TimeNs min_ns = static_cast<TimeNs>(std::min(min_ns_real, 1.0e18));
    auto tiny = [min_ns](const IdleGap& gap) { return gap.end_ns - gap.start_ns < min_ns; };
    std::size_t index = first;
    while (index < last) {
        const IdleGap& gap = gaps[index];
        if (!tiny(gap)) {
            GapItem item;
            item.start_ns = gap.start_ns;
            item.end_ns = gap.end_ns;
            item.first_index = static_cast<std::uint32_t>(index);
            item.count = 1;
            item.idle_ns[static_cast<std::size_t>(overlay.categories[index])] = gap.duration_ns();
            out.push_back(item);
            ++index;
            continue;
        }
        // The bin holding this gap's start (floor division: times may be negative).
        TimeNs bin_start = gap.start_ns / min_ns * min_ns;
        if (bin_start > gap.start_ns) bin_start -= min_ns;
        const TimeNs bin_end = bin_start > std::numeric_limits<TimeNs>::max() - min_ns
                                   ? std::numeric_limits<TimeNs>::max()
                                   : bin_start + min_ns;
        // Every gap starting in the bin joins it, found by galloping then binary search
        // (zoomed out a bin may hold millions). Only the last of them can be wide: a
        // wide gap ends past the bin, so the one after it starts past the bin too.
        std::size_t low = index, step = 1;
        while (low + step < last && gaps[low + step].start_ns < bin_end) {
            low += step;
            step *= 2;
        }
        std::size_t beyond = static_cast<std::size_t>(
            std::partition_point(gaps.begin() + static_cast<std::ptrdiff_t>(low),
                                 gaps.begin() + static_cast<std::ptrdiff_t>(std::min(last, low + step)),
                                 [bin_end](const IdleGap& g) { return g.start_ns < bin_end; }) -
            gaps.begin());
        if (beyond - 1 > index && !tiny(gaps[beyond - 1])) --beyond;  // it draws itself
        GapItem item;
        item.start_ns = bin_start;
        item.end_ns = bin_end;
        item.first_index = static_cast<std::uint32_t>(index);
        item.count = static_cast<std::uint32_t>(beyond - index);
        item.binned = true;
        item.idle_ns = overlay.idle_between(index, beyond);
        out.push_back(item);
        index = beyond;
    }
}

void fold_counter(const std::vector<CounterPoint>& points, TimeNs view_begin_ns, double ns_per_pixel, int columns,
                  std::vector<CounterColumn>& out) {
    out.assign(static_cast<std::size_t>(std::max(columns, 0)), CounterColumn{});
    if (points.empty()) return;
    auto first_at_or_after = [&points](std::size_t from, TimeNs time) {
        return static_cast<std::size_t>(
            std::partition_point(points.begin() + static_cast<std::ptrdiff_t>(from), points.end(),
                                 [time](const CounterPoint& p) { return p.time_ns < time; }) -
            points.begin());
    };
    std::size_t index = first_at_or_after(0, view_begin_ns);
    for (int column = 0; column < columns; ++column) {
        const auto column_end = static_cast<TimeNs>(static_cast<double>(view_begin_ns) + (column + 1) * ns_per_pixel);
        const std::size_t end = first_at_or_after(index, column_end);
        CounterColumn& cell = out[static_cast<std::size_t>(column)];
        if (end > index) {
            // Many samples in one column: their min and max are all a pixel can show.
            // Scanning is bounded by visiting each sample once per frame only when
            // zoomed in; zoomed out, sample at most 64 evenly spaced points.
            const std::size_t count = end - index;
            const std::size_t stride = count > 64 ? count / 64 : 1;
            cell.min_value = cell.max_value = points[index].value;
            for (std::size_t k = index; k < end; k += stride) {
                cell.min_value = std::min(cell.min_value, points[k].value);
                cell.max_value = std::max(cell.max_value, points[k].value);
            }
            cell.has_value = true;
        } else if (index > 0) {
            cell.min_value = cell.max_value = points[index - 1].value;
            cell.has_value = true;
        }
        index = end;
    }
}

}  // namespace ember::viewer
