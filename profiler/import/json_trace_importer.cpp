// json_trace_importer.cpp: the Trace Event Format phases every JSON dialect shares.
//
// Index:
//   [SECTION] Names: copies, memsets, NCCL
//   [SECTION] The loop
//   [SECTION] Phases: B/E, b/e, instants, counters, metadata
#include "profiler/import/json_trace_importer.h"
#include "profiler/import/gpu_activity.h"

#include "profiler/store/trace_error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>

namespace ember::importing {

using trace::MemcpyDirection;
using trace::MemoryKind;

// ---------------------------------------------------------------------------
// [SECTION] Names: copies, memsets, NCCL
// ---------------------------------------------------------------------------

namespace {

bool equals_ignoring_case(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
            return false;
    }
    return true;
}

std::uint32_t clamp_to_u32(std::int64_t value) {
    return static_cast<std::uint32_t>(std::clamp<std::int64_t>(value, 0, 0xffffffffll));
}

std::string_view trim(std::string_view text) {
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
    return text;
}

}  // namespace

MemoryKind memory_kind_from_word(std::string_view word) {
    word = trim(word);
    if (equals_ignoring_case(word, "pageable")) return MemoryKind::pageable;
    if (equals_ignoring_case(word, "pinned")) return MemoryKind::pinned;
    if (equals_ignoring_case(word, "device")) return MemoryKind::device;
    if (equals_ignoring_case(word, "managed")) return MemoryKind::managed;
    if (equals_ignoring_case(word, "array")) return MemoryKind::array;
    return MemoryKind::unknown;
}

CopyShape copy_shape_from_name(std::string_view name) {
    CopyShape shape;
    std::size_t space = name.find(' ');
    if (space == std::string_view::npos) return shape;
    std::string_view rest = name.substr(space + 1);
    std::string_view direction = rest.substr(0, rest.find(' '));
    // Array copies keep their direction across the host/device line; the array side
    // shows in the memory kind.
    if (direction == "HtoD" || direction == "HtoA") {
        shape.direction = MemcpyDirection::host_to_device;
    } else if (direction == "DtoH" || direction == "AtoH") {
        shape.direction = MemcpyDirection::device_to_host;
    } else if (direction == "DtoD" || direction == "DtoA" || direction == "AtoD" || direction == "AtoA") {
        shape.direction = MemcpyDirection::device_to_device;
    } else if (direction == "HtoH") {
        shape.direction = MemcpyDirection::host_to_host;
    } else if (direction == "PtoP") {
        shape.direction = MemcpyDirection::peer_to_peer;
    }
    std::size_t open = rest.find('(');
    std::size_t arrow = rest.find("->", open == std::string_view::npos ? 0 : open);
    std::size_t close = rest.find(')', arrow == std::string_view::npos ? 0 : arrow);
    if (open != std::string_view::npos && arrow != std::string_view::npos && close != std::string_view::npos) {
        shape.source = memory_kind_from_word(rest.substr(open + 1, arrow - open - 1));
        shape.destination = memory_kind_from_word(rest.substr(arrow + 2, close - arrow - 2));
    }
    return shape;
}

MemoryKind memset_kind_from_name(std::string_view name) {
    std::size_t open = name.find('(');
    std::size_t close = name.find(')', open == std::string_view::npos ? 0 : open);
    if (open == std::string_view::npos || close == std::string_view::npos) return MemoryKind::device;
    MemoryKind kind = memory_kind_from_word(name.substr(open + 1, close - open - 1));
    return kind == MemoryKind::unknown ? MemoryKind::device : kind;
}

bool is_nccl_kernel(std::string_view name) {
    if (name.substr(0, 5) == "void ") name.remove_prefix(5);
    return name.substr(0, 4) == "nccl" || name.find("ncclKernel") != std::string_view::npos ||
           name.find("ncclDevKernel") != std::string_view::npos;
}

// ---------------------------------------------------------------------------
// [SECTION] The loop
// ---------------------------------------------------------------------------

