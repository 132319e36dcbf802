// chrome_trace.cpp: streaming Trace Event Format writer.
#include "profiler/export/chrome_trace.h"

#include "profiler/analysis/operation_names.h"
#include "profiler/store/table_sql.h"
#include "profiler/export/collective_args.h"
#include "profiler/export/json_text.h"
#include "profiler/trace/chrome_layout.h"

#include "ember/version.h"

#include <fmt/format.h>

#include <iterator>
#include <set>
#include <unordered_map>
#include <vector>

namespace ember::exporting {

namespace {

using trace::TimeNs;
namespace chrome = trace::chrome;

class ChromeWriter {
  public:
    ChromeWriter(const store::TraceReader& reader, OutputFile& out) : reader_(reader), out_(out) {
        origin_ = reader.run().start_ns;
        for (const trace::ThreadInfo& thread : reader.threads()) {
            thread_pid_[thread.thread_id] = thread.pid != 0 ? thread.pid : reader.run().pid;
        }
    }

    // Starts the next event object: separator, opening brace, ph/pid/tid.
    std::string& begin(const char* phase, std::int64_t pid, std::int64_t tid) {
        std::string& b = out_.buffer();
        b += first_ ? "\n{" : ",\n{";
        first_ = false;
        fmt::format_to(std::back_inserter(b), "\"ph\":\"{}\",\"pid\":{},\"tid\":{}", phase, pid, tid);
        return b;
    }
    void end() {
        out_.buffer() += '}';
        out_.maybe_flush();
    }
    void name(std::string_view text) {
        out_.buffer() += ",\"name\":";
        append_json_string(out_.buffer(), text);
    }
    void category(std::string_view text) {
        out_.buffer() += ",\"cat\":";
        append_json_string(out_.buffer(), text);
    }
    void time(const char* key, TimeNs ns) {
        fmt::format_to(std::back_inserter(out_.buffer()), ",\"{}\":", key);
        append_microseconds(out_.buffer(), ns);
    }
    void complete(std::int64_t pid, std::int64_t tid, std::string_view event_name, std::string_view cat, TimeNs start,
                  TimeNs end_ns) {
        begin("X", pid, tid);
        name(event_name);
        category(cat);
        time("ts", start - origin_);
        time("dur", end_ns - start);
    }
    void metadata(const char* what, std::int64_t pid, std::int64_t tid, std::string_view value) {
        begin("M", pid, tid);
        name(what);
        out_.buffer() += ",\"args\":{\"name\":";
        append_json_string(out_.buffer(), value);
        out_.buffer() += '}';
        end();
    }
    void sort_index(const char* what, std::int64_t pid, std::int64_t tid, std::int64_t index) {
        begin("M", pid, tid);
        name(what);
        fmt::format_to(std::back_inserter(out_.buffer()), ",\"args\":{{\"sort_index\":{}}}", index);
        end();
    }
    std::int64_t pid_of_thread(trace::ThreadId thread) const {
        auto found = thread_pid_.find(thread);
        return found != thread_pid_.end() ? found->second : reader_.run().pid;
    }
    std::int64_t pid_of_stream(trace::StreamId stream) const {
        const trace::StreamInfo* info = reader_.stream(stream);
        return chrome::gpu_pid(info != nullptr ? info->device_id : 0);
    }
    TimeNs origin() const { return origin_; }
    std::string& buffer() { return out_.buffer(); }

