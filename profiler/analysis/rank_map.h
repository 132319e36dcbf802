// rank_map.h: which rank each thread, device and stream of a trace belongs to. A job
// trace (`ember merge`, `ember import` of several ranks) has one "rank R" process per
// rank and "rank R: ..." devices; any other file is one rank, RunInfo::rank (0 when
// the file records none).
#pragma once

#include "profiler/store/reader.h"

#include <cstdint>
#include <set>
#include <unordered_map>

namespace ember::analysis {

struct RankMap {
    std::int32_t single_rank = 0;  // the rank of whatever no "rank R" names
    bool job = false;              // two or more "rank R" processes
    std::set<std::int32_t> ranks;  // every rank of the file
    std::unordered_map<trace::ThreadId, std::int32_t> thread_rank;
    std::unordered_map<trace::DeviceId, std::int32_t> device_rank;
    std::unordered_map<trace::StreamId, std::int32_t> stream_rank;

    std::int32_t of_thread(trace::ThreadId thread) const { return find_or_single(thread_rank, thread); }
    std::int32_t of_device(trace::DeviceId device) const { return find_or_single(device_rank, device); }
    std::int32_t of_stream(trace::StreamId stream) const { return find_or_single(stream_rank, stream); }

  private:
    template <class Map, class Key>
    std::int32_t find_or_single(const Map& map, Key key) const {
        auto found = map.find(key);
        return found == map.end() ? single_rank : found->second;
    }
};

RankMap rank_map(const store::TraceReader& reader);

}  // namespace ember::analysis
