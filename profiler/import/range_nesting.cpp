// range_nesting.cpp: sort (in memory, or external merge sort over spilled runs),
// then one stack per thread.
#include "profiler/import/range_nesting.h"

#include "profiler/store/trace_error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <queue>
#include <tuple>
#include <type_traits>

namespace ember::importing {

static_assert(std::is_trivially_copyable_v<PendingRange>, "spilled to files as raw bytes");

namespace {

// Thread, then start, then the longer range first (so a parent precedes the children
// that start with it), then arrival.
bool nests_before(const PendingRange& a, const PendingRange& b) {
    return std::tie(a.thread_id, a.start_ns, b.end_ns, a.arrival) <
           std::tie(b.thread_id, b.start_ns, a.end_ns, b.arrival);
}

[[noreturn]] void throw_spill_error(const std::string& path, const char* what) {
    throw store::TraceError(store::TraceErrorKind::io, path,
                            fmt::format("{} a temporary file of host ranges: {}", what, std::strerror(errno)));
}

// Reads one sorted run back in blocks.
class RunReader {
  public:
    explicit RunReader(const std::string& path) : path_(path) {
        file_ = std::fopen(path.c_str(), "rb");
        if (file_ == nullptr) throw_spill_error(path, "cannot open");
        block_.resize(4096);
    }
    ~RunReader() {
        if (file_ != nullptr) std::fclose(file_);
    }
    RunReader(const RunReader&) = delete;
    RunReader& operator=(const RunReader&) = delete;

    // The current range, or nullptr at the end.
    const PendingRange* current() {
        if (next_ == count_) {
            count_ = std::fread(block_.data(), sizeof(PendingRange), block_.size(), file_);
            next_ = 0;
            if (count_ == 0) {
                if (std::ferror(file_)) throw_spill_error(path_, "cannot read");
                return nullptr;
            }
        }
        return &block_[next_];
    }
    void advance() { ++next_; }

  private:
    std::string path_;
    std::FILE* file_ = nullptr;
    std::vector<PendingRange> block_;
    std::size_t count_ = 0;
    std::size_t next_ = 0;
};

// Assigns depth and parent from the sorted stream.
class StackSweep {
  public:
    StackSweep(const RangeNester::NextRangeId& next_range_id, const RangeNester::Emit& emit)
        : next_range_id_(next_range_id), emit_(emit) {}

    void visit(const PendingRange& range) {
        if (!started_ || range.thread_id != thread_) {
            not_nested_ += nesting_.not_nested();
            nesting_ = ThreadNesting();
            thread_ = range.thread_id;
            started_ = true;
        }
        emit_(nesting_.nest(range, next_range_id_()));
    }
    std::int64_t not_nested() const { return not_nested_ + nesting_.not_nested(); }

