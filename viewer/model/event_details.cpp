// event_details.cpp: lazily read event details and flow partners (event_details.h).
#include "viewer/model/event_details.h"

#include "viewer/model/view_state.h"

#include "profiler/analysis/gpu_memory.h"
#include "profiler/analysis/operation_names.h"

#include <algorithm>
#include <bit>
#include <cstdio>

namespace ember::viewer {

using trace::TimeNs;

namespace {

std::string number(std::uint64_t value) {
    return std::to_string(value);
}

std::string payload_text(std::uint8_t kind, std::uint64_t bits) {
    const auto payload_kind = static_cast<trace::PayloadKind>(kind);
    if (payload_kind == trace::PayloadKind::integer) return std::to_string(static_cast<std::int64_t>(bits));
    if (payload_kind == trace::PayloadKind::real) {
        char text[64];
        std::snprintf(text, sizeof text, "%.6g", std::bit_cast<double>(bits));
        return text;
    }
    return "";
}

std::string hex_color(std::uint32_t argb) {
    char text[16];
    std::snprintf(text, sizeof text, "#%08x", argb);
    return text;
}

}  // namespace

std::vector<DetailLine> describe_event(TraceModel& model, const EventRef& ref) {
    std::vector<DetailLine> lines;
    const TimelineEvent* event = model.event(ref);
    if (event == nullptr) return lines;
    const Lane& lane = model.lane(ref.lane);
    TraceFile& file = model.file(lane.file_index);
    const TimeNs file_start = event->start_ns - file.shift_ns;
    const TimeNs file_end = event->end_ns - file.shift_ns;

    lines.push_back({"name", std::string(model.name(event->name_id))});
    lines.push_back({"kind", event_kind_name(event->kind)});
    lines.push_back({"start", format_duration(static_cast<double>(event->start_ns - model.begin_ns())) +
                                  " (trace time " + std::to_string(file_start) + " ns)"});
    lines.push_back({"duration", format_duration(static_cast<double>(event->duration_ns()))});
    lines.push_back({"lane", lane.group + " / " + lane.title});
    if (model.files().size() > 1) lines.push_back({"file", file.shown_as});

    store::EventQuery query;
    query.track = lane.track_id;
    query.begin_ns = file_start;
    query.end_ns = file_start + 1;
    store::TraceReader& reader = *file.reader;
    try {
        switch (event->kind) {
            case EventKind::kernel: {
                std::optional<trace::KernelEvent> found;
                reader.for_each_kernel(query, [&](const trace::KernelEvent& kernel) {
                    if (kernel.start_ns == file_start && kernel.end_ns == file_end) {
                        found = kernel;
                        return false;
                    }
                    return true;
                });
                lines.push_back({"correlation id", number(event->link)});
                if (found) {
                    const trace::LaunchConfig& launch = found->launch;
                    lines.push_back({"grid", number(launch.grid_x) + " x " + number(launch.grid_y) + " x " +
                                                 number(launch.grid_z)});
                    lines.push_back({"block", number(launch.block_x) + " x " + number(launch.block_y) + " x " +
                                                  number(launch.block_z)});
                    lines.push_back({"registers per thread", number(launch.registers_per_thread)});
                    lines.push_back({"static shared memory", format_bytes(launch.static_shared_bytes)});
                    lines.push_back({"dynamic shared memory", format_bytes(launch.dynamic_shared_bytes)});
                    lines.push_back({"device", std::to_string(found->device_id)});
                }
                break;
            }
            case EventKind::memcpy: {
                lines.push_back(
                    {"bytes", format_bytes(static_cast<double>(event->value)) + " (" + number(event->value) + ")"});
                if (event->duration_ns() > 0)
                    lines.push_back({"bandwidth", format_bytes(static_cast<double>(event->value) * 1e9 /
                                                               static_cast<double>(event->duration_ns())) +
                                                      "/s"});
                lines.push_back(
                    {"direction", trace::direction_name(static_cast<trace::MemcpyDirection>(event->detail))});
                lines.push_back(
                    {"source memory", trace::memory_kind_name(static_cast<trace::MemoryKind>(event->extra & 0xff))});
                lines.push_back(
                    {"destination memory", trace::memory_kind_name(static_cast<trace::MemoryKind>(event->extra >> 8))});
                lines.push_back({"correlation id", number(event->link)});
                break;
            }
            case EventKind::memset: {
                lines.push_back({"bytes", format_bytes(static_cast<double>(event->value))});
                lines.push_back({"memory", trace::memory_kind_name(static_cast<trace::MemoryKind>(event->extra))});
                lines.push_back({"correlation id", number(event->link)});
                reader.for_each_memset(query, [&](const trace::MemsetEvent& memset) {
                    if (memset.start_ns != file_start) return true;
                    lines.push_back({"value", number(memset.value)});
                    return false;
                });
                break;
            }
            case EventKind::sync:
                lines.push_back({"sync kind", trace::sync_kind_name(static_cast<trace::SyncKind>(event->detail))});
                lines.push_back({"CUDA event", number(event->value)});
                lines.push_back({"correlation id", number(event->link)});
                break;
            case EventKind::api_call:
                lines.push_back({"correlation id", number(event->link)});
                lines.push_back({"result", event->extra ? "error" : "success"});
                if (event->extra) {
                    reader.for_each_api_call(query, [&](const trace::ApiEvent& call) {
                        if (call.start_ns != file_start) return true;
                        lines.push_back({"error code", std::to_string(call.result)});
                        return false;
                    });
                }
                break;
            case EventKind::range: {
                lines.push_back({"range id", number(event->link)});
                lines.push_back({"category", std::to_string(event->extra)});
                const std::string payload = payload_text(event->detail, event->value);
                if (!payload.empty()) lines.push_back({"payload", payload});
                if (auto range = reader.range(event->link)) {
                    lines.push_back(
                        {"domain", range->domain_id ? std::string(reader.string(range->domain_id)) : "(default)"});
                    lines.push_back({"depth", std::to_string(range->depth)});
                    if (range->color) lines.push_back({"color", hex_color(range->color)});
                    if (range->parent_range_id) {
                        auto parent = reader.range(range->parent_range_id);
                        std::string text;
                        if (parent) text.append(reader.string(parent->name_id)).append(" ");
                        text.append("#").append(number(range->parent_range_id));
                        lines.push_back({"parent", text});
                    }
                }
                break;
            }
            case EventKind::mark: {
                lines.push_back({"category", std::to_string(event->extra)});
                const std::string payload = payload_text(event->detail, event->value);
                if (!payload.empty()) lines.push_back({"payload", payload});
                break;
            }
            case EventKind::overhead:
                break;
        }
    } catch (const std::exception& error) {
        lines.push_back({"error", error.what()});
    }
    return lines;
}

std::optional<EventRef> find_flow_partner(const TraceModel& model, const EventRef& ref) {
    const TimelineEvent* event = model.event(ref);
    if (event == nullptr || event->link == 0) return std::nullopt;
    const bool from_api = event->kind == EventKind::api_call;
    const bool from_gpu =
        event->kind == EventKind::kernel || event->kind == EventKind::memcpy || event->kind == EventKind::memset;
    if (!from_api && !from_gpu) return std::nullopt;
    const int file = model.lane(ref.lane).file_index;
    for (int lane_index = 0; lane_index < model.lane_count(); ++lane_index) {
        const Lane& lane = model.lane(lane_index);
        if (lane.file_index != file || !lane.ready.load(std::memory_order_acquire)) continue;
        if (from_api != (lane.kind == LaneKind::stream)) continue;
        for (int row_index = 0; row_index < static_cast<int>(lane.rows.size()); ++row_index) {
            const Row& row = lane.rows[static_cast<std::size_t>(row_index)];
            const RowKind wanted = from_api ? RowKind::gpu_work : RowKind::api_calls;
            if (row.kind != wanted) continue;
            for (std::size_t index = 0; index < row.events.size(); ++index)
                if (row.events[index].link == event->link)
                    return EventRef{lane_index, row_index, static_cast<std::uint32_t>(index)};
        }
    }
    return std::nullopt;
}

std::vector<DetailLine> describe_memory_at(TraceModel& model, int lane_index, trace::TimeNs time, std::size_t top) {
    std::vector<DetailLine> lines;
    if (lane_index < 0 || lane_index >= model.lane_count()) return lines;
    const Lane& lane = model.lane(lane_index);
    if (lane.kind != LaneKind::memory) return lines;
    TraceFile& file = model.file(lane.file_index);
    const trace::TimeNs file_time = time - file.shift_ns;
    lines.push_back({"lane", lane.group + " / GPU memory"});
    lines.push_back({"at", format_duration(static_cast<double>(time - model.begin_ns())) + " (trace time " +
                               std::to_string(file_time) + " ns)"});
    try {
        const analysis::GpuMemoryAt at =
            analysis::gpu_memory_at(*file.reader, static_cast<trace::DeviceId>(lane.track_id), file_time);
        lines.push_back({"allocated", format_bytes(static_cast<double>(at.allocated_bytes)) + " in " +
                                          std::to_string(at.live_blocks) + " live blocks"});
        lines.push_back({"reserved", format_bytes(static_cast<double>(at.reserved_bytes))});
        for (std::size_t i = 0; i < at.by_op.size() && i < top; ++i) {
            const analysis::GpuMemoryPlace& place = at.by_op[i];
            lines.push_back({"allocated in " + place.place, format_bytes(static_cast<double>(place.bytes)) + " in " +
                                                                std::to_string(place.blocks) +
                                                                (place.blocks == 1 ? " block" : " blocks")});
        }
        if (at.by_op.size() > top)
            lines.push_back({"... ", std::to_string(at.by_op.size() - top) + " more allocating ops"});
        for (std::size_t i = 0; i < at.by_line.size() && i < top; ++i) {
            const analysis::GpuMemoryPlace& place = at.by_line[i];
            lines.push_back({"allocated at " + place.place, format_bytes(static_cast<double>(place.bytes)) + " in " +
                                                                std::to_string(place.blocks) +
                                                                (place.blocks == 1 ? " block" : " blocks")});
        }
        if (at.by_line.size() > top)
            lines.push_back({"...", std::to_string(at.by_line.size() - top) + " more allocating lines"});
    } catch (const store::TraceError& error) {
        lines.push_back({"error", error.what()});
    }
    return lines;
}

std::optional<EventRef> find_range_event(const TraceModel& model, int file_index, const trace::RangeEvent& range) {
    if (file_index < 0 || file_index >= static_cast<int>(model.files().size())) return std::nullopt;
    const trace::TimeNs start = range.start_ns + model.files()[static_cast<std::size_t>(file_index)].shift_ns;
    for (int lane_index = 0; lane_index < model.lane_count(); ++lane_index) {
        const Lane& lane = model.lane(lane_index);
        if (lane.file_index != file_index || lane.kind != LaneKind::thread || lane.track_id != range.thread_id ||
            !lane.ready.load(std::memory_order_acquire))
            continue;
        for (int row_index = 0; row_index < static_cast<int>(lane.rows.size()); ++row_index) {
            const Row& row = lane.rows[static_cast<std::size_t>(row_index)];
            if (row.kind != RowKind::ranges && row.kind != RowKind::async_ranges) continue;
            if (row.kind == RowKind::ranges && row.depth != range.depth) continue;
            auto first = std::lower_bound(row.events.begin(), row.events.end(), start,
                                          [](const TimelineEvent& e, trace::TimeNs t) { return e.start_ns < t; });
            for (auto it = first; it != row.events.end() && it->start_ns == start; ++it)
                if (it->kind == EventKind::range && it->link == range.range_id)
                    return EventRef{lane_index, row_index, static_cast<std::uint32_t>(it - row.events.begin())};
        }
    }
    return std::nullopt;
}

std::vector<LiveBlockLink> live_blocks_at(TraceModel& model, int lane_index, trace::TimeNs time, std::size_t top) {
    std::vector<LiveBlockLink> links;
    if (lane_index < 0 || lane_index >= model.lane_count() || top == 0) return links;
    const Lane& lane = model.lane(lane_index);
    if (lane.kind != LaneKind::memory) return links;
    TraceFile& file = model.file(lane.file_index);
    try {
        const analysis::GpuMemoryAt at = analysis::gpu_memory_at(
            *file.reader, static_cast<trace::DeviceId>(lane.track_id), time - file.shift_ns, top);
        for (const analysis::GpuMemoryBlock& block : at.blocks) {
            LiveBlockLink link;
            link.address = block.address;
            link.bytes = block.bytes;
            link.alloc_ns = block.alloc_ns + file.shift_ns;
            link.op = block.op;
            link.line = block.line;
            if (block.stack_id != 0)
                for (const trace::FrameInfo& frame : file.reader->stack_frames(block.stack_id))
                    link.stack.push_back(frame.is_python() ? analysis::python_frame_name(frame) : frame.function);
            if (block.op_range) link.op_event = find_range_event(model, lane.file_index, *block.op_range);
            links.push_back(std::move(link));
        }
    } catch (const store::TraceError&) {
        links.clear();
    }
    return links;
}

}  // namespace ember::viewer