  private:
    const store::TraceReader& reader_;
    OutputFile& out_;
    TimeNs origin_ = 0;
    bool first_ = true;
    std::unordered_map<trace::ThreadId, std::int64_t> thread_pid_;
};

void write_tracks(const store::TraceReader& reader, ChromeWriter& w) {
    std::set<std::int64_t> host_pids;
    for (const trace::ThreadInfo& thread : reader.threads()) host_pids.insert(w.pid_of_thread(thread.thread_id));
    host_pids.insert(reader.run().pid);
    for (std::int64_t pid : host_pids) {
        std::string name = fmt::format("process {}", pid);
        for (const trace::ProcessInfo& process : reader.processes()) {
            if (process.pid == pid && !process.name.empty())
                name = fmt::format("{} ({} {})", process.name, chrome::kPidWord, pid);
        }
        w.metadata("process_name", pid, 0, name);
        w.sort_index("process_sort_index", pid, 0, 0);
    }
    for (const trace::ThreadInfo& thread : reader.threads()) {
        std::int64_t pid = w.pid_of_thread(thread.thread_id);
        w.metadata(
            "thread_name", pid, thread.thread_id,
            fmt::format("{} ({} {})", thread.name.empty() ? "thread" : thread.name, chrome::kTidWord, thread.tid));
    }
    std::set<trace::DeviceId> devices;
    for (const trace::DeviceInfo& device : reader.devices()) devices.insert(device.device_id);
    for (const trace::StreamInfo& stream : reader.streams()) devices.insert(stream.device_id);
    for (trace::DeviceId device : devices) {
        const trace::DeviceInfo* info = reader.device(device);
        w.metadata("process_name", chrome::gpu_pid(device), 0,
                   fmt::format("{}{}{}{}", chrome::kGpuProcessPrefix, device,
                               info != nullptr && !info->name.empty() ? " " : "", info != nullptr ? info->name : ""));
        w.sort_index("process_sort_index", chrome::gpu_pid(device), 0, 1 + device);
    }
    for (const trace::StreamInfo& stream : reader.streams()) {
        std::int64_t pid = chrome::gpu_pid(stream.device_id);
        w.metadata("thread_name", pid, stream.stream_id,
                   fmt::format("{}{}{}{}", chrome::kStreamThreadPrefix, stream.cuda_stream_id,
                               stream.name.empty() ? "" : " ", stream.name));
        w.metadata("thread_name", pid, chrome::sync_tid(stream.stream_id),
                   fmt::format("{}{}", chrome::kSyncThreadPrefix, stream.cuda_stream_id));
    }
}

// Appends `,"Collective name":...` for the event's collective call, if it has one.
void append_collective_args(std::string& b, const CollectiveArgs& collectives, bool on_stream, std::uint32_t track,
                            TimeNs start) {
    const trace::CollectiveCall* call = collectives.find(on_stream, track, start);
    if (call == nullptr) return;
    collectives.for_each_arg(
        *call,
        [&](std::string_view key, std::string_view value) {
            fmt::format_to(std::back_inserter(b), ",\"{}\":", key);
            append_json_string(b, value);
        },
        [&](std::string_view key, std::int64_t value) {
            fmt::format_to(std::back_inserter(b), ",\"{}\":{}", key, value);
        });
}

void write_gpu_work(const store::TraceReader& reader, ChromeWriter& w, const CollectiveArgs& collectives) {
    store::EventQuery all;
    reader.for_each_kernel(all, [&](const trace::KernelEvent& k) {
        w.complete(chrome::gpu_pid(k.device_id), k.stream_id, reader.string(k.name_id), chrome::kKernelCategory,
                   k.start_ns, k.end_ns);
        const trace::LaunchConfig& l = k.launch;
        fmt::format_to(std::back_inserter(w.buffer()),
                       ",\"args\":{{\"correlation_id\":{},\"grid\":[{},{},{}],\"block\":[{},{},{}],"
                       "\"registers_per_thread\":{},\"shared_bytes\":{}",
                       k.correlation_id, l.grid_x, l.grid_y, l.grid_z, l.block_x, l.block_y, l.block_z,
                       l.registers_per_thread, l.static_shared_bytes + l.dynamic_shared_bytes);
        append_collective_args(w.buffer(), collectives, true, k.stream_id, k.start_ns);
        w.buffer() += '}';
        w.end();
        return true;
    });
    reader.for_each_memcpy(all, [&](const trace::MemcpyEvent& m) {
        w.complete(chrome::gpu_pid(m.device_id), m.stream_id,
                   analysis::memcpy_display_name(m.direction, m.source_kind, m.destination_kind),
                   chrome::kMemcpyCategory, m.start_ns, m.end_ns);
        fmt::format_to(std::back_inserter(w.buffer()), ",\"args\":{{\"correlation_id\":{},\"bytes\":{}}}",
                       m.correlation_id, m.bytes);
        w.end();
        return true;
    });
    reader.for_each_memset(all, [&](const trace::MemsetEvent& m) {
        w.complete(chrome::gpu_pid(m.device_id), m.stream_id, "Memset", chrome::kMemsetCategory, m.start_ns, m.end_ns);
        fmt::format_to(std::back_inserter(w.buffer()), ",\"args\":{{\"correlation_id\":{},\"bytes\":{},\"value\":{}}}",
                       m.correlation_id, m.bytes, m.value);
        w.end();
        return true;
    });
    reader.for_each_sync(all, [&](const trace::SyncEvent& s) {
        w.complete(chrome::gpu_pid(s.device_id), chrome::sync_tid(s.stream_id), trace::sync_kind_name(s.kind),
                   chrome::kSyncCategory, s.start_ns, s.end_ns);
        fmt::format_to(std::back_inserter(w.buffer()), ",\"args\":{{\"correlation_id\":{}}}", s.correlation_id);
        w.end();
        return true;
    });
}

void write_host_work(const store::TraceReader& reader, ChromeWriter& w, const CollectiveArgs& collectives) {
    store::EventQuery all;
    reader.for_each_api_call(all, [&](const trace::ApiEvent& a) {
        w.complete(w.pid_of_thread(a.thread_id), a.thread_id, reader.string(a.name_id), chrome::kCudaApiCategory,
                   a.start_ns, a.end_ns);
        fmt::format_to(std::back_inserter(w.buffer()), ",\"args\":{{\"correlation_id\":{},\"result\":{}}}",
                       a.correlation_id, a.result);
        w.end();
        return true;
    });
    reader.for_each_range(all, [&](const trace::RangeEvent& r) {
        std::string_view domain = reader.string(r.domain_id);
        std::string cat = domain.empty() ? std::string(chrome::kNvtxCategory)
                                         : std::string(chrome::kNvtxDomainCategoryPrefix) + std::string(domain);
        std::int64_t pid = w.pid_of_thread(r.thread_id);
        auto args = [&] {
            std::string& b = w.buffer();
            fmt::format_to(std::back_inserter(b), ",\"args\":{{\"category\":{}", r.category);
            if (r.payload.kind == trace::PayloadKind::integer)
                fmt::format_to(std::back_inserter(b), ",\"payload\":{}", r.payload.integer);
            if (r.payload.kind == trace::PayloadKind::real)
                fmt::format_to(std::back_inserter(b), ",\"payload\":{}", r.payload.real);
            append_collective_args(b, collectives, false, r.thread_id, r.start_ns);
            b += '}';
        };
        if (r.depth >= 0) {
            w.complete(pid, r.thread_id, reader.string(r.name_id), cat, r.start_ns, r.end_ns);
            args();
            w.end();
            return true;
        }
        // start/end ranges may overlap anything: async events keyed by range id.
        for (int edge = 0; edge < 2; ++edge) {
            w.begin(edge == 0 ? "b" : "e", pid, r.thread_id);
            w.name(reader.string(r.name_id));
            w.category(cat);
            w.time("ts", (edge == 0 ? r.start_ns : r.end_ns) - w.origin());
            fmt::format_to(std::back_inserter(w.buffer()), ",\"id\":{}", r.range_id);
            if (edge == 0) args();
            w.end();
        }
        return true;
    });
    reader.for_each_mark(all, [&](const trace::MarkEvent& m) {
        w.begin("i", w.pid_of_thread(m.thread_id), m.thread_id);
        w.name(reader.string(m.name_id));
        w.category(chrome::kNvtxCategory);
        w.time("ts", m.time_ns - w.origin());
        w.buffer() += ",\"s\":\"t\"";
        w.end();
        return true;
    });
    reader.for_each_overhead(all, [&](const trace::OverheadEvent& o) {
        w.complete(w.pid_of_thread(o.thread_id), o.thread_id, reader.string(o.name_id), chrome::kOverheadCategory,
                   o.start_ns, o.end_ns);
        w.end();
        return true;
    });
    reader.for_each_counter_sample(all, [&](const trace::CounterSample& c) {
        const trace::CounterInfo* info = reader.counter(c.counter_id);
        std::int64_t pid =
            info != nullptr && info->device_id >= 0 ? chrome::gpu_pid(info->device_id) : reader.run().pid;
        std::string counter_name = info != nullptr ? info->name : fmt::format("counter {}", c.counter_id);
        if (info != nullptr && !info->unit.empty()) counter_name += " (" + info->unit + ")";
        w.begin("C", pid, 0);
        w.name(counter_name);
        w.time("ts", c.time_ns - w.origin());
        fmt::format_to(std::back_inserter(w.buffer()), ",\"args\":{{\"value\":{}}}", c.value);
        w.end();
        return true;
    });
}

// One flow per (API call, GPU operation) pair sharing a correlation id.
void write_flows(const store::TraceReader& reader, ChromeWriter& w) {
    store::Statement query =
        store::query(reader,
                     "SELECT a.thread_id, a.start_ns, g.device_id, g.stream_id, g.start_ns FROM api_calls AS a JOIN "
                     "(SELECT correlation_id, device_id, stream_id, start_ns FROM kernels UNION ALL "
                     "SELECT correlation_id, device_id, stream_id, start_ns FROM memcpys UNION ALL "
                     "SELECT correlation_id, device_id, stream_id, start_ns FROM memsets) AS g "
                     "ON g.correlation_id = a.correlation_id WHERE a.correlation_id != 0");
    std::int64_t flow_id = 0;
    while (query.next_row()) {
        ++flow_id;
        auto thread = static_cast<trace::ThreadId>(query.column_int64(0));
        w.begin("s", w.pid_of_thread(thread), thread);
        w.name("launch");
        w.category("flow");
        w.time("ts", query.column_int64(1) - w.origin());
        fmt::format_to(std::back_inserter(w.buffer()), ",\"id\":{}", flow_id);
        w.end();
        w.begin("f", chrome::gpu_pid(static_cast<trace::DeviceId>(query.column_int64(2))), query.column_int64(3));
        w.name("launch");
        w.category("flow");
        w.time("ts", query.column_int64(4) - w.origin());
        fmt::format_to(std::back_inserter(w.buffer()), ",\"id\":{},\"bp\":\"e\"", flow_id);
        w.end();
    }
}

}  // namespace

void export_chrome_trace(const store::TraceReader& reader, OutputFile& out) {
    std::string& b = out.buffer();
    b += "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"exporter\":";
    append_json_string(b, std::string(chrome::kExporterPrefix) + " " + EMBER_VERSION_STRING);
    b += ",\"trace\":";
    append_json_string(b, reader.path());
    fmt::format_to(std::back_inserter(b), ",\"time_origin_ns\":{},\"dropped_records\":{}}},\"traceEvents\":[",
                   reader.run().start_ns, reader.total_dropped());
    ChromeWriter writer(reader, out);
    write_tracks(reader, writer);
    const CollectiveArgs collectives(reader);
    write_gpu_work(reader, writer, collectives);
    write_host_work(reader, writer, collectives);
    write_flows(reader, writer);
    out.buffer() += "\n]}\n";
    out.flush();
}

}  // namespace ember::exporting