  private:
    const RangeNester::NextRangeId& next_range_id_;
    const RangeNester::Emit& emit_;
    trace::ThreadId thread_ = 0;
    bool started_ = false;
    ThreadNesting nesting_;
    std::int64_t not_nested_ = 0;
};

}  // namespace

PendingRange pending_range_of(const trace::RangeEvent& range) {
    PendingRange pending;
    pending.start_ns = range.start_ns;
    pending.end_ns = range.end_ns;
    pending.thread_id = range.thread_id;
    pending.domain_id = range.domain_id;
    pending.name_id = range.name_id;
    pending.category = range.category;
    pending.color = range.color;
    pending.payload_kind = range.payload.kind;
    pending.payload_integer = range.payload.integer;
    pending.payload_real = range.payload.real;
    return pending;
}

trace::RangeEvent range_event_of(const PendingRange& range) {
    trace::RangeEvent event;
    event.start_ns = range.start_ns;
    event.end_ns = range.end_ns;
    event.thread_id = range.thread_id;
    event.domain_id = range.domain_id;
    event.name_id = range.name_id;
    event.category = range.category;
    event.color = range.color;
    event.payload.kind = range.payload_kind;
    event.payload.integer = range.payload_integer;
    event.payload.real = range.payload_real;
    return event;
}

trace::RangeEvent ThreadNesting::nest(const PendingRange& range, trace::RangeId id) {
    while (!open_.empty() && open_.back().end_ns <= range.start_ns) open_.pop_back();
    // A range that starts inside another but outlives it breaks push/pop nesting (a
    // Python tracer's record_function call that opens ProfilerStep#N): it goes under
    // the nearest range that contains it whole, and is counted. The ranges it
    // outlives take no more children.
    if (!open_.empty() && open_.back().end_ns < range.end_ns) {
        ++not_nested_;
        while (!open_.empty() && open_.back().end_ns < range.end_ns) open_.pop_back();
    }
    trace::RangeEvent event = range_event_of(range);
    event.range_id = id;
    event.depth = static_cast<std::int32_t>(open_.size());
    event.parent_range_id = open_.empty() ? 0 : open_.back().id;
    open_.push_back({range.end_ns, id});
    return event;
}

RangeNester::RangeNester(std::string spill_prefix, std::size_t memory_bytes)
    : spill_prefix_(std::move(spill_prefix)),
      max_buffered_(std::max<std::size_t>(memory_bytes / sizeof(PendingRange), 1024)) {}

RangeNester::~RangeNester() {
    remove_spill_files();
}

void RangeNester::emit_while_in_order(NextRangeId next_range_id, Emit emit) {
    early_next_id_ = std::move(next_range_id);
    early_emit_ = std::move(emit);
}

void RangeNester::emit_while_in_final_order(NextRangeId next_range_id, Emit emit) {
    early_next_id_ = std::move(next_range_id);
    early_emit_ = std::move(emit);
    final_order_.on = true;
    final_order_.hold = std::min(kHeldInFinalOrder, max_buffered_);
}

void RangeNester::add(const PendingRange& range) {
    PendingRange arrived = range;
    arrived.arrival = added_++;
    // Emitted at once: kept nowhere else (renest_withdrawn() or renest_all() reads it
    // back if need be).
    if (final_order_.on) {
        if (emit_in_final_order(arrived)) return;
    } else if (early_emit_ && emit_early(arrived)) {
        return;
    }
    collect(arrived);
}

void RangeNester::collect(const PendingRange& range) {
    if (buffer_.size() >= max_buffered_) spill();
    buffer_.push_back(range);
}

// In nesting order means after the thread's previous range by nests_before: a later
// start, or the same start and no longer (arrival breaks the remaining ties).
bool RangeNester::emit_early(const PendingRange& range) {
    if (early_cached_ == nullptr || early_cached_thread_ != range.thread_id) {
        early_cached_ = &early_[range.thread_id];  // unordered_map: the address stays valid
        early_cached_thread_ = range.thread_id;
    }
    EarlyThread& thread = *early_cached_;
    if (!thread.in_order) return false;
    if (thread.emitted.count > 0 && (range.start_ns < thread.last_start ||
                                     (range.start_ns == thread.last_start && range.end_ns > thread.last_end))) {
        thread.in_order = false;  // renest_withdrawn() nests all of it; what was emitted is withdrawn
        return false;
    }
    const trace::RangeId id = early_next_id_();
    early_emit_(thread.nesting.nest(range, id));
    thread.last_start = range.start_ns;
    thread.last_end = range.end_ns;
    if (thread.emitted.count == 0) {
        thread.emitted.thread_id = range.thread_id;
        thread.emitted.first = id;
    }
    thread.emitted.last = id;
    ++thread.emitted.count;
    return true;
}

// Where finish() would put it: after the last range taken by nests_before, and on its
// thread (a range of a thread sorted later waits for finish(), as finish() would emit
// it after all of this thread's). Ids come from the same counter finish() uses, in the
// same order, so they are the ones it would give.
bool RangeNester::emit_in_final_order(const PendingRange& range) {
    FinalOrder& order = final_order_;
    if (order.withdrawn) return false;
    if (order.emitted.count > 0 || !order.held.empty()) {
        if (nests_before(range, order.last)) {
            // Nested at the end after all: those held join the others; those emitted
            // are nested again by renest_all(). This one is collected by the caller.
            order.withdrawn = true;
            for (const PendingRange& held : order.held) collect(held);
            std::vector<PendingRange>().swap(order.held);
            return false;
        }
        if (range.thread_id != order.last.thread_id) return false;
    }
    order.last = range;
    if (order.emitted.count == 0 && order.held.size() < order.hold) {
        order.held.push_back(range);
        return true;
    }
    emit_held();
    emit_numbered(range);
    return true;
}

void RangeNester::emit_held() {
    for (const PendingRange& range : final_order_.held) emit_numbered(range);
    std::vector<PendingRange>().swap(final_order_.held);
}

void RangeNester::emit_numbered(const PendingRange& range) {
    FinalOrder& order = final_order_;
    const trace::RangeId id = early_next_id_();
    early_emit_(order.nesting.nest(range, id));
    if (order.emitted.count == 0) {
        order.emitted.thread_id = range.thread_id;
        order.emitted.first = id;
    }
    order.emitted.last = id;
    ++order.emitted.count;
}

void RangeNester::spill() {
    std::sort(buffer_.begin(), buffer_.end(), nests_before);
    std::string path = fmt::format("{}.{}", spill_prefix_, runs_.size());
    runs_.push_back(path);
    std::FILE* file = std::fopen(path.c_str(), "wb");
    if (file == nullptr) throw_spill_error(path, "cannot create");
    std::size_t written = std::fwrite(buffer_.data(), sizeof(PendingRange), buffer_.size(), file);
    bool closed = std::fclose(file) == 0;
    if (written != buffer_.size() || !closed) throw_spill_error(path, "cannot write");
    buffer_.clear();
}

void RangeNester::remove_spill_files() {
    for (const std::string& path : runs_) std::remove(path.c_str());
    runs_.clear();
}

void RangeNester::for_each_sorted(const std::function<void(const PendingRange&)>& visit) {
    if (runs_.empty()) {
        std::sort(buffer_.begin(), buffer_.end(), nests_before);
        for (const PendingRange& range : buffer_) visit(range);
        std::vector<PendingRange>().swap(buffer_);
        return;
    }
    if (!buffer_.empty()) spill();
    std::vector<PendingRange>().swap(buffer_);
    // k-way merge of the sorted runs.
    std::vector<std::unique_ptr<RunReader>> readers;
    for (const std::string& path : runs_) readers.push_back(std::make_unique<RunReader>(path));
    auto later = [&](std::size_t a, std::size_t b) {
        return nests_before(*readers[b]->current(), *readers[a]->current());
    };
    std::priority_queue<std::size_t, std::vector<std::size_t>, decltype(later)> heap(later);
    for (std::size_t i = 0; i < readers.size(); ++i) {
        if (readers[i]->current() != nullptr) heap.push(i);
    }
    while (!heap.empty()) {
        std::size_t i = heap.top();
        heap.pop();
        visit(*readers[i]->current());
        readers[i]->advance();
        if (readers[i]->current() != nullptr) heap.push(i);
    }
    readers.clear();
    remove_spill_files();
}

std::int64_t RangeNester::finish(const NextRangeId& next_range_id, const Emit& emit) {
    if (final_order_.on) {
        if (early_withdrawn()) return 0;  // renest_all() does it all
        // Every range collected sorts after those held and emitted (it is of a later
        // thread), unless they were withdrawn before any was emitted: then it is the
        // nesting at the end alone.
        if (!final_order_.withdrawn) emit_held();
        StackSweep sweep(next_range_id, emit);
        for_each_sorted([&](const PendingRange& range) { sweep.visit(range); });
        return final_order_.nesting.not_nested() + sweep.not_nested();
    }
    if (early_emit_) {
        // The buffer holds the ranges of withdrawn threads alone, from the one that came
        // out of order on: renest_withdrawn() nests them with the early ones.
        std::int64_t not_nested = 0;
        for (const auto& [thread, early] : early_) {
            if (early.in_order) {
                not_nested += early.nesting.not_nested();
            } else {
                withdrawn_.push_back(early.emitted);
            }
        }
        std::sort(withdrawn_.begin(), withdrawn_.end(),
                  [](const WithdrawnRanges& a, const WithdrawnRanges& b) { return a.thread_id < b.thread_id; });
        return not_nested;
    }
    StackSweep sweep(next_range_id, emit);
    for_each_sorted([&](const PendingRange& range) { sweep.visit(range); });
    return sweep.not_nested();
}

// Each withdrawn thread's early ranges came in nesting order and before any of its
// buffered ones: numbered 0, 1, ... as their arrival, they merge with the sorted
// buffered ranges (whose arrival numbers are larger) by nests_before.
std::int64_t RangeNester::renest_withdrawn(const EarlyRanges& early_of, const NextRangeId& next_range_id,
                                           const Emit& emit) {
    std::int64_t not_nested = 0;
    ThreadNesting nesting;
    trace::ThreadId thread = 0;
    bool started = false;
    std::function<bool(PendingRange&)> next_early;
    PendingRange early;
    bool has_early = false;
    std::uint64_t early_arrival = 0;
    auto pull = [&] {
        has_early = next_early && next_early(early);
        early.thread_id = thread;
        early.arrival = early_arrival++;
    };
    auto emit_early_ones_before = [&](const PendingRange* range) {
        while (has_early && (range == nullptr || nests_before(early, *range))) {
            emit(nesting.nest(early, next_range_id()));
            pull();
        }
    };
    for_each_sorted([&](const PendingRange& range) {
        if (!started || range.thread_id != thread) {
            emit_early_ones_before(nullptr);
            not_nested += nesting.not_nested();
            nesting = ThreadNesting();
            thread = range.thread_id;
            started = true;
            auto withdrawn =
                std::lower_bound(withdrawn_.begin(), withdrawn_.end(), thread,
                                 [](const WithdrawnRanges& w, trace::ThreadId t) { return w.thread_id < t; });
            next_early = withdrawn != withdrawn_.end() && withdrawn->thread_id == thread
                             ? early_of(*withdrawn)
                             : std::function<bool(PendingRange&)>();
            early_arrival = 0;
            pull();
        }
        emit_early_ones_before(&range);
        emit(nesting.nest(range, next_range_id()));
    });
    emit_early_ones_before(nullptr);
    return not_nested + nesting.not_nested();
}

// The early ranges came in nesting order and before any collected range of their
// thread: numbered 0, 1, ... as their arrival, they sort with the collected ones (whose
// arrival numbers are larger) where they arrived.
void RangeNester::take_back_early(const std::function<bool(PendingRange&)>& early) {
    PendingRange range;
    std::uint64_t arrival = 0;
    while (early(range)) {
        range.thread_id = final_order_.emitted.thread_id;
        range.arrival = arrival++;
        collect(range);
    }
}

std::int64_t RangeNester::renest_all(const NextRangeId& next_range_id, const Emit& emit) {
    StackSweep sweep(next_range_id, emit);
    for_each_sorted([&](const PendingRange& range) { sweep.visit(range); });
    return sweep.not_nested();
}

}  // namespace ember::importing
