// range_nesting.h: push/pop-style host ranges arrive in any order (a Kineto file
// lists CPU ops, then annotations, then Python functions; an Nsight Systems table
// is unordered), but a range's depth and parent depend on every other range of
// its thread. RangeNester collects them, sorts each thread's ranges by (start,
// longest first, arrival), and assigns depth and parent with one stack per
// thread — the nesting a push/pop NVTX collector would have seen.
//
// Memory is bounded: past `memory_bytes` the collected ranges are sorted and
// spilled to a temporary file (a "run"), and finish() merges the runs.
//
// Most files list a thread's ranges in that order already (a Chrome trace of "X"
// events, ember's own export). With emit_while_in_order(), such a thread's ranges are
// nested and emitted as they arrive, and kept nowhere else: they are written while the
// rest of the file is parsed, and neither sorted nor spilled. A thread whose range then
// comes out of order is listed by withdrawn(): its later ranges are collected as above,
// and renest_withdrawn() nests them with the early ones, which the caller reads back
// from its output (and then deletes there).
//
// emit_while_in_final_order() keeps the ids too: a range is emitted at once only when
// it is where finish() would put it, with the id finish() would give it (Kineto's
// imports are compared with earlier ones row by row, ids included). That is the first
// thread's ranges while they come in nesting order and no range of a thread sorted
// before it comes; the others are collected and follow at finish(). The first such
// ranges (up to kHeldInFinalOrder) are held, unnumbered, before any is emitted: a file
// that turns out of order within them (the Python functions after the CPU ops of a
// short trace) is nested at the end as if nothing had been emitted. Should a range come
// that sorts before ranges already emitted, every early range is withdrawn at once
// (early_withdrawn()), and renest_all() nests them with the rest, in the order and with
// the ids finish() alone would have given.
#pragma once

#include "profiler/trace/events.h"

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
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

// A nested range as it was before nesting: its id, depth and parent dropped (arrival 0).
PendingRange pending_range_of(const trace::RangeEvent& range);
// The range a pending one holds, without its id, depth and parent.
trace::RangeEvent range_event_of(const PendingRange& range);

// Depth and parent of one thread's ranges, visited in nesting order.
class ThreadNesting {
  public:
    trace::RangeEvent nest(const PendingRange& range, trace::RangeId id);
    std::int64_t not_nested() const { return not_nested_; }

  private:
    struct Open {
        trace::TimeNs end_ns;
        trace::RangeId id;
    };
    std::vector<Open> open_;
    std::int64_t not_nested_ = 0;
};

// Ranges emitted early for a thread whose later range came out of order: ids
// first..last (those of the thread among them), to be deleted from the output.
struct WithdrawnRanges {
    trace::ThreadId thread_id = 0;
    trace::RangeId first = 0;
    trace::RangeId last = 0;
    std::uint64_t count = 0;  // of the thread's ranges in [first, last]
};

class RangeNester {
  public:
    using NextRangeId = std::function<trace::RangeId()>;
    using Emit = std::function<void(const trace::RangeEvent&)>;

    // Spill files are "<spill_prefix>.<n>" and removed by finish() or the destructor.
    RangeNester(std::string spill_prefix, std::size_t memory_bytes);
    ~RangeNester();
    RangeNester(const RangeNester&) = delete;
    RangeNester& operator=(const RangeNester&) = delete;

    // From now on, emit each thread's ranges as they are added while they arrive in
    // nesting order (see above). Call before the first add().
    void emit_while_in_order(NextRangeId next_range_id, Emit emit);
    // From now on, emit ranges as they are added while they come in the order finish()
    // emits them, with its ids (see above). Call before the first add().
    void emit_while_in_final_order(NextRangeId next_range_id, Emit emit);

    void add(const PendingRange& range);  // arrival is assigned here
    std::uint64_t size() const { return added_; }

