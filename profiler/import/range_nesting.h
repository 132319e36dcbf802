// range_nesting.h: push/pop-style host ranges arrive in any order (a Kineto file
// lists CPU ops, then annotations, then Python functions; an Nsight Systems table
// is unordered), but a range's depth and parent depend on every other range of
// its thread. RangeNester collects them, sorts each thread's ranges by (start,
// longest first, arrival), and assigns depth and parent with one stack per
// thread — the nesting a push/pop NVTX collector would have seen.
//
// Memory is bounded: past `memory_bytes` the collected ranges are sorted and
// spilled to a temporary file (a "run"), and finish() merges the runs.
#pragma once

#include "profiler/trace/events.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ember::importing {

// A range before nesting: everything but range_id, depth and parent_range_id.
struct PendingRange {
    trace::TimeNs start_ns = 0;
    trace::TimeNs end_ns = 0;
    std::uint64_t arrival = 0;  // input order; breaks ties between identical intervals
    trace::ThreadId thread_id = 0;
    trace::StringId domain_id = trace::kNoString;
    trace::StringId name_id = trace::kNoString;
    std::uint32_t category = 0;
    std::uint32_t color = 0;
    trace::PayloadKind payload_kind = trace::PayloadKind::none;
    std::int64_t payload_integer = 0;
    double payload_real = 0.0;
};

class RangeNester {
public:
    // Spill files are "<spill_prefix>.<n>" and removed by finish() or the destructor.
    RangeNester(std::string spill_prefix, std::size_t memory_bytes);
    ~RangeNester();
    RangeNester(const RangeNester&) = delete;
    RangeNester& operator=(const RangeNester&) = delete;

    void add(const PendingRange& range);  // arrival is assigned here
    std::uint64_t size() const { return added_; }

    // Emits every range once, nested, by thread then start. `next_range_id` hands
    // out ids (TraceWriter::next_range_id). Returns how many ranges started inside
    // another range but ended after it (nested under the nearest range that contains
    // them whole). Throws TraceError (io) when a spill file cannot be written or read.
    std::int64_t finish(const std::function<trace::RangeId()>& next_range_id,
                        const std::function<void(const trace::RangeEvent&)>& emit);

private:
    void spill();
    void remove_spill_files();

    std::string spill_prefix_;
    std::size_t max_buffered_;
    std::vector<PendingRange> buffer_;
    std::vector<std::string> runs_;
    std::uint64_t added_ = 0;
};

}  // namespace ember::importing
