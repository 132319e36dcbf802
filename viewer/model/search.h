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
    // Matches the names `matching` marks (indexed by model name id), in rows of the kinds
    // whose bit (1 << RowKind) is set in `row_kinds`: the diff tables' "highlight this
    // row's events" (run_diff.h), where a kernel row must not light up a range of the
    // same name.
    void set_names(std::vector<bool> matching, std::uint32_t row_kinds);
    bool matches(std::uint32_t name_id) const { return name_id < matching_names_.size() && matching_names_[name_id]; }
    bool matches_row(RowKind kind) const { return (row_kinds_ >> static_cast<int>(kind)) & 1u; }
    bool matches(const Row& row, std::uint32_t name_id) const { return matches_row(row.kind) && matches(name_id); }
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
    std::uint32_t row_kinds_ = ~0u;  // every kind of row
};

}  // namespace ember::viewer