// Chunks of 256 KiB and batches of 128 KiB: the parsing thread starts after the first
// 128 KiB of text rather than after a whole 4 MiB chunk was inflated and 1 MiB scanned
// (most of a small trace), and eight batches in flight keep the two threads apart.
JsonTraceImporter::JsonTraceImporter(ImportSink& sink)
    : sink_(sink), input_(sink.input(), std::size_t{256} << 10), parser_(input_) {}

JsonTraceImporter::~JsonTraceImporter() = default;

void JsonTraceImporter::run() {
    // Reading, inflating and finding the elements run on a thread of their own; this
    // thread parses and hands the events to the writer, whose thread stores them.
    ScanAhead scanner(input_, wanted_top_level_keys(), std::size_t{128} << 10, 8);
    JsonItem item;
    TraceEventFields event;
    while (scanner.next(item)) {
        if (item.kind == JsonItem::Kind::top_level_value) {
            on_top_level(item);
            continue;
        }
        parser_.parse_event(item, event);
        events_seen_ = true;
        dispatch(event, item);
    }
    if (!scanner.saw_trace_events()) {
        throw store::TraceError(store::TraceErrorKind::not_a_trace, input_.path(),
                                "not a trace: the JSON has no traceEvents array");
    }
    for (const auto& [thread, open] : open_durations_) {
        if (!open.empty())
            sink_.skip("\"B\" event never ended (\"E\" missing)", static_cast<std::int64_t>(open.size()));
    }
    for (const auto& [key, open] : open_async_) {
        if (!open.empty())
            sink_.skip("async range never ended (\"e\" missing)", static_cast<std::int64_t>(open.size()));
    }
    finish_dialect();
}

std::int64_t JsonTraceImporter::id_number(const JsonId& id) {
    if (!id.present) return 0;
    if (!id.is_text) return id.number;
    auto found = text_ids_.find(std::string(id.text));
    if (found != text_ids_.end()) return found->second;
    // Negative and far from OS ids, stable for the import.
    std::int64_t number = -1'000'000'000ll - static_cast<std::int64_t>(text_ids_.size());
    text_ids_.emplace(std::string(id.text), number);
    return number;
}

trace::ThreadId JsonTraceImporter::host_thread(const TraceEventFields& event) {
    return sink_.thread(id_number(event.pid), id_number(event.tid));
}

bool JsonTraceImporter::reject(const JsonItem& item, std::string_view reason, const std::string& detail) {
    std::string where =
        fmt::format("traceEvents element #{} at {}: {}", item.index, input_.describe_offset(item.offset), detail);
    if (sink_.options().strict)
        throw store::TraceError(store::TraceErrorKind::bad_value, input_.path(), std::move(where));
    sink_.invalid(reason, std::move(where));
    return false;
}

bool JsonTraceImporter::complete_interval(const TraceEventFields& event, const JsonItem& item, trace::TimeNs& start,
                                          trace::TimeNs& end) {
    if (!event.has_ts) return reject(item, "event without \"ts\"", fmt::format("\"{}\" has no \"ts\"", event.name));
    trace::TimeNs duration = event.has_dur ? event.dur_ns : 0;
    if (duration < 0) {
        return reject(item, "negative duration",
                      fmt::format("\"{}\" has a negative duration ({} ns)", event.name, duration));
    }
    start = event_time(event.ts_ns);
    if (start > std::numeric_limits<trace::TimeNs>::max() - duration) {
        return reject(item, "time out of range", fmt::format("\"{}\" ends past the largest time", event.name));
    }
    end = start + duration;
    return true;
}

JsonTraceImporter::RangeStyle JsonTraceImporter::range_style(const TraceEventFields& event) {
    RangeStyle style;
    style.domain_id = sink_.intern(event.category);
    style.category = event.args.nvtx_category ? static_cast<std::uint32_t>(*event.args.nvtx_category) : 0;
    return style;
}

