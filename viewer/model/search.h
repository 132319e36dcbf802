// search.h: find events by name (substring or ECMAScript regex) across every lane,
// and step through them in time order (next / previous).
//
// Matching is decided once per distinct name (the model's name table), so stepping
// costs one table lookup per event visited.
#pragma once

#include "viewer/model/trace_model.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ember::viewer {

struct SearchQuery {
    std::string text;
    bool regex = false;
    bool case_sensitive = false;
};

class EventSearch {
public:
    // Returns false (and says why in `error`) for an invalid regex; an empty text
    // matches nothing.
    bool set_query(const TraceModel& model, const SearchQuery& query, std::string* error = nullptr);
    // Matches exactly one name (the tables' "jump to next instance").
    void set_name(const TraceModel& model, std::uint32_t name_id);
    bool matches(std::uint32_t name_id) const {
        return name_id < matching_names_.size() && matching_names_[name_id];
    }
    bool empty() const { return matching_name_count_ == 0; }

    // The matching event that comes first after `current` in (start time, lane, row,
    // index) order; with an invalid `current`, the first at or after `time_ns`.
    std::optional<EventRef> next(const TraceModel& model, const EventRef& current, trace::TimeNs time_ns) const;
    std::optional<EventRef> previous(const TraceModel& model, const EventRef& current, trace::TimeNs time_ns) const;
    // Every matching event in ready lanes.
    std::int64_t count(const TraceModel& model) const;

private:
    std::vector<bool> matching_names_;
    std::size_t matching_name_count_ = 0;
};

}  // namespace ember::viewer
