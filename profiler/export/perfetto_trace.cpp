// perfetto_trace.cpp: streaming writer of Perfetto TracePackets.
#include "profiler/export/perfetto_trace.h"

#include "profiler/analysis/gpu_memory.h"
#include "profiler/analysis/operation_names.h"
#include "profiler/store/table_sql.h"
#include "profiler/export/collective_args.h"

#include "profiler/export/proto/perfetto_trace.pb.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ember::exporting {

namespace {

namespace pb = ember::perfetto;
using trace::TimeNs;

constexpr std::uint32_t kSequenceId = 1;

void append_varint(std::string& out, std::uint64_t value) {
    while (value >= 0x80) {
        out += static_cast<char>((value & 0x7F) | 0x80);
        value >>= 7;
    }
    out += static_cast<char>(value);
}

// Strings interned on the packet sequence: ids from 1, each sent once with the first
// packet that uses it.
class Interner {
  public:
    // The id of `text`; `is_new` says whether this packet must carry its definition.
    std::uint64_t id(std::string_view text, bool& is_new) {
        auto found = ids_.find(text);
        if (found != ids_.end()) {
            is_new = false;
            return found->second;
        }
        std::uint64_t next = ids_.size() + 1;
        ids_.emplace(std::string(text), next);
        is_new = true;
        return next;
    }

  private:
    struct Hash {
        using is_transparent = void;
        std::size_t operator()(std::string_view text) const { return std::hash<std::string_view>()(text); }
    };
    std::unordered_map<std::string, std::uint64_t, Hash, std::equal_to<>> ids_;
};

class PacketWriter {
  public:
    PacketWriter(OutputFile& out, TimeNs time_shift) : out_(out), time_shift_(time_shift) {}

    PerfettoCounts& counts() { return counts_; }

    void track(const pb::TrackDescriptor& descriptor) {
        packet_.Clear();
        *packet_.mutable_track_descriptor() = descriptor;
        ++counts_.tracks;
        write();
    }

    // Starts a track event packet; add arguments with the methods below, then commit().
    pb::TrackEvent& event(pb::TrackEvent::Type type, std::uint64_t track, TimeNs at) {
        packet_.Clear();
        packet_.set_timestamp(static_cast<std::uint64_t>(at + time_shift_));
        packet_.set_sequence_flags(pb::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE);
        pb::TrackEvent& event = *packet_.mutable_track_event();
        event.set_type(type);
        event.set_track_uuid(track);
        if (type == pb::TrackEvent::TYPE_SLICE_BEGIN) ++counts_.slices;
        if (type == pb::TrackEvent::TYPE_INSTANT) ++counts_.instants;
        if (type == pb::TrackEvent::TYPE_COUNTER) ++counts_.counter_values;
        return event;
    }
    void name(std::string_view text) {
        bool is_new = false;
        std::uint64_t id = names_.id(text, is_new);
        if (is_new) {
            pb::EventName& entry = *packet_.mutable_interned_data()->add_event_names();
            entry.set_iid(id);
            entry.set_name(std::string(text));
        }
        packet_.mutable_track_event()->set_name_iid(id);
    }
    void category(std::string_view text) {
        bool is_new = false;
        std::uint64_t id = categories_.id(text, is_new);
        if (is_new) {
            pb::EventCategory& entry = *packet_.mutable_interned_data()->add_event_categories();
            entry.set_iid(id);
            entry.set_name(std::string(text));
        }
        packet_.mutable_track_event()->add_category_iids(id);
    }
    void arg(std::string_view key, std::int64_t value) { annotation(key).set_int_value(value); }
    void arg_real(std::string_view key, double value) { annotation(key).set_double_value(value); }
    void arg_text(std::string_view key, std::string_view value) {
        annotation(key).set_string_value(std::string(value));
    }
    void correlation(trace::CorrelationId id) {
        if (id == 0) return;
        pb::TrackEvent& event = *packet_.mutable_track_event();
        event.set_correlation_id(id);
        event.add_flow_ids(id);
        ++counts_.flow_events;
    }
    void commit() { write(); }

    void slice_end(std::uint64_t track, TimeNs at) {
        event(pb::TrackEvent::TYPE_SLICE_END, track, at);
        write();
    }