void JsonTraceImporter::collective_call(const TraceEventFields& event, trace::TimeNs start, std::uint32_t track,
                                        bool on_stream) {
    const TraceEventArgs& args = event.args;
    if (args.collective_name.empty() && args.group_name.empty()) return;
    trace::CollectiveCall call;
    call.start_ns = start;
    call.track_id = track;
    call.on_stream = on_stream;
    call.name_id = sink_.intern(args.collective_name);
    call.group_name_id = sink_.intern(args.group_name);
    call.group_desc_id = sink_.intern(args.group_desc);
    call.group_ranks_id = sink_.intern(args.group_ranks);
    call.group_size = static_cast<std::int32_t>(std::clamp<std::int64_t>(args.group_size.value_or(0), 0, 1 << 30));
    call.sequence = args.sequence.value_or(-1);
    call.in_elements = args.in_elements.value_or(-1);
    call.out_elements = args.out_elements.value_or(-1);
    call.dtype_id = sink_.intern(args.dtype);
    sink_.collective_call(call);
}

void JsonTraceImporter::add_host_range(trace::ThreadId thread, trace::TimeNs start, trace::TimeNs end,
                                       std::string_view name, RangeStyle style, const trace::Payload& payload) {
    PendingRange range;
    range.start_ns = start;
    range.end_ns = end;
    range.thread_id = thread;
    range.domain_id = style.domain_id;
    range.name_id = sink_.intern(name);
    range.category = style.category;
    range.payload_kind = payload.kind;
    range.payload_integer = payload.integer;
    range.payload_real = payload.real;
    sink_.nested_range(range);
}

void JsonTraceImporter::dispatch(const TraceEventFields& event, const JsonItem& item) {
    switch (event.phase) {
        case 'X':
            on_complete(event, item);
            return;
        case 'B':
            begin_duration(event, item);
            return;
        case 'E':
            end_duration(event, item);
            return;
        case 'b':
        case 'e':
        case 'S':
        case 'F':
            async_event(event, item);
            return;
        case 'i':
        case 'I':
        case 'R':
        case 'n':
            on_instant(event, item);
            return;
        case 'C':
            counter_event(event, item);
            return;
        case 's':
        case 't':
        case 'f':
            // Launch flows repeat the correlation id the GPU event carries.
            sink_.skip("flow event (links come from correlation ids)");
            return;
        case 'M':
            metadata(event);
            return;
        case 0:
            sink_.skip("event without \"ph\"");
            return;
        default:
            sink_.skip(fmt::format("phase '{}' (not imported)", event.phase));
            return;
    }
}

// ---------------------------------------------------------------------------
// [SECTION] Phases: B/E, b/e, instants, counters, metadata
// ---------------------------------------------------------------------------

void JsonTraceImporter::begin_duration(const TraceEventFields& event, const JsonItem& item) {
    if (!event.has_ts) {
        reject(item, "event without \"ts\"", fmt::format("\"B\" event \"{}\" has no \"ts\"", event.name));
        return;
    }
    trace::ThreadId thread = host_thread(event);
    open_durations_[thread].push_back(
        {event_time(event.ts_ns), sink_.intern(event.name), range_style(event), event.args.payload});
}

void JsonTraceImporter::end_duration(const TraceEventFields& event, const JsonItem& item) {
    if (!event.has_ts) {
        reject(item, "event without \"ts\"", "an \"E\" event has no \"ts\"");
        return;
    }
    trace::ThreadId thread = host_thread(event);
    std::vector<OpenDuration>& open = open_durations_[thread];
    if (open.empty()) {
        reject(item, "\"E\" without a \"B\"",
               fmt::format("an \"E\" event on pid {} tid {} closes nothing (no open \"B\" on that thread)",
                           id_number(event.pid), id_number(event.tid)));
        return;
    }
    OpenDuration begun = open.back();
    open.pop_back();
    trace::TimeNs end = event_time(event.ts_ns);
    if (end < begun.start_ns) {
        reject(item, "negative duration",
               fmt::format("an \"E\" event ends {} ns before its \"B\"", begun.start_ns - end));
        return;
    }
    PendingRange range;
    range.start_ns = begun.start_ns;
    range.end_ns = end;
    range.thread_id = thread;
    range.domain_id = begun.style.domain_id;
    range.name_id = begun.name_id;
    range.category = begun.style.category;
    range.payload_kind = begun.payload.kind;
    range.payload_integer = begun.payload.integer;
    range.payload_real = begun.payload.real;
    sink_.nested_range(range);
}

