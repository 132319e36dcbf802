// range_nesting_test.cpp: RangeNester gives every range the depth and parent a push/pop
// collector would have seen, whatever order the ranges come in; emitting a thread's
// ranges as they come (while they come in nesting order) changes only their ids: once
// the ranges it withdrew are removed, the nesting is what nesting at the end gives,
// range for range, with and without spilling to disk.
#include "profiler/import/range_nesting.h"
#include "tests/support/temp_dir.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <tuple>
#include <vector>

namespace {

using namespace ember;
using importing::PendingRange;
using importing::RangeNester;

// A range as nesting leaves it, named by its interval and its parent's.
using Nested = std::tuple<trace::ThreadId, trace::TimeNs, trace::TimeNs, std::int32_t, trace::TimeNs, trace::TimeNs,
                          trace::StringId>;

struct Outcome {
    std::vector<Nested> ranges;
    std::int64_t not_nested = 0;
    std::uint64_t withdrawn = 0;
};

Outcome nest(const std::vector<PendingRange>& input, bool early, std::size_t memory_bytes, const std::string& prefix) {
    RangeNester nester(prefix, memory_bytes);
    std::map<trace::RangeId, trace::RangeEvent> emitted;
    trace::RangeId next = 1;
    auto next_id = [&] { return next++; };
    auto emit = [&](const trace::RangeEvent& range) { EXPECT_TRUE(emitted.emplace(range.range_id, range).second); };
    if (early) nester.emit_while_in_order(next_id, emit);
    for (const PendingRange& range : input) nester.add(range);
    Outcome outcome;
    outcome.not_nested = nester.finish(next_id, emit);
    // What an import does with the threads that came out of order: read the early rows
    // back from its output, in id order, nest them with the rest, then delete them.
    std::vector<trace::RangeId> early_ids;
    auto early_of = [&](const importing::WithdrawnRanges& withdrawn) -> std::function<bool(PendingRange&)> {
        auto it = emitted.lower_bound(withdrawn.first);
        return [&emitted, &early_ids, withdrawn, it](PendingRange& range) mutable {
            while (it != emitted.end() && it->first <= withdrawn.last && it->second.thread_id != withdrawn.thread_id) ++it;
            if (it == emitted.end() || it->first > withdrawn.last) return false;
            range = importing::pending_range_of(it->second);
            early_ids.push_back(it->first);
            ++it;
            return true;
        };
    };
    if (early) outcome.not_nested += nester.renest_withdrawn(early_of, next_id, emit);
    std::uint64_t listed = 0;
    for (const importing::WithdrawnRanges& withdrawn : nester.withdrawn()) listed += withdrawn.count;
    EXPECT_EQ(early_ids.size(), listed);
    for (trace::RangeId id : early_ids) emitted.erase(id);
    outcome.withdrawn = early_ids.size();
    for (const auto& [id, range] : emitted) {
        trace::TimeNs parent_start = -1, parent_end = -1;
        if (range.parent_range_id != 0) {
            auto parent = emitted.find(range.parent_range_id);
            EXPECT_NE(parent, emitted.end()) << "parent " << range.parent_range_id << " of " << id << " is gone";
            if (parent == emitted.end()) continue;
            EXPECT_EQ(parent->second.thread_id, range.thread_id);
            parent_start = parent->second.start_ns;
            parent_end = parent->second.end_ns;
        }
        outcome.ranges.emplace_back(range.thread_id, range.start_ns, range.end_ns, range.depth, parent_start, parent_end,
                                    range.name_id);
    }
    std::sort(outcome.ranges.begin(), outcome.ranges.end());
    return outcome;
}

// Ranges of a few threads: trees of calls, siblings with equal starts, identical
// intervals, and some ranges that outlive their parent (counted as not nested).
std::vector<PendingRange> random_ranges(std::mt19937& random, int threads, int per_thread) {
    std::vector<PendingRange> ranges;
    for (int t = 1; t <= threads; ++t) {
        std::vector<std::pair<trace::TimeNs, trace::TimeNs>> open;  // a stack of intervals being filled
        trace::TimeNs at = 0;
        for (int i = 0; i < per_thread; ++i) {
            while (!open.empty() && (open.back().second <= at || random() % 4 == 0)) {
                at = std::max(at, open.back().second);
                open.pop_back();
            }
            const trace::TimeNs limit = open.empty() ? at + 1000 : open.back().second;
            trace::TimeNs start = at + static_cast<trace::TimeNs>(random() % 3);
            if (start >= limit) start = at;
            trace::TimeNs end = start + 1 + static_cast<trace::TimeNs>(random() % std::max<trace::TimeNs>(limit - start, 1));
            if (random() % 40 == 0) end += 50;  // outlives its parent
            PendingRange range;
            range.thread_id = static_cast<trace::ThreadId>(t);
            range.start_ns = start;
            range.end_ns = end;
            range.name_id = static_cast<trace::StringId>(random() % 5 + 1);
            ranges.push_back(range);
            if (random() % 8 == 0) ranges.push_back(range);  // the same interval twice
            open.emplace_back(start, end);
            at = start;
        }
    }
    return ranges;
}

// Each thread's ranges in nesting order, threads interleaved.
std::vector<PendingRange> in_nesting_order(std::vector<PendingRange> ranges, std::mt19937& random) {
    std::stable_sort(ranges.begin(), ranges.end(), [](const PendingRange& a, const PendingRange& b) {
        return std::tie(a.thread_id, a.start_ns, b.end_ns) < std::tie(b.thread_id, b.start_ns, a.end_ns);
    });
    std::map<trace::ThreadId, std::vector<PendingRange>> by_thread;
    for (const PendingRange& range : ranges) by_thread[range.thread_id].push_back(range);
    std::vector<PendingRange> out;
    std::map<trace::ThreadId, std::size_t> next;
    while (out.size() < ranges.size()) {
        auto it = by_thread.begin();
        std::advance(it, static_cast<long>(random() % by_thread.size()));
        std::size_t& i = next[it->first];
        if (i < it->second.size()) out.push_back(it->second[i++]);
    }
    return out;
}

// Reorders the ranges of one thread among the places they hold.
template <typename Reorder>
void reorder_thread(std::vector<PendingRange>& ranges, trace::ThreadId thread, Reorder&& reorder) {
    std::vector<std::size_t> places;
    std::vector<PendingRange> of_thread;
    for (std::size_t i = 0; i < ranges.size(); ++i) {
        if (ranges[i].thread_id != thread) continue;
        places.push_back(i);
        of_thread.push_back(ranges[i]);
    }
    reorder(of_thread);
    for (std::size_t k = 0; k < places.size(); ++k) ranges[places[k]] = of_thread[k];
}

TEST(RangeNesting, EmittedAsTheyComeOrAtTheEndTheNestingIsTheSame) {
    test_support::TempDir dir;
    std::mt19937 random(11);
    for (int round = 0; round < 12; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        std::vector<PendingRange> sorted = in_nesting_order(random_ranges(random, 4, 700), random);
        // In order; one thread shuffled from its middle on; one thread by end (the
        // order "B"/"E" pairs close in); one with ties the other way; all shuffled.
        std::vector<PendingRange> one_late = sorted;
        reorder_thread(one_late, 2, [&](std::vector<PendingRange>& ranges) {
            std::shuffle(ranges.begin() + static_cast<long>(ranges.size() / 2), ranges.end(), random);
        });
        std::vector<PendingRange> by_end = sorted;
        reorder_thread(by_end, 3, [](std::vector<PendingRange>& ranges) {
            std::stable_sort(ranges.begin(), ranges.end(),
                             [](const PendingRange& a, const PendingRange& b) { return a.end_ns < b.end_ns; });
        });
        // Ranges that start together, the shorter first (out of order by the tie rule only).
        std::vector<PendingRange> short_first = sorted;
        reorder_thread(short_first, 4, [](std::vector<PendingRange>& ranges) {
            std::stable_sort(ranges.begin(), ranges.end(), [](const PendingRange& a, const PendingRange& b) {
                return std::tie(a.start_ns, a.end_ns) < std::tie(b.start_ns, b.end_ns);
            });
        });
        std::vector<PendingRange> shuffled = sorted;
        std::shuffle(shuffled.begin(), shuffled.end(), random);

        for (const std::vector<PendingRange>* input : {&sorted, &one_late, &by_end, &short_first, &shuffled}) {
            for (std::size_t memory : {std::size_t{64} << 20, std::size_t{1}}) {  // 1: spills every 1024 ranges
                const Outcome at_end = nest(*input, false, memory, dir.path("at_end"));
                const Outcome as_they_come = nest(*input, true, memory, dir.path("early"));
                ASSERT_EQ(at_end.ranges.size(), input->size());
                EXPECT_EQ(as_they_come.ranges, at_end.ranges);
                EXPECT_EQ(as_they_come.not_nested, at_end.not_nested);
                if (input == &sorted) {
                    EXPECT_EQ(as_they_come.withdrawn, 0u);
                }
                if (input == &one_late || input == &short_first) {
                    EXPECT_GT(as_they_come.withdrawn, 0u);
                }
            }
        }
        EXPECT_GT(nest(sorted, false, 64 << 20, dir.path("x")).not_nested, 0);
    }
}

}  // namespace
