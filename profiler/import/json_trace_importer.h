// json_trace_importer.h: what the Kineto and Chrome importers share — the loop over
// a streamed trace JSON and the Trace Event Format phases whose meaning does not
// depend on who wrote the file: "B"/"E" duration pairs, "b"/"e" async ranges,
// instants, counters, flows and metadata. A dialect decides what a complete ("X")
// event is (a kernel? a CUDA call? a host range?) and reads its top-level keys.
#pragma once

#include "profiler/import/import_sink.h"
#include "profiler/import/json_stream.h"
#include "profiler/import/trace_event_parser.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ember::importing {

// Memcpy direction and memory kinds from an event name: Kineto's
// "Memcpy HtoD (Pageable -> Device)" and ember's "Memcpy HtoD (pinned -> device)".
struct CopyShape {
    trace::MemcpyDirection direction = trace::MemcpyDirection::unknown;
    trace::MemoryKind source = trace::MemoryKind::unknown;
    trace::MemoryKind destination = trace::MemoryKind::unknown;
};
CopyShape copy_shape_from_name(std::string_view name);
// "Memset (Device)" -> device.
trace::MemoryKind memset_kind_from_name(std::string_view name);
// "pageable", "Pinned", "device", ... (any case) -> the kind; unknown otherwise.
trace::MemoryKind memory_kind_from_word(std::string_view word);
// NCCL's kernels: "ncclKernel_...", "ncclDevKernel_...", "void ncclKernel..." (the
// communication work of a distributed job).
bool is_nccl_kernel(std::string_view name);

class JsonTraceImporter {
  public:
    explicit JsonTraceImporter(ImportSink& sink);
    virtual ~JsonTraceImporter();
    JsonTraceImporter(const JsonTraceImporter&) = delete;
    JsonTraceImporter& operator=(const JsonTraceImporter&) = delete;

    // Reads the whole input, then calls finish_dialect().
    void run();

  protected:
    // How a host range of this dialect is filed: NVTX domain and category.
    struct RangeStyle {
        trace::StringId domain_id = trace::kNoString;
        std::uint32_t category = 0;
    };

    virtual std::vector<std::string> wanted_top_level_keys() const = 0;
    virtual void on_top_level(const JsonItem& item) = 0;
    virtual void on_complete(const TraceEventFields& event, const JsonItem& item) = 0;
    virtual void on_instant(const TraceEventFields& event, const JsonItem& item);
    virtual RangeStyle range_style(const TraceEventFields& event);
    virtual void on_process_name(std::int64_t pid, std::string_view name) { sink_.name_process(pid, name); }
    virtual void on_thread_name(std::int64_t pid, std::int64_t tid, std::string_view name) {
        sink_.name_thread(pid, tid, name);
    }
    virtual void on_process_labels(std::int64_t pid, std::string_view labels) {}
    // The counter of a "C" event's series `key`.
    virtual trace::CounterId counter_for(const TraceEventFields& event, std::string_view key);
    virtual void finish_dialect() {}

    // --- shared helpers -----------------------------------------------------------------
    // A number for a pid/tid (text ids such as "Spans" get stable negative numbers).
    std::int64_t id_number(const JsonId& id);
    // The host thread of an event (every kind: "X", "B"/"E", "b"/"e", instants). A
    // dialect that maps its tids (ember's Chrome export keeps the OS thread id in the
    // thread's name) overrides it.
    virtual trace::ThreadId host_thread(const TraceEventFields& event);
    // Adds the source's time base (ember's export: its time origin).
    trace::TimeNs event_time(trace::TimeNs ts_ns) const { return ts_ns + time_shift_ns_; }
    // [start, end) of an "X" event; rejects a missing ts and negative or overflowing durations.
    bool complete_interval(const TraceEventFields& event, const JsonItem& item, trace::TimeNs& start,
                           trace::TimeNs& end);
    // An event that breaks the format's rules: skipped and counted with where it was
    // (ImportSink::invalid), or an error under ImportOptions::strict. Returns false (skip
    // it) when it returns.
    bool reject(const JsonItem& item, std::string_view reason, const std::string& detail);
    void add_host_range(trace::ThreadId thread, trace::TimeNs start, trace::TimeNs end, std::string_view name,
                        RangeStyle style, const trace::Payload& payload);
    // What both JSON dialects read alike from a GPU event once the dialect has placed it
    // on a stream (`stream` of `device`, from its gpu_track): times, the correlation id
    // (0 when absent or not positive), the name, the launch shape, the bytes, the copy
    // kind from the name. A memset's value and memory kind and a sync's kind are the
    // dialect's.
    static trace::CorrelationId correlation_of(const TraceEventFields& event);
    // A CUDA runtime or driver call on its host thread, with its correlation id and its
    // "result" argument (0 when absent).
    trace::ApiEvent api_call_of(const TraceEventFields& event, trace::TimeNs start, trace::TimeNs end);
    trace::KernelEvent kernel_of(const TraceEventFields& event, trace::TimeNs start, trace::TimeNs end,
                                 trace::StreamId stream, trace::DeviceId device);
    static trace::MemcpyEvent memcpy_of(const TraceEventFields& event, trace::TimeNs start, trace::TimeNs end,
                                        trace::StreamId stream, trace::DeviceId device);
    static trace::MemsetEvent memset_of(const TraceEventFields& event, trace::TimeNs start, trace::TimeNs end,
                                        trace::StreamId stream, trace::DeviceId device);
    static trace::SyncEvent sync_of(const TraceEventFields& event, trace::TimeNs start, trace::TimeNs end,
                                    trace::StreamId stream, trace::DeviceId device);
    // Kineto's collective metadata of the kernel (on_stream: `track` is its stream) or
    // host range (`track` its thread) just recorded at `start`, when its args carry any
    // (`Collective name`, `Process Group Name`, ...): the process group that matches the
    // job's collectives across ranks. ember's Chrome export writes the same args.
    void collective_call(const TraceEventFields& event, trace::TimeNs start, std::uint32_t track, bool on_stream);

    ImportSink& sink_;
    InputStream input_;
    TraceEventParser parser_;
    trace::TimeNs time_shift_ns_ = 0;
    bool events_seen_ = false;

  private:
    void dispatch(const TraceEventFields& event, const JsonItem& item);
    void metadata(const TraceEventFields& event);
    void begin_duration(const TraceEventFields& event, const JsonItem& item);
    void end_duration(const TraceEventFields& event, const JsonItem& item);
    void async_event(const TraceEventFields& event, const JsonItem& item);
    void counter_event(const TraceEventFields& event, const JsonItem& item);

    struct OpenDuration {
        trace::TimeNs start_ns = 0;
        trace::StringId name_id = trace::kNoString;
        RangeStyle style;
        trace::Payload payload;
    };
    struct OpenAsync {
        trace::TimeNs start_ns = 0;
        trace::ThreadId thread_id = 0;
        trace::StringId name_id = trace::kNoString;
        RangeStyle style;
        trace::Payload payload;
    };
    std::unordered_map<trace::ThreadId, std::vector<OpenDuration>> open_durations_;
    std::unordered_map<std::string, std::vector<OpenAsync>> open_async_;
    std::unordered_map<std::string, std::int64_t> text_ids_;
    std::string async_key_;
};

}  // namespace ember::importing
