// events.h: ember's trace event model. Plain structs, one per kind of thing a
// collector sees (kernels, copies, API calls, NVTX ranges, counter samples, ...)
// plus the descriptions of the tracks they lie on (threads, devices, streams,
// counters) and of the run. The store writes exactly these structs and its reader
// gives them back; docs/trace-schema.md maps every field to its table column.
//
// Conventions:
//   * every time is an int64 count of nanoseconds on the run's one clock
//     (RunInfo::clock_name); wall time = time + RunInfo::clock_offset_to_wall_ns;
//   * intervals are half-open [start_ns, end_ns);
//   * text is interned: a StringId names a row of the `strings` table and 0 means
//     "no string" (the empty string);
//   * ids (ThreadId, StreamId, CounterId, ...) are small integers the writer hands
//     out when a thread/stream/counter is registered; OS thread ids and CUDA stream
//     handles live in the registration structs, not in every event.
#pragma once

#include <cstdint>
#include <type_traits>
#include <string>

namespace ember::trace {

using TimeNs = std::int64_t;
using StringId = std::uint32_t;        // row of `strings`; 0 = no string
using ThreadId = std::uint32_t;        // row of `threads`; 0 = unknown thread
using StreamId = std::uint32_t;        // row of `streams`; 0 = unknown stream
using DeviceId = std::int32_t;         // CUDA device ordinal; -1 = host / none
using CorrelationId = std::uint64_t;   // links a CUDA API call to its GPU work; 0 = none
using CounterId = std::uint32_t;       // row of `counters`
using RangeId = std::uint64_t;         // row of `ranges`; 0 = none (no parent)
using FrameId = std::uint32_t;         // row of `frames`
using StackId = std::uint32_t;         // row of `stacks` (a node of the call-stack tree); 0 = empty
using LaunchConfigId = std::uint32_t;  // row of `launch_configs`
using GraphId = std::uint32_t;         // CUDA graph id (CUPTI graphId); 0 = none or unknown
using GraphNodeId = std::uint64_t;     // CUDA graph node id (CUPTI graphNodeId); 0 = not from a graph

constexpr StringId kNoString = 0;
constexpr DeviceId kNoDevice = -1;

// ---------------------------------------------------------------------------
// [SECTION] Enumerations (stored as their integer value; never renumber)
// ---------------------------------------------------------------------------

enum class MemcpyDirection : std::uint8_t {
    unknown = 0,
    host_to_device = 1,    // HtoD
    device_to_host = 2,    // DtoH
    device_to_device = 3,  // DtoD, same device
    host_to_host = 4,      // HtoH
    peer_to_peer = 5,      // between two devices (peer_device_id says which)
};

enum class MemoryKind : std::uint8_t {
    unknown = 0,
    pageable = 1,  // ordinary host memory: the driver stages it, copies are synchronous
    pinned = 2,    // page-locked host memory: async DMA
    device = 3,
    managed = 4,  // unified memory
    array = 5,    // CUDA array
};

enum class SyncKind : std::uint8_t {
    unknown = 0,
    event_synchronize = 1,    // cudaEventSynchronize
    stream_wait_event = 2,    // cudaStreamWaitEvent
    stream_synchronize = 3,   // cudaStreamSynchronize
    context_synchronize = 4,  // cudaDeviceSynchronize / cuCtxSynchronize
};

enum class PayloadKind : std::uint8_t {
    none = 0,
    integer = 1,
    real = 2,
};

// Short names used in docs, exports and the viewer ("HtoD", "pinned", ...).
inline const char* direction_name(MemcpyDirection d) {
    switch (d) {
        case MemcpyDirection::host_to_device:
            return "HtoD";
        case MemcpyDirection::device_to_host:
            return "DtoH";
        case MemcpyDirection::device_to_device:
            return "DtoD";
        case MemcpyDirection::host_to_host:
            return "HtoH";
        case MemcpyDirection::peer_to_peer:
            return "PtoP";
        default:
            return "unknown";
    }
}

inline const char* memory_kind_name(MemoryKind k) {
    switch (k) {
        case MemoryKind::pageable:
            return "pageable";
        case MemoryKind::pinned:
            return "pinned";
        case MemoryKind::device:
            return "device";
        case MemoryKind::managed:
            return "managed";
        case MemoryKind::array:
            return "array";
        default:
            return "unknown";
    }
}

inline const char* sync_kind_name(SyncKind k) {
    switch (k) {
        case SyncKind::event_synchronize:
            return "event synchronize";
        case SyncKind::stream_wait_event:
            return "stream wait event";
        case SyncKind::stream_synchronize:
            return "stream synchronize";
        case SyncKind::context_synchronize:
            return "context synchronize";
        default:
            return "unknown";
    }
}

// An NVTX payload: none, an integer (bytes, counts) or a real number (loss, lr).
struct Payload {
    PayloadKind kind = PayloadKind::none;
    std::int64_t integer = 0;
    double real = 0.0;