  private:
    pb::DebugAnnotation& annotation(std::string_view key) {
        bool is_new = false;
        std::uint64_t id = annotation_names_.id(key, is_new);
        if (is_new) {
            pb::DebugAnnotationName& entry = *packet_.mutable_interned_data()->add_debug_annotation_names();
            entry.set_iid(id);
            entry.set_name(std::string(key));
        }
        pb::DebugAnnotation& annotation = *packet_.mutable_track_event()->add_debug_annotations();
        annotation.set_name_iid(id);
        return annotation;
    }
    // One Trace.packet field (number 1, length-delimited) per packet.
    void write() {
        packet_.set_trusted_packet_sequence_id(kSequenceId);
        if (first_)
            packet_.set_sequence_flags(packet_.sequence_flags() | pb::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED);
        first_ = false;
        bytes_.clear();
        packet_.AppendToString(&bytes_);
        std::string& b = out_.buffer();
        b += static_cast<char>(0x0A);
        append_varint(b, bytes_.size());
        b += bytes_;
        out_.maybe_flush();
    }

    OutputFile& out_;
    TimeNs time_shift_ = 0;
    pb::TracePacket packet_;
    std::string bytes_;
    bool first_ = true;
    Interner names_, categories_, annotation_names_;
    PerfettoCounts counts_;
};

// Lanes for intervals that may overlap each other: each interval goes to the first lane
// free at its start, and a lane's track is described when it is first used.
class OverlapLanes {
  public:
    OverlapLanes(PacketWriter& writer, std::uint64_t parent, std::string name, std::uint64_t& next_uuid)
        : writer_(writer), parent_(parent), name_(std::move(name)), next_uuid_(next_uuid) {}

    // The track for an interval that starts at `start`, after every earlier start.
    std::uint64_t place(TimeNs start, TimeNs end) {
        std::size_t lane = 0;
        while (lane < ends_.size() && ends_[lane] > start) ++lane;
        if (lane == ends_.size()) {
            pb::TrackDescriptor descriptor;
            descriptor.set_uuid(next_uuid_++);
            descriptor.set_parent_uuid(parent_);
            descriptor.set_name(lane == 0 ? name_ : fmt::format("{} {}", name_, lane + 1));
            writer_.track(descriptor);
            ends_.push_back(start);
            uuids_.push_back(descriptor.uuid());
        }
        ends_[lane] = end;
        return uuids_[lane];
    }

  private:
    PacketWriter& writer_;
    std::uint64_t parent_ = 0;
    std::string name_;
    std::uint64_t& next_uuid_;
    std::vector<TimeNs> ends_;
    std::vector<std::uint64_t> uuids_;
};

// The ends of slices placed on overlap lanes, written in time order: before a slice
// begins at `time`, every end at or before it (so a lane's previous slice has ended).
class PendingEnds {
  public:
    explicit PendingEnds(PacketWriter& writer) : writer_(writer) {}
    void add(TimeNs end, std::uint64_t track) {
        heap_.emplace_back(end, track);
        std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
    }
    void write_until(TimeNs time) {
        while (!heap_.empty() && heap_.front().first <= time) {
            std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
            writer_.slice_end(heap_.back().second, heap_.back().first);
            heap_.pop_back();
        }
    }
    void write_all() { write_until(std::numeric_limits<TimeNs>::max()); }

  private:
    PacketWriter& writer_;
    std::vector<std::pair<TimeNs, std::uint64_t>> heap_;  // a min-heap of (end, track)
};

// Nested slices of one track from `query` rows (start_ns, end_ns, ...) ordered by start,
// then end descending: `begin` writes a slice's begin packet (its end may be cut to the
// enclosing slice's end) and returns true, or writes an instant and returns false; ends
// are written as later starts pass them, so the track's times never go back.
template <typename Begin>
void nest_slices(store::Statement& query, PacketWriter& writer, std::uint64_t track, const Begin& begin) {
    std::vector<TimeNs> open_ends;
    while (query.next_row()) {
        TimeNs start = query.column_int64(0);
        TimeNs end = query.column_int64(1);
        while (!open_ends.empty() && open_ends.back() <= start) {
            writer.slice_end(track, open_ends.back());
            open_ends.pop_back();
        }
        if (!open_ends.empty()) end = std::min(end, open_ends.back());
        end = std::max(end, start);
        if (begin(query)) open_ends.push_back(end);
    }
    while (!open_ends.empty()) {
        writer.slice_end(track, open_ends.back());
        open_ends.pop_back();
    }
}

class PerfettoExport {
  public:
    PerfettoExport(const store::TraceReader& reader, PacketWriter& writer)
        : reader_(reader), writer_(writer), collectives_(reader) {}

