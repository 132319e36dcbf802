// intervals.h: measure arithmetic on sets of time intervals — the union of a list of
// [start, end) intervals, and the length of unions, intersections and differences of
// such unions. Every breakdown of GPU time (temporal, kernel types, overlap, the
// TraceLens timeline) is this arithmetic over per-class unions, so it is written once.
#pragma once

#include "profiler/trace/events.h"

#include <algorithm>
#include <vector>

namespace ember::analysis {

struct Interval {
    trace::TimeNs start_ns = 0;
    trace::TimeNs end_ns = 0;
    trace::TimeNs length() const { return end_ns - start_ns; }
};

// Sorted, disjoint, non-touching intervals: the union of whatever built it.
using IntervalUnion = std::vector<Interval>;

// The union of `intervals` (any order; empty and reversed intervals contribute
// nothing). Intervals that touch (one ends where the next starts) merge.
inline IntervalUnion union_of(std::vector<Interval> intervals) {
    auto by_start = [](const Interval& a, const Interval& b) { return a.start_ns < b.start_ns; };
    // GPU work arrives in start order: checking is linear, sorting is not.
    if (!std::is_sorted(intervals.begin(), intervals.end(), by_start))
        std::sort(intervals.begin(), intervals.end(), by_start);
    IntervalUnion merged;
    for (const Interval& interval : intervals) {
        if (interval.end_ns <= interval.start_ns) continue;
        if (!merged.empty() && interval.start_ns <= merged.back().end_ns)
            merged.back().end_ns = std::max(merged.back().end_ns, interval.end_ns);
        else
            merged.push_back(interval);
    }
    return merged;
}

inline trace::TimeNs measure(const IntervalUnion& set) {
    trace::TimeNs total = 0;
    for (const Interval& interval : set) total += interval.length();
    return total;
}

// a ∩ b of two unions.
inline IntervalUnion intersection(const IntervalUnion& a, const IntervalUnion& b) {
    IntervalUnion result;
    std::size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
        const trace::TimeNs start = std::max(a[i].start_ns, b[j].start_ns);
        const trace::TimeNs end = std::min(a[i].end_ns, b[j].end_ns);
        if (start < end) result.push_back({start, end});
        if (a[i].end_ns < b[j].end_ns)
            ++i;
        else
            ++j;
    }
    return result;
}

// a − b of two unions.
inline IntervalUnion difference(const IntervalUnion& a, const IntervalUnion& b) {
    IntervalUnion result;
    std::size_t j = 0;
    for (const Interval& interval : a) {
        trace::TimeNs start = interval.start_ns;
        while (j < b.size() && b[j].end_ns <= start) ++j;
        std::size_t k = j;
        while (k < b.size() && b[k].start_ns < interval.end_ns) {
            if (b[k].start_ns > start) result.push_back({start, b[k].start_ns});
            start = std::max(start, b[k].end_ns);
            ++k;
        }
        if (start < interval.end_ns) result.push_back({start, interval.end_ns});
    }
    return result;
}

// a ∪ b of two unions.
inline IntervalUnion union_with(const IntervalUnion& a, const IntervalUnion& b) {
    IntervalUnion all = a;
    all.insert(all.end(), b.begin(), b.end());
    return union_of(std::move(all));
}

}  // namespace ember::analysis
