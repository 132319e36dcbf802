// live_refresh.cpp: growing a loaded model with the rows a recording committed since
// the load or the last refresh (TraceModel::read_new_events / apply_new_events).
//
// The writer only appends, so each event table's rowids grow: the rows above the
// rowid mark of the last load are exactly the new ones, which the reader's
// for_each_*() select with EventQuery::after_rowid/upto_rowid. Each refresh reads
// inside one TraceReader::Snapshot, so every table is read at the same instant.
#include "profiler/store/schema.h"
#include "viewer/model/trace_model.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string_view>

namespace ember::viewer {

using trace::TimeNs;

std::int64_t LaneDelta::event_count() const {
    return static_cast<std::int64_t>(gpu_work.size() + syncs.size() + api_calls.size() + marks.size() +
                                     overhead.size() + ranges.size() + points.size());
}

std::int64_t TraceDelta::event_count() const {
    std::int64_t count = 0;
    for (const LaneDelta& lane : lanes) count += lane.event_count();
    for (const File& file : files) count += static_cast<std::int64_t>(file.stack_samples.size());
    return count;
}

namespace {

LaneKind lane_kind_of(const store::EventTableInfo& table) {
    const std::string_view column = table.track_column;
    return column == "stream_id" ? LaneKind::stream : column == "counter_id" ? LaneKind::counter : LaneKind::thread;
}

// Titles of a lane the model did not have (the reader's small tables were reloaded).
void describe_new_lane(const TraceModel& model, const TraceFile& file, const store::TraceReader& reader,
                       LaneDelta& lane) {
    LaneNames names =
        lane_names(reader, rank_prefix(model.files().size(), file), lane.kind, lane.track_id, file.run.pid);
    lane.group = std::move(names.group);
    lane.title = std::move(names.title);
    lane.unit = std::move(names.unit);
    lane.process_id = names.process_id;
    lane.device_id = names.device_id;
}

bool by_start(const TimelineEvent& a, const TimelineEvent& b) {
    return a.start_ns < b.start_ns;
}

// Where a row goes in its lane: the loader's order (ranges by depth, start/end
// ranges, API calls, marks, overhead; GPU work, then waits).
int row_rank(RowKind kind, int depth) {
    switch (kind) {
        case RowKind::ranges:
            return depth;
        case RowKind::async_ranges:
            return 1000 + depth;
        case RowKind::api_calls:
            return 2000;
        case RowKind::marks:
            return 3000;
        case RowKind::overhead:
            return 4000;
        case RowKind::gpu_work:
            return 0;
        case RowKind::syncs:
            return 1;
    }
    return 5000;
}

// The lane's row of this kind (and depth), created in its place when missing.
Row& row_for(Lane& lane, RowKind kind, int depth, RefreshResult& result) {
    const int rank = row_rank(kind, depth);
    std::size_t position = 0;
    for (; position < lane.rows.size(); ++position) {
        const Row& row = lane.rows[position];
        const int existing = row_rank(row.kind, row.depth);
        if (existing == rank) return lane.rows[position];
        if (existing > rank) break;
    }
    if (position < lane.rows.size()) result.events_moved = true;  // rows below shift down
    Row row;
    row.kind = kind;
    row.depth = depth;
    return *lane.rows.insert(lane.rows.begin() + static_cast<std::ptrdiff_t>(position), std::move(row));
}

// Appends start-sorted `additions` to a row, keeping it sorted by start.
void append_events(Row& row, const std::vector<TimelineEvent>& additions, RefreshResult& result) {
    if (additions.empty()) return;
    const std::size_t old_size = row.events.size();
    const bool in_order = old_size == 0 || additions.front().start_ns >= row.events.back().start_ns;
    row.events.insert(row.events.end(), additions.begin(), additions.end());
    if (in_order) {
        update_row_stats(row, old_size);
        return;
    }
    // Late arrivals (a buffer flushed out of order): merge, and indexes move.
    std::inplace_merge(row.events.begin(), row.events.begin() + static_cast<std::ptrdiff_t>(old_size), row.events.end(),
                       by_start);
    result.events_moved = true;
    update_row_stats(row, 0);
}

}  // namespace

std::unique_ptr<TraceDelta> TraceModel::read_new_events() {
    auto delta = std::make_unique<TraceDelta>();
    if (!loaded()) return delta;
    for (std::size_t index = 0; index < files_.size(); ++index) read_file_delta(static_cast<int>(index), *delta);
    return delta;
}

void TraceModel::read_file_delta(int file_index, TraceDelta& delta) {
    const TraceFile& file = files_[static_cast<std::size_t>(file_index)];
    if (!file.live_reader || file.loaded_rowid.size() != std::size(store::kEventTables)) return;
    store::TraceReader& reader = *file.live_reader;
    const store::TraceReader::Snapshot snapshot = reader.snapshot();
    const std::vector<std::int64_t>& old_marks = file.loaded_rowid;
    TraceDelta::File changes;
    changes.file_index = file_index;
    changes.rowid_marks = reader.highest_rowids();
    // Names, threads, streams and counters registered since the last read.
    reader.reload_small_tables();
    // Strings the model does not know yet (ids are dense and only grow).
    changes.strings = reader.strings_from(static_cast<trace::StringId>(file.string_to_model.size()));

    // This file's lanes by (kind, track); deltas of this file by the same key.
    std::map<std::pair<LaneKind, std::uint32_t>, int> model_lanes;
    for (int index = 0; index < lane_count(); ++index)
        if (lanes_[static_cast<std::size_t>(index)]->file_index == file_index)
            model_lanes[{lanes_[static_cast<std::size_t>(index)]->kind,
                         lanes_[static_cast<std::size_t>(index)]->track_id}] = index;
    std::map<std::pair<LaneKind, std::uint32_t>, std::size_t> delta_lanes;
    auto lane_delta = [&](LaneKind kind, std::uint32_t track) -> LaneDelta& {
        auto [found, inserted] = delta_lanes.emplace(std::make_pair(kind, track), delta.lanes.size());
        if (inserted) {
            LaneDelta lane;
            lane.kind = kind;
            lane.file_index = file_index;
            lane.track_id = track;
            auto existing = model_lanes.find({kind, track});
            lane.lane = existing == model_lanes.end() ? -1 : existing->second;
            delta.lanes.push_back(std::move(lane));
        }
        return delta.lanes[found->second];
    };

    const TimeNs shift = file.shift_ns;
    std::set<trace::StackId> new_stacks;
    // The rows of one table stored after `after` (of one track when given), into the
    // lanes' deltas, decoded by the reader.
    auto read_rows = [&](const store::EventTableInfo& table, std::int64_t after, std::int64_t upto,
                         std::optional<std::uint32_t> track) {
        store::EventQuery query;
        query.track = track;
        query.after_rowid = after;
        query.upto_rowid = upto;
        // Each event goes to its lane's delta, into the vector of its kind.
        auto into = [&](LaneKind kind, std::vector<TimelineEvent> LaneDelta::*events) {
            return [&, kind, events](const auto& event) {
                (lane_delta(kind, trace::track_of(event)).*events).push_back(timeline_event(event, shift, nullptr));
                return true;
            };
        };
        const std::string_view name = table.name;
        if (name == "kernels")
            reader.for_each<trace::KernelEvent>(query, into(LaneKind::stream, &LaneDelta::gpu_work));
        else if (name == "memcpys")
            reader.for_each<trace::MemcpyEvent>(query, into(LaneKind::stream, &LaneDelta::gpu_work));
        else if (name == "memsets")
            reader.for_each<trace::MemsetEvent>(query, into(LaneKind::stream, &LaneDelta::gpu_work));
        else if (name == "synchronizations")
            reader.for_each<trace::SyncEvent>(query, into(LaneKind::stream, &LaneDelta::syncs));
        else if (name == "api_calls")
            reader.for_each<trace::ApiEvent>(query, into(LaneKind::thread, &LaneDelta::api_calls));
        else if (name == "marks")
            reader.for_each<trace::MarkEvent>(query, into(LaneKind::thread, &LaneDelta::marks));
        else if (name == "collector_overhead")
            reader.for_each<trace::OverheadEvent>(query, into(LaneKind::thread, &LaneDelta::overhead));
        else if (name == "ranges") {
            reader.for_each_range(query, [&](const trace::RangeEvent& range) {
                LaneDelta& lane = lane_delta(LaneKind::thread, range.thread_id);
                lane.ranges.push_back(timeline_event(range, shift, nullptr));
                lane.range_depths.push_back(std::min(range.depth, 255));
                return true;
            });
        } else if (name == "counter_samples") {
            reader.for_each_counter_sample(query, [&](const trace::CounterSample& sample) {
                lane_delta(LaneKind::counter, sample.counter_id)
                    .points.push_back({sample.time_ns + shift, sample.value});
                return true;
            });
        } else if (name == "stack_samples") {
            reader.for_each_stack_sample(query, [&](const trace::StackSample& sample) {
                changes.stack_samples.push_back(
                    {sample.time_ns + shift, sample.thread_id, sample.stack_id, sample.idle});
                // A thread with samples only (a Python program) gets its lane, for its stacks.
                if (!model_lanes.contains({LaneKind::thread, sample.thread_id}))
                    lane_delta(LaneKind::thread, sample.thread_id);
                if (!file.stack_frames.contains(sample.stack_id)) new_stacks.insert(sample.stack_id);
                return true;
            });
        }
    };

    const std::size_t table_count = std::size(store::kEventTables);
    const std::size_t first_lane = delta.lanes.size();
    for (std::size_t table = 0; table < table_count; ++table)
        if (changes.rowid_marks[table] > old_marks[table])
            read_rows(store::kEventTables[table], old_marks[table], changes.rowid_marks[table], std::nullopt);
    // A track the model has no lane for (it began after the file was opened): its
    // older rows too, so the new lane starts complete.
    for (std::size_t index = first_lane; index < delta.lanes.size(); ++index) {
        if (delta.lanes[index].lane >= 0) continue;
        const LaneKind kind = delta.lanes[index].kind;
        const std::uint32_t track = delta.lanes[index].track_id;
        for (std::size_t table = 0; table < table_count; ++table) {
            const store::EventTableInfo& info = store::kEventTables[table];
            if (lane_kind_of(info) != kind || std::string_view(info.name) == "stack_samples") continue;
            if (old_marks[table] > 0) read_rows(info, 0, old_marks[table], track);
        }
        describe_new_lane(*this, file, reader, delta.lanes[index]);
    }
    for (trace::StackId stack : new_stacks) changes.stacks.emplace_back(stack, stack_frame_names(reader, stack));
    delta.files.push_back(std::move(changes));
}

RefreshResult TraceModel::apply_new_events(TraceDelta& delta) {
    RefreshResult result;
    if (!loaded()) return result;
    for (TraceDelta::File& changes : delta.files) {
        TraceFile& file = files_[static_cast<std::size_t>(changes.file_index)];
        for (const auto& [id, text] : changes.strings) {
            if (id >= file.string_to_model.size()) file.string_to_model.resize(static_cast<std::size_t>(id) + 1, 0);
            file.string_to_model[id] = intern(text);
        }
        file.add_stacks(changes.stacks);
        if (!changes.stack_samples.empty()) {
            auto by_time = [](const StackSampleRef& a, const StackSampleRef& b) { return a.time_ns < b.time_ns; };
            std::stable_sort(changes.stack_samples.begin(), changes.stack_samples.end(), by_time);
            const std::size_t old_size = file.stack_samples.size();
            file.stack_samples.insert(file.stack_samples.end(), changes.stack_samples.begin(),
                                      changes.stack_samples.end());
            std::inplace_merge(file.stack_samples.begin(),
                               file.stack_samples.begin() + static_cast<std::ptrdiff_t>(old_size),
                               file.stack_samples.end(), by_time);
            result.events += static_cast<std::int64_t>(changes.stack_samples.size());
            begin_ns_ = std::min(begin_ns_, changes.stack_samples.front().time_ns);
            end_ns_ = std::max(end_ns_, changes.stack_samples.back().time_ns);
        }
        file.loaded_rowid = changes.rowid_marks;
    }
    for (LaneDelta& changes : delta.lanes) {
        const std::int64_t count = changes.event_count();
        if (count == 0 && changes.lane >= 0) continue;  // a new lane may hold samples only
        // File string ids -> model name ids (GPU copies, memsets and waits carry
        // model names already).
        const std::vector<std::uint32_t>& names = files_[static_cast<std::size_t>(changes.file_index)].string_to_model;
        auto map_names = [&names](std::vector<TimelineEvent>& events, bool kernels_only) {
            for (TimelineEvent& event : events) {
                if (kernels_only && event.kind != EventKind::kernel) continue;
                event.name_id = event.name_id < names.size() ? names[event.name_id] : 0;
            }
        };
        map_names(changes.gpu_work, true);
        map_names(changes.api_calls, false);
        map_names(changes.ranges, false);
        map_names(changes.marks, false);
        map_names(changes.overhead, false);

        std::unique_ptr<Lane> created;
        Lane* lane = nullptr;
        if (changes.lane >= 0 && changes.lane < lane_count()) {
            lane = lanes_[static_cast<std::size_t>(changes.lane)].get();
        } else {
            created = std::make_unique<Lane>();
            created->kind = changes.kind;
            created->file_index = changes.file_index;
            created->track_id = changes.track_id;
            created->device_id = changes.device_id;
            created->process_id = changes.process_id;
            created->group = changes.group;
            created->title = changes.title;
            created->unit = changes.unit;
            lane = created.get();
        }
        append_to_lane(*lane, changes, result);
        lane->expected_events += count;
        events_loaded_.fetch_add(count, std::memory_order_relaxed);
        result.events += count;
        if (created) {
            created->ready.store(true, std::memory_order_release);
            lanes_.push_back(std::move(created));
            lanes_ready_.fetch_add(1, std::memory_order_relaxed);
            ++result.new_lanes;
        }
    }
    // The stack charts of the threads that got samples, built again (after the new
    // lanes exist, so a new thread's lane gets its chart).
    for (const TraceDelta::File& changes : delta.files) {
        if (changes.stack_samples.empty()) continue;
        std::vector<trace::ThreadId> threads;
        for (const StackSampleRef& sample : changes.stack_samples) threads.push_back(sample.thread_id);
        std::sort(threads.begin(), threads.end());
        threads.erase(std::unique(threads.begin(), threads.end()), threads.end());
        build_sample_stacks(changes.file_index, &threads);
    }
    // Counted again, not added to: the count made at open came from the file's track
    // summaries, and the loader may have read rows committed after those.
    std::int64_t total = 0;
    for (const auto& lane : lanes_) total += lane->event_count();
    total_events_ = total;
    return result;
}

void TraceModel::append_to_lane(Lane& lane, LaneDelta& changes, RefreshResult& result) {
    auto widen = [this](TimeNs start, TimeNs end) {
        begin_ns_ = std::min(begin_ns_, start);
        end_ns_ = std::max(end_ns_, end);
    };
    auto append_sorted = [&](RowKind kind, int depth, std::vector<TimelineEvent>& events) {
        if (events.empty()) return;
        std::stable_sort(events.begin(), events.end(), by_start);
        for (const TimelineEvent& event : events) widen(event.start_ns, event.end_ns);
        append_events(row_for(lane, kind, depth, result), events, result);
    };

    if (lane.kind == LaneKind::counter) {
        if (changes.points.empty()) return;
        auto by_time = [](const CounterPoint& a, const CounterPoint& b) { return a.time_ns < b.time_ns; };
        std::stable_sort(changes.points.begin(), changes.points.end(), by_time);
        if (lane.points.empty()) lane.min_value = lane.max_value = changes.points[0].value;
        const std::size_t old_size = lane.points.size();
        lane.points.insert(lane.points.end(), changes.points.begin(), changes.points.end());
        std::inplace_merge(lane.points.begin(), lane.points.begin() + static_cast<std::ptrdiff_t>(old_size),
                           lane.points.end(), by_time);
        for (const CounterPoint& point : changes.points) {
            lane.min_value = std::min(lane.min_value, point.value);
            lane.max_value = std::max(lane.max_value, point.value);
            widen(point.time_ns, point.time_ns);
        }
        return;
    }
    if (lane.kind == LaneKind::stream) {
        append_sorted(RowKind::gpu_work, 0, changes.gpu_work);
        append_sorted(RowKind::syncs, 0, changes.syncs);
        return;
    }

    // Ranges: push/pop ones to the row of their depth, start/end ones packed greedily
    // into the rows where they fit (as the loader does).
    std::vector<std::size_t> range_order(changes.ranges.size());
    std::iota(range_order.begin(), range_order.end(), std::size_t{0});
    std::stable_sort(range_order.begin(), range_order.end(), [&changes](std::size_t a, std::size_t b) {
        return changes.ranges[a].start_ns < changes.ranges[b].start_ns;
    });
    std::map<int, std::vector<TimelineEvent>> by_depth;
    std::vector<TimeNs> async_last_end;
    for (const Row& row : lane.rows)
        if (row.kind == RowKind::async_ranges && !row.events.empty())
            async_last_end.push_back(row.events.back().end_ns);
    std::vector<std::vector<TimelineEvent>> async_additions(async_last_end.size());
    for (std::size_t index : range_order) {
        const TimelineEvent& event = changes.ranges[index];
        const std::int32_t depth = changes.range_depths[index];
        if (depth >= 0) {
            by_depth[depth].push_back(event);
            continue;
        }
        std::size_t target = async_last_end.size();
        for (std::size_t row = 0; row < async_last_end.size(); ++row)
            if (async_last_end[row] <= event.start_ns) {
                target = row;
                break;
            }
        if (target == async_last_end.size()) {
            if (async_last_end.size() < 32) {
                async_last_end.push_back(event.end_ns);
                async_additions.emplace_back();
            } else {
                target = async_last_end.size() - 1;  // overlaps: still drawn, row marked overlapping
            }
        }
        async_additions[target].push_back(event);
        async_last_end[target] = event.end_ns;
    }
    for (auto& [depth, events] : by_depth) append_sorted(RowKind::ranges, depth, events);
    for (std::size_t row = 0; row < async_additions.size(); ++row)
        append_sorted(RowKind::async_ranges, static_cast<int>(row), async_additions[row]);
    append_sorted(RowKind::api_calls, 0, changes.api_calls);
    append_sorted(RowKind::marks, 0, changes.marks);
    append_sorted(RowKind::overhead, 0, changes.overhead);
}

}  // namespace ember::viewer