    void run() {
        describe_processes();
        for (const trace::ThreadInfo& thread : reader_.threads()) write_thread(thread);
        write_async_ranges();
        describe_devices();
        for (const trace::StreamInfo& stream : reader_.streams()) write_stream(stream);
        write_syncs();
        write_counters();
        write_memory();
    }

  private:
    std::int64_t pid_of_thread(const trace::ThreadInfo& thread) const {
        return thread.pid != 0 ? thread.pid : reader_.run().pid;
    }

    void describe_processes() {
        std::set<std::int64_t> pids{reader_.run().pid};
        for (const trace::ThreadInfo& thread : reader_.threads()) pids.insert(pid_of_thread(thread));
        for (std::int64_t pid : pids) {
            pb::TrackDescriptor descriptor;
            descriptor.set_uuid(next_uuid_++);
            pb::ProcessDescriptor& process = *descriptor.mutable_process();
            process.set_pid(static_cast<std::int32_t>(pid));
            std::string name = fmt::format("process {}", pid);
            for (const trace::ProcessInfo& info : reader_.processes()) {
                if (info.pid == pid && !info.name.empty()) name = info.name;
            }
            process.set_process_name(name);
            writer_.track(descriptor);
            process_uuid_[pid] = descriptor.uuid();
        }
        for (const trace::ThreadInfo& thread : reader_.threads()) {
            pb::TrackDescriptor descriptor;
            descriptor.set_uuid(next_uuid_++);
            descriptor.set_parent_uuid(process_uuid_[pid_of_thread(thread)]);
            pb::ThreadDescriptor& info = *descriptor.mutable_thread();
            info.set_pid(static_cast<std::int32_t>(pid_of_thread(thread)));
            info.set_tid(thread.tid);
            info.set_thread_name(thread.name.empty() ? fmt::format("thread {}", thread.tid) : thread.name);
            writer_.track(descriptor);
            thread_uuid_[thread.thread_id] = descriptor.uuid();
        }
    }

    // An NVTX range's or mark's categories ("nvtx" and its domain: Kineto's "cpu_op",
    // "user_annotation", ...) and arguments.
    void range_args(trace::StringId domain, std::int64_t category, std::string_view payload_type,
                    const store::Statement& row, int payload_column) {
        writer_.category("nvtx");
        if (domain != trace::kNoString) writer_.category(reader_.string(domain));
        if (category != 0) {
            std::string_view category_name = reader_.nvtx_category_name(domain, static_cast<std::uint32_t>(category));
            if (category_name.empty()) {
                writer_.arg("category", category);
            } else {
                writer_.arg_text("category", category_name);
            }
        }
        if (payload_type == "integer") writer_.arg("payload", row.column_int64(payload_column));
        if (payload_type == "real") writer_.arg_real("payload", row.column_double(payload_column));
    }

    void collective_args(bool on_stream, std::uint32_t track, TimeNs start) {
        const trace::CollectiveCall* call = collectives_.find(on_stream, track, start);
        if (call == nullptr) return;
        collectives_.for_each_arg(
            *call, [&](std::string_view key, std::string_view value) { writer_.arg_text(key, value); },
            [&](std::string_view key, std::int64_t value) { writer_.arg(key, value); });
    }

    // A thread's API calls, push/pop ranges and collector overhead, nested, and its marks.
    void write_thread(const trace::ThreadInfo& thread) {
        std::uint64_t track = thread_uuid_[thread.thread_id];
        store::Statement query = store::query(
            reader_,
            "SELECT start_ns, end_ns, 0, name_id, range_id, domain_id, category, typeof(payload), payload FROM ranges "
            "WHERE thread_id = ?1 AND depth >= 0 UNION ALL "
            "SELECT start_ns, end_ns, 1, name_id, correlation_id, result, 0, '', 0 FROM api_calls WHERE thread_id = ?1 "
            "UNION ALL SELECT start_ns, end_ns, 2, name_id, 0, 0, 0, '', 0 FROM collector_overhead WHERE thread_id = ?1 "
            "UNION ALL SELECT time_ns, time_ns, 3, name_id, 0, domain_id, category, typeof(payload), payload FROM marks "
            "WHERE thread_id = ?1 ORDER BY 1, 2 DESC, 3");
        query.bind(1, thread.thread_id);
        nest_slices(query, writer_, track, [&](const store::Statement& row) {
            TimeNs start = row.column_int64(0);
            std::int64_t kind = row.column_int64(2);
            writer_.event(kind == 3 ? pb::TrackEvent::TYPE_INSTANT : pb::TrackEvent::TYPE_SLICE_BEGIN, track, start);
            writer_.name(reader_.string(static_cast<trace::StringId>(row.column_int64(3))));
            if (kind == 0 || kind == 3) {
                range_args(static_cast<trace::StringId>(row.column_int64(5)), row.column_int64(6), row.column_text(7),
                           row, 8);
                if (kind == 0) collective_args(false, thread.thread_id, start);
            } else if (kind == 1) {
                writer_.category("cuda_api");
                writer_.correlation(static_cast<trace::CorrelationId>(row.column_int64(4)));
                writer_.arg("result", row.column_int64(5));
            } else {
                writer_.category("ember_overhead");
            }
            writer_.commit();
            return kind != 3;
        });
    }

