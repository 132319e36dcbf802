// merge.cpp: one job trace from the per-rank files of a distributed run, on rank 0's
// time base (`ember merge -o job.db rank0.db rank1.db ...`, the importers' job files).
//
// Clock alignment: distributed::Context::record_clock_anchor() leaves a barrier on every rank
// and marks `clock/anchor` (payload: the anchor's sequence number), so anchors with
// equal numbers are simultaneous. Each rank is shifted by (rank 0's anchor - its
// anchor), using the first anchor number both files hold; a file without anchors falls
// back to wall-clock alignment (RunInfo::clock_offset_to_wall_ns), which is only as good
// as the hosts' NTP.
//
// Each rank becomes a process ("rank R") with its threads, and everything it recorded
// is copied: NVTX ranges (nesting kept), marks, counters ("rank R: name"), CUDA API
// calls, kernels, copies, memsets, synchronizations, stack samples, collector overhead,
// dropped-record counts, NVTX category names and collective metadata. Ids that are
// only unique within one process are remapped: devices get fresh ordinals (named
// "rank R: <GPU>", since rank 0's GPU 0 and rank 1's GPU 0 are different GPUs), streams
// are re-registered on them, and correlation ids carry the rank in their upper 32 bits
// (CUPTI's are 32-bit), so an API call still finds its own kernels.
#include "profiler/merge/merge.h"

#include "common/nvtx_contract.h"
#include "profiler/store/reader.h"
#include "profiler/store/writer.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>

namespace ember::merge {

namespace {

// Anchor sequence number -> time, from the `clock/anchor` marks of one file.
std::map<int64_t, trace::TimeNs> clock_anchors(const store::TraceReader& reader) {
    std::map<int64_t, trace::TimeNs> anchors;
    std::optional<trace::StringId> name = reader.find_string(nvtx::range::kClockAnchor);
    if (!name) return anchors;
    reader.for_each_mark({}, [&](const trace::MarkEvent& mark) {
        if (mark.name_id == *name)
            anchors.emplace(static_cast<int64_t>(std::llround(mark.payload.as_double())), mark.time_ns);
        return true;
    });
    return anchors;
}

// Copies one rank's events into the writer, shifted by `shift_ns`.
struct RankCopier {
    RankCopier(const store::TraceReader& rank_reader, store::TraceWriter& job_writer, int rank_number,
               trace::TimeNs shift, trace::DeviceId& device_counter)
        : reader(rank_reader), writer(job_writer), rank(rank_number), shift_ns(shift), next_device_id(device_counter) {}

    const store::TraceReader& reader;
    store::TraceWriter& writer;
    int rank = 0;
    trace::TimeNs shift_ns = 0;
    trace::DeviceId& next_device_id;  // shared by all ranks: merged devices are numbered in order
    std::unordered_map<trace::StringId, trace::StringId> strings;
    std::unordered_map<trace::ThreadId, trace::ThreadId> threads;
    std::unordered_map<trace::RangeId, trace::RangeId> ranges;
    std::unordered_map<trace::CounterId, trace::CounterId> counters;
    std::unordered_map<trace::DeviceId, trace::DeviceId> devices;
    std::unordered_map<trace::StreamId, trace::StreamId> streams;
    std::unordered_map<trace::StackId, trace::StackId> stacks;

    trace::StringId string(trace::StringId id) {
        if (id == trace::kNoString) return id;
        auto it = strings.find(id);
        if (it != strings.end()) return it->second;
        const trace::StringId merged = writer.intern(reader.string(id));
        strings.emplace(id, merged);
        return merged;
    }
    trace::RangeId range(trace::RangeId id) {
        if (id == 0) return 0;
        auto it = ranges.find(id);
        if (it != ranges.end()) return it->second;
        const trace::RangeId merged = writer.next_range_id();
        ranges.emplace(id, merged);
        return merged;
    }
    trace::ThreadId thread(trace::ThreadId id) {
        auto it = threads.find(id);
        return it == threads.end() ? 0 : it->second;
    }
    trace::DeviceId device(trace::DeviceId id) {
        if (id == trace::kNoDevice) return id;
        auto it = devices.find(id);
        if (it != devices.end()) return it->second;
        // A device the events name but the file never described.
        trace::DeviceInfo info;
        info.device_id = next_device_id++;
        info.name = fmt::format("rank {}: device {}", rank, id);
        writer.register_device(info);
        devices.emplace(id, info.device_id);
        return info.device_id;
    }
    trace::StreamId stream(trace::StreamId id) {
        auto it = streams.find(id);
        return it == streams.end() ? 0 : it->second;
    }
    trace::CorrelationId correlation(trace::CorrelationId id) const {
        if (id == 0) return 0;
        return (static_cast<trace::CorrelationId>(rank) << 32) | (id & 0xffffffffu);
    }
    trace::StackId stack(trace::StackId id) {
        if (id == 0) return 0;
        auto it = stacks.find(id);
        if (it != stacks.end()) return it->second;
        std::vector<trace::FrameId> frames;
        for (const trace::FrameInfo& frame : reader.stack_frames(id))
            frames.push_back(writer.intern_frame(frame.function, frame.module, frame.address, frame.line));
        const trace::StackId merged = writer.intern_stack(frames);
        stacks.emplace(id, merged);
        return merged;
    }

