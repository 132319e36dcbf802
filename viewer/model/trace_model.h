// trace_model.h: TraceModel, what the viewer knows about one or more trace files.
//
// Opening reads the small tables of every file at once (threads, streams, counters,
// strings) and creates every lane, empty; a background thread then fills the lanes
// one track at a time through ember::store::TraceReader and marks each `ready` when
// it is complete. The UI draws ready lanes only, so the first frame never waits for
// the events and no lock is taken per frame: a lane's arrays never change once it is
// ready.
//
// Layout in memory (Tracy-style): per lane, rows of TimelineEvent sorted by start
// (one row per NVTX depth, one for CUDA API calls, one for GPU work per stream, ...)
// so that the visible part of a row is found by binary search (lod.h).
//
// Several files are put on one time base through each run's clock offset to wall
// time (ranks of one job recorded on different hosts line up); every time the model
// hands out is `file time + TraceFile::shift_ns`.
//
// Live files (a recording in progress, --attach/--watch) grow by refresh: the loader
// reads the file inside one read transaction and notes each event table's highest
// rowid; read_new_events() later reads only the rows above those marks
// (live_refresh.cpp), and apply_new_events() appends them to the lanes.
#pragma once

#include "profiler/store/reader.h"
#include "profiler/trace/events.h"
#include "viewer/model/gpu_analysis.h"
#include "viewer/model/sample_stacks.h"
#include "viewer/model/timeline_event.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

namespace ember::viewer {

// memory: a GPU's allocated or reserved bytes over time, replayed from the file's memory
// events (analysis::for_each_memory_total); drawn as a counter is.
enum class LaneKind : std::uint8_t { thread = 0, stream = 1, counter = 2, memory = 3 };

// What a row of a lane holds; decides its title and colors.
enum class RowKind : std::uint8_t {
    ranges = 0,    // NVTX push/pop ranges of one depth
    async_ranges,  // NVTX start/end ranges, packed greedily into rows
    api_calls,
    marks,
    overhead,
    gpu_work,  // kernels, copies, memsets of one stream
    syncs,     // host waits on the stream
};

struct Row {
    RowKind kind = RowKind::ranges;
    int depth = 0;                      // NVTX depth of a `ranges` row
    std::vector<TimelineEvent> events;  // sorted by start_ns
    // True when no event starts before the previous one ends: then ends are sorted
    // too and the first visible event is found by binary search on end_ns.
    bool non_overlapping = true;
    trace::TimeNs max_duration_ns = 0;
    // Overlapping rows only: running_max_end[i] = latest end among events 0..i. It is
    // sorted, so the visible part and the extent of a folded run stay binary searches
    // (8 more bytes for the events of such rows; empty for the others).
    std::vector<trace::TimeNs> running_max_end;
};

struct Lane {
    LaneKind kind = LaneKind::thread;
    int file_index = 0;
    std::uint32_t track_id = 0;  // ThreadId, StreamId or CounterId in its file; memory: the DeviceId
    trace::DeviceId device_id = trace::kNoDevice;
    std::int64_t process_id = 0;       // thread lanes
    std::string group;                 // "rank 0 · process 1234 python", "rank 0 · GPU 0 H100"
    std::string title;                 // "thread 1235 loader", "stream 7", "loss"
    std::string unit;                  // counter lanes
    std::int64_t expected_events = 0;  // from the file's track summaries
    // Per kind (EventKind index), so every row array is reserved once, exactly.
    std::int64_t expected_by_kind[kEventKindCount] = {};
    // Filled by the loader; read only after `ready`.
    std::vector<Row> rows;
    std::vector<CounterPoint> points;  // counter lanes, sorted by time
    double min_value = 0.0;
    double max_value = 0.0;
    std::atomic<bool> ready{false};

