// memory_snapshot_importer.cpp: PyTorch CUDA memory snapshots
// (`torch.cuda.memory._dump_snapshot`, `torch.cuda.memory_snapshot()`) -> ember trace.
//
// A snapshot is a pickle of plain values, read by pickle_reader.h (nothing in it is
// run). Its eras, told apart by the keys present:
//   * up to 1.13: a list of segments (the allocator's state, no events);
//   * 2.0: {segments, device_traces}; blocks have no `address` (it is the segment's
//     address plus the sizes of the blocks before it) and carry `history`;
//   * 2.1: blocks and segments get `address`/`frames`, expandable segments and
//     segment_map/segment_unmap; 2.2: events get `time_us`; 2.3: `allocator_settings`;
//     2.5: `external_annotations`; later: `user_metadata`, `compile_context`.
//
// What it becomes (docs/import.md, "PyTorch memory snapshots"):
//   * each event of device_traces[d] a memory_events row on device d, its `frames`
//     (innermost first) a stack: Python frames (a .py file) keep file and line, C++
//     frames their name;
//   * times: `time_us` * 1000 (wall-clock microseconds). A snapshot older than 2.2
//     has none: its events are placed 1 µs apart in their order, the first at 1 µs,
//     and the run's clock is named so;
//   * memory allocated (reserved) before the trace began — a block freed in the trace
//     without an `alloc`, a block still active in `segments` that the trace never
//     allocated, and likewise for segments — becomes a live_at_start
//     (segment_live_at_start) event the nanosecond before the trace's first event, as
//     PyTorch's memory_viz counts "initially allocated" memory; blocks use the size
//     the trace would have recorded (requested_size, what `alloc` events carry);
//   * `segments` become memory_blocks rows, at the time of the last event (when the
//     snapshot was taken);
//   * external_annotations: START/END pairs become ranges on a thread per device
//     ("memory annotations"), an unpaired one a mark; allocator_settings and
//     user_metadata are kept in run_metadata as JSON.
//
// Streaming: the events are taken from the pickle reader batch by batch as it
// appends them (ListItemsHook), written at once, and never held (pickle_reader.h).
// What is kept per device is what a replay needs: the addresses allocated in the
// trace and not yet freed, and the segments mapped in it.
#include "profiler/import/importers.h"
#include "profiler/import/pickle_reader.h"
#include "common/json_string.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>