    void register_tracks(int64_t merged_pid) {
        writer.register_process({merged_pid, fmt::format("rank {}", rank)});
        for (const trace::ThreadInfo& info : reader.threads()) {
            trace::ThreadInfo merged = info;
            merged.pid = merged_pid;
            merged.name = fmt::format("rank {}: {}", rank, info.name.empty() ? std::to_string(info.tid) : info.name);
            threads[info.thread_id] = writer.register_thread(merged);
        }
        for (const trace::DeviceInfo& info : reader.devices()) {
            trace::DeviceInfo merged = info;
            merged.device_id = next_device_id++;
            merged.name = fmt::format("rank {}: {}", rank, info.name);
            writer.register_device(merged);
            devices[info.device_id] = merged.device_id;
        }
        for (const trace::StreamInfo& info : reader.streams()) {
            trace::StreamInfo merged = info;
            merged.device_id = device(info.device_id);
            streams[info.stream_id] = writer.register_stream(merged);
        }
        // NVTX category names: the same on every rank of a job (the same program).
        for (const store::NvtxCategoryName& named : reader.nvtx_category_names())
            writer.name_nvtx_category(string(named.domain_id), named.category, named.name);
        for (const trace::CounterInfo& info : reader.counters()) {
            trace::CounterInfo merged = info;
            merged.name = fmt::format("rank {}: {}", rank, info.name);
            merged.device_id = device(info.device_id);
            counters[info.counter_id] = writer.register_counter(merged);
        }
    }

    // An event of the rank as the job file holds it: shifted onto the job's time base,
    // with every id that is only unique within its file remapped.
    template <typename Event>
    Event remapped(const Event& event) {
        Event merged = event;
        if constexpr (requires { merged.range_id; }) {
            merged.range_id = range(event.range_id);
            merged.parent_range_id = range(event.parent_range_id);
        }
        if constexpr (requires { merged.time_ns; }) {
            merged.time_ns += shift_ns;
        } else {
            merged.start_ns += shift_ns;
            merged.end_ns += shift_ns;
        }
        if constexpr (requires { merged.thread_id; }) merged.thread_id = thread(event.thread_id);
        if constexpr (requires { merged.counter_id; }) merged.counter_id = counters[event.counter_id];
        if constexpr (requires { merged.device_id; }) merged.device_id = device(event.device_id);
        if constexpr (requires { merged.peer_device_id; }) merged.peer_device_id = device(event.peer_device_id);
        if constexpr (requires { merged.stream_id; }) merged.stream_id = stream(event.stream_id);
        if constexpr (requires { merged.correlation_id; }) merged.correlation_id = correlation(event.correlation_id);
        if constexpr (requires { merged.stack_id; }) merged.stack_id = stack(event.stack_id);
        if constexpr (requires { merged.source_id; }) merged.source_id = string(event.source_id);
        if constexpr (requires { merged.domain_id; }) merged.domain_id = string(event.domain_id);
        if constexpr (requires { merged.name_id; }) merged.name_id = string(event.name_id);
        return merged;
    }

    // Every event of the table that `record` (TraceWriter::record_kernel, ...) writes.
    template <typename Event>
    void copy_table(bool (store::TraceWriter::*record)(const Event&)) {
        reader.for_each<Event>({}, [&](const Event& event) {
            (writer.*record)(remapped(event));
            return true;
        });
    }

    // copy_table of each, in the order given.
    template <typename... Events>
    void copy_tables(bool (store::TraceWriter::*... record)(const Events&)) {
        (copy_table(record), ...);
    }