    bool reserved_memory = false;      // memory lanes: reserved (else allocated) bytes
    std::int64_t event_count() const;  // events in rows + counter points
    bool plots_values() const { return kind == LaneKind::counter || kind == LaneKind::memory; }
};

// A sampled CPU stack, kept for the CPU flamegraph.
// One event of the timeline: lane, row and index in the row.
struct EventRef {
    int lane = -1;
    int row = 0;
    std::uint32_t index = 0;
    bool valid() const { return lane >= 0; }
    bool operator==(const EventRef&) const = default;
};

struct StackSampleRef {
    trace::TimeNs time_ns = 0;
    trace::ThreadId thread_id = 0;
    trace::StackId stack_id = 0;
    bool idle = false;  // the thread was not running (stack_samples.idle)
};

struct TraceFile;
// "rank 1 · " in front of a file's lane groups when several files or a single rank of a
// distributed run are shown; "" for a lone file or a job trace.
std::string rank_prefix(std::size_t file_count, const TraceFile& file);

// What a lane is called and where it belongs, from the reader's small tables: the
// same words when the file is loaded and when a live refresh finds a new track.
struct LaneNames {
    std::string group;  // "process 42 python", "GPU 0 NVIDIA H100", "counters" (after the rank prefix)
    std::string title;  // "thread 42 main", "stream 7", "gpu_utilization (GPU 0)"
    std::string unit;   // counters
    std::int64_t process_id = 0;
    trace::DeviceId device_id = 0;
};
LaneNames lane_names(const store::TraceReader& reader, const std::string& rank_prefix, LaneKind kind,
                     std::uint32_t track_id, std::int64_t default_pid);

// The frames of a sampled stack as the flamegraph names them, outermost first: native
// code by its function, a Python frame as "function (file:line)" (python_frame_name).
std::vector<std::string> stack_frame_names(const store::TraceReader& reader, trace::StackId stack);

struct TraceFile {
    std::string path;
    // The file as the user named it: an imported Kineto JSON or nsys export is read from
    // its ember cache (`path`), but the headers and details say what was opened.
    std::string shown_as;
    trace::RunInfo run;
    trace::TimeNs shift_ns = 0;  // model time = file time + shift_ns
    std::uint64_t dropped_records = 0;
    bool complete = false;
    std::vector<trace::ThreadInfo> threads;
    std::vector<trace::StreamInfo> streams;
    std::vector<trace::DeviceInfo> devices;
    // A job trace (`ember merge`): several processes, one per rank, each already named
    // "rank R", so its lanes take no file-level "rank N · " prefix.
    bool job_trace = false;
    std::vector<std::uint32_t> string_to_model;  // file StringId -> model name id
    // The period each stack sample stands for, as its sampler recorded it (run_metadata
    // cpu_sample_period_ns); 0 when the file does not say (the lanes measure it).
    trace::TimeNs sample_period_ns = 0;
    // Filled by the loader (read after TraceModel::loaded()).
    std::vector<StackSampleRef> stack_samples;
    // Frames of each sampled stack, outermost first, as indexes into frame_names.
    std::unordered_map<trace::StackId, std::vector<std::uint32_t>> stack_frames;
    std::vector<std::string> frame_names;
    // Adds stacks (id, frame names outermost first) to stack_frames, each name once in
    // frame_names. Frame names are not in the strings table: the file keeps its own, so
    // the model's names never change while the UI reads them.
    void add_stacks(const std::vector<std::pair<trace::StackId, std::vector<std::string>>>& stacks);
    // Used by the UI thread only (details, flows); the loader has its own reader.
    std::unique_ptr<store::TraceReader> reader;
    // The loader's reader, kept for refreshes (opening a reader on a live file scans
    // it for track summaries; this one is opened once). Used by read_new_events() only.
    std::unique_ptr<store::TraceReader> live_reader;
    // Highest rowid loaded per event table (store::kEventTables order).
    std::vector<std::int64_t> loaded_rowid;
};

// New events of one lane (an existing one, or one to create), as read_new_events()
// found them. Names of kernels, API calls, ranges, marks and overhead are still the
// file's string ids; apply_new_events() maps them.
struct LaneDelta {
    int lane = -1;  // existing lane, or -1: create it from the fields below
    LaneKind kind = LaneKind::thread;
    int file_index = 0;
    std::uint32_t track_id = 0;
    trace::DeviceId device_id = trace::kNoDevice;
    std::int64_t process_id = 0;
    std::string group, title, unit;
    std::vector<TimelineEvent> gpu_work, syncs, api_calls, marks, overhead, ranges;
    std::vector<std::int32_t> range_depths;  // one per `ranges` entry; -1 for start/end ranges
    std::vector<CounterPoint> points;
    std::int64_t event_count() const;
};

// New rows of every file since the last load or refresh.
struct TraceDelta {
    struct File {
        int file_index = 0;
        std::vector<std::int64_t> rowid_marks;                         // the marks once this delta is applied
        std::vector<std::pair<trace::StringId, std::string>> strings;  // strings new to the model
        std::vector<std::pair<trace::StackId, std::vector<std::string>>> stacks;  // frames, outermost first
        std::vector<StackSampleRef> stack_samples;
    };
    std::vector<File> files;
    std::vector<LaneDelta> lanes;
    std::int64_t event_count() const;
};

struct RefreshResult {
    std::int64_t events = 0;  // events added (lanes, counters, stack samples)
    int new_lanes = 0;        // appended at the end of the model's lanes
    // Rows were re-sorted or inserted: an EventRef taken before may now name another
    // event (the UI drops its selection and search position).
    bool events_moved = false;
};

struct LoadProgress {
    std::int64_t events_loaded = 0;
    std::int64_t events_expected = 0;
    int lanes_ready = 0;
    int lane_count = 0;
    bool finished = false;
    bool analyzing = false;  // lanes loaded; the GPU breakdowns are being computed
    std::string error;       // first load error, empty when none
};

class TraceModel {
  public:
    // Opens every file (throws store::TraceError naming the file when one is missing,
    // foreign or from an unsupported schema) and creates the lanes. Events are loaded
    // by start_loading() (background) or load_all() (this thread, for tests/tools).
    // With `shifts` (one per path: the job's clock offsets, job_overview.h), model time =
    // file time + shift; without, several files line up on their wall clocks.
    explicit TraceModel(const std::vector<std::string>& paths, const std::vector<trace::TimeNs>* shifts = nullptr);
    ~TraceModel();
    TraceModel(const TraceModel&) = delete;
    TraceModel& operator=(const TraceModel&) = delete;

