// range_nesting_test.cpp: RangeNester gives every range the depth and parent a push/pop
// collector would have seen, whatever order the ranges come in; emitting a thread's
// ranges as they come (while they come in nesting order) changes only their ids: once
// the ranges it withdrew are removed, the nesting is what nesting at the end gives,
// range for range, with and without spilling to disk. Emitting them while they come in
// the order nesting at the end emits them (Kineto's imports) changes nothing at all:
// the same ranges with the same ids, whatever comes, withdrawn or not.
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
            while (it != emitted.end() && it->first <= withdrawn.last && it->second.thread_id != withdrawn.thread_id)
                ++it;
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
        outcome.ranges.emplace_back(range.thread_id, range.start_ns, range.end_ns, range.depth, parent_start,
                                    parent_end, range.name_id);
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
            trace::TimeNs end =
                start + 1 + static_cast<trace::TimeNs>(random() % std::max<trace::TimeNs>(limit - start, 1));
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

// Every range as nesting leaves it, ids included, in id order; with `final_order`, as
// an import does with ranges emitted early: start/end ranges taking ids (at the
// positions `taken_at` of the input) withdraw them, and when they were withdrawn they
// are read back in the order emitted, removed, and nested with the rest.
struct Exact {
    std::vector<std::tuple<trace::RangeId, trace::ThreadId, trace::TimeNs, trace::TimeNs, std::int32_t, trace::RangeId,
                           trace::StringId>>
        ranges;
    std::int64_t not_nested = 0;
    std::uint64_t early = 0;
    bool withdrawn = false;
};

Exact nest_exactly(const std::vector<PendingRange>& input, bool final_order, const std::vector<std::size_t>& taken_at,
                   std::size_t memory_bytes, const std::string& prefix) {
    RangeNester nester(prefix, memory_bytes);
    std::map<trace::RangeId, trace::RangeEvent> emitted;
    trace::RangeId next = 1;
    trace::RangeId other_ids = 0;  // ids taken by start/end ranges
    auto next_id = [&] { return next++; };
    auto emit = [&](const trace::RangeEvent& range) { EXPECT_TRUE(emitted.emplace(range.range_id, range).second); };
    if (final_order) nester.emit_while_in_final_order(next_id, emit);
    for (std::size_t i = 0; i < input.size(); ++i) {
        if (std::find(taken_at.begin(), taken_at.end(), i) != taken_at.end()) {
            // What ImportSink::start_end_range does: a held range takes the id it has
            // without the early ones; otherwise the counter's.
            ++other_ids;
            if (final_order) nester.withdraw_early();
            if (!final_order || !nester.early_withdrawn()) EXPECT_EQ(next_id(), other_ids);
        }
        nester.add(input[i]);
    }
    Exact exact;
    exact.not_nested = nester.finish(next_id, emit);
    if (final_order) {
        exact.early = nester.emitted_early().count;
        exact.withdrawn = nester.early_withdrawn();
    }
    if (exact.withdrawn) {
        const importing::WithdrawnRanges early = nester.emitted_early();
        auto it = emitted.lower_bound(early.first);
        nester.take_back_early([&](PendingRange& range) {
            if (it == emitted.end() || it->first > early.last) return false;
            range = importing::pending_range_of(it->second);
            ++it;
            return true;
        });
        EXPECT_EQ(emitted.erase(emitted.find(early.first), emitted.upper_bound(early.last)), emitted.end());
        EXPECT_EQ(emitted.size(), 0u);  // nothing else was emitted
        trace::RangeId renumbered = other_ids + 1;
        exact.not_nested = nester.renest_all([&] { return renumbered++; }, emit);
    }
    for (const auto& [id, range] : emitted) {
        exact.ranges.emplace_back(id, range.thread_id, range.start_ns, range.end_ns, range.depth, range.parent_range_id,
                                  range.name_id);
    }
    return exact;
}