    void copy(int64_t merged_pid) {
        register_tracks(merged_pid);
        // Host-side events: NVTX ranges and marks, counters, API calls, stack samples.
        copy_tables(&store::TraceWriter::record_range, &store::TraceWriter::record_mark,
                    &store::TraceWriter::record_counter, &store::TraceWriter::record_api_call,
                    &store::TraceWriter::record_stack_sample, &store::TraceWriter::record_overhead);
        for (const trace::DroppedRecords& dropped : reader.dropped_records()) writer.record_dropped(remapped(dropped));
        // GPU work on the rank's streams.
        copy_tables(&store::TraceWriter::record_kernel, &store::TraceWriter::record_memcpy,
                    &store::TraceWriter::record_memset, &store::TraceWriter::record_sync);
        // Kineto's collective metadata of those kernels and ranges.
        for (trace::CollectiveCall call : reader.collective_calls()) {
            call.start_ns += shift_ns;
            call.track_id = call.on_stream ? stream(call.track_id) : thread(call.track_id);
            for (trace::StringId* id :
                 {&call.name_id, &call.group_name_id, &call.group_desc_id, &call.group_ranks_id, &call.dtype_id})
                *id = string(*id);
            writer.record_collective_call(call);
        }
        // GPU memory: the allocator's events and state, on the rank's devices.
        reader.for_each_memory_event([&](const trace::MemoryEvent& event) {
            writer.record_memory_event(remapped(event));
            return true;
        });
        for (const trace::MemoryBlock& block : reader.memory_blocks()) writer.record_memory_block(remapped(block));
    }
};

}  // namespace

MergeResult merge_traces(const std::vector<std::string>& inputs, const std::string& output,
                         const MergeOptions& options) {
    const std::vector<RankPlacement>& placements = options.placements;
    if (inputs.empty()) throw store::TraceError(store::TraceErrorKind::io, output, "merge: no input files");
    if (!placements.empty() && placements.size() != inputs.size())
        throw store::TraceError(store::TraceErrorKind::io, output, "merge: one placement per input is needed");
    std::vector<std::unique_ptr<store::TraceReader>> readers;
    for (const std::string& path : inputs) readers.push_back(std::make_unique<store::TraceReader>(path));
    // Order by recorded rank (file order when ranks are missing or repeated).
    std::vector<std::size_t> order(readers.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    auto recorded_rank = [&](std::size_t i) {
        return placements.empty() ? readers[i]->run().rank : placements[i].rank;
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return recorded_rank(a) < recorded_rank(b); });
    const store::TraceReader& base = *readers[order[0]];
    const std::map<int64_t, trace::TimeNs> base_anchors = clock_anchors(base);
    // Each rank keeps the number its file records (the launcher's rank, Kineto's
    // distributedInfo): two ranks sampled from a large job stay ranks 3 and 77. Files
    // that repeat a rank or record none are numbered in merged order instead.
    std::set<int> recorded_ranks;
    for (const auto& reader : readers)
        if (reader->run().rank >= 0) recorded_ranks.insert(reader->run().rank);
    const bool keep_recorded_ranks = !placements.empty() || recorded_ranks.size() == readers.size();

    trace::RunInfo run = base.run();
    run.command_line = "ember merge";
    for (const std::string& path : inputs) run.command_line += " " + path;
    run.rank = 0;
    run.world_size = static_cast<int32_t>(readers.size());
    run.rank_source = "job file";
    store::WriterOptions writer_options;
    writer_options.overflow = store::OverflowPolicy::block;  // a copy must not drop events
    store::TraceWriter writer(output, run, writer_options);
    for (const auto& [key, value] : options.metadata) writer.set_metadata(key, value);

    MergeResult result;
    std::set<int64_t> pids;
    trace::TimeNs end_ns = 0;
    trace::DeviceId next_device_id = 0;
    for (std::size_t position = 0; position < order.size(); ++position) {
        const store::TraceReader& reader = *readers[order[position]];
        const int rank =
            order.size() == 1 || keep_recorded_ranks ? recorded_rank(order[position]) : static_cast<int>(position);
        trace::TimeNs shift = 0;
        std::string how = "reference";
        if (!placements.empty()) {
            shift = placements[order[position]].shift_ns;
            how = placements[order[position]].how;
        } else if (position > 0) {
            const std::map<int64_t, trace::TimeNs> anchors = clock_anchors(reader);
            bool aligned = false;
            for (const auto& [sequence, time] : anchors) {
                auto it = base_anchors.find(sequence);
                if (it == base_anchors.end()) continue;
                shift = it->second - time;
                how = fmt::format("clock anchor {}", sequence);
                aligned = true;
                break;
            }
            if (!aligned) {
                shift = reader.run().clock_offset_to_wall_ns - base.run().clock_offset_to_wall_ns;
                how = "wall clock (no common clock/anchor marks)";
            }
        }
        int64_t pid = reader.run().pid;
        while (pids.count(pid)) pid += trace::kMergedPidStep;  // same pid on two hosts
        pids.insert(pid);
        RankCopier copier(reader, writer, rank, shift, next_device_id);
        copier.copy(pid);
        if (reader.run().end_ns) end_ns = std::max(end_ns, reader.run().end_ns + shift);
        result.ranks.push_back({rank, reader.path(), shift, how});
    }
    if (end_ns) writer.set_end_time(end_ns);
    writer.close();
    return result;
}

}  // namespace ember::merge