    void start_loading();
    void load_all();
    void cancel_loading();  // stops the loader at its next event and joins it
    bool loaded() const { return finished_.load(std::memory_order_acquire); }
    LoadProgress progress() const;

    // --- Names ---------------------------------------------------------------------
    std::string_view name(std::uint32_t name_id) const;
    std::size_t name_count() const { return names_.size(); }
    // Model name id of `text`, or -1 when no file has it.
    std::int64_t find_name(std::string_view text) const;
    // The name the tables of `ember stats` and `ember diff` give the operation of
    // `name_id`: "[CUDA memcpy HtoD]" for the model's "Memcpy HtoD (pinned -> device)",
    // "[CUDA memset]" for a memset; the name itself for the rest.
    std::string_view operation_name(std::uint32_t name_id) const;

    // --- Files and lanes -------------------------------------------------------------
    const std::vector<TraceFile>& files() const { return files_; }
    TraceFile& file(int index) { return files_[static_cast<std::size_t>(index)]; }
    // What the headers call file `index` (the input an import was read from).
    void set_shown_as(int index, std::string name) {
        files_[static_cast<std::size_t>(index)].shown_as = std::move(name);
    }
    int lane_count() const { return static_cast<int>(lanes_.size()); }
    const Lane& lane(int index) const { return *lanes_[static_cast<std::size_t>(index)]; }
    // The event `ref` names, or nullptr when its lane is not ready or it is out of range.
    const TimelineEvent* event(const EventRef& ref) const;
    // First event start and last event end over all files (from track summaries, so
    // known before loading).
    trace::TimeNs begin_ns() const { return begin_ns_; }
    trace::TimeNs end_ns() const { return end_ns_; }
    std::int64_t total_events() const { return total_events_; }

    // Bytes held by loaded lanes (capacities, not sizes), for the <= 64 B/event budget,
    // and by the GPU analysis.
    std::size_t memory_bytes() const;

    // --- GPU breakdowns (gpu_analysis.h) ---------------------------------------------
    // The loader computes them once every lane is loaded, before loaded() turns true;
    // nullptr until then. The lanes draw while it runs. Never null after loaded() (a
    // failure is its `error`).
    const GpuAnalysis* gpu_analysis() const {
        return gpu_analysis_ready_.load(std::memory_order_acquire) ? gpu_analysis_.get() : nullptr;
    }
    // A grown live file, analysed again: analysis_lanes() on the UI thread, then
    // compute_gpu_analysis() on any thread (it opens its own readers; not while the
    // loader runs), then set_gpu_analysis() on the UI thread between frames.
    std::vector<AnalysisLane> analysis_lanes() const;
    std::unique_ptr<GpuAnalysis> compute_gpu_analysis(const std::vector<AnalysisLane>& lanes, int lane_count,
                                                      std::int64_t model_events) const;
    void set_gpu_analysis(std::unique_ptr<GpuAnalysis> analysis);

