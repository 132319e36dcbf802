// gpu_work.cpp: GPU events per rank under a convention (gpu_work.h).
//
// The event tables are scanned without ORDER BY (a full scan is the fastest read
// SQLite has) and sorted in memory; launching calls are looked up only for the
// correlation ids the GPU events carry, so memory stays proportional to the GPU
// work, whatever the number of host events.
#include "profiler/analysis/gpu_work.h"

#include "profiler/analysis/rank_summary.h"
#include "profiler/analysis/sql_query.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <unordered_map>

namespace ember::analysis {

std::optional<Convention> parse_convention(std::string_view text) {
    if (text == "ember") return Convention::ember;
    if (text == "hta") return Convention::hta;
    if (text == "tb") return Convention::tb;
    if (text == "tracelens") return Convention::tracelens;
    return std::nullopt;
}

const char* convention_name(Convention convention) {
    switch (convention) {
        case Convention::ember: return "ember";
        case Convention::hta: return "hta";
        case Convention::tb: return "tb";
        case Convention::tracelens: return "tracelens";
    }
    return "ember";
}

const char* kernel_class_name(KernelClass kind) {
    switch (kind) {
        case KernelClass::computation: return "COMPUTATION";
        case KernelClass::communication: return "COMMUNICATION";
        case KernelClass::memory: return "MEMORY";
    }
    return "COMPUTATION";
}

KernelClass classify_kernel(std::string_view name) {
    auto starts = [&](std::string_view prefix) { return name.substr(0, prefix.size()) == prefix; };
    if (starts("nccl") || starts("hip") || starts("hccl") || name.find("ncclKernel") != std::string_view::npos)
        return KernelClass::communication;
    if (starts("Memcpy") || starts("Memset") || starts("dma")) return KernelClass::memory;
    return KernelClass::computation;
}

bool is_step_range_name(std::string_view name) {
    return name == "step" || name.substr(0, 13) == "ProfilerStep#";
}

namespace {

// ---------------------------------------------------------------------------
// [SECTION] HTA's microsecond rounding
// ---------------------------------------------------------------------------

// The double Python's json module makes of a Kineto timestamp: the nearest double to
// the decimal number of microseconds (ns / 1000, exact in decimal).
double microseconds_as_python_float(std::int64_t ns) {
    char text[40];
    const bool negative = ns < 0;
    const unsigned long long magnitude = negative ? 0ull - static_cast<unsigned long long>(ns)
                                                  : static_cast<unsigned long long>(ns);
    std::snprintf(text, sizeof(text), "%s%llu.%03llu", negative ? "-" : "", magnitude / 1000, magnitude % 1000);
    return std::strtod(text, nullptr);
}

// HTA's parser rounds float timestamps inward: ts = ceil(ts), end = floor(ts + dur),
// with ts + dur computed in double. Times here are ns from the file's time origin.
trace::TimeNs ceil_like_hta(trace::TimeNs ns) {
    return static_cast<trace::TimeNs>(std::ceil(microseconds_as_python_float(ns))) * 1000;
}
void round_like_hta(trace::TimeNs& start_ns, trace::TimeNs& end_ns) {
    const double start_us = microseconds_as_python_float(start_ns);
    const double duration_us = microseconds_as_python_float(end_ns - start_ns);
    start_ns = static_cast<trace::TimeNs>(std::ceil(start_us)) * 1000;
    end_ns = static_cast<trace::TimeNs>(std::floor(start_us + duration_us)) * 1000;
}

// ---------------------------------------------------------------------------
// [SECTION] Ranks
// ---------------------------------------------------------------------------

// Which rank each device and thread belongs to.
struct RankMap {
    std::int32_t single_rank = 0;
    bool job = false;  // several "rank R" processes
    std::map<trace::DeviceId, std::int32_t> device_rank;
    std::map<trace::ThreadId, std::int32_t> thread_rank;