void JsonTraceImporter::async_event(const TraceEventFields& event, const JsonItem& item) {
    if (!event.has_ts) {
        reject(item, "event without \"ts\"", "an async event has no \"ts\"");
        return;
    }
    async_key_.assign(event.category);
    async_key_.push_back('\x1f');
    if (event.id.is_text) {
        async_key_.append(event.id.text);
    } else {
        async_key_.append(std::to_string(event.id.number));
    }
    bool begins = event.phase == 'b' || event.phase == 'S';
    if (begins) {
        open_async_[async_key_].push_back({event_time(event.ts_ns), host_thread(event), sink_.intern(event.name),
                                           range_style(event), event.args.payload});
        return;
    }
    auto found = open_async_.find(async_key_);
    if (found == open_async_.end() || found->second.empty()) {
        reject(item, "async end without a begin",
               fmt::format("an async end (\"{}\") with cat \"{}\" and id {} ends nothing", event.phase, event.category,
                           event.id.is_text ? std::string(event.id.text) : std::to_string(event.id.number)));
        return;
    }
    OpenAsync begun = found->second.back();
    found->second.pop_back();
    if (found->second.empty()) open_async_.erase(found);
    trace::TimeNs end = event_time(event.ts_ns);
    if (end < begun.start_ns) {
        reject(item, "negative duration",
               fmt::format("an async end lies {} ns before its begin", begun.start_ns - end));
        return;
    }
    trace::RangeEvent range;
    range.start_ns = begun.start_ns;
    range.end_ns = end;
    range.thread_id = begun.thread_id;
    range.domain_id = begun.style.domain_id;
    range.name_id = begun.name_id;
    range.category = begun.style.category;
    range.payload = begun.payload;
    sink_.start_end_range(range);
}

void JsonTraceImporter::on_instant(const TraceEventFields& event, const JsonItem& item) {
    if (!event.has_ts) {
        reject(item, "event without \"ts\"", fmt::format("instant \"{}\" has no \"ts\"", event.name));
        return;
    }
    RangeStyle style = range_style(event);
    trace::MarkEvent mark;
    mark.time_ns = event_time(event.ts_ns);
    mark.thread_id = host_thread(event);
    mark.domain_id = style.domain_id;
    mark.name_id = sink_.intern(event.name);
    mark.category = style.category;
    mark.payload = event.args.payload;
    sink_.mark(mark);
}

trace::CounterId JsonTraceImporter::counter_for(const TraceEventFields& event, std::string_view key) {
    std::string name(event.name);
    if (key != "value") name += fmt::format(".{}", key);
    return sink_.counter(name, "", trace::kNoDevice);
}

void JsonTraceImporter::counter_event(const TraceEventFields& event, const JsonItem& item) {
    if (!event.has_ts) {
        reject(item, "event without \"ts\"", fmt::format("counter \"{}\" has no \"ts\"", event.name));
        return;
    }
    for (std::size_t i = 0; i < event.args.number_count; ++i) {
        const TraceEventArgs::Number& series = event.args.numbers[i];
        sink_.counter_sample({counter_for(event, series.key), event_time(event.ts_ns), series.value});
    }
}

