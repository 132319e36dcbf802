// trace_event_parser.h: one Trace Event Format element (Chrome, Kineto, ember's
// export) parsed with simdjson On-Demand into flat fields — the union of what the
// importers read, no heap allocation per event. Text fields are views into the
// parser's buffers, valid until the next parse. Times are exact nanoseconds from
// the decimal text (decimal_time.h). Also the top-level values the importers use
// (deviceProperties, distributedInfo, baseTimeNanoseconds, otherData).
#pragma once

#include "profiler/import/decimal_time.h"
#include "profiler/import/json_stream.h"
#include "profiler/trace/events.h"

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::importing {

// "pid", "tid" and "id" are numbers in most traces and text in some ("stream 7",
// "Spans", "0x1f"). Text that is a plain integer is read as the number.
struct JsonId {
    bool present = false;
    bool is_text = false;
    std::int64_t number = 0;
    std::string_view text;
};

struct TraceEventArgs {
    // Kineto names / ember export names of the same facts.
    std::optional<std::int64_t> correlation;           // "correlation" / "correlation_id"
    std::optional<std::int64_t> device;                // "device"
    std::optional<std::int64_t> stream;                // "stream"
    std::optional<std::int64_t> context;               // "context"
    std::optional<std::int64_t> bytes;                 // "bytes"
    std::optional<std::int64_t> registers_per_thread;  // "registers per thread" / "registers_per_thread"
    std::optional<std::int64_t> shared_memory;         // "shared memory" / "shared_bytes"
    std::optional<std::int64_t> result;                // "result" (ember: CUDA API result)
    std::optional<std::int64_t> nvtx_category;         // "category" (ember: NVTX category)
    std::optional<std::int64_t> value;                 // "value" when integral (ember: memset value)
    // Kineto "[memory]" instants.
    std::optional<std::int64_t> total_allocated;     // "Total Allocated"
    std::optional<std::int64_t> total_reserved;      // "Total Reserved"
    std::optional<std::int64_t> memory_device_id;    // "Device Id"
    std::optional<std::int64_t> memory_device_type;  // "Device Type" (1: CUDA)
    std::optional<std::int64_t> memory_address;      // "Addr" (the block allocated or freed; "Bytes" < 0: freed)
    // Kineto's collective metadata (c10d's record_param_comms, copied onto the NCCL kernel).
    std::optional<std::int64_t> group_size;    // "Group size"
    std::optional<std::int64_t> in_elements;   // "In msg nelems"
    std::optional<std::int64_t> out_elements;  // "Out msg nelems"
    std::optional<std::int64_t> sequence;      // "Seq"
    // Kineto's cuda_sync events: the CUDA event an event sync / stream wait waits for.
    std::optional<std::int64_t> cuda_event_id;  // "wait_on_cuda_event_id" / "cuda_event_id"
    std::string_view collective_name;           // "Collective name"
    std::string_view group_name;                // "Process Group Name"
    std::string_view group_desc;                // "Process Group Description"
    std::string_view group_ranks;               // "Process Group Ranks": a string "[0, 1]", or an array's JSON text
    std::string_view dtype;                     // "dtype"
    int grid_size = 0;                          // how many of grid[] were given
    std::array<std::uint32_t, 3> grid{1, 1, 1};
    int block_size = 0;
    std::array<std::uint32_t, 3> block{1, 1, 1};
    trace::Payload payload;   // "payload" (ember: NVTX payload)
    std::string_view name;    // "name" (metadata events)
    std::string_view labels;  // "labels" (Kineto process labels: "CPU", "GPU 0")
    // Every numeric argument in order (a "C" event's series); the first 16.
    struct Number {
        std::string_view key;
        double value = 0.0;
    };
    std::array<Number, 16> numbers{};
    std::size_t number_count = 0;
};

struct TraceEventFields {
    char phase = 0;  // 0: no "ph"
    std::string_view name;
    std::string_view category;  // "cat"
    std::string_view scope;     // "s" of instants
    JsonId pid, tid, id;
    bool has_ts = false;
    bool has_dur = false;
    trace::TimeNs ts_ns = 0;
    trace::TimeNs dur_ns = 0;
    bool has_args = false;
    TraceEventArgs args;
};

// Kineto's deviceProperties entry / distributedInfo object.
struct KinetoDistributedInfo {
    std::optional<std::int32_t> rank;
    std::optional<std::int32_t> world_size;
    std::string backend;
    std::string nccl_version;
};

// ember's `export --format chrome` header.
struct ChromeOtherData {
    std::optional<std::int64_t> time_origin_ns;
    std::string exporter;
};

class TraceEventParser {
  public:
    explicit TraceEventParser(const InputStream& input);
    ~TraceEventParser();
    TraceEventParser(const TraceEventParser&) = delete;
    TraceEventParser& operator=(const TraceEventParser&) = delete;

    // Parses one traceEvents element. Throws TraceError (corrupt) naming the file,
    // the element and its byte offset for malformed JSON or a field of the wrong type.
    void parse_event(const JsonItem& item, TraceEventFields& fields);

    // Top-level values. Each throws TraceError (corrupt) when malformed.
    std::vector<trace::DeviceInfo> device_properties(const JsonItem& item);
    KinetoDistributedInfo distributed_info(const JsonItem& item);
    std::optional<std::int64_t> integer(const JsonItem& item);  // a number or numeric string
    std::optional<std::string> string(const JsonItem& item);
    ChromeOtherData other_data(const JsonItem& item);

    // Elements whose invalid UTF-8 was replaced by '?' so they could be read.
    std::int64_t utf8_repairs() const { return utf8_repairs_; }

  private:
    struct State;
    std::unique_ptr<State> state_;
    const InputStream& input_;
    std::int64_t utf8_repairs_ = 0;
};

}  // namespace ember::importing