    std::int32_t of_device(trace::DeviceId device) const {
        auto found = device_rank.find(device);
        return found == device_rank.end() ? single_rank : found->second;
    }
    std::int32_t of_thread(trace::ThreadId thread) const {
        auto found = thread_rank.find(thread);
        return found == thread_rank.end() ? single_rank : found->second;
    }
};

RankMap rank_map(const store::TraceReader& reader) {
    RankMap map;
    map.single_rank = std::max(0, reader.run().rank);
    std::map<std::int64_t, std::int32_t> process_rank;
    for (const trace::ProcessInfo& process : reader.processes())
        if (std::optional<std::int32_t> rank = rank_of_process_name(process.name)) process_rank[process.pid] = *rank;
    map.job = process_rank.size() >= 2;
    if (!map.job) return map;
    for (const trace::DeviceInfo& device : reader.devices())
        if (std::optional<std::int32_t> rank = rank_of_device_name(device.name)) map.device_rank[device.device_id] = *rank;
    for (const trace::ThreadInfo& thread : reader.threads()) {
        auto found = process_rank.find(thread.pid);
        if (found != process_rank.end()) map.thread_rank[thread.thread_id] = found->second;
    }
    return map;
}

struct Launch {
    trace::TimeNs start_ns = 0;
    trace::TimeNs end_ns = 0;
    trace::StringId name_id = trace::kNoString;
    bool found = false;
};

}  // namespace

// ---------------------------------------------------------------------------
// [SECTION] Collection
// ---------------------------------------------------------------------------

std::vector<RankGpuWork> gpu_work(const store::TraceReader& reader, Convention convention) {
    const RankMap ranks = rank_map(reader);
    std::map<trace::StreamId, std::pair<std::uint64_t, std::int32_t>> streams;  // cuda stream id, rank
    for (const trace::StreamInfo& stream : reader.streams())
        streams[stream.stream_id] = {stream.cuda_stream_id, ranks.of_device(stream.device_id)};

    // Kernel names classified once per distinct name.
    std::unordered_map<trace::StringId, KernelClass> classes;
    auto class_of = [&](trace::StringId name) {
        auto [found, inserted] = classes.try_emplace(name, KernelClass::computation);
        if (inserted) found->second = classify_kernel(reader.string(name));
        return found->second;
    };

    std::map<std::int32_t, RankGpuWork> by_rank;
    auto rank_work = [&](std::int32_t rank) -> RankGpuWork& {
        RankGpuWork& work = by_rank[rank];
        work.rank = rank;
        return work;
    };
    auto read_table = [&](const char* table, GpuEventKind kind) {
        const bool kernels = kind == GpuEventKind::kernel;
        SqlQuery query(reader.database(), reader.path(),
                       std::string("SELECT start_ns, end_ns, stream_id, correlation_id") +
                           (kernels ? ", name_id" : "") + " FROM " + table);
        while (query.next_row()) {
            GpuEvent event;
            event.start_ns = query.int64(0);
            event.end_ns = query.int64(1);
            const auto stream = streams.find(static_cast<trace::StreamId>(query.int64(2)));
            const std::int32_t rank = stream == streams.end() ? ranks.single_rank : stream->second.second;
            event.cuda_stream = stream == streams.end() ? 0 : stream->second.first;
            event.correlation = static_cast<trace::CorrelationId>(query.int64(3));
            event.kind = kind;
            if (kernels) {
                event.name_id = static_cast<trace::StringId>(query.int64(4));
                event.kernel_class = class_of(event.name_id);
            } else {
                event.kernel_class = KernelClass::memory;
            }
            rank_work(rank).events.push_back(event);
        }
    };
    read_table("kernels", GpuEventKind::kernel);
    read_table("memcpys", GpuEventKind::memcpy);
    read_table("memsets", GpuEventKind::memset);

    // The launching calls of exactly these events.
    std::unordered_map<trace::CorrelationId, Launch> launches;
    for (const auto& [rank, work] : by_rank)
        for (const GpuEvent& event : work.events)
            if (event.correlation != 0) launches.try_emplace(event.correlation);
    if (!launches.empty()) {
        SqlQuery query(reader.database(), reader.path(),
                       "SELECT start_ns, end_ns, correlation_id, name_id FROM api_calls WHERE correlation_id != 0");
        while (query.next_row()) {
            auto found = launches.find(static_cast<trace::CorrelationId>(query.int64(2)));
            if (found == launches.end()) continue;
            found->second = {query.int64(0), query.int64(1), static_cast<trace::StringId>(query.int64(3)), true};
        }
    }

    // Profiler steps per rank (HTA drops the last, incomplete one).
    std::map<std::int32_t, std::vector<trace::TimeNs>> step_starts;
    {
        std::vector<trace::StringId> step_names;
        for (const auto& [id, text] : reader.strings_from(0))
            if (is_step_range_name(text)) step_names.push_back(id);
        if (!step_names.empty()) {
            std::string list;
            for (trace::StringId id : step_names) list += (list.empty() ? "" : ",") + std::to_string(id);
            SqlQuery query(reader.database(), reader.path(),
                           "SELECT start_ns, thread_id FROM ranges WHERE name_id IN (" + list + ")");
            while (query.next_row())
                step_starts[ranks.of_thread(static_cast<trace::ThreadId>(query.int64(1)))].push_back(query.int64(0));
        }
    }

    std::vector<RankGpuWork> result;
    for (auto& [rank, work] : by_rank) {
        const std::vector<trace::TimeNs>& steps = step_starts[rank];
        work.profiler_steps = static_cast<std::int64_t>(steps.size());
        trace::TimeNs last_step_start = steps.empty() ? 0 : *std::max_element(steps.begin(), steps.end());
        if (convention == Convention::hta) last_step_start = ceil_like_hta(last_step_start);
        // HTA filters only with two or more steps (one step cannot be told from a partial one).
        const bool filter_last_step = convention == Convention::hta && steps.size() >= 2;
        const bool linked_only = convention == Convention::tracelens || filter_last_step;
        std::vector<GpuEvent> kept;
        kept.reserve(work.events.size());
        for (GpuEvent& event : work.events) {
            if (event.correlation != 0) {
                auto found = launches.find(event.correlation);
                if (found != launches.end() && found->second.found) {
                    event.launch_start_ns = found->second.start_ns;
                    event.launch_end_ns = found->second.end_ns;
                    event.launch_name_id = found->second.name_id;
                }
            }
            if (convention == Convention::hta) {
                round_like_hta(event.start_ns, event.end_ns);
                if (event.linked()) round_like_hta(event.launch_start_ns, event.launch_end_ns);
            }
            if (linked_only && !event.linked()) {
                ++work.dropped_unlinked;
                continue;
            }
            if (filter_last_step && event.launch_start_ns >= last_step_start) {
                ++work.dropped_after_last_step;
                continue;
            }
            kept.push_back(event);
        }
        std::stable_sort(kept.begin(), kept.end(),
                         [](const GpuEvent& a, const GpuEvent& b) { return a.start_ns < b.start_ns; });
        work.events = std::move(kept);
        result.push_back(std::move(work));
    }
    return result;
}

}  // namespace ember::analysis