    // Emits every range once, nested, by thread then start. `next_range_id` hands out
    // ids (TraceWriter::next_range_id). Returns how many ranges started inside another
    // range but ended after it (nested under the nearest range that contains them
    // whole). Throws TraceError (io) when a spill file cannot be written or read.
    // With emit_while_in_order(): emits nothing more, lists withdrawn() and returns
    // the count for the threads that stayed in order.
    std::int64_t finish(const NextRangeId& next_range_id, const Emit& emit);

    // After finish(): the threads whose ranges came out of order, by thread id, with
    // the ids emitted for them early.
    const std::vector<WithdrawnRanges>& withdrawn() const { return withdrawn_; }

    // After finish(), with emit_while_in_order(): nests each withdrawn thread's ranges,
    // those emitted early (which `early_of(withdrawn)` hands back one by one in the
    // order they were emitted: start, end, names, payload) and those that came after,
    // and emits them all with fresh ids. Returns the not-nested count of those threads.
    using EarlyRanges = std::function<std::function<bool(PendingRange&)>(const WithdrawnRanges&)>;
    std::int64_t renest_withdrawn(const EarlyRanges& early_of, const NextRangeId& next_range_id, const Emit& emit);

    // With emit_while_in_final_order(): the ranges emitted so far (one thread's, ids
    // first..last), and whether they were withdrawn (early_withdrawn(): emitted, then
    // withdrawn). The caller calls withdraw_early() when it hands a range id to a range
    // of its own (a start/end range): finish() would have numbered those emitted after
    // it (ranges still held have no id yet and stay).
    static constexpr std::size_t kHeldInFinalOrder = 65'536;
    const WithdrawnRanges& emitted_early() const { return final_order_.emitted; }
    bool early_withdrawn() const { return final_order_.withdrawn && final_order_.emitted.count > 0; }
    void withdraw_early() {
        if (final_order_.emitted.count > 0) final_order_.withdrawn = true;
    }

    // After finish(), when early_withdrawn(): take_back_early() takes the ranges emitted
    // early back (`early` hands them back one by one in the order they were emitted),
    // after which the caller removes them from its output; renest_all() then nests every
    // range as finish() alone would have and emits it with an id from `next_range_id`.
    // Returns the not-nested count.
    void take_back_early(const std::function<bool(PendingRange&)>& early);
    std::int64_t renest_all(const NextRangeId& next_range_id, const Emit& emit);

  private:
    struct EarlyThread {
        bool in_order = true;
        trace::TimeNs last_start = 0;
        trace::TimeNs last_end = 0;
        ThreadNesting nesting;
        WithdrawnRanges emitted;  // the ids given so far
    };
    bool emit_early(const PendingRange& range);           // false: the thread is (now) out of order
    bool emit_in_final_order(const PendingRange& range);  // false: collected (and maybe withdrawn)
    void emit_held();                                     // numbers, nests and emits the held ranges
    void emit_numbered(const PendingRange& range);        // with the next id, on the first thread
    void collect(const PendingRange& range);              // into the sort buffer (spilled when full)
    void for_each_sorted(const std::function<void(const PendingRange&)>& visit);
    void spill();
    void remove_spill_files();

    std::string spill_prefix_;
    std::size_t max_buffered_;
    std::vector<PendingRange> buffer_;
    std::vector<std::string> runs_;
    std::uint64_t added_ = 0;
    NextRangeId early_next_id_;
    Emit early_emit_;
    std::unordered_map<trace::ThreadId, EarlyThread> early_;
    trace::ThreadId early_cached_thread_ = 0;
    EarlyThread* early_cached_ = nullptr;
    std::vector<WithdrawnRanges> withdrawn_;
    struct FinalOrder {
        bool on = false;
        bool withdrawn = false;
        std::size_t hold = 0;            // ranges held before the first is emitted
        std::vector<PendingRange> held;  // unnumbered yet; while nothing was emitted
        PendingRange last;               // the last range held or emitted
        ThreadNesting nesting;
        WithdrawnRanges emitted;
    };
    FinalOrder final_order_;
};

}  // namespace ember::importing