    // --- Sampled stacks on the thread lanes (sample_stacks.h) --------------------------
    // The loader builds them once the stack samples are read, before loaded() turns
    // true; until then, and for lanes that are not threads or have no samples, nullptr.
    // A live refresh rebuilds the lanes whose threads got new samples.
    const SampleStackLane* sample_stacks(int lane) const;
    // Builds the charts with idle samples too (SampleStackLane::with_idle), from then on
    // also on refresh. UI thread, once sample_stacks() answers; later calls do nothing.
    void include_idle_stacks();

    // --- Aligning runs (the diff mode, run_diff.h) ------------------------------------
    // Moves every event of file `file_index` so that model time = file time + shift_ns
    // (TraceFile::shift_ns becomes `shift_ns`): its lanes, stack samples and GPU
    // breakdowns (gaps, queue, steps). UI thread, after loaded(), between frames and
    // not while a refresh or a background analysis runs. EventRefs stay valid (rows keep
    // their order); times the caller kept (a selected range) do not move.
    void shift_file(int file_index, trace::TimeNs shift_ns);

    // --- Live files ---------------------------------------------------------------------
    // After loaded(). read_new_events() reads the rows committed since the last load or
    // refresh (never one twice) and may run on another thread while the UI draws;
    // apply_new_events() changes the lanes, so it runs on the UI thread between frames.
    // The two must not overlap. Both throw store::TraceError naming the file.
    std::unique_ptr<TraceDelta> read_new_events();
    RefreshResult apply_new_events(TraceDelta& delta);
    RefreshResult refresh() { return apply_new_events(*read_new_events()); }

  private:
    std::uint32_t intern(std::string_view text);
    void create_lanes(int file_index, const store::TraceReader& reader);
    void load_lane(store::TraceReader& reader, Lane& lane);
    void load_stack_samples(store::TraceReader& reader, int file_index);
    // The stack charts of file `file_index`'s thread lanes; with `threads`, only of those.
    void build_sample_stacks(int file_index, const std::vector<trace::ThreadId>* threads = nullptr);
    void analyze(std::vector<std::unique_ptr<store::TraceReader>>& readers);
    void run_loader();
    // live_refresh.cpp
    void read_file_delta(int file_index, TraceDelta& delta);
    void append_to_lane(Lane& lane, LaneDelta& delta, RefreshResult& result);
    // Events of the file's tables (kernels, copies, memsets, waits, API calls, ranges,
    // marks, collector overhead) as the timeline keeps them; `names` maps the file's
    // string ids to model ids (nullptr: keep the file's ids, mapped later). Copies,
    // memsets and waits carry model names already.
    template <typename Event>
    TimelineEvent timeline_event(const Event& from, trace::TimeNs shift, const std::vector<std::uint32_t>* names) const;

    std::vector<TraceFile> files_;
    std::vector<std::unique_ptr<Lane>> lanes_;
    std::vector<std::string> names_;
    std::unordered_map<std::string, std::uint32_t> name_lookup_;
    trace::TimeNs begin_ns_ = 0;
    trace::TimeNs end_ns_ = 0;
    std::int64_t total_events_ = 0;

    std::thread loader_;
    std::atomic<bool> cancel_{false};
    std::atomic<bool> finished_{false};
    std::atomic<std::int64_t> events_loaded_{0};
    std::atomic<int> lanes_ready_{0};
    std::atomic<bool> analyzing_{false};
    std::unique_ptr<GpuAnalysis> gpu_analysis_;
    std::atomic<bool> gpu_analysis_ready_{false};
    std::vector<std::unique_ptr<SampleStackLane>> sample_stacks_;  // by lane index
    std::atomic<bool> sample_stacks_ready_{false};
    bool idle_stacks_ = false;  // include_idle_stacks() was called
    mutable std::mutex error_mutex_;
    std::string load_error_;
    // Name ids of unnamed GPU work, indexed by enum values (see the constructor).
    std::vector<std::uint32_t> memcpy_names_;  // [direction][source][destination]
    std::vector<std::uint32_t> memset_names_;  // [memory kind]
    std::vector<std::uint32_t> sync_names_;    // [sync kind]
    // The tables' name (operation_names.h) of each name id above that is a copy or memset.
    std::unordered_map<std::uint32_t, std::string> operation_names_;
};

// Row bookkeeping (trace_model.cpp): non_overlapping, max_duration_ns and
// running_max_end for events[from..] given those of events[..from) (from = 0: all).
void update_row_stats(Row& row, std::size_t from);

}  // namespace ember::viewer