    // Start/end ranges overlap anything: lanes of their process, in start order.
    void write_async_ranges() {
        store::Statement query =
            store::query(reader_,
                         "SELECT start_ns, end_ns, thread_id, name_id, domain_id, category, typeof(payload), "
                         "payload FROM ranges WHERE depth < 0 ORDER BY start_ns, range_id");
        std::map<std::int64_t, OverlapLanes> lanes;  // by pid
        PendingEnds pending(writer_);
        while (query.next_row()) {
            TimeNs start = query.column_int64(0);
            TimeNs end = std::max(start, query.column_int64(1));
            const trace::ThreadInfo* thread = reader_.thread(static_cast<trace::ThreadId>(query.column_int64(2)));
            std::int64_t pid = thread != nullptr ? pid_of_thread(*thread) : reader_.run().pid;
            auto lane = lanes.find(pid);
            if (lane == lanes.end()) {
                lane = lanes.emplace(pid, OverlapLanes(writer_, process_uuid_[pid], "ranges", next_uuid_)).first;
            }
            pending.write_until(start);
            std::uint64_t track = lane->second.place(start, end);
            writer_.event(pb::TrackEvent::TYPE_SLICE_BEGIN, track, start);
            writer_.name(reader_.string(static_cast<trace::StringId>(query.column_int64(3))));
            range_args(static_cast<trace::StringId>(query.column_int64(4)), query.column_int64(5), query.column_text(6),
                       query, 7);
            writer_.commit();
            pending.add(end, track);
        }
        pending.write_all();
    }

    void describe_devices() {
        std::set<trace::DeviceId> devices;
        for (const trace::DeviceInfo& device : reader_.devices()) devices.insert(device.device_id);
        for (const trace::StreamInfo& stream : reader_.streams()) devices.insert(stream.device_id);
        for (const trace::CounterInfo& counter : reader_.counters()) {
            if (counter.device_id >= 0) devices.insert(counter.device_id);
        }
        for (trace::DeviceId device : devices) describe_device(device);
        int rank = 0;
        for (const trace::StreamInfo& stream : reader_.streams()) {
            pb::TrackDescriptor descriptor;
            descriptor.set_uuid(next_uuid_++);
            descriptor.set_parent_uuid(device_uuid_[stream.device_id]);
            descriptor.set_name(
                fmt::format("Stream {}{}{}", stream.cuda_stream_id, stream.name.empty() ? "" : " ", stream.name));
            descriptor.set_sibling_order_rank(rank++);
            writer_.track(descriptor);
            stream_uuid_[stream.stream_id] = descriptor.uuid();
        }
    }

    std::uint64_t describe_device(trace::DeviceId device) {
        const trace::DeviceInfo* info = reader_.device(device);
        pb::TrackDescriptor descriptor;
        descriptor.set_uuid(next_uuid_++);
        descriptor.set_name(fmt::format("GPU {}{}{}", device, info != nullptr && !info->name.empty() ? " " : "",
                                        info != nullptr ? info->name : ""));
        descriptor.set_child_ordering(pb::TrackDescriptor::EXPLICIT);
        writer_.track(descriptor);
        device_uuid_[device] = descriptor.uuid();
        return descriptor.uuid();
    }

