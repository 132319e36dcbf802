// rank_map.cpp: see rank_map.h.
#include "profiler/analysis/rank_map.h"

#include "profiler/analysis/rank_summary.h"

#include <algorithm>
#include <optional>

namespace ember::analysis {

RankMap rank_map(const store::TraceReader& reader) {
    RankMap map;
    map.single_rank = std::max(0, reader.run().rank);
    std::unordered_map<std::int64_t, std::int32_t> process_rank;
    for (const trace::ProcessInfo& process : reader.processes())
        if (std::optional<std::int32_t> rank = rank_of_process_name(process.name)) process_rank[process.pid] = *rank;
    map.job = process_rank.size() >= 2;
    if (map.job) {
        for (const trace::ThreadInfo& thread : reader.threads()) {
            auto found = process_rank.find(thread.pid);
            if (found != process_rank.end()) map.thread_rank[thread.thread_id] = found->second;
        }
        for (const trace::DeviceInfo& device : reader.devices())
            if (std::optional<std::int32_t> rank = rank_of_device_name(device.name))
                map.device_rank[device.device_id] = *rank;
        for (const auto& [pid, rank] : process_rank) map.ranks.insert(rank);
    } else {
        map.ranks.insert(map.single_rank);
    }
    for (const trace::StreamInfo& stream : reader.streams())
        map.stream_rank[stream.stream_id] = map.of_device(stream.device_id);
    return map;
}

}  // namespace ember::analysis
