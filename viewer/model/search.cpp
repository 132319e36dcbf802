// search.cpp: name matching and time-ordered stepping (search.h).
#include "viewer/model/search.h"
#include "common/text.h"

#include <algorithm>
#include <iterator>
#include <regex>
#include <tuple>

namespace ember::viewer {

using trace::TimeNs;

namespace {

// The (start, lane, row, index) order search steps through.
using Key = std::tuple<TimeNs, int, int, std::uint32_t>;

// Where stepping starts: the current event's key, or with an invalid `current` a key
// before every event that starts at `time_ns`.
Key start_key(const TraceModel& model, const EventRef& current, TimeNs time_ns) {
    const TimelineEvent* current_event = model.event(current);
    return current_event ? Key{current_event->start_ns, current.lane, current.row, current.index}
                         : Key{time_ns, -1, -1, 0};
}

// Calls visit(lane_index, row_index, events) for every row of a ready lane that the
// search's row kinds cover.
template <typename Visit>
void for_each_searched_row(const TraceModel& model, const EventSearch& search, Visit&& visit) {
    for (int lane_index = 0; lane_index < model.lane_count(); ++lane_index) {
        const Lane& lane = model.lane(lane_index);
        if (!lane.ready.load(std::memory_order_acquire)) continue;
        for (int row_index = 0; row_index < static_cast<int>(lane.rows.size()); ++row_index) {
            const Row& row = lane.rows[static_cast<std::size_t>(row_index)];
            if (search.matches_row(row.kind)) visit(lane_index, row_index, row.events);
        }
    }
}

}  // namespace

bool EventSearch::set_query(const TraceModel& model, const SearchQuery& query, std::string* error) {
    matching_names_.assign(model.name_count(), false);
    matching_name_count_ = 0;
    row_kinds_ = ~0u;
    if (query.text.empty()) return true;
    std::optional<std::regex> pattern;
    if (query.regex) {
        try {
            auto flags = std::regex::ECMAScript;
            if (!query.case_sensitive) flags |= std::regex::icase;
            pattern.emplace(query.text, flags);
        } catch (const std::regex_error& failure) {
            if (error) *error = std::string("invalid regular expression: ") + failure.what();
            return false;
        }
    }
    const std::string needle = query.case_sensitive ? query.text : text::ascii_lowercase(query.text);
    for (std::size_t id = 1; id < model.name_count(); ++id) {
        const std::string_view name = model.name(static_cast<std::uint32_t>(id));
        bool hit;
        if (pattern)
            hit = std::regex_search(name.begin(), name.end(), *pattern);
        else if (query.case_sensitive)
            hit = name.find(needle) != std::string_view::npos;
        else
            hit = text::ascii_lowercase(name).find(needle) != std::string::npos;
        if (hit) {
            matching_names_[id] = true;
            ++matching_name_count_;
        }
    }
    return true;
}

void EventSearch::set_names(std::vector<bool> matching, std::uint32_t row_kinds) {
    matching_names_ = std::move(matching);
    matching_name_count_ = static_cast<std::size_t>(std::count(matching_names_.begin(), matching_names_.end(), true));
    row_kinds_ = row_kinds;
}

void EventSearch::set_name(const TraceModel& model, std::uint32_t name_id) {
    matching_names_.assign(model.name_count(), false);
    matching_name_count_ = 0;
    row_kinds_ = ~0u;
    if (name_id < matching_names_.size()) {
        matching_names_[name_id] = true;
        matching_name_count_ = 1;
    }
}

namespace {

// The matching event nearest `from` on one side of it in Key order (start, lane, row,
// index): the first after it (Forward) or the last before it. Each row is walked from
// `from`'s start outwards and stops at its first match, or where it cannot beat the best.
template <bool Forward>
std::optional<EventRef> nearest_match(const TraceModel& model, const EventSearch& search, const Key& from) {
    // `a` lies beyond `b` on the side searched.
    auto beyond = [](const auto& a, const auto& b) { return Forward ? b < a : a < b; };
    std::optional<EventRef> best;
    Key best_key{};
    for_each_searched_row(model, search, [&](int lane_index, int row_index, const auto& events) {
        auto walk = [&](auto it, auto end) {
            for (; it != end; ++it) {
                if (best && beyond(it->start_ns, std::get<0>(best_key))) break;
                if (!search.matches(it->name_id)) continue;
                const auto index = static_cast<std::uint32_t>(&*it - events.data());
                const Key key{it->start_ns, lane_index, row_index, index};
                if (!beyond(key, from)) continue;
                if (!best || beyond(best_key, key)) {
                    best = EventRef{lane_index, row_index, index};
                    best_key = key;
                }
                break;
            }
        };
        const TimeNs start = std::get<0>(from);
        if constexpr (Forward) {
            walk(std::partition_point(events.begin(), events.end(),
                                      [&](const TimelineEvent& e) { return e.start_ns < start; }),
                 events.end());
        } else {
            auto after = std::partition_point(events.begin(), events.end(),
                                              [&](const TimelineEvent& e) { return e.start_ns <= start; });
            walk(std::make_reverse_iterator(after), events.rend());
        }
    });
    return best;
}

}  // namespace

std::optional<EventRef> EventSearch::next(const TraceModel& model, const EventRef& current, TimeNs time_ns) const {
    if (empty()) return std::nullopt;
    return nearest_match<true>(model, *this, start_key(model, current, time_ns));
}

std::optional<EventRef> EventSearch::previous(const TraceModel& model, const EventRef& current, TimeNs time_ns) const {
    if (empty()) return std::nullopt;
    return nearest_match<false>(model, *this, start_key(model, current, time_ns));
}

std::int64_t EventSearch::count(const TraceModel& model) const {
    if (empty()) return 0;
    std::int64_t total = 0;
    for_each_searched_row(model, *this, [&](int, int, const auto& events) {
        for (const TimelineEvent& event : events) total += matches(event.name_id) ? 1 : 0;
    });
    return total;
}

}  // namespace ember::viewer