    std::uint64_t counter_track(std::uint64_t parent, const std::string& name, const std::string& unit) {
        pb::TrackDescriptor descriptor;
        descriptor.set_uuid(next_uuid_++);
        descriptor.set_parent_uuid(parent);
        descriptor.set_name(name);
        pb::CounterDescriptor& info = *descriptor.mutable_counter();
        if (unit == "bytes") {
            info.set_unit(pb::CounterDescriptor::UNIT_SIZE_BYTES);
        } else if (unit == "ns") {
            info.set_unit(pb::CounterDescriptor::UNIT_TIME_NS);
        } else if (!unit.empty()) {
            info.set_unit_name(unit);
        }
        writer_.track(descriptor);
        return descriptor.uuid();
    }

    // A stream's kernels, copies and memsets.
    void write_stream(const trace::StreamInfo& stream) {
        std::uint64_t track = stream_uuid_[stream.stream_id];
        store::Statement query = store::query(
            reader_,
            "SELECT start_ns, end_ns, 0, correlation_id, name_id, launch_config_id, 0, 0 FROM kernels "
            "WHERE stream_id = ?1 UNION ALL "
            "SELECT start_ns, end_ns, 1, correlation_id, direction, bytes, source_kind, destination_kind FROM memcpys "
            "WHERE stream_id = ?1 UNION ALL "
            "SELECT start_ns, end_ns, 2, correlation_id, memory_kind, bytes, value, 0 FROM memsets WHERE stream_id = ?1 "
            "ORDER BY 1, 2 DESC");
        query.bind(1, stream.stream_id);
        nest_slices(query, writer_, track, [&](const store::Statement& row) {
            TimeNs start = row.column_int64(0);
            std::int64_t kind = row.column_int64(2);
            writer_.event(pb::TrackEvent::TYPE_SLICE_BEGIN, track, start);
            if (kind == 0) {
                writer_.name(reader_.string(static_cast<trace::StringId>(row.column_int64(4))));
                writer_.category("kernel");
            } else if (kind == 1) {
                writer_.name(analysis::memcpy_operation_name(static_cast<trace::MemcpyDirection>(row.column_int64(4))));
                writer_.category("memcpy");
            } else {
                writer_.name(analysis::kMemsetOperationName);
                writer_.category("memset");
            }
            writer_.correlation(static_cast<trace::CorrelationId>(row.column_int64(3)));
            if (kind == 0) {
                const trace::LaunchConfig l =
                    reader_.launch_config(static_cast<trace::LaunchConfigId>(row.column_int64(5)));
                writer_.arg_text("grid", fmt::format("[{}, {}, {}]", l.grid_x, l.grid_y, l.grid_z));
                writer_.arg_text("block", fmt::format("[{}, {}, {}]", l.block_x, l.block_y, l.block_z));
                writer_.arg("registers per thread", l.registers_per_thread);
                writer_.arg("shared memory", l.static_shared_bytes + l.dynamic_shared_bytes);
                collective_args(true, stream.stream_id, start);
            } else if (kind == 1) {
                writer_.arg("bytes", row.column_int64(5));
                writer_.arg_text("source",
                                 trace::memory_kind_name(static_cast<trace::MemoryKind>(row.column_int64(6))));
                writer_.arg_text("destination",
                                 trace::memory_kind_name(static_cast<trace::MemoryKind>(row.column_int64(7))));
            } else {
                writer_.arg("bytes", row.column_int64(5));
                writer_.arg("value", row.column_int64(6));
                writer_.arg_text("memory",
                                 trace::memory_kind_name(static_cast<trace::MemoryKind>(row.column_int64(4))));
            }
            writer_.commit();
            return true;
        });
    }

    // Host waits overlap each other (threads waiting at once): lanes per stream.
    void write_syncs() {
        store::Statement query =
            store::query(reader_,
                         "SELECT start_ns, end_ns, stream_id, kind, correlation_id, cuda_event_id FROM "
                         "synchronizations ORDER BY start_ns");
        std::map<trace::StreamId, OverlapLanes> lanes;
        PendingEnds pending(writer_);
        while (query.next_row()) {
            TimeNs start = query.column_int64(0);
            TimeNs end = std::max(start, query.column_int64(1));
            auto stream_id = static_cast<trace::StreamId>(query.column_int64(2));
            const trace::StreamInfo* stream = reader_.stream(stream_id);
            auto lane = lanes.find(stream_id);
            if (lane == lanes.end()) {
                std::uint64_t parent = device_uuid_[stream != nullptr ? stream->device_id : 0];
                std::string name =
                    fmt::format("Synchronizations, stream {}", stream != nullptr ? stream->cuda_stream_id : 0);
                lane = lanes.emplace(stream_id, OverlapLanes(writer_, parent, name, next_uuid_)).first;
            }
            pending.write_until(start);
            std::uint64_t track = lane->second.place(start, end);
            writer_.event(pb::TrackEvent::TYPE_SLICE_BEGIN, track, start);
            writer_.name(trace::sync_kind_name(static_cast<trace::SyncKind>(query.column_int64(3))));
            writer_.category("sync");
            auto correlation = static_cast<trace::CorrelationId>(query.column_int64(4));
            if (correlation != 0) writer_.arg("correlation_id", static_cast<std::int64_t>(correlation));
            if (query.column_int64(5) != 0) writer_.arg("cuda_event_id", query.column_int64(5));
            writer_.commit();
            pending.add(end, track);
        }
        pending.write_all();
    }

