// lod_test.cpp: folding never hides an event, counts add up, and the number of items
// is bounded by the pixels whatever the number of events.
#include "viewer/model/lod.h"

#include <gtest/gtest.h>

#include <random>

namespace ember::viewer {
namespace {

// Non-overlapping events with random durations and gaps (a mix of tiny and wide).
Row random_row(std::size_t count, std::uint32_t seed) {
    std::mt19937_64 random(seed);
    Row row;
    trace::TimeNs time = 0;
    for (std::size_t i = 0; i < count; ++i) {
        const bool wide = random() % 50 == 0;
        const trace::TimeNs duration = wide ? 100'000 + static_cast<trace::TimeNs>(random() % 1'000'000)
                                            : 1 + static_cast<trace::TimeNs>(random() % 2'000);
        time += static_cast<trace::TimeNs>(random() % 3'000);
        TimelineEvent event;
        event.start_ns = time;
        event.end_ns = time + duration;
        row.events.push_back(event);
        time += duration;
    }
    for (const TimelineEvent& event : row.events)
        row.max_duration_ns = std::max(row.max_duration_ns, event.duration_ns());
    return row;
}

bool overlaps(const TimelineEvent& event, trace::TimeNs begin, trace::TimeNs end) {
    return event.start_ns < end &&
           (event.end_ns > begin || (event.start_ns == event.end_ns && event.start_ns >= begin));
}

void check_folding(const Row& row, const LodParams& params) {
    std::vector<DrawItem> items;
    fold_row(row, params, items);
    const IndexRange visible = visible_range(row, params.view_begin_ns, params.view_end_ns);
    // Every overlapping event lies inside the visible index range.
    for (std::size_t i = 0; i < row.events.size(); ++i)
        if (overlaps(row.events[i], params.view_begin_ns, params.view_end_ns)) {
            ASSERT_GE(i, visible.first);
            ASSERT_LT(i, visible.last);
        }
    // Items tile the visible range in order, counts add up, and each item's span
    // covers all its events.
    std::size_t next = visible.first;
    std::uint64_t counted = 0;
    for (const DrawItem& item : items) {
        ASSERT_EQ(item.first_index, next);
        ASSERT_GE(item.count, 1u);
        for (std::size_t i = item.first_index; i < item.first_index + item.count; ++i) {
            ASSERT_GE(row.events[i].start_ns, item.start_ns);
            ASSERT_LE(row.events[i].end_ns, item.end_ns);
        }
        if (item.count > 1 && row.non_overlapping) {
            // Only tiny events fold. (In overlapping rows a long event may sit inside a
            // run; the run's box then spans it: covered and counted, never hidden.)
            const double min_ns = params.min_pixels * params.ns_per_pixel;
            for (std::size_t i = item.first_index; i < item.first_index + item.count; ++i)
                ASSERT_LT(static_cast<double>(row.events[i].duration_ns()), min_ns);
        }
        next += item.count;
        counted += item.count;
    }
    EXPECT_EQ(next, visible.last);
    EXPECT_EQ(counted, visible.size());
}

TEST(LodTest, FoldingNeverHidesAnEventAndCountsAddUp) {
    const Row row = random_row(50'000, 7);
    const trace::TimeNs end = row.events.back().end_ns;
    const double widths[] = {1600.0, 300.0};
    for (double width : widths) {
        // Whole trace, then ever deeper zooms into the middle.
        for (trace::TimeNs span = end; span > 1000; span /= 7) {
            LodParams params;
            params.view_begin_ns = end / 2 - span / 2;
            params.view_end_ns = params.view_begin_ns + span;
            params.ns_per_pixel = static_cast<double>(span) / width;
            check_folding(row, params);
        }
    }
}

TEST(LodTest, ItemsAreBoundedByPixelsNotEvents) {
    const Row row = random_row(200'000, 11);
    LodParams params;
    params.view_begin_ns = 0;
    params.view_end_ns = row.events.back().end_ns;
    params.ns_per_pixel = static_cast<double>(params.view_end_ns) / 1600.0;
    std::vector<DrawItem> items;
    fold_row(row, params, items);
    // At most one folded item plus one wide event per min_pixels, twice over.
    EXPECT_LT(items.size(), 2u * 1600u / 3u + 2u);
    // A hundredth of the trace: wide events stand alone, the bound still holds.
    params.view_end_ns /= 100;
    params.ns_per_pixel = static_cast<double>(params.view_end_ns) / 1600.0;
    items.clear();
    fold_row(row, params, items);
    EXPECT_LT(items.size(), 2u * 1600u / 3u + 2u);
    EXPECT_GT(items.size(), 10u);
}

TEST(LodTest, ZoomedInEveryEventIsItsOwnItem) {
    const Row row = random_row(1000, 3);
    LodParams params;
    params.view_begin_ns = row.events[100].start_ns;
    params.view_end_ns = row.events[110].end_ns;
    params.ns_per_pixel = 0.01;  // far below any event
    std::vector<DrawItem> items;
    fold_row(row, params, items);
    ASSERT_EQ(items.size(), 11u);
    for (const DrawItem& item : items) EXPECT_EQ(item.count, 1u);
}

TEST(LodTest, OverlappingRowsStillCoverEveryEvent) {
    Row row;
    for (int i = 0; i < 1000; ++i) {
        TimelineEvent event;
        event.start_ns = i * 100;
        event.end_ns = i * 100 + (i % 10 == 0 ? 5000 : 50);  // every tenth overlaps the next ones
        row.events.push_back(event);
        row.max_duration_ns = std::max(row.max_duration_ns, event.duration_ns());
    }
    row.non_overlapping = false;
    trace::TimeNs latest = 0;
    for (const TimelineEvent& event : row.events) {
        latest = std::max(latest, event.end_ns);
        row.running_max_end.push_back(latest);
    }
    LodParams params;
    params.view_begin_ns = 20'000;
    params.view_end_ns = 60'000;
    params.ns_per_pixel = 40.0;
    check_folding(row, params);
}

TEST(LodTest, CounterColumnsKeepExtremes) {
    std::vector<CounterPoint> points;
    for (int i = 0; i < 10'000; ++i) points.push_back({i * 10, i == 5000 ? 99.0 : 1.0});
    std::vector<CounterColumn> columns;
    fold_counter(points, 0, 1000.0, 100, columns);  // 100 samples per column
    ASSERT_EQ(columns.size(), 100u);
    EXPECT_TRUE(columns[0].has_value);
    EXPECT_DOUBLE_EQ(columns[50].max_value, 99.0);
    EXPECT_DOUBLE_EQ(columns[49].max_value, 1.0);
}

}  // namespace
}  // namespace ember::viewer