    static Payload of_integer(std::int64_t v) { return {PayloadKind::integer, v, 0.0}; }
    static Payload of_real(double v) { return {PayloadKind::real, 0, v}; }
    // The payload as a number, whatever its kind (0 for none).
    double as_double() const {
        return kind == PayloadKind::integer ? static_cast<double>(integer) : (kind == PayloadKind::real ? real : 0.0);
    }
    bool operator==(const Payload&) const = default;
};

// ---------------------------------------------------------------------------
// [SECTION] The run and its tracks (registered once, small tables)
// ---------------------------------------------------------------------------

// One per file: who wrote it, where, and how its clock maps to wall time.
struct RunInfo {
    std::string ember_version;  // empty: the writer fills in its own version
    std::string command_line;   // the recorded program's argv, joined by spaces
    std::string host;
    std::int64_t pid = 0;
    std::int32_t rank = 0;  // MPI/NCCL rank of this process; 0 for a single process
    std::int32_t world_size = 1;
    // Where `rank` came from: "RANK environment", "distributedInfo.rank", "--rank",
    // "job file", "synthetic", ...; empty when the recorder knew no rank.
    std::string rank_source;
    std::string clock_name = "CLOCK_MONOTONIC";  // the clock every *_ns value is on
    std::int64_t clock_offset_to_wall_ns = 0;    // wall (Unix epoch ns) = trace time + offset
    TimeNs start_ns = 0;                         // recording began
    TimeNs end_ns = 0;                           // recording ended (0 while recording / after a crash)
    bool operator==(const RunInfo&) const = default;
};

struct ProcessInfo {
    std::int64_t pid = 0;
    std::string name;
    bool operator==(const ProcessInfo&) const = default;
};

// A merged job file (profiler/merge) keeps each rank's pids; a pid already taken by an
// earlier rank (the same pid on two hosts) moves up by kMergedPidStep until it is free.
// original_pid() undoes that for a pid of a process (pid >= 0).
inline constexpr std::int64_t kMergedPidStep = 1'000'000'000;
constexpr std::int64_t original_pid(std::int64_t merged_pid) {
    return merged_pid < 0 ? merged_pid : merged_pid % kMergedPidStep;
}

struct ThreadInfo {
    ThreadId thread_id = 0;  // assigned by the writer at registration
    std::int64_t pid = 0;
    std::int64_t tid = 0;  // OS thread id (gettid)
    std::string name;
    bool operator==(const ThreadInfo&) const = default;
};

struct DeviceInfo {
    DeviceId device_id = 0;  // CUDA ordinal
    std::string name;        // "NVIDIA H100 80GB HBM3"
    std::string uuid;        // "GPU-..." when known
    std::int32_t compute_capability_major = 0;
    std::int32_t compute_capability_minor = 0;
    std::int32_t multiprocessor_count = 0;
    std::int64_t memory_bytes = 0;                   // global memory
    double memory_bandwidth_bytes_per_second = 0.0;  // theoretical peak
    bool operator==(const DeviceInfo&) const = default;
};

struct StreamInfo {
    StreamId stream_id = 0;  // assigned by the writer at registration
    DeviceId device_id = 0;
    std::uint32_t context_id = 0;      // CUPTI context id
    std::uint64_t cuda_stream_id = 0;  // CUPTI stream id (unique within the process)
    std::int32_t priority = 0;
    std::string name;  // "default", "copy", user name; may be empty
    bool operator==(const StreamInfo&) const = default;
};

// A scalar series: GPU utilization, loss, lr, samples/s, memory in use, ...
struct CounterInfo {
    CounterId counter_id = 0;        // assigned by the writer at registration
    std::string name;                // "gpu utilization", "loss"
    std::string unit;                // "%", "bytes", "" (dimensionless)
    DeviceId device_id = kNoDevice;  // the device it measures, -1 for host-side series
    bool operator==(const CounterInfo&) const = default;
};

// Kernel launch shape; interned by the writer into `launch_configs` (training runs
// launch the same few shapes millions of times).
struct LaunchConfig {
    std::uint32_t grid_x = 1, grid_y = 1, grid_z = 1;
    std::uint32_t block_x = 1, block_y = 1, block_z = 1;
    std::uint32_t registers_per_thread = 0;
    std::uint32_t static_shared_bytes = 0;
    std::uint32_t dynamic_shared_bytes = 0;
    bool operator==(const LaunchConfig&) const = default;
};

// One frame of a CPU call stack.
struct FrameInfo {
    FrameId frame_id = 0;
    std::string function;  // demangled function name, or "0x..." when unresolved
    std::string module;    // shared object / executable path; a Python frame's co_filename
    std::uint64_t address = 0;
    std::int32_t line = -1;  // a Python frame's line (>= 0; 0 = unknown); -1 for native code
    bool is_python() const { return line >= 0; }
    bool operator==(const FrameInfo&) const = default;
};

// ---------------------------------------------------------------------------
// [SECTION] Events (millions of them: keep them flat)
// ---------------------------------------------------------------------------

// Track: a stream.
struct KernelEvent {
    TimeNs start_ns = 0;
    TimeNs end_ns = 0;
    DeviceId device_id = 0;
    StreamId stream_id = 0;
    CorrelationId correlation_id = 0;
    StringId name_id = kNoString;  // demangled kernel name
    LaunchConfig launch;
    // Schema 3 (fields added last so positional initialisation stays valid):
    GraphId graph_id = 0;           // the CUDA graph this kernel ran in; 0 = none or unknown
    GraphNodeId graph_node_id = 0;  // its node in that graph; 0 = not from a graph
    bool operator==(const KernelEvent&) const = default;
};

// Track: a stream.
struct MemcpyEvent {
    TimeNs start_ns = 0;
    TimeNs end_ns = 0;
    DeviceId device_id = 0;
    StreamId stream_id = 0;
    CorrelationId correlation_id = 0;
    MemcpyDirection direction = MemcpyDirection::unknown;
    std::uint64_t bytes = 0;
    MemoryKind source_kind = MemoryKind::unknown;
    MemoryKind destination_kind = MemoryKind::unknown;
    DeviceId peer_device_id = kNoDevice;  // the other device of a peer copy
    // Schema 3 (fields added last so positional initialisation stays valid):
    GraphId graph_id = 0;           // the CUDA graph it ran in; 0 = none or unknown
    GraphNodeId graph_node_id = 0;  // its node in that graph; 0 = not from a graph
    bool operator==(const MemcpyEvent&) const = default;
};

// Track: a stream.
struct MemsetEvent {
    TimeNs start_ns = 0;
    TimeNs end_ns = 0;
    DeviceId device_id = 0;
    StreamId stream_id = 0;
    CorrelationId correlation_id = 0;
    std::uint64_t bytes = 0;
    std::uint32_t value = 0;
    MemoryKind memory_kind = MemoryKind::device;
    // Schema 3 (fields added last so positional initialisation stays valid):
    GraphId graph_id = 0;           // the CUDA graph it ran in; 0 = none or unknown
    GraphNodeId graph_node_id = 0;  // its node in that graph; 0 = not from a graph
    bool operator==(const MemsetEvent&) const = default;
};

// A host wait on GPU work. Track: the stream waited on (0 for a whole-device sync).
struct SyncEvent {
    TimeNs start_ns = 0;
    TimeNs end_ns = 0;
    DeviceId device_id = 0;
    StreamId stream_id = 0;
    CorrelationId correlation_id = 0;  // the API call that waited
    SyncKind kind = SyncKind::unknown;
    std::uint64_t cuda_event_id = 0;  // for event syncs / waits; 0 otherwise
    bool operator==(const SyncEvent&) const = default;
};

// run_metadata key: how many of the file's synchronizations an import made from the
// synchronizing runtime calls of a trace that records none (the call's own times; no
// GPU record behind them). Absent or 0: every synchronization is a GPU record.
inline constexpr const char* kSynchronizationsFromCallsKey = "import_synchronizations_from_calls";

// A CUDA runtime/driver API call (cudaLaunchKernel, cudaMemcpyAsync, ...). Track: a thread.
struct ApiEvent {
    TimeNs start_ns = 0;
    TimeNs end_ns = 0;
    ThreadId thread_id = 0;
    CorrelationId correlation_id = 0;
    StringId name_id = kNoString;
    std::int32_t result = 0;  // cudaError_t / CUresult; 0 = success
    StackId stack_id = 0;     // schema 3: the call site's stack (e.g. its Python stack); 0 = unknown
    bool operator==(const ApiEvent&) const = default;
};

// An NVTX range. Track: a thread (the one that opened it).
struct RangeEvent {
    RangeId range_id = 0;  // unique in the file; from TraceWriter::next_range_id()
    TimeNs start_ns = 0;
    TimeNs end_ns = 0;
    ThreadId thread_id = 0;
    StringId domain_id = kNoString;  // NVTX domain ("ember"); kNoString = default domain
    StringId name_id = kNoString;
    std::uint32_t category = 0;   // NVTX category (engine/core/nvtx.h: Category)
    std::uint32_t color = 0;      // ARGB; 0 = none
    std::int32_t depth = 0;       // push/pop nesting on its thread, 0 = outermost;
                                  // -1 for start/end ranges (not nested)
    RangeId parent_range_id = 0;  // enclosing push/pop range, 0 = none
    Payload payload;
    bool operator==(const RangeEvent&) const = default;
};

// An NVTX mark (an instant). Track: a thread.
struct MarkEvent {
    TimeNs time_ns = 0;
    ThreadId thread_id = 0;
    StringId domain_id = kNoString;
    StringId name_id = kNoString;
    std::uint32_t category = 0;
    std::uint32_t color = 0;
    Payload payload;
    bool operator==(const MarkEvent&) const = default;
};

// Track: a counter.
struct CounterSample {
    CounterId counter_id = 0;
    TimeNs time_ns = 0;
    double value = 0.0;
    bool operator==(const CounterSample&) const = default;
};

// A sampled CPU call stack. Track: a thread.
struct StackSample {
    TimeNs time_ns = 0;
    ThreadId thread_id = 0;
    StackId stack_id = 0;  // leaf node of the stack tree (TraceWriter::intern_stack)
    bool idle = false;     // the thread was not running (sleeping, blocked) when sampled
    bool operator==(const StackSample&) const = default;
};

// Records lost before they reached the file: CUPTI buffer drops, writer buffer
// overflow, ... Nothing is dropped silently.
struct DroppedRecords {
    TimeNs time_ns = 0;              // when the loss was noticed
    StringId source_id = kNoString;  // "cupti", "writer buffer full", ...
    ThreadId thread_id = 0;          // the producing thread when known
    std::uint64_t count = 0;
    bool operator==(const DroppedRecords&) const = default;
};

// What PyTorch's profiler says of one collective (Kineto's collective metadata, from
// c10d's record_param_comms): its process group, its sequence number in that group,
// its sizes. Attached to the event that ran it: a kernel (on_stream: its stream and
// start) or a host range (its thread and start).
struct CollectiveCall {
    TimeNs start_ns = 0;         // the kernel's or range's start
    std::uint32_t track_id = 0;  // its StreamId (on_stream) or ThreadId
    bool on_stream = true;
    StringId name_id = kNoString;         // "Collective name": "allreduce", "_allgather_base", ...
    StringId group_name_id = kNoString;   // "Process Group Name": the same on every rank
    StringId group_desc_id = kNoString;   // "Process Group Description": "default_pg", "mesh_dp"
    StringId group_ranks_id = kNoString;  // "Process Group Ranks", as "[0, 1, 2, 3]"
    std::int32_t group_size = 0;          // "Group size"
    std::int64_t sequence = -1;           // "Seq": the collective's number in its group; -1 unknown
    std::int64_t in_elements = -1;        // "In msg nelems"
    std::int64_t out_elements = -1;       // "Out msg nelems"
    StringId dtype_id = kNoString;        // "dtype"
    bool operator==(const CollectiveCall&) const = default;
};

// ---------------------------------------------------------------------------
// [SECTION] GPU memory (a caching allocator's events and state; schema 5)
// ---------------------------------------------------------------------------

// What happened to device memory. Bytes are in use from `alloc` to `free_completed`
// (a block freed on a stream is reused only once the stream's work is done:
// `free_requested` marks the request); reserved from `segment_alloc`/`segment_map` to
// `segment_free`/`segment_unmap`. The *_live_at_start kinds stand for memory that
// was already allocated (reserved) when the trace began: PyTorch's trace is a ring
// buffer, so a block freed in it with no `alloc`, or still allocated at the end with
// no `alloc`, was allocated before it (memory_viz's "initially allocated").
enum class MemoryAction : std::uint8_t {
    unknown = 0,
    alloc = 1,
    free_requested = 2,
    free_completed = 3,
    segment_alloc = 4,           // cudaMalloc of a segment
    segment_free = 5,            // cudaFree of a segment
    segment_map = 6,             // pages mapped into an expandable segment
    segment_unmap = 7,           // pages unmapped from one
    snapshot = 8,                // a snapshot was taken (PyTorch 2.0: bytes = allocated then)
    oom = 9,                     // an allocation failed: bytes = the request, device_free_bytes
    live_at_start = 10,          // a block allocated before the trace began
    segment_live_at_start = 11,  // a segment reserved before the trace began
};

// The state of a block when the allocator's state was taken (MemoryBlock).
enum class MemoryBlockState : std::uint8_t {
    unknown = 0,
    active_allocated = 1,     // in use
    active_pending_free = 2,  // freed, waiting for its stream's work to finish
    inactive = 3,             // free, cached by the allocator
};

// One allocator event. Track: the device (memory_events, by device then time).
struct MemoryEvent {
    TimeNs time_ns = 0;
    DeviceId device_id = 0;
    MemoryAction action = MemoryAction::unknown;
    std::uint64_t address = 0;            // the block's (or segment's) address; 0 for oom/snapshot
    std::int64_t bytes = 0;               // its size (oom: the request)
    std::uint64_t cuda_stream = 0;        // the stream as the source names it (a cudaStream_t; 0 = default)
    StackId stack_id = 0;                 // where it was allocated/freed; 0 = unknown
    std::int64_t device_free_bytes = -1;  // oom: what the device had free; -1 otherwise
    ThreadId thread_id = 0;               // the thread that allocated/freed (its open range is the op); 0 = unknown
    bool operator==(const MemoryEvent&) const = default;
};

// One block of the allocator's state at `time_ns` (a PyTorch snapshot's `segments`:
// every block of every segment, free ones included).
struct MemoryBlock {
    TimeNs time_ns = 0;
    DeviceId device_id = 0;
    MemoryBlockState state = MemoryBlockState::unknown;
    bool expandable_segment = false;
    bool small_pool = false;  // the segment is of the small-block pool (under 1 MiB requests)
    std::uint64_t segment_address = 0;
    std::int64_t segment_bytes = 0;  // the whole segment (reserved)
    std::uint64_t address = 0;
    std::int64_t bytes = 0;            // the block's size
    std::int64_t requested_bytes = 0;  // what its user asked for (<= bytes)
    std::uint64_t cuda_stream = 0;
    StackId stack_id = 0;  // where it was allocated; 0 = unknown
    bool operator==(const MemoryBlock&) const = default;
};

inline const char* memory_action_name(MemoryAction a) {
    switch (a) {
        case MemoryAction::alloc:
            return "alloc";
        case MemoryAction::free_requested:
            return "free_requested";
        case MemoryAction::free_completed:
            return "free_completed";
        case MemoryAction::segment_alloc:
            return "segment_alloc";
        case MemoryAction::segment_free:
            return "segment_free";
        case MemoryAction::segment_map:
            return "segment_map";
        case MemoryAction::segment_unmap:
            return "segment_unmap";
        case MemoryAction::snapshot:
            return "snapshot";
        case MemoryAction::oom:
            return "oom";
        case MemoryAction::live_at_start:
            return "live_at_start";
        case MemoryAction::segment_live_at_start:
            return "segment_live_at_start";
        default:
            return "unknown";
    }
}

inline const char* memory_block_state_name(MemoryBlockState s) {
    switch (s) {
        case MemoryBlockState::active_allocated:
            return "active_allocated";
        case MemoryBlockState::active_pending_free:
            return "active_pending_free";
        case MemoryBlockState::inactive:
            return "inactive";
        default:
            return "unknown";
    }
}

// Time the collector itself spent (CUPTI buffer processing, writer commits, ...).
struct OverheadEvent {
    TimeNs start_ns = 0;
    TimeNs end_ns = 0;
    ThreadId thread_id = 0;
    StringId name_id = kNoString;  // what the collector was doing
    bool operator==(const OverheadEvent&) const = default;
};

// ---------------------------------------------------------------------------
// [SECTION] Tracks
// ---------------------------------------------------------------------------

// What a lane of the timeline is made of.
enum class TrackKind : std::uint8_t {
    thread = 0,   // API calls, ranges, marks, stack samples, overhead
    stream = 1,   // kernels, memcpys, memsets, synchronizations
    counter = 2,  // counter samples
};

struct Track {
    TrackKind kind = TrackKind::thread;
    std::uint32_t id = 0;  // ThreadId, StreamId or CounterId
    bool operator==(const Track&) const = default;
};

// ---------------------------------------------------------------------------
// [SECTION] When and where an event is: one accessor per event kind, so code that
// handles every kind (the writer's track statistics, the reader's merge by start)
// is written once. An instant's end is its start; the track is the id its table's
// track column holds.
// ---------------------------------------------------------------------------

// The event kinds stored on a track (a stream, a thread or a counter).
template <typename Event>
concept TrackEvent = std::is_same_v<Event, KernelEvent> || std::is_same_v<Event, MemcpyEvent> ||
    std::is_same_v<Event, MemsetEvent> || std::is_same_v<Event, SyncEvent> || std::is_same_v<Event, ApiEvent> ||
    std::is_same_v<Event, RangeEvent> || std::is_same_v<Event, MarkEvent> || std::is_same_v<Event, CounterSample> ||
    std::is_same_v<Event, StackSample> || std::is_same_v<Event, OverheadEvent>;

template <TrackEvent Event>
TimeNs start_of(const Event& e) {
    if constexpr (requires { e.start_ns; })
        return e.start_ns;
    else
        return e.time_ns;  // an instant
}
template <TrackEvent Event>
TimeNs end_of(const Event& e) {
    if constexpr (requires { e.end_ns; })
        return e.end_ns;
    else
        return e.time_ns;
}
// A GPU event's stream, a counter sample's counter, any other event's thread.
template <TrackEvent Event>
std::uint32_t track_of(const Event& e) {
    if constexpr (requires { e.stream_id; })
        return e.stream_id;
    else if constexpr (requires { e.counter_id; })
        return e.counter_id;
    else
        return e.thread_id;
}

}  // namespace ember::trace