    void write_counters() {
        std::unordered_map<trace::CounterId, std::uint64_t> tracks;
        for (const trace::CounterInfo& counter : reader_.counters()) {
            tracks[counter.counter_id] = counter_track(
                counter.device_id >= 0 ? device_uuid_[counter.device_id] : process_uuid_[reader_.run().pid],
                counter.name, counter.unit);
        }
        store::EventQuery all;
        reader_.for_each_counter_sample(all, [&](const trace::CounterSample& sample) {
            auto found = tracks.find(sample.counter_id);
            if (found == tracks.end()) return true;
            writer_.event(pb::TrackEvent::TYPE_COUNTER, found->second, sample.time_ns)
                .set_double_counter_value(sample.value);
            writer_.commit();
            return true;
        });
    }

    // A memory lane per GPU from the allocator's events (analysis::for_each_memory_total):
    // allocated and reserved bytes after each instant. Not for a device whose trace already
    // has these totals as counters (Kineto's "memory allocated").
    void write_memory() {
        if (reader_.memory_event_count() == 0) return;
        std::set<trace::DeviceId> has_counters;
        for (const trace::CounterInfo& counter : reader_.counters()) {
            if (counter.name == "memory allocated" && counter.device_id >= 0) has_counters.insert(counter.device_id);
        }
        std::uint64_t allocated_track = 0, reserved_track = 0;
        std::optional<trace::DeviceId> current;
        analysis::for_each_memory_total(reader_, [&](trace::DeviceId device, TimeNs time, std::int64_t allocated,
                                                     std::int64_t reserved, std::int64_t) {
            if (has_counters.count(device)) return true;
            if (current != device) {
                current = device;
                auto found = device_uuid_.find(device);
                const std::uint64_t parent = found != device_uuid_.end() ? found->second : describe_device(device);
                allocated_track = counter_track(parent, "GPU memory allocated", "bytes");
                reserved_track = counter_track(parent, "GPU memory reserved", "bytes");
            }
            writer_.event(pb::TrackEvent::TYPE_COUNTER, allocated_track, time)
                .set_double_counter_value(static_cast<double>(allocated));
            writer_.commit();
            writer_.event(pb::TrackEvent::TYPE_COUNTER, reserved_track, time)
                .set_double_counter_value(static_cast<double>(reserved));
            writer_.commit();
            return true;
        });
    }

    const store::TraceReader& reader_;
    PacketWriter& writer_;
    CollectiveArgs collectives_;
    std::uint64_t next_uuid_ = 1;
    std::map<std::int64_t, std::uint64_t> process_uuid_;
    std::unordered_map<trace::ThreadId, std::uint64_t> thread_uuid_;
    std::map<trace::DeviceId, std::uint64_t> device_uuid_;
    std::unordered_map<trace::StreamId, std::uint64_t> stream_uuid_;
};

// Perfetto's timestamps are unsigned: a trace whose clock reads below zero is shifted
// up by its earliest time.
TimeNs time_shift(const store::TraceReader& reader) {
    TimeNs earliest = reader.run().start_ns;
    for (const store::TrackSummary& track : reader.tracks()) earliest = std::min(earliest, track.first_start_ns);
    return earliest < 0 ? -earliest : 0;
}

}  // namespace

PerfettoCounts export_perfetto_trace(const store::TraceReader& reader, OutputFile& out) {
    PacketWriter writer(out, time_shift(reader));
    PerfettoExport(reader, writer).run();
    out.flush();
    return writer.counts();
}

}  // namespace ember::exporting