namespace ember::importing {

namespace {

using pickle::Kind;
using pickle::Value;
using store::TraceError;
using store::TraceErrorKind;
using trace::MemoryAction;
using trace::MemoryBlockState;
using trace::TimeNs;

std::optional<std::int64_t> integer_at(const Value& dict, std::string_view key) {
    const Value* v = dict.find(key);
    if (v == nullptr || !v->is_integer()) return std::nullopt;
    return v->integer();
}

std::string_view text_at(const Value& dict, std::string_view key) {
    const Value* v = dict.find(key);
    return v != nullptr && v->kind() == Kind::string ? v->text() : std::string_view();
}

std::optional<MemoryAction> action_of(std::string_view name) {
    static constexpr std::pair<std::string_view, MemoryAction> kActions[] = {
        {"alloc", MemoryAction::alloc},
        {"free_requested", MemoryAction::free_requested},
        {"free", MemoryAction::free_requested},  // the name before free_completed existed
        {"free_completed", MemoryAction::free_completed},
        {"segment_alloc", MemoryAction::segment_alloc},
        {"segment_free", MemoryAction::segment_free},
        {"segment_map", MemoryAction::segment_map},
        {"segment_unmap", MemoryAction::segment_unmap},
        {"snapshot", MemoryAction::snapshot},
        {"oom", MemoryAction::oom},
    };
    for (const auto& [text, action] : kActions) {
        if (text == name) return action;
    }
    return std::nullopt;
}

MemoryBlockState block_state_of(std::string_view name) {
    if (name == "active_allocated") return MemoryBlockState::active_allocated;
    if (name == "active_pending_free") return MemoryBlockState::active_pending_free;
    if (name == "inactive") return MemoryBlockState::inactive;
    return MemoryBlockState::unknown;
}

bool is_python_file(std::string_view file, std::int64_t line) {
    auto ends_with = [&](std::string_view suffix) {
        return file.size() >= suffix.size() && file.compare(file.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    return ends_with(".py") || ends_with(".pyx") || (!file.empty() && file.front() == '<' && line > 0);
}

// A value as JSON text (run_metadata keeps allocator_settings and user_metadata so).
void append_json(std::string& out, const Value& v, int depth = 0) {
    auto quote = [&](std::string_view string) { text::append_json_string(out, string); };
    if (depth > 32) {
        out += "null";
        return;
    }
    switch (v.kind()) {
        case Kind::none:
            out += "null";
            return;
        case Kind::boolean:
            out += v.boolean() ? "true" : "false";
            return;
        case Kind::integer:
            out += std::to_string(v.integer());
            return;
        case Kind::real:
            out += std::isfinite(v.real()) ? fmt::format("{}", v.real()) : "null";
            return;
        case Kind::string:
        case Kind::bytes:
            quote(v.text());
            return;
        case Kind::list:
        case Kind::tuple: {
            out.push_back('[');
            bool first = true;
            for (const Value& item : v.items()) {
                if (!first) out.push_back(',');
                first = false;
                append_json(out, item, depth + 1);
            }
            out.push_back(']');
            return;
        }
        case Kind::dict: {
            out.push_back('{');
            bool first = true;
            for (const auto& [key, value] : v.entries()) {
                if (!first) out.push_back(',');
                first = false;
                if (key.kind() == Kind::string) {
                    quote(key.text());
                } else {
                    std::string text;
                    append_json(text, key, depth + 1);
                    quote(text);
                }
                out.push_back(':');
                append_json(out, value, depth + 1);
            }
            out.push_back('}');
            return;
        }
    }
}

class SnapshotImporter {
  public:
    explicit SnapshotImporter(ImportSink& sink) : sink_(sink) {}

    void run() {
        pickle::ReadOptions options;
        options.on_list_items = [this](std::span<const pickle::PathStep> path, const Value& list,
                                       std::vector<Value>& items) { return take_events(path, list, items); };
        Value root = pickle::read_pickle_file(sink_.input(), options);

        const Value* segments = nullptr;
        const Value* traces = nullptr;
        if (root.kind() == Kind::list) {
            segments = &root;  // up to PyTorch 1.13: the segments alone
        } else if (root.kind() == Kind::dict) {
            segments = root.find("segments");
            traces = root.find("device_traces");
        }
        if (segments == nullptr || segments->kind() != Kind::list ||
            (traces != nullptr && traces->kind() != Kind::list)) {
            throw TraceError(
                TraceErrorKind::not_a_trace, sink_.input(),
                fmt::format("a pickle, but not a PyTorch memory snapshot (its top level is a {} without "
                            "a list of `segments`{})",
                            pickle::kind_name(root.kind()), root.kind() == Kind::dict ? " and `device_traces`" : ""));
        }
        check_event_lists(traces);
        era_notes(root);

        const bool any_time = any_event_;
        origin_ns_ = any_time ? first_ns_ - 1 : 0;
        snapshot_ns_ = any_time ? last_ns_ : 0;
        read_segments(*segments);
        for (auto& [device, state] : devices_) {
            emit_live_before(device, state);
            trace::DeviceInfo info;
            info.device_id = device;
            sink_.describe_device(info);
        }
        if (root.kind() == Kind::dict) {
            if (const Value* annotations = root.find("external_annotations")) read_annotations(*annotations);
            if (const Value* settings = root.find("allocator_settings"))
                keep_json("memory_allocator_settings", *settings);
            if (const Value* user = root.find("user_metadata")) keep_json("memory_user_metadata", *user);
        }
        sink_.run().clock_name = has_times_ ? "CLOCK_REALTIME (PyTorch allocator trace time_us)"
                                            : "event order (no time_us before PyTorch 2.2: events 1 us apart)";
        if (!has_times_ && any_time) {
            sink_.note(
                "the snapshot's events have no time_us (PyTorch before 2.2): they are placed 1 us "
                "apart in "
                "their order");
        }
    }

  private:
    struct DeviceState {
        std::shared_ptr<pickle::Container> list;                    // the device_traces list the events came from
        std::int64_t index = 0;                                     // events seen
        std::unordered_map<std::uint64_t, std::int64_t> allocated;  // in the trace, not freed yet
        std::map<std::uint64_t, std::int64_t> mapped;               // segments allocated/mapped in the trace
        std::vector<trace::MemoryEvent> live_before;                // freed in the trace, never allocated in it
    };

    [[noreturn]] void refuse_strict(const std::string& where) {
        throw TraceError(TraceErrorKind::bad_value, sink_.input(), where);
    }
    void invalid(std::string_view reason, std::string where) {
        if (sink_.options().strict) refuse_strict(where + ": " + std::string(reason));
        sink_.invalid(reason, std::move(where));
    }

    // --- events (device_traces), as the reader appends them ------------------------------------
    bool take_events(std::span<const pickle::PathStep> path, const Value& list, std::vector<Value>& items) {
        if (path.size() != 2 || path[0].key != "device_traces" || path[1].index < 0) return false;
        if (path[1].index > std::numeric_limits<trace::DeviceId>::max() / 2) return false;
        const auto device = static_cast<trace::DeviceId>(path[1].index);
        DeviceState& state = devices_[device];
        if (!state.list) {
            state.list = list.shared_container();
        } else if (state.list.get() != list.container()) {
            return false;  // not where it seemed: left in the tree, and check_event_lists refuses
                           // the file
        }
        for (const Value& item : items) {
            const std::int64_t index = state.index++;
            event(device, state, item, index);
        }
        return true;
    }

    void event(trace::DeviceId device, DeviceState& state, const Value& item, std::int64_t index) {
        auto where = [&] { return fmt::format("device_traces[{}] event #{}", device, index); };
        if (item.kind() != Kind::dict) {
            return invalid("event that is not a dict",
                           fmt::format("{}: a {}", where(), pickle::kind_name(item.kind())));
        }
        const std::string_view action_name = text_at(item, "action");
        const std::optional<MemoryAction> action = action_of(action_name);
        if (!action) {
            return invalid("event with an unknown action",
                           fmt::format("{}: action '{}'", where(), action_name.substr(0, 64)));
        }
        trace::MemoryEvent e;
        e.device_id = device;
        e.action = *action;
        const std::optional<std::int64_t> size = integer_at(item, "size");
        if (!size || *size < 0) {
            return invalid("event without a size of 0 or more",
                           fmt::format("{}: {} without a valid size", where(), action_name));
        }
        e.bytes = *size;
        e.address = static_cast<std::uint64_t>(integer_at(item, "addr").value_or(0));
        e.cuda_stream = static_cast<std::uint64_t>(integer_at(item, "stream").value_or(0));
        if (e.action == MemoryAction::oom) e.device_free_bytes = integer_at(item, "device_free").value_or(-1);
        if (const std::optional<std::int64_t> time_us = integer_at(item, "time_us")) {
            if (*time_us < 0 || *time_us > std::numeric_limits<TimeNs>::max() / 1000) {
                return invalid("event time out of range", fmt::format("{}: time_us {}", where(), *time_us));
            }
            e.time_ns = *time_us * 1000;
            has_times_ = true;
        } else if (has_times_) {
            e.time_ns = last_ns_;  // a time missing among times: the previous one
        } else {
            e.time_ns = (index + 1) * 1000;
        }
        e.stack_id = stack_of(item.find("frames"));
        sink_.memory_event(e);
        if (!any_event_ || e.time_ns < first_ns_) first_ns_ = e.time_ns;
        if (!any_event_ || e.time_ns > last_ns_) last_ns_ = e.time_ns;
        any_event_ = true;
        replay(state, e);
    }

    // What was allocated before the trace shows itself as a free without its alloc.
    void replay(DeviceState& state, const trace::MemoryEvent& e) {
        switch (e.action) {
            case MemoryAction::alloc:
                state.allocated[e.address] = e.bytes;
                return;
            case MemoryAction::free_completed:
                if (state.allocated.erase(e.address) == 0) {
                    trace::MemoryEvent before = e;
                    before.action = MemoryAction::live_at_start;
                    before.stack_id = 0;  // allocated where the trace does not say
                    state.live_before.push_back(before);
                }
                return;
            case MemoryAction::segment_alloc:
            case MemoryAction::segment_map:
                state.mapped[e.address] += e.bytes;
                return;
            case MemoryAction::segment_free:
            case MemoryAction::segment_unmap: {
                auto found = state.mapped.find(e.address);
                std::int64_t from_trace = 0;
                if (found != state.mapped.end()) {
                    from_trace = std::min(found->second, e.bytes);
                    found->second -= from_trace;
                    if (found->second <= 0) state.mapped.erase(found);
                }
                if (e.bytes > from_trace) {
                    trace::MemoryEvent before = e;
                    before.action = MemoryAction::segment_live_at_start;
                    before.bytes = e.bytes - from_trace;
                    before.stack_id = 0;
                    state.live_before.push_back(before);
                }
                return;
            }
            default:
                return;
        }
    }

    void check_event_lists(const Value* traces) {
        for (const auto& [device, state] : devices_) {
            const bool placed = traces != nullptr && static_cast<std::size_t>(device) < traces->size() &&
                                traces->items()[static_cast<std::size_t>(device)].container() == state.list.get();
            if (!placed) {
                throw TraceError(TraceErrorKind::corrupt, sink_.input(),
                                 fmt::format("events read as device_traces[{}] are not in that list of the finished "
                                             "snapshot (an unusual pickle layout); refused rather than misplaced",
                                             device));
            }
        }
        if (traces == nullptr) return;
        std::size_t index = 0;
        for (const Value& list : traces->items()) {
            const std::size_t device = index++;
            if (list.kind() != Kind::list) {
                invalid("device trace that is not a list",
                        fmt::format("device_traces[{}]: a {}", device, pickle::kind_name(list.kind())));
            } else if (list.size() > 0) {
                // Events the hook did not take (a list it could not place): refused above, or none.
                invalid("device trace events not read",
                        fmt::format("device_traces[{}]: {} events", device, list.size()));
            }
        }
    }

    void era_notes(const Value& root) {
        if (root.kind() == Kind::list) {
            sink_.note(
                "a list of segments (PyTorch 1.13 or torch.cuda.memory_snapshot()): the "
                "allocator's state, no events");
            return;
        }
        static constexpr std::string_view kKnown[] = {"segments", "device_traces", "allocator_settings",
                                                      "external_annotations", "user_metadata"};
        for (const auto& [key, value] : root.entries()) {
            if (key.kind() != Kind::string ||
                std::find(std::begin(kKnown), std::end(kKnown), key.text()) == std::end(kKnown)) {
                sink_.skip(
                    fmt::format("top-level key '{}' of the snapshot", key.kind() == Kind::string ? key.text() : "?"));
            }
        }
    }

    // --- stacks ------------------------------------------------------------------------------
    // Frame lists and frame dicts are shared through the pickle's memo: each is turned into
    // ids once (the cache holds them, so an address is never reused while cached).
    trace::StackId stack_of(const Value* frames) {
        if (frames == nullptr || frames->kind() != Kind::list || frames->size() == 0) return 0;
        if (auto found = stacks_.find(frames->container()); found != stacks_.end()) return found->second.second;
        std::vector<trace::FrameId> ids;
        ids.reserve(frames->size());
        std::span<const Value> items = frames->items();
        for (std::size_t i = items.size(); i-- > 0;) {  // innermost first -> outermost first
            if (std::optional<trace::FrameId> id = frame_of(items[i])) ids.push_back(*id);
        }
        const trace::StackId id = ids.empty() ? 0 : sink_.stack(ids);
        if (stacks_.size() >= kCacheLimit) stacks_.clear();
        stacks_.emplace(frames->container(), std::make_pair(frames->shared_container(), id));
        return id;
    }

    std::optional<trace::FrameId> frame_of(const Value& frame) {
        if (frame.kind() != Kind::dict) return std::nullopt;
        if (auto found = frames_.find(frame.container()); found != frames_.end()) return found->second.second;
        const std::string_view name = text_at(frame, "name");
        const std::string_view file = text_at(frame, "filename");
        const std::int64_t line = integer_at(frame, "line").value_or(0);
        trace::FrameId id;
        if (is_python_file(file, line)) {
            id = sink_.frame(name, file, 0, static_cast<std::int32_t>(std::clamp<std::int64_t>(line, 0, 1 << 30)));
        } else {
            id = sink_.frame(name, file == "??" ? std::string_view() : file, 0);
        }
        if (frames_.size() >= kCacheLimit) frames_.clear();
        frames_.emplace(frame.container(), std::make_pair(frame.shared_container(), id));
        return id;
    }

    // --- segments: the allocator's state when the snapshot was taken ----------------------------
    void read_segments(const Value& segments) {
        std::size_t index = 0;
        for (const Value& segment : segments.items()) {
            const std::size_t at = index++;
            auto where = [&] { return fmt::format("segments[{}]", at); };
            if (segment.kind() != Kind::dict) {
                invalid("segment that is not a dict",
                        fmt::format("{}: a {}", where(), pickle::kind_name(segment.kind())));
                continue;
            }
            const std::optional<std::int64_t> address = integer_at(segment, "address");
            const std::optional<std::int64_t> total = integer_at(segment, "total_size");
            const Value* blocks = segment.find("blocks");
            if (!address || !total || *total < 0 || blocks == nullptr || blocks->kind() != Kind::list) {
                invalid("segment without address, total_size and blocks", where());
                continue;
            }
            const auto device = static_cast<trace::DeviceId>(std::clamp<std::int64_t>(
                integer_at(segment, "device").value_or(0), 0, std::numeric_limits<trace::DeviceId>::max()));
            DeviceState& state = devices_[device];
            trace::MemoryBlock row;
            row.time_ns = snapshot_ns_;
            row.device_id = device;
            row.segment_address = static_cast<std::uint64_t>(*address);
            row.segment_bytes = *total;
            row.cuda_stream = static_cast<std::uint64_t>(integer_at(segment, "stream").value_or(0));
            row.small_pool = text_at(segment, "segment_type") == "small";
            if (const Value* expandable = segment.find("is_expandable"))
                row.expandable_segment = expandable->is_integer() && expandable->integer() != 0;

            // Reserved before the trace: what of [address, address + total) the trace did not map.
            std::int64_t mapped_in_trace = 0;
            const std::uint64_t begin = row.segment_address, end = begin + static_cast<std::uint64_t>(*total);
            for (auto it = state.mapped.lower_bound(begin); it != state.mapped.end() && it->first < end; ++it)
                mapped_in_trace += it->second;
            if (*total > mapped_in_trace) {
                trace::MemoryEvent before;
                before.device_id = device;
                before.action = MemoryAction::segment_live_at_start;
                before.address = row.segment_address;
                before.bytes = *total - mapped_in_trace;
                before.cuda_stream = row.cuda_stream;
                before.stack_id = stack_of(segment.find("frames"));
                state.live_before.push_back(before);
            }

            std::uint64_t next_address = row.segment_address;  // 2.0: blocks follow each other
            std::size_t block_index = 0;
            for (const Value& block : blocks->items()) {
                const std::size_t b = block_index++;
                if (block.kind() != Kind::dict) {
                    invalid("block that is not a dict", fmt::format("{} block {}", where(), b));
                    continue;
                }
                const std::optional<std::int64_t> size = integer_at(block, "size");
                if (!size || *size < 0) {
                    invalid("block without a size", fmt::format("{} block {}", where(), b));
                    continue;
                }
                trace::MemoryBlock out = row;
                out.address = static_cast<std::uint64_t>(
                    integer_at(block, "address").value_or(static_cast<std::int64_t>(next_address)));
                next_address = out.address + static_cast<std::uint64_t>(*size);
                out.bytes = *size;
                out.requested_bytes = integer_at(block, "requested_size").value_or(*size);
                out.state = block_state_of(text_at(block, "state"));
                const Value* frames = block.find("frames");
                if (frames == nullptr) {  // 2.0: the latest history entry says where it was allocated
                    const Value* history = block.find("history");
                    if (history != nullptr && history->kind() == Kind::list && history->size() > 0) {
                        const Value& latest = history->items().back();
                        if (latest.kind() == Kind::dict) frames = latest.find("frames");
                    }
                }
                out.stack_id = stack_of(frames);
                sink_.memory_block(out);
                if (out.state == MemoryBlockState::active_allocated && !state.allocated.count(out.address)) {
                    trace::MemoryEvent before;
                    before.device_id = device;
                    before.action = MemoryAction::live_at_start;
                    before.address = out.address;
                    before.bytes = out.requested_bytes;
                    before.cuda_stream = out.cuda_stream;
                    before.stack_id = out.stack_id;
                    state.live_before.push_back(before);
                }
            }
        }
    }

    void emit_live_before(trace::DeviceId, DeviceState& state) {
        for (trace::MemoryEvent& e : state.live_before) {
            e.time_ns = origin_ns_;
            sink_.memory_event(e);
        }
        state.live_before.clear();
        state.live_before.shrink_to_fit();
    }

    // --- annotations and settings --------------------------------------------------------------
    void read_annotations(const Value& annotations) {
        if (annotations.kind() != Kind::list) {
            invalid("external_annotations that is not a list", "external_annotations");
            return;
        }
        // START/END pairs per (device, name), innermost first.
        std::map<std::pair<std::int64_t, std::string>, std::vector<TimeNs>> open;
        std::uint64_t arrival = 0;
        std::size_t index = 0;
        auto thread_of = [&](std::int64_t device) {
            sink_.name_thread(0, device, fmt::format("memory annotations (device {})", device));
            return sink_.thread(0, device);
        };
        auto mark = [&](std::int64_t device, std::string_view name, TimeNs time) {
            trace::MarkEvent m;
            m.time_ns = time;
            m.thread_id = thread_of(device);
            m.name_id = sink_.intern(name);
            sink_.mark(m);
        };
        for (const Value& a : annotations.items()) {
            const std::size_t at = index++;
            if (a.kind() != Kind::dict) {
                invalid("annotation that is not a dict", fmt::format("external_annotations[{}]", at));
                continue;
            }
            const std::optional<std::int64_t> time_us = integer_at(a, "time_us");
            if (!time_us || *time_us < 0 || *time_us > std::numeric_limits<TimeNs>::max() / 1000) {
                invalid("annotation without a time", fmt::format("external_annotations[{}]", at));
                continue;
            }
            const TimeNs time = *time_us * 1000;
            const std::int64_t device = std::clamp<std::int64_t>(integer_at(a, "device").value_or(0), 0, 1 << 20);
            const std::string name(text_at(a, "name"));
            const std::string_view stage = text_at(a, "stage");
            auto& starts = open[{device, name}];
            if (stage == "START") {
                starts.push_back(time);
            } else if (stage == "END" && !starts.empty() && starts.back() <= time) {
                PendingRange range;
                range.start_ns = starts.back();
                range.end_ns = time;
                range.arrival = ++arrival;
                range.thread_id = thread_of(device);
                range.name_id = sink_.intern(name);
                sink_.nested_range(range);
                starts.pop_back();
            } else {
                mark(device, name, time);
            }
        }
        for (const auto& [key, starts] : open) {
            for (TimeNs start : starts) mark(key.first, key.second, start);
        }
    }

    void keep_json(std::string_view key, const Value& value) {
        std::string json;
        append_json(json, value);
        sink_.metadata(key, json);
    }

    static constexpr std::size_t kCacheLimit = 1u << 20;

    ImportSink& sink_;
    std::map<trace::DeviceId, DeviceState> devices_;
    std::unordered_map<const pickle::Container*, std::pair<std::shared_ptr<pickle::Container>, trace::StackId>> stacks_;
    std::unordered_map<const pickle::Container*, std::pair<std::shared_ptr<pickle::Container>, trace::FrameId>> frames_;
    bool any_event_ = false;
    bool has_times_ = false;
    TimeNs first_ns_ = 0;
    TimeNs last_ns_ = 0;
    TimeNs origin_ns_ = 0;
    TimeNs snapshot_ns_ = 0;
};

}  // namespace

void import_memory_snapshot(ImportSink& sink) {
    SnapshotImporter importer(sink);
    importer.run();
}

}  // namespace ember::importing