void JsonTraceImporter::metadata(const TraceEventFields& event) {
    if (event.pid.is_text) return;  // Kineto's "Spans"/"Traces" pseudo-processes
    if (event.name == "process_name") {
        on_process_name(event.pid.number, event.args.name);
    } else if (event.name == "thread_name") {
        if (!event.tid.present) return;
        on_thread_name(event.pid.number, id_number(event.tid), event.args.name);
    } else if (event.name == "process_labels") {
        on_process_labels(event.pid.number, event.args.labels);
    }
    // Sort indexes only order lanes in a viewer.
}

trace::CorrelationId JsonTraceImporter::correlation_of(const TraceEventFields& event) {
    return event.args.correlation && *event.args.correlation > 0
               ? static_cast<trace::CorrelationId>(*event.args.correlation)
               : 0;
}

trace::ApiEvent JsonTraceImporter::api_call_of(const TraceEventFields& event, trace::TimeNs start, trace::TimeNs end) {
    trace::ApiEvent call;
    call.start_ns = start;
    call.end_ns = end;
    call.thread_id = host_thread(event);
    call.correlation_id = correlation_of(event);
    call.name_id = sink_.intern(event.name);
    call.result =
        static_cast<std::int32_t>(std::clamp<std::int64_t>(event.args.result.value_or(0), INT32_MIN, INT32_MAX));
    return call;
}

trace::KernelEvent JsonTraceImporter::kernel_of(const TraceEventFields& event, trace::TimeNs start, trace::TimeNs end,
                                                trace::StreamId stream, trace::DeviceId device) {
    trace::KernelEvent kernel = gpu_activity<trace::KernelEvent>(start, end, stream, device, correlation_of(event));
    kernel.name_id = sink_.intern(event.name);
    const TraceEventArgs& args = event.args;
    if (args.grid_size > 0) {
        kernel.launch.grid_x = args.grid[0];
        kernel.launch.grid_y = args.grid[1];
        kernel.launch.grid_z = args.grid[2];
    }
    if (args.block_size > 0) {
        kernel.launch.block_x = args.block[0];
        kernel.launch.block_y = args.block[1];
        kernel.launch.block_z = args.block[2];
    }
    if (args.registers_per_thread) kernel.launch.registers_per_thread = clamp_to_u32(*args.registers_per_thread);
    // Kineto and ember's export give one "shared memory" number (static + dynamic); it
    // is stored as static.
    if (args.shared_memory) kernel.launch.static_shared_bytes = clamp_to_u32(*args.shared_memory);
    return kernel;
}

trace::MemcpyEvent JsonTraceImporter::memcpy_of(const TraceEventFields& event, trace::TimeNs start, trace::TimeNs end,
                                                trace::StreamId stream, trace::DeviceId device) {
    trace::MemcpyEvent copy = gpu_activity<trace::MemcpyEvent>(start, end, stream, device, correlation_of(event));
    const CopyShape shape = copy_shape_from_name(event.name);
    copy.direction = shape.direction;
    copy.source_kind = shape.source;
    copy.destination_kind = shape.destination;
    copy.bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(event.args.bytes.value_or(0), 0));
    return copy;
}

trace::MemsetEvent JsonTraceImporter::memset_of(const TraceEventFields& event, trace::TimeNs start, trace::TimeNs end,
                                                trace::StreamId stream, trace::DeviceId device) {
    trace::MemsetEvent set = gpu_activity<trace::MemsetEvent>(start, end, stream, device, correlation_of(event));
    set.bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(event.args.bytes.value_or(0), 0));
    return set;
}

trace::SyncEvent JsonTraceImporter::sync_of(const TraceEventFields& event, trace::TimeNs start, trace::TimeNs end,
                                            trace::StreamId stream, trace::DeviceId device) {
    trace::SyncEvent wait = gpu_activity<trace::SyncEvent>(start, end, stream, device, correlation_of(event));
    if (event.args.cuda_event_id && *event.args.cuda_event_id > 0)
        wait.cuda_event_id = static_cast<std::uint64_t>(*event.args.cuda_event_id);
    return wait;
}

}  // namespace ember::importing