TEST(RangeNesting, EmittedInFinalOrderTheRangesAndTheirIdsAreThoseOfTheEnd) {
    test_support::TempDir dir;
    std::mt19937 random(23);
    for (int round = 0; round < 8; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        // Over 1024 a thread: more than are held before the first is emitted when the
        // memory is 1 byte (1024 ranges), fewer than when it is 64 MiB (65,536).
        std::vector<PendingRange> ranges = random_ranges(random, 3, 1100);
        std::vector<PendingRange> sorted = ranges;
        std::stable_sort(sorted.begin(), sorted.end(), [](const PendingRange& a, const PendingRange& b) {
            return std::tie(a.thread_id, a.start_ns, b.end_ns) < std::tie(b.thread_id, b.start_ns, a.end_ns);
        });
        // The first thread first, in order, then the others interleaved (Kineto's CPU
        // ops of several threads); the same with a later thread shuffled (stays early:
        // collected anyway); the first thread's ties the other way from its middle on,
        // or a range of it late; a thread sorted before the first one coming second;
        // everything interleaved; all shuffled.
        std::vector<PendingRange> first_then_rest, others;
        for (const PendingRange& range : sorted) (range.thread_id == 1 ? first_then_rest : others).push_back(range);
        for (const PendingRange& range : in_nesting_order(others, random)) first_then_rest.push_back(range);
        std::vector<PendingRange> later_thread_shuffled = first_then_rest;
        reorder_thread(later_thread_shuffled, 3,
                       [&](std::vector<PendingRange>& r) { std::shuffle(r.begin(), r.end(), random); });
        std::vector<PendingRange> first_thread_late = first_then_rest;
        reorder_thread(first_thread_late, 1, [&](std::vector<PendingRange>& r) {
            const auto middle = r.begin() + static_cast<long>(r.size() / 2);
            std::rotate(middle, middle + 1, r.end());
        });
        std::vector<PendingRange> lower_thread_second = first_then_rest;
        std::stable_partition(lower_thread_second.begin(), lower_thread_second.end(),
                              [](const PendingRange& r) { return r.thread_id == 2; });
        std::vector<PendingRange> interleaved = in_nesting_order(sorted, random);
        std::vector<PendingRange> shuffled = sorted;
        std::shuffle(shuffled.begin(), shuffled.end(), random);

        const std::size_t n = sorted.size();
        for (const std::vector<PendingRange>* input :
             {&sorted, &first_then_rest, &later_thread_shuffled, &first_thread_late, &lower_thread_second, &interleaved,
              &shuffled}) {
            // Start/end ranges taking ids: none; before the first range (nothing emitted
            // yet); in the middle and at the end (after ranges were emitted).
            for (const std::vector<std::size_t>& taken_at :
                 {std::vector<std::size_t>{}, std::vector<std::size_t>{0}, std::vector<std::size_t>{0, n / 2, n - 1}}) {
                for (std::size_t memory : {std::size_t{64} << 20, std::size_t{1}}) {  // 1: spills every 1024 ranges
                    const Exact at_end = nest_exactly(*input, false, taken_at, memory, dir.path("at_end"));
                    const Exact early = nest_exactly(*input, true, taken_at, memory, dir.path("early"));
                    ASSERT_EQ(at_end.ranges.size(), n);
                    ASSERT_EQ(early.ranges, at_end.ranges);
                    EXPECT_EQ(early.not_nested, at_end.not_nested);
                    const bool undisturbed = taken_at.size() <= 1;
                    const bool first_in_order =
                        input == &sorted || input == &first_then_rest || input == &later_thread_shuffled;
                    if (undisturbed && first_in_order) {
                        EXPECT_FALSE(early.withdrawn);
                        EXPECT_GT(early.early, n / 4);
                    }
                    // Withdrawn after some were emitted (taken back), or while all were
                    // held (nothing to take back).
                    const bool late = input == &first_thread_late || input == &lower_thread_second ||
                                      (taken_at.size() > 1 && first_in_order);
                    EXPECT_EQ(early.withdrawn, late && memory == 1);
                }
            }
        }
    }
}

}  // namespace
