// gpu_analysis.cpp: the GPU breakdowns of every file and the idle gaps and queue
// series of every stream lane (gpu_analysis.h), from the trace library's analyses.
//
// The analyses key a stream by (rank, CUDA stream id as recorded). A lane is one stream
// track of one file, so the per-lane drawing splits each rank's GPU work by lane: by
// the CUDA stream id when one lane has it, and by matching (start, correlation id)
// against the lanes' own events when several devices of one rank reuse an id (a
// process driving two GPUs has a stream 7 on each), so gaps are never drawn between
// the events of two different streams.
#include "viewer/model/gpu_analysis.h"

#include "profiler/analysis/enum_names.h"
#include "profiler/analysis/rank_map.h"
#include "profiler/analysis/step_breakdown.h"

#include <algorithm>
#include <map>
#include <set>

namespace ember::viewer {

using trace::TimeNs;

const char* idle_category_meaning(IdleCategory category) {
    static constexpr analysis::EnumName<IdleCategory> kMeanings[] = {
        {IdleCategory::host_wait, "the host launched the next operation only after the stream went idle"},
        {IdleCategory::kernel_wait, "a short gap between operations launched ahead of time (launch overhead)"},
        {IdleCategory::other,
         "a longer gap although the next operation was already launched (or has no launching call)"},
    };
    return analysis::name_in(kMeanings, category, "");
}

const char* step_category_name(int category) {
    return category >= 0 && category < kStepCategoryCount
               ? analysis::step_breakdown_category_name(static_cast<StepBreakdownCategory>(category))
               : "?";
}

void StreamOverlay::add_gap(TimeNs start_ns, TimeNs end_ns, IdleCategory category) {
    gaps.push_back({start_ns, end_ns});
    categories.push_back(category);
}

void StreamOverlay::finish() {
    gaps.shrink_to_fit();
    categories.shrink_to_fit();
    idle_before_block.assign(gaps.size() / kBlock + 1, IdleSplit{});
    IdleSplit running{};
    for (std::size_t i = 0; i < gaps.size(); ++i) {
        if (i % kBlock == 0) idle_before_block[i / kBlock] = running;
        running[static_cast<std::size_t>(categories[i])] += gaps[i].duration_ns();
    }
    if (gaps.size() % kBlock == 0) idle_before_block[gaps.size() / kBlock] = running;
    queue.shrink_to_fit();
    queue_max = 0.0;
    for (const CounterPoint& point : queue) queue_max = std::max(queue_max, point.value);
}

IdleSplit StreamOverlay::idle_before(std::size_t index) const {
    index = std::min(index, gaps.size());
    const std::size_t block = index / kBlock;
    IdleSplit split = block < idle_before_block.size() ? idle_before_block[block] : IdleSplit{};
    for (std::size_t i = block * kBlock; i < index; ++i)
        split[static_cast<std::size_t>(categories[i])] += gaps[i].duration_ns();
    return split;
}

IdleSplit StreamOverlay::idle_between(std::size_t first, std::size_t last) const {
    last = std::min(last, gaps.size());
    IdleSplit split{};
    if (first >= last) return split;
    if (last - first <= kBlock) {  // a short run: add it up directly
        for (std::size_t i = first; i < last; ++i)
            split[static_cast<std::size_t>(categories[i])] += gaps[i].duration_ns();
        return split;
    }
    const IdleSplit before_last = idle_before(last), before_first = idle_before(first);
    for (std::size_t c = 0; c < split.size(); ++c) split[c] = before_last[c] - before_first[c];
    return split;
}

double StreamOverlay::queue_at(TimeNs time_ns) const {
    // The last point at or before `time_ns`.
    auto after = std::upper_bound(queue.begin(), queue.end(), time_ns,
                                  [](TimeNs time, const CounterPoint& point) { return time < point.time_ns; });
    return after == queue.begin() ? 0.0 : std::prev(after)->value;
}

const StreamOverlay* GpuAnalysis::overlay(int lane) const {
    if (lane < 0 || lane >= static_cast<int>(lanes.size())) return nullptr;
    const StreamOverlay& found = lanes[static_cast<std::size_t>(lane)];
    return found.empty() ? nullptr : &found;
}

std::size_t GpuAnalysis::memory_bytes() const {
    std::size_t bytes = sizeof(GpuAnalysis) + lanes.capacity() * sizeof(StreamOverlay);
    for (const StreamOverlay& lane : lanes)
        bytes += lane.gaps.capacity() * sizeof(IdleGap) + lane.categories.capacity() * sizeof(IdleCategory) +
                 lane.idle_before_block.capacity() * sizeof(IdleSplit) + lane.queue.capacity() * sizeof(CounterPoint);
    for (const RankBreakdown& rank : ranks)
        bytes += sizeof(RankBreakdown) + rank.steps.capacity() * sizeof(StepSplit) +
                 rank.streams.capacity() * sizeof(StreamIdleRow) +
                 rank.kernel_types.capacity() * sizeof(analysis::KernelTypeRow) +
                 rank.top_kernels.capacity() * sizeof(analysis::TopKernelRow);
    return bytes;
}

namespace {

struct LaneStream {
    int lane = -1;
    trace::StreamId stream_id = 0;
    std::uint64_t cuda_stream = 0;
    std::int32_t rank = 0;
    std::string title;
};

// (start, correlation id) of every GPU event of one stream track, sorted: the key that
// tells which of several same-numbered streams an analysis event belongs to.
std::vector<std::pair<TimeNs, trace::CorrelationId>> event_keys(const store::TraceReader& reader,
                                                                trace::StreamId stream_id) {
    std::vector<std::pair<TimeNs, trace::CorrelationId>> keys;
    store::EventQuery query;
    query.track = stream_id;
    auto add = [&keys](const auto& event) {
        keys.emplace_back(event.start_ns, event.correlation_id);
        return true;
    };
    reader.for_each<trace::KernelEvent>(query, add);
    reader.for_each<trace::MemcpyEvent>(query, add);
    reader.for_each<trace::MemsetEvent>(query, add);
    std::sort(keys.begin(), keys.end());
    return keys;
}

// Appends a queue series (one stream's) to a lane, on the model's time base.
void add_queue(StreamOverlay& overlay, const std::vector<analysis::QueuePoint>& points, TimeNs shift) {
    overlay.queue.reserve(overlay.queue.size() + points.size());
    for (const analysis::QueuePoint& point : points) {
        const TimeNs time = point.time_ns + shift;
        // Several changes at one instant: the value after the last one is what holds.
        if (!overlay.queue.empty() && overlay.queue.back().time_ns == time)
            overlay.queue.back().value = static_cast<double>(point.length);
        else
            overlay.queue.push_back({time, static_cast<double>(point.length)});
    }
}

RankBreakdown& rank_entry(std::map<std::int32_t, RankBreakdown>& ranks, int file_index, std::int32_t rank) {
    RankBreakdown& entry = ranks[rank];
    entry.file_index = file_index;
    entry.rank = rank;
    return entry;
}

StepSplit step_split(const analysis::StepBreakdownRow& row, TimeNs shift) {
    StepSplit step;
    step.step = row.step;
    step.start_ns = row.start_ns + shift;
    step.end_ns = row.end_ns + shift;
    step.ns = row.by_category();
    return step;
}

bool cancelled(const std::atomic<bool>* cancel) {
    return cancel != nullptr && cancel->load(std::memory_order_relaxed);
}

}  // namespace

std::unique_ptr<GpuAnalysis> analyze_gpu(const std::vector<AnalysisFile>& files,
                                         const std::vector<AnalysisLane>& stream_lanes, int lane_count,
                                         const GpuAnalysisOptions& options, const std::atomic<bool>* cancel) {
    auto result = std::make_unique<GpuAnalysis>();
    result->options = options;
    result->lanes.resize(static_cast<std::size_t>(std::max(lane_count, 0)));
    for (std::size_t file_index = 0; file_index < files.size() && !cancelled(cancel); ++file_index) {
        const store::TraceReader& reader = *files[file_index].reader;
        const TimeNs shift = files[file_index].shift_ns;
        // The ranks every report gives this file's streams (rank_map.h).
        const analysis::RankMap ranks = analysis::rank_map(reader);

        // This file's stream lanes, with the (rank, CUDA stream) the analyses know them by.
        std::map<std::pair<std::int32_t, std::uint64_t>, std::vector<LaneStream>> lanes_of_stream;
        for (const AnalysisLane& lane : stream_lanes) {
            if (lane.file_index != static_cast<int>(file_index)) continue;
            LaneStream entry;
            entry.lane = lane.lane;
            entry.stream_id = lane.stream_id;
            const trace::StreamInfo* info = reader.stream(lane.stream_id);
            entry.cuda_stream = info ? info->cuda_stream_id : 0;
            entry.rank = ranks.of_stream(lane.stream_id);
            entry.title =
                "stream " + std::to_string(entry.cuda_stream) + (info && !info->name.empty() ? " " + info->name : "");
            lanes_of_stream[{entry.rank, entry.cuda_stream}].push_back(std::move(entry));
        }

        std::vector<analysis::RankGpuWork> work = analysis::gpu_work(reader, analysis::Convention::ember);
        std::map<std::int32_t, RankBreakdown> by_rank;
        for (const analysis::RankGpuWork& rank_work : work) {
            RankBreakdown& entry = rank_entry(by_rank, static_cast<int>(file_index), rank_work.rank);
            entry.gpu_events = static_cast<std::int64_t>(rank_work.events.size());
            if (rank_work.events.empty()) continue;
            entry.gpu_begin_ns = rank_work.events.front().start_ns + shift;
            TimeNs last_end = rank_work.events.front().end_ns;
            for (const analysis::GpuEvent& event : rank_work.events) {
                last_end = std::max(last_end, event.end_ns);
                if (!event.linked()) ++entry.unlinked_events;
            }
            entry.gpu_end_ns = last_end + shift;
        }
        for (const analysis::TemporalRow& row : analysis::temporal_breakdown(work))
            rank_entry(by_rank, static_cast<int>(file_index), row.rank).temporal = row;
        for (const analysis::KernelTypeRow& row : analysis::kernel_type_breakdown(work))
            rank_entry(by_rank, static_cast<int>(file_index), row.rank).kernel_types.push_back(row);
        for (const analysis::OverlapRow& row : analysis::communication_overlap(work))
            rank_entry(by_rank, static_cast<int>(file_index), row.rank).overlap = row;
        for (analysis::TopKernelRow& row : analysis::top_kernels_by_type(reader, work, 3))
            rank_entry(by_rank, static_cast<int>(file_index), row.rank).top_kernels.push_back(std::move(row));
        auto stream_title = [&](std::int32_t rank, std::uint64_t cuda_stream, int* lane) {
            auto found = lanes_of_stream.find({rank, cuda_stream});
            *lane = found != lanes_of_stream.end() && found->second.size() == 1 ? found->second[0].lane : -1;
            return found != lanes_of_stream.end() && found->second.size() == 1
                       ? found->second[0].title
                       : "stream " + std::to_string(cuda_stream);
        };
        for (const analysis::IdleRow& row : analysis::idle_breakdown(work, options.kernel_wait_threshold_ns)) {
            RankBreakdown& entry = rank_entry(by_rank, static_cast<int>(file_index), row.rank);
            if (entry.streams.empty() || entry.streams.back().cuda_stream != row.stream) {
                StreamIdleRow stream;
                stream.cuda_stream = row.stream;
                stream.title = stream_title(row.rank, row.stream, &stream.lane);
                entry.streams.push_back(std::move(stream));
            }
            const int category = static_cast<int>(row.category);
            entry.streams.back().idle_ns[category] += row.idle_ns;
            entry.streams.back().gaps[category] += row.gaps;
        }
        for (const analysis::QueueRow& row : analysis::queue_length_summary(work)) {
            QueueSummaryRow queue;
            queue.cuda_stream = row.stream;
            int lane = -1;
            queue.title = stream_title(row.rank, row.stream, &lane);
            queue.mean = row.mean;
            queue.time_weighted_mean = row.time_weighted_mean;
            queue.max = row.max;
            rank_entry(by_rank, static_cast<int>(file_index), row.rank).queues.push_back(std::move(queue));
        }
        if (cancelled(cancel)) break;

        // Per lane. The analyses work per (rank, CUDA stream): where one lane has that
        // pair, their gaps and series go to it as they are. Streams that several lanes
        // share get their events split by lane first, analysed apart, one lane at a time.
        auto lane_of = [&](std::int32_t rank, std::uint64_t cuda_stream) -> const std::vector<LaneStream>* {
            auto found = lanes_of_stream.find({rank, cuda_stream});
            return found == lanes_of_stream.end() ? nullptr : &found->second;
        };
        auto overlay_of = [&](int lane) -> StreamOverlay* {
            return lane >= 0 && lane < lane_count ? &result->lanes[static_cast<std::size_t>(lane)] : nullptr;
        };
        {
            const std::vector<analysis::IdleGapSpan> spans =
                analysis::idle_gaps_by_category(work, options.kernel_wait_threshold_ns);
            // Exact sizes first: these arrays hold about one gap per GPU event.
            std::map<int, std::size_t> gap_count;
            for (const analysis::IdleGapSpan& span : spans) {
                const std::vector<LaneStream>* candidates = lane_of(span.rank, span.stream);
                if (candidates != nullptr && candidates->size() == 1) ++gap_count[(*candidates)[0].lane];
            }
            for (const auto& [lane, count] : gap_count)
                if (StreamOverlay* overlay = overlay_of(lane)) {
                    overlay->gaps.reserve(count);
                    overlay->categories.reserve(count);
                }
            // The analysis walks a stream in start order and a gap runs from one event's
            // end to the next one's start: a lane's gaps come sorted and disjoint.
            for (const analysis::IdleGapSpan& span : spans) {
                const std::vector<LaneStream>* candidates = lane_of(span.rank, span.stream);
                if (candidates == nullptr || candidates->size() != 1) continue;
                if (StreamOverlay* overlay = overlay_of((*candidates)[0].lane))
                    overlay->add_gap(span.start_ns + shift, span.end_ns + shift, span.category);
            }
        }
        if (cancelled(cancel)) break;
        for (const analysis::QueueSeries& series : analysis::queue_length_series(work)) {
            const std::vector<LaneStream>* candidates = lane_of(series.rank, series.stream);
            if (candidates == nullptr || candidates->size() != 1) continue;
            if (StreamOverlay* overlay = overlay_of((*candidates)[0].lane)) add_queue(*overlay, series.points, shift);
        }
        for (const auto& [key, candidates] : lanes_of_stream) {
            if (candidates.size() < 2 || cancelled(cancel)) continue;
            // Which lane each event of the shared stream is on: its (start, correlation)
            // among the lane's own events.
            std::vector<std::vector<std::pair<TimeNs, trace::CorrelationId>>> keys;
            for (const LaneStream& candidate : candidates) keys.push_back(event_keys(reader, candidate.stream_id));
            std::vector<analysis::RankGpuWork> per_lane(candidates.size());
            for (const analysis::RankGpuWork& rank_work : work) {
                if (rank_work.rank != key.first) continue;
                for (const analysis::GpuEvent& event : rank_work.events) {
                    if (event.cuda_stream != key.second) continue;
                    const std::pair<TimeNs, trace::CorrelationId> event_key{event.start_ns, event.correlation};
                    for (std::size_t index = 0; index < candidates.size(); ++index)
                        if (std::binary_search(keys[index].begin(), keys[index].end(), event_key)) {
                            per_lane[index].events.push_back(event);
                            break;
                        }
                }
            }
            for (std::size_t index = 0; index < candidates.size(); ++index) {
                StreamOverlay* overlay = overlay_of(candidates[index].lane);
                if (overlay == nullptr) continue;
                std::vector<analysis::RankGpuWork> one;
                one.push_back(std::move(per_lane[index]));
                for (const analysis::IdleGapSpan& span :
                     analysis::idle_gaps_by_category(one, options.kernel_wait_threshold_ns))
                    overlay->add_gap(span.start_ns + shift, span.end_ns + shift, span.category);
                for (const analysis::QueueSeries& series : analysis::queue_length_series(one))
                    add_queue(*overlay, series.points, shift);
            }
        }
        for (const auto& [key, candidates] : lanes_of_stream)
            for (const LaneStream& candidate : candidates)
                if (StreamOverlay* overlay = overlay_of(candidate.lane)) overlay->finish();
        work = {};

        // Steps: rows by rank; a file that is not a job trace is one rank whatever its rows say.
        for (const analysis::StepBreakdownRow& row :
             analysis::step_breakdown(reader, analysis::StepConvention::ember)) {
            const std::int32_t rank = ranks.job ? row.rank : ranks.single_rank;
            rank_entry(by_rank, static_cast<int>(file_index), rank).steps.push_back(step_split(row, shift));
        }
        for (auto& [rank, entry] : by_rank) result->ranks.push_back(std::move(entry));
    }

    // Titles: "rank R", with the file's name when two files hold the same rank.
    std::map<std::int32_t, int> rank_count;
    for (const RankBreakdown& rank : result->ranks) ++rank_count[rank.rank];
    for (RankBreakdown& rank : result->ranks) {
        rank.title = "rank " + std::to_string(rank.rank);
        if (rank_count[rank.rank] > 1) rank.title += " · " + files[static_cast<std::size_t>(rank.file_index)].name;
    }
    return result;
}

}  // namespace ember::viewer
