// trace_model.cpp: opening trace files, creating lanes from their track summaries,
// and the background loader that fills them (trace_model.h).
#include "viewer/model/trace_model.h"

#include "profiler/analysis/gpu_memory.h"
#include "profiler/analysis/operation_names.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>
#include <type_traits>

namespace ember::viewer {

using trace::TimeNs;

const char* event_kind_name(EventKind kind) {
    switch (kind) {
        case EventKind::kernel:
            return "kernel";
        case EventKind::memcpy:
            return "memcpy";
        case EventKind::memset:
            return "memset";
        case EventKind::sync:
            return "synchronization";
        case EventKind::api_call:
            return "CUDA API call";
        case EventKind::range:
            return "NVTX range";
        case EventKind::mark:
            return "NVTX mark";
        case EventKind::overhead:
            return "collector overhead";
    }
    return "event";
}

std::int64_t Lane::event_count() const {
    std::int64_t count = static_cast<std::int64_t>(points.size());
    for (const Row& row : rows) count += static_cast<std::int64_t>(row.events.size());
    return count;
}

namespace {

constexpr int kMemoryKindCount = 6;
constexpr int kDirectionCount = 6;
constexpr int kSyncKindCount = 5;

Row make_row(RowKind kind, int depth = 0) {
    Row row;
    row.kind = kind;
    row.depth = depth;
    return row;
}

void finish_row(Row& row) {
    row.events.shrink_to_fit();
    update_row_stats(row, 0);
}

std::uint64_t payload_bits(const trace::Payload& payload) {
    if (payload.kind == trace::PayloadKind::integer) return static_cast<std::uint64_t>(payload.integer);
    if (payload.kind == trace::PayloadKind::real) return std::bit_cast<std::uint64_t>(payload.real);
    return 0;
}

std::string process_title(const store::TraceReader& reader, std::int64_t pid) {
    for (const trace::ProcessInfo& process : reader.processes())
        if (process.pid == pid && !process.name.empty()) return "process " + std::to_string(pid) + " " + process.name;
    return "process " + std::to_string(pid);
}

void name_lane(Lane& lane, LaneNames names) {
    lane.group = std::move(names.group);
    lane.title = std::move(names.title);
    lane.unit = std::move(names.unit);
    lane.process_id = names.process_id;
    lane.device_id = names.device_id;
}

}  // namespace

void update_row_stats(Row& row, std::size_t from) {
    const std::vector<TimelineEvent>& events = row.events;
    if (from == 0 || from > events.size()) {
        from = 0;
        row.non_overlapping = true;
        row.max_duration_ns = 0;
        row.running_max_end.clear();
    }
    const bool was_non_overlapping = row.non_overlapping;
    // Latest end among events[..from): the last end while ends are sorted.
    TimeNs latest = std::numeric_limits<TimeNs>::min();
    if (from > 0) latest = was_non_overlapping ? events[from - 1].end_ns : row.running_max_end[from - 1];
    for (std::size_t index = from; index < events.size(); ++index) {
        const TimelineEvent& event = events[index];
        if (event.start_ns < latest) row.non_overlapping = false;
        latest = std::max(latest, event.end_ns);
        row.max_duration_ns = std::max(row.max_duration_ns, event.duration_ns());
    }
    if (row.non_overlapping) return;
    // A row that just became overlapping needs the running maximum from its start.
    std::size_t begin = was_non_overlapping ? 0 : from;
    if (begin == 0) {
        row.running_max_end.clear();
        row.running_max_end.reserve(events.size());
    }
    TimeNs running = begin == 0 ? std::numeric_limits<TimeNs>::min() : row.running_max_end[begin - 1];
    for (std::size_t index = begin; index < events.size(); ++index) {
        running = std::max(running, events[index].end_ns);
        row.running_max_end.push_back(running);
    }
}

TraceModel::TraceModel(const std::vector<std::string>& paths, const std::vector<TimeNs>* shifts) {
    if (paths.empty()) throw std::invalid_argument("no trace file given");
    names_.emplace_back("");
    name_lookup_.emplace("", 0);
    // Names of GPU work the file does not name; interned first so the table never
    // changes while the loader runs.
    for (int direction = 0; direction < kDirectionCount; ++direction)
        for (int source = 0; source < kMemoryKindCount; ++source)
            for (int destination = 0; destination < kMemoryKindCount; ++destination) {
                const auto copy_direction = static_cast<trace::MemcpyDirection>(direction);
                const std::uint32_t id =
                    intern(analysis::memcpy_display_name(copy_direction, static_cast<trace::MemoryKind>(source),
                                                         static_cast<trace::MemoryKind>(destination)));
                memcpy_names_.push_back(id);
                operation_names_.emplace(id, analysis::memcpy_operation_name(copy_direction));
            }
    for (int kind = 0; kind < kMemoryKindCount; ++kind) {
        const std::uint32_t id = intern(analysis::memset_display_name(static_cast<trace::MemoryKind>(kind)));
        memset_names_.push_back(id);
        operation_names_.emplace(id, std::string(analysis::kMemsetOperationName));
    }
    for (int kind = 0; kind < kSyncKindCount; ++kind)
        sync_names_.push_back(intern(trace::sync_kind_name(static_cast<trace::SyncKind>(kind))));

    files_.resize(paths.size());
    TimeNs min_offset = std::numeric_limits<TimeNs>::max();
    for (std::size_t index = 0; index < paths.size(); ++index) {
        TraceFile& file = files_[index];
        file.path = paths[index];
        file.shown_as = paths[index];
        file.reader = std::make_unique<store::TraceReader>(paths[index]);
        const store::TraceReader& reader = *file.reader;
        file.run = reader.run();
        file.complete = reader.complete();
        file.sample_period_ns = recorded_sample_period_ns(reader);
        file.dropped_records = reader.total_dropped();
        file.threads = reader.threads();
        file.streams = reader.streams();
        file.devices = reader.devices();
        min_offset = std::min(min_offset, file.run.clock_offset_to_wall_ns);
        // Strings are dense ids 0..count; the first id the reader refuses ends them.
        const std::size_t count = reader.string_count();
        file.string_to_model.assign(1, 0);
        for (std::size_t id = 1; id <= count + 1; ++id) {
            try {
                file.string_to_model.push_back(intern(reader.string(static_cast<trace::StringId>(id))));
            } catch (const store::TraceError&) {
                break;
            }
        }
    }
    for (std::size_t index = 0; index < files_.size(); ++index) {
        TraceFile& file = files_[index];
        if (shifts && index < shifts->size())
            file.shift_ns = (*shifts)[index];
        else
            file.shift_ns = files_.size() > 1 ? file.run.clock_offset_to_wall_ns - min_offset : 0;
    }

    begin_ns_ = std::numeric_limits<TimeNs>::max();
    end_ns_ = std::numeric_limits<TimeNs>::min();
    for (std::size_t index = 0; index < files_.size(); ++index)
        create_lanes(static_cast<int>(index), *files_[index].reader);
    if (begin_ns_ > end_ns_) {  // no events at all: show the recording's span
        begin_ns_ = files_[0].run.start_ns + files_[0].shift_ns;
        end_ns_ = std::max(begin_ns_ + 1, files_[0].run.end_ns + files_[0].shift_ns);
    }
}

TraceModel::~TraceModel() {
    cancel_loading();
}

std::uint32_t TraceModel::intern(std::string_view text) {
    auto found = name_lookup_.find(std::string(text));
    if (found != name_lookup_.end()) return found->second;
    const auto id = static_cast<std::uint32_t>(names_.size());
    names_.emplace_back(text);
    name_lookup_.emplace(std::string(text), id);
    return id;
}

std::string_view TraceModel::name(std::uint32_t name_id) const {
    if (name_id >= names_.size()) return "?";
    return names_[name_id];
}

const TimelineEvent* TraceModel::event(const EventRef& ref) const {
    if (ref.lane < 0 || ref.lane >= lane_count()) return nullptr;
    const Lane& owner = lane(ref.lane);
    if (!owner.ready.load(std::memory_order_acquire)) return nullptr;
    if (ref.row < 0 || ref.row >= static_cast<int>(owner.rows.size())) return nullptr;
    const Row& row = owner.rows[static_cast<std::size_t>(ref.row)];
    return ref.index < row.events.size() ? &row.events[ref.index] : nullptr;
}

std::string_view TraceModel::operation_name(std::uint32_t name_id) const {
    auto found = operation_names_.find(name_id);
    return found != operation_names_.end() ? std::string_view(found->second) : name(name_id);
}

std::int64_t TraceModel::find_name(std::string_view text) const {
    auto found = name_lookup_.find(std::string(text));
    return found == name_lookup_.end() ? -1 : static_cast<std::int64_t>(found->second);
}

std::string rank_prefix(std::size_t file_count, const TraceFile& file) {
    if (file.job_trace && file_count <= 1) return "";
    return file_count > 1 || file.run.world_size > 1 ? "rank " + std::to_string(file.run.rank) + " · " : "";
}

LaneNames lane_names(const store::TraceReader& reader, const std::string& rank_prefix, LaneKind kind,
                     std::uint32_t track_id, std::int64_t default_pid) {
    LaneNames names;
    const std::string id = std::to_string(track_id);
    if (kind == LaneKind::thread) {
        const trace::ThreadInfo* info = reader.thread(track_id);
        names.process_id = info ? info->pid : default_pid;
        names.group = rank_prefix + process_title(reader, names.process_id);
        names.title = info ? "thread " + std::to_string(info->tid) + (info->name.empty() ? "" : " " + info->name)
                           : "thread #" + id;
    } else if (kind == LaneKind::stream) {
        const trace::StreamInfo* info = reader.stream(track_id);
        names.device_id = info ? info->device_id : 0;
        const trace::DeviceInfo* device = reader.device(names.device_id);
        names.group = rank_prefix + "GPU " + std::to_string(names.device_id) +
                      (device && !device->name.empty() ? " " + device->name : "");
        names.title = "stream " + (info ? std::to_string(info->cuda_stream_id) : id) +
                      (info && !info->name.empty() ? " " + info->name : "");
    } else if (kind == LaneKind::memory) {
        names.device_id = static_cast<trace::DeviceId>(track_id);
        const trace::DeviceInfo* device = reader.device(names.device_id);
        // Device -1 is the host: the CPU backend's caching allocator (docs/collectors.md).
        names.group =
            rank_prefix +
            (names.device_id == trace::kNoDevice ? std::string("host") : "GPU " + std::to_string(names.device_id)) +
            (device && !device->name.empty() ? " " + device->name : "");
        names.title = "memory";  // "allocated" / "reserved" added by create_lanes
        names.unit = "bytes";
    } else {
        const trace::CounterInfo* info = reader.counter(track_id);
        names.device_id = info ? info->device_id : trace::kNoDevice;
        names.group = rank_prefix + "counters";
        names.title = info ? info->name : "counter #" + id;
        if (info && names.device_id != trace::kNoDevice)
            names.title += " (GPU " + std::to_string(names.device_id) + ")";
        names.unit = info ? info->unit : "";
    }
    return names;
}

void TraceModel::create_lanes(int file_index, const store::TraceReader& reader) {
    TraceFile& file = files_[static_cast<std::size_t>(file_index)];
    file.job_trace = reader.processes().size() > 1;
    const std::string file_prefix = rank_prefix(files_.size(), file);
    // One lane per (track kind, id); events of several tables share it.
    std::map<std::uint32_t, std::int64_t> thread_events, stream_events, counter_events;
    std::map<std::pair<int, std::uint32_t>, std::array<std::int64_t, kEventKindCount>> by_kind;
    for (const store::TrackSummary& summary : reader.tracks()) {
        if (summary.event_count <= 0) continue;
        // A thread with samples only (a Python program without CUDA or NVTX) still gets
        // its lane, for its stacks; samples are not events of the lane's rows.
        if (summary.event_table == "stack_samples") {
            if (summary.track.kind == trace::TrackKind::thread) {
                thread_events.try_emplace(summary.track.id, 0);
                begin_ns_ = std::min(begin_ns_, summary.first_start_ns + file.shift_ns);
                end_ns_ = std::max(end_ns_, summary.last_end_ns + file.shift_ns);
            }
            continue;
        }
        begin_ns_ = std::min(begin_ns_, summary.first_start_ns + file.shift_ns);
        end_ns_ = std::max(end_ns_, summary.last_end_ns + file.shift_ns);
        total_events_ += summary.event_count;
        if (summary.track.kind == trace::TrackKind::thread)
            thread_events[summary.track.id] += summary.event_count;
        else if (summary.track.kind == trace::TrackKind::stream)
            stream_events[summary.track.id] += summary.event_count;
        else
            counter_events[summary.track.id] += summary.event_count;
        const std::string& table = summary.event_table;
        const int kind = table == "kernels"              ? static_cast<int>(EventKind::kernel)
                         : table == "memcpys"            ? static_cast<int>(EventKind::memcpy)
                         : table == "memsets"            ? static_cast<int>(EventKind::memset)
                         : table == "synchronizations"   ? static_cast<int>(EventKind::sync)
                         : table == "api_calls"          ? static_cast<int>(EventKind::api_call)
                         : table == "ranges"             ? static_cast<int>(EventKind::range)
                         : table == "marks"              ? static_cast<int>(EventKind::mark)
                         : table == "collector_overhead" ? static_cast<int>(EventKind::overhead)
                                                         : -1;
        if (kind >= 0) by_kind[{static_cast<int>(summary.track.kind), summary.track.id}][kind] += summary.event_count;
    }
    // A lane for one track, with the counts the loader will fill it up to.
    auto new_lane = [&](LaneKind kind, trace::TrackKind track_kind, std::uint32_t track_id, std::int64_t count) {
        auto lane = std::make_unique<Lane>();
        lane->kind = kind;
        lane->file_index = file_index;
        lane->track_id = track_id;
        lane->expected_events = count;
        if (track_kind != trace::TrackKind::counter) {  // counter samples are not events of a row
            auto found = by_kind.find({static_cast<int>(track_kind), track_id});
            if (found != by_kind.end())
                for (int index = 0; index < kEventKindCount; ++index)
                    lane->expected_by_kind[index] = found->second[index];
        }
        name_lane(*lane, lane_names(reader, file_prefix, kind, track_id, file.run.pid));
        return lane;
    };

    // Threads, grouped by process, ordered by (pid, tid).
    std::vector<std::unique_ptr<Lane>> thread_lanes;
    for (const auto& [thread_id, count] : thread_events) {
        thread_lanes.push_back(new_lane(LaneKind::thread, trace::TrackKind::thread, thread_id, count));
    }
    std::stable_sort(thread_lanes.begin(), thread_lanes.end(), [&](const auto& a, const auto& b) {
        const trace::ThreadInfo* ta = reader.thread(a->track_id);
        const trace::ThreadInfo* tb = reader.thread(b->track_id);
        const std::int64_t tid_a = ta ? ta->tid : 0, tid_b = tb ? tb->tid : 0;
        return a->process_id != b->process_id ? a->process_id < b->process_id : tid_a < tid_b;
    });
    for (auto& lane : thread_lanes) lanes_.push_back(std::move(lane));

    // Streams, grouped by device.
    std::vector<std::unique_ptr<Lane>> stream_lanes;
    for (const auto& [stream_id, count] : stream_events) {
        stream_lanes.push_back(new_lane(LaneKind::stream, trace::TrackKind::stream, stream_id, count));
    }
    std::stable_sort(stream_lanes.begin(), stream_lanes.end(),
                     [](const auto& a, const auto& b) { return a->device_id < b->device_id; });
    for (auto& lane : stream_lanes) lanes_.push_back(std::move(lane));

    for (const auto& [counter_id, count] : counter_events) {
        lanes_.push_back(new_lane(LaneKind::counter, trace::TrackKind::counter, counter_id, count));
    }
    // GPU memory from the allocator's events: allocated and reserved bytes per device.
    for (const auto& [device, count] : reader.memory_event_devices()) {
        for (bool reserved : {false, true}) {
            auto lane =
                new_lane(LaneKind::memory, trace::TrackKind::counter, static_cast<std::uint32_t>(device), count);
            lane->reserved_memory = reserved;
            lane->title = reserved ? "memory reserved" : "memory allocated";
            lanes_.push_back(std::move(lane));
        }
    }
}

void TraceModel::start_loading() {
    if (loader_.joinable() || loaded()) return;
    loader_ = std::thread([this] { run_loader(); });
}

void TraceModel::load_all() {
    if (loader_.joinable()) {
        loader_.join();
        return;
    }
    if (!loaded()) run_loader();
}

void TraceModel::cancel_loading() {
    cancel_.store(true);
    if (loader_.joinable()) loader_.join();
}

LoadProgress TraceModel::progress() const {
    LoadProgress progress;
    progress.events_loaded = events_loaded_.load(std::memory_order_relaxed);
    progress.events_expected = total_events_;
    progress.lanes_ready = lanes_ready_.load(std::memory_order_relaxed);
    progress.lane_count = lane_count();
    progress.finished = loaded();
    progress.analyzing = analyzing_.load(std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(error_mutex_);
    progress.error = load_error_;
    return progress;
}

void TraceModel::run_loader() {
    // Own readers: a TraceReader is used from one thread at a time, and the UI keeps
    // the file's reader for details.
    std::vector<std::unique_ptr<store::TraceReader>> readers(files_.size());
    // One read snapshot per file for the whole load: every query sees the same rows,
    // so the rowid marks say exactly which rows were loaded.
    std::vector<std::optional<store::TraceReader::Snapshot>> snapshots(files_.size());
    try {
        for (std::size_t index = 0; index < files_.size(); ++index) {
            readers[index] = std::make_unique<store::TraceReader>(files_[index].path);
            snapshots[index].emplace(readers[index]->snapshot());
            files_[index].loaded_rowid = readers[index]->highest_rowids();
        }
        for (auto& lane : lanes_) {
            if (cancel_.load(std::memory_order_relaxed)) break;
            load_lane(*readers[static_cast<std::size_t>(lane->file_index)], *lane);
            lane->ready.store(true, std::memory_order_release);
            lanes_ready_.fetch_add(1, std::memory_order_relaxed);
        }
        for (std::size_t index = 0; index < files_.size() && !cancel_.load(); ++index)
            load_stack_samples(*readers[index], static_cast<int>(index));
        sample_stacks_.resize(lanes_.size());
        for (std::size_t index = 0; index < files_.size() && !cancel_.load(); ++index)
            build_sample_stacks(static_cast<int>(index));
        sample_stacks_ready_.store(true, std::memory_order_release);
        if (!cancel_.load()) analyze(readers);
        if (!cancel_.load()) {
            for (std::size_t index = 0; index < files_.size(); ++index) {
                snapshots[index].reset();
                files_[index].live_reader = std::move(readers[index]);
            }
        }
    } catch (const std::exception& error) {
        std::lock_guard<std::mutex> lock(error_mutex_);
        load_error_ = error.what();
    }
    finished_.store(true, std::memory_order_release);
}

namespace {

std::vector<AnalysisFile> analysis_files(const std::vector<TraceFile>& files,
                                         const std::vector<std::unique_ptr<store::TraceReader>>& readers) {
    std::vector<AnalysisFile> inputs;
    for (std::size_t index = 0; index < files.size(); ++index)
        inputs.push_back({readers[index].get(), files[index].shift_ns,
                          std::filesystem::path(files[index].path).filename().string()});
    return inputs;
}

}  // namespace

std::vector<AnalysisLane> TraceModel::analysis_lanes() const {
    std::vector<AnalysisLane> lanes;
    for (int index = 0; index < lane_count(); ++index) {
        const Lane& candidate = lane(index);
        if (candidate.kind == LaneKind::stream) lanes.push_back({index, candidate.file_index, candidate.track_id});
    }
    return lanes;
}

void TraceModel::analyze(std::vector<std::unique_ptr<store::TraceReader>>& readers) {
    // After the lanes, with the loader's readers inside their snapshot: the breakdowns
    // see exactly the rows the lanes hold. A failure (an old file without a table the
    // analyses read, ...) is reported in the panel; the timeline is unaffected.
    analyzing_.store(true, std::memory_order_relaxed);
    std::unique_ptr<GpuAnalysis> analysis;
    try {
        analysis = analyze_gpu(analysis_files(files_, readers), analysis_lanes(), lane_count(), {}, &cancel_);
    } catch (const std::exception& error) {
        analysis = std::make_unique<GpuAnalysis>();
        analysis->error = error.what();
    }
    analysis->model_events = total_events_;
    gpu_analysis_ = std::move(analysis);
    gpu_analysis_ready_.store(true, std::memory_order_release);
    analyzing_.store(false, std::memory_order_relaxed);
}

std::unique_ptr<GpuAnalysis> TraceModel::compute_gpu_analysis(const std::vector<AnalysisLane>& lanes, int lane_count,
                                                              std::int64_t model_events) const {
    std::unique_ptr<GpuAnalysis> analysis;
    try {
        std::vector<std::unique_ptr<store::TraceReader>> readers;
        for (const TraceFile& file : files_) readers.push_back(std::make_unique<store::TraceReader>(file.path));
        // One snapshot per file, as the loader reads: every analysis sees the same rows.
        std::vector<store::TraceReader::Snapshot> snapshots;
        snapshots.reserve(readers.size());
        for (auto& reader : readers) snapshots.push_back(reader->snapshot());
        analysis = analyze_gpu(analysis_files(files_, readers), lanes, lane_count);
    } catch (const std::exception& error) {
        analysis = std::make_unique<GpuAnalysis>();
        analysis->error = error.what();
    }
    analysis->model_events = model_events;
    return analysis;
}

void TraceModel::set_gpu_analysis(std::unique_ptr<GpuAnalysis> analysis) {
    if (!analysis || !loaded()) return;
    gpu_analysis_ = std::move(analysis);
    gpu_analysis_ready_.store(true, std::memory_order_release);
}

void TraceModel::shift_file(int file_index, TimeNs shift_ns) {
    TraceFile& file = files_[static_cast<std::size_t>(file_index)];
    const TimeNs delta = shift_ns - file.shift_ns;
    if (delta == 0) return;
    file.shift_ns = shift_ns;
    // Adding one constant keeps every order the rows rely on (starts, ends, running
    // maxima), so nothing is re-sorted and no row statistic changes but the maxima.
    for (const auto& lane : lanes_) {
        if (lane->file_index != file_index) continue;
        for (Row& row : lane->rows) {
            for (TimelineEvent& event : row.events) {
                event.start_ns += delta;
                event.end_ns += delta;
            }
            for (TimeNs& end : row.running_max_end) end += delta;
        }
        for (CounterPoint& point : lane->points) point.time_ns += delta;
    }
    for (StackSampleRef& sample : file.stack_samples) sample.time_ns += delta;
    for (std::size_t lane = 0; lane < sample_stacks_.size() && lane < lanes_.size(); ++lane) {
        if (!sample_stacks_[lane] || lanes_[lane]->file_index != file_index) continue;
        for (std::vector<StackRow>* chart : {&sample_stacks_[lane]->active, &sample_stacks_[lane]->with_idle})
            for (StackRow& row : *chart)
                for (StackBox& box : row.boxes) box.start_ns += delta, box.end_ns += delta;
    }
    if (gpu_analysis_) {
        for (std::size_t lane = 0; lane < gpu_analysis_->lanes.size() && lane < lanes_.size(); ++lane) {
            if (lanes_[lane]->file_index != file_index) continue;
            StreamOverlay& overlay = gpu_analysis_->lanes[lane];
            for (IdleGap& gap : overlay.gaps) gap.start_ns += delta, gap.end_ns += delta;
            for (CounterPoint& point : overlay.queue) point.time_ns += delta;
        }
        for (RankBreakdown& rank : gpu_analysis_->ranks) {
            if (rank.file_index != file_index) continue;
            rank.gpu_begin_ns += delta;
            rank.gpu_end_ns += delta;
            for (StepSplit& step : rank.steps) step.start_ns += delta, step.end_ns += delta;
        }
    }
    // The model's extent, from the loaded lanes (the first start and the latest end of
    // every row).
    TimeNs begin = std::numeric_limits<TimeNs>::max(), end = std::numeric_limits<TimeNs>::min();
    for (const auto& lane : lanes_) {
        for (const Row& row : lane->rows) {
            if (row.events.empty()) continue;
            begin = std::min(begin, row.events.front().start_ns);
            end = std::max(end, row.running_max_end.empty() ? row.events.back().end_ns : row.running_max_end.back());
        }
        if (!lane->points.empty()) {
            begin = std::min(begin, lane->points.front().time_ns);
            end = std::max(end, lane->points.back().time_ns);
        }
    }
    if (begin <= end) {
        begin_ns_ = begin;
        end_ns_ = std::max(begin + 1, end);
    }
}

void TraceModel::load_lane(store::TraceReader& reader, Lane& lane) {
    const TraceFile& file = files_[static_cast<std::size_t>(lane.file_index)];
    const TimeNs shift = file.shift_ns;
    const std::vector<std::uint32_t>& names = file.string_to_model;
    store::EventQuery query;
    query.track = lane.track_id;
    std::int64_t since_report = 0;
    auto count_event = [&]() {
        if (++since_report == 4096) {
            events_loaded_.fetch_add(since_report, std::memory_order_relaxed);
            since_report = 0;
        }
        return !cancel_.load(std::memory_order_relaxed);
    };
    // Reservations from the file's track summaries.
    auto count_of = [&lane](EventKind kind) {
        return static_cast<std::size_t>(std::max<std::int64_t>(0, lane.expected_by_kind[static_cast<int>(kind)]));
    };
    // A visitor that appends each event, as the timeline keeps it, to `events`.
    auto append_to = [&](std::vector<TimelineEvent>& events) {
        return [&, events_ptr = &events](const auto& event) {
            events_ptr->push_back(timeline_event(event, shift, &names));
            return count_event();
        };
    };

    if (lane.kind == LaneKind::memory) {
        // One point per instant that has memory events.
        lane.points.reserve(static_cast<std::size_t>(lane.expected_events));
        analysis::for_each_memory_total(
            reader,
            [&](trace::DeviceId, trace::TimeNs time, std::int64_t allocated, std::int64_t reserved,
                std::int64_t events) {
                lane.points.push_back({time + shift, static_cast<double>(lane.reserved_memory ? reserved : allocated)});
                bool go_on = true;
                for (std::int64_t i = 0; i < events; ++i) go_on = count_event();
                return go_on;
            },
            static_cast<trace::DeviceId>(lane.track_id));
        if (!lane.points.empty()) {
            lane.min_value = lane.max_value = lane.points[0].value;
            for (const CounterPoint& point : lane.points) {
                lane.min_value = std::min(lane.min_value, point.value);
                lane.max_value = std::max(lane.max_value, point.value);
            }
        }
    } else if (lane.kind == LaneKind::counter) {
        lane.points.reserve(static_cast<std::size_t>(lane.expected_events));
        reader.for_each_counter_sample(query, [&](const trace::CounterSample& sample) {
            lane.points.push_back({sample.time_ns + shift, sample.value});
            return count_event();
        });
        if (!lane.points.empty()) {
            lane.min_value = lane.max_value = lane.points[0].value;
            for (const CounterPoint& point : lane.points) {
                lane.min_value = std::min(lane.min_value, point.value);
                lane.max_value = std::max(lane.max_value, point.value);
            }
        }
    } else if (lane.kind == LaneKind::stream) {
        Row work = make_row(RowKind::gpu_work);
        Row syncs = make_row(RowKind::syncs);
        work.events.reserve(count_of(EventKind::kernel) + count_of(EventKind::memcpy) + count_of(EventKind::memset));
        syncs.events.reserve(count_of(EventKind::sync));
        reader.for_each<trace::KernelEvent>(query, append_to(work.events));
        reader.for_each<trace::MemcpyEvent>(query, append_to(work.events));
        reader.for_each<trace::MemsetEvent>(query, append_to(work.events));
        reader.for_each<trace::SyncEvent>(query, append_to(syncs.events));
        // Each table arrives in start order; merge them into one start-ordered row.
        std::stable_sort(work.events.begin(), work.events.end(),
                         [](const TimelineEvent& a, const TimelineEvent& b) { return a.start_ns < b.start_ns; });
        if (!work.events.empty()) lane.rows.push_back(std::move(work));
        if (!syncs.events.empty()) lane.rows.push_back(std::move(syncs));
    } else {
        // Ranges: read once, then split into one row per depth (exact sizes, so a
        // lane's peak is twice its ranges, never twice the trace).
        std::vector<TimelineEvent> ranges;
        std::vector<std::int32_t> depths;
        ranges.reserve(count_of(EventKind::range));
        depths.reserve(count_of(EventKind::range));
        reader.for_each_range(query, [&](const trace::RangeEvent& range) {
            ranges.push_back(timeline_event(range, shift, &names));
            depths.push_back(std::min(range.depth, 255));
            return count_event();
        });
        int max_depth = -1;
        for (std::int32_t depth : depths) max_depth = std::max(max_depth, depth);
        std::vector<std::size_t> per_depth(static_cast<std::size_t>(max_depth + 1), 0);
        for (std::int32_t depth : depths)
            if (depth >= 0) ++per_depth[static_cast<std::size_t>(depth)];
        for (int depth = 0; depth <= max_depth; ++depth) {
            Row row = make_row(RowKind::ranges, depth);
            row.events.reserve(per_depth[static_cast<std::size_t>(depth)]);
            for (std::size_t index = 0; index < ranges.size(); ++index)
                if (depths[index] == depth) row.events.push_back(ranges[index]);
            if (!row.events.empty()) lane.rows.push_back(std::move(row));
        }
        // Start/end ranges do not nest: pack them greedily into rows where they fit.
        std::vector<Row> async_rows;
        for (std::size_t index = 0; index < ranges.size(); ++index) {
            if (depths[index] >= 0) continue;
            const TimelineEvent& event = ranges[index];
            Row* target = nullptr;
            for (Row& row : async_rows)
                if (row.events.back().end_ns <= event.start_ns) {
                    target = &row;
                    break;
                }
            if (target == nullptr || async_rows.size() >= 32) {
                if (target == nullptr && async_rows.size() < 32) {
                    async_rows.push_back(make_row(RowKind::async_ranges, static_cast<int>(async_rows.size())));
                    target = &async_rows.back();
                } else if (target == nullptr) {
                    target = &async_rows.back();  // overlaps: still drawn, row marked overlapping
                }
            }
            target->events.push_back(event);
        }
        for (Row& row : async_rows) lane.rows.push_back(std::move(row));
        ranges = {};
        depths = {};

        // One row each, in this order below the ranges.
        auto load_row = [&](RowKind kind, EventKind count_kind, auto for_each_event) {
            Row row = make_row(kind);
            row.events.reserve(count_of(count_kind));
            for_each_event(append_to(row.events));
            if (!row.events.empty()) lane.rows.push_back(std::move(row));
        };
        load_row(RowKind::api_calls, EventKind::api_call,
                 [&](auto append) { reader.for_each<trace::ApiEvent>(query, append); });
        load_row(RowKind::marks, EventKind::mark,
                 [&](auto append) { reader.for_each<trace::MarkEvent>(query, append); });
        load_row(RowKind::overhead, EventKind::overhead,
                 [&](auto append) { reader.for_each<trace::OverheadEvent>(query, append); });
    }
    for (Row& row : lane.rows) finish_row(row);
    events_loaded_.fetch_add(since_report, std::memory_order_relaxed);
}

namespace {

std::uint32_t model_name(const std::vector<std::uint32_t>* names, trace::StringId id) {
    if (names == nullptr) return id;
    return id < names->size() ? (*names)[id] : 0;
}

}  // namespace

// What every kind fills the same way: its interval (a mark's is one instant), the
// API call it links to, its name and an NVTX payload and category; then what is
// the kind's own.
template <typename Event>
TimelineEvent TraceModel::timeline_event(const Event& from, TimeNs shift,
                                         const std::vector<std::uint32_t>* names) const {
    TimelineEvent event;
    event.start_ns = trace::start_of(from) + shift;
    event.end_ns = trace::end_of(from) + shift;
    if constexpr (requires { from.correlation_id; }) event.link = from.correlation_id;
    if constexpr (requires { from.name_id; }) event.name_id = model_name(names, from.name_id);
    if constexpr (requires { from.payload; }) {
        event.value = payload_bits(from.payload);
        event.detail = static_cast<std::uint8_t>(from.payload.kind);
        event.extra = static_cast<std::uint16_t>(std::min<std::uint32_t>(from.category, 0xffff));
    }
    if constexpr (std::is_same_v<Event, trace::KernelEvent>) {
        event.kind = EventKind::kernel;
    } else if constexpr (std::is_same_v<Event, trace::MemcpyEvent>) {
        event.kind = EventKind::memcpy;
        event.value = from.bytes;
        const auto direction = std::min<unsigned>(static_cast<unsigned>(from.direction), kDirectionCount - 1);
        const auto source = std::min<unsigned>(static_cast<unsigned>(from.source_kind), kMemoryKindCount - 1);
        const auto destination = std::min<unsigned>(static_cast<unsigned>(from.destination_kind), kMemoryKindCount - 1);
        event.name_id = memcpy_names_[(direction * kMemoryKindCount + source) * kMemoryKindCount + destination];
        event.detail = static_cast<std::uint8_t>(from.direction);
        event.extra = static_cast<std::uint16_t>(static_cast<unsigned>(from.source_kind) |
                                                 static_cast<unsigned>(from.destination_kind) << 8);
    } else if constexpr (std::is_same_v<Event, trace::MemsetEvent>) {
        event.kind = EventKind::memset;
        event.value = from.bytes;
        event.name_id =
            memset_names_[std::min<unsigned>(static_cast<unsigned>(from.memory_kind), kMemoryKindCount - 1)];
        event.extra = static_cast<std::uint16_t>(from.memory_kind);
    } else if constexpr (std::is_same_v<Event, trace::SyncEvent>) {
        event.kind = EventKind::sync;
        event.value = from.cuda_event_id;
        event.name_id = sync_names_[std::min<unsigned>(static_cast<unsigned>(from.kind), kSyncKindCount - 1)];
        event.detail = static_cast<std::uint8_t>(from.kind);
    } else if constexpr (std::is_same_v<Event, trace::ApiEvent>) {
        event.kind = EventKind::api_call;
        event.extra = from.result != 0 ? 1 : 0;
    } else if constexpr (std::is_same_v<Event, trace::RangeEvent>) {
        event.kind = EventKind::range;
        event.link = from.range_id;
    } else if constexpr (std::is_same_v<Event, trace::MarkEvent>) {
        event.kind = EventKind::mark;
    } else {
        static_assert(std::is_same_v<Event, trace::OverheadEvent>, "not a table the timeline shows");
        event.kind = EventKind::overhead;
    }
    return event;
}

template TimelineEvent TraceModel::timeline_event(const trace::KernelEvent&, TimeNs,
                                                  const std::vector<std::uint32_t>*) const;
template TimelineEvent TraceModel::timeline_event(const trace::MemcpyEvent&, TimeNs,
                                                  const std::vector<std::uint32_t>*) const;
template TimelineEvent TraceModel::timeline_event(const trace::MemsetEvent&, TimeNs,
                                                  const std::vector<std::uint32_t>*) const;
template TimelineEvent TraceModel::timeline_event(const trace::SyncEvent&, TimeNs,
                                                  const std::vector<std::uint32_t>*) const;
template TimelineEvent TraceModel::timeline_event(const trace::ApiEvent&, TimeNs,
                                                  const std::vector<std::uint32_t>*) const;
template TimelineEvent TraceModel::timeline_event(const trace::RangeEvent&, TimeNs,
                                                  const std::vector<std::uint32_t>*) const;
template TimelineEvent TraceModel::timeline_event(const trace::MarkEvent&, TimeNs,
                                                  const std::vector<std::uint32_t>*) const;
template TimelineEvent TraceModel::timeline_event(const trace::OverheadEvent&, TimeNs,
                                                  const std::vector<std::uint32_t>*) const;

void TraceModel::load_stack_samples(store::TraceReader& reader, int file_index) {
    TraceFile& file = files_[static_cast<std::size_t>(file_index)];
    std::set<trace::StackId> stacks;
    reader.for_each_stack_sample({}, [&](const trace::StackSample& sample) {
        file.stack_samples.push_back({sample.time_ns + file.shift_ns, sample.thread_id, sample.stack_id, sample.idle});
        stacks.insert(sample.stack_id);
        return !cancel_.load(std::memory_order_relaxed);
    });
    std::vector<std::pair<trace::StackId, std::vector<std::string>>> named;
    named.reserve(stacks.size());
    for (trace::StackId stack : stacks) named.emplace_back(stack, stack_frame_names(reader, stack));
    file.add_stacks(named);
}

const SampleStackLane* TraceModel::sample_stacks(int lane) const {
    if (!sample_stacks_ready_.load(std::memory_order_acquire)) return nullptr;
    if (lane < 0 || lane >= static_cast<int>(sample_stacks_.size())) return nullptr;
    return sample_stacks_[static_cast<std::size_t>(lane)].get();
}

void TraceModel::include_idle_stacks() {
    if (idle_stacks_ || !sample_stacks_ready_.load(std::memory_order_acquire)) return;
    idle_stacks_ = true;
    for (std::size_t index = 0; index < files_.size(); ++index) build_sample_stacks(static_cast<int>(index));
}

void TraceModel::build_sample_stacks(int file_index, const std::vector<trace::ThreadId>* threads) {
    const TraceFile& file = files_[static_cast<std::size_t>(file_index)];
    if (sample_stacks_.size() < lanes_.size()) sample_stacks_.resize(lanes_.size());
    // Each thread's samples in time order (the table is in rowid order: by time within
    // a collector's batch, not across threads).
    std::unordered_map<trace::ThreadId, std::vector<StackSampleRef>> by_thread;
    for (const StackSampleRef& sample : file.stack_samples) {
        if (threads && std::find(threads->begin(), threads->end(), sample.thread_id) == threads->end()) continue;
        by_thread[sample.thread_id].push_back(sample);
    }
    for (std::size_t index = 0; index < lanes_.size(); ++index) {
        const Lane& lane = *lanes_[index];
        if (lane.kind != LaneKind::thread || lane.file_index != file_index) continue;
        auto found = by_thread.find(lane.track_id);
        if (found == by_thread.end()) continue;
        std::vector<StackSampleRef>& samples = found->second;
        std::stable_sort(samples.begin(), samples.end(),
                         [](const StackSampleRef& a, const StackSampleRef& b) { return a.time_ns < b.time_ns; });
        sample_stacks_[index] = std::make_unique<SampleStackLane>(build_sample_stack_lane(
            samples, file.stack_frames, kDefaultSamplePeriodNs, idle_stacks_, file.sample_period_ns));
    }
}

std::vector<std::string> stack_frame_names(const store::TraceReader& reader, trace::StackId stack) {
    std::vector<std::string> names;
    for (trace::FrameInfo& frame : reader.stack_frames(stack))
        names.push_back(frame.is_python() ? analysis::python_frame_name(frame) : std::move(frame.function));
    return names;
}

void TraceFile::add_stacks(const std::vector<std::pair<trace::StackId, std::vector<std::string>>>& stacks) {
    std::unordered_map<std::string, std::uint32_t> lookup;
    for (std::size_t index = 0; index < frame_names.size(); ++index)
        lookup.emplace(frame_names[index], static_cast<std::uint32_t>(index));
    for (const auto& [stack, names] : stacks) {
        std::vector<std::uint32_t> frames;
        for (const std::string& name : names) {
            auto [found, inserted] = lookup.emplace(name, static_cast<std::uint32_t>(frame_names.size()));
            if (inserted) frame_names.push_back(name);
            frames.push_back(found->second);
        }
        stack_frames[stack] = std::move(frames);
    }
}

std::size_t TraceModel::memory_bytes() const {
    std::size_t bytes = 0;
    for (const auto& lane : lanes_) {
        if (!lane->ready.load(std::memory_order_acquire)) continue;
        bytes += sizeof(Lane) + lane->points.capacity() * sizeof(CounterPoint);
        for (const Row& row : lane->rows)
            bytes += sizeof(Row) + row.events.capacity() * sizeof(TimelineEvent) +
                     row.running_max_end.capacity() * sizeof(TimeNs);
    }
    for (const std::string& text : names_) bytes += sizeof(std::string) + text.capacity();
    for (const TraceFile& file : files_) {
        bytes += file.string_to_model.capacity() * sizeof(std::uint32_t);
        bytes += file.stack_samples.capacity() * sizeof(StackSampleRef);
    }
    if (const GpuAnalysis* analysis = gpu_analysis()) bytes += analysis->memory_bytes();
    if (sample_stacks_ready_.load(std::memory_order_acquire))
        for (const auto& stacks : sample_stacks_)
            if (stacks) bytes += stacks->memory_bytes();
    return bytes;
}

}  // namespace ember::viewer
