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
    return std::tie(a.thread_id, a.start_ns, b.end_ns, a.arrival) < std::tie(b.thread_id, b.start_ns, a.end_ns, b.arrival);
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
    StackSweep(const std::function<trace::RangeId()>& next_range_id,
               const std::function<void(const trace::RangeEvent&)>& emit)
        : next_range_id_(next_range_id), emit_(emit) {}

    void visit(const PendingRange& range) {
        if (range.thread_id != thread_) {
            open_.clear();
            thread_ = range.thread_id;
        }
        while (!open_.empty() && open_.back().end_ns <= range.start_ns) open_.pop_back();
        // A range that starts inside another but outlives it breaks push/pop nesting (a
        // Python tracer's record_function call that opens ProfilerStep#N): it goes under
        // the nearest range that contains it whole, and is counted. The ranges it
        // outlives take no more children.
        if (!open_.empty() && open_.back().end_ns < range.end_ns) {
            ++not_nested_;
            while (!open_.empty() && open_.back().end_ns < range.end_ns) open_.pop_back();
        }
        trace::RangeEvent event;
        event.range_id = next_range_id_();
        event.start_ns = range.start_ns;
        event.end_ns = range.end_ns;
        event.thread_id = range.thread_id;
        event.domain_id = range.domain_id;
        event.name_id = range.name_id;
        event.category = range.category;
        event.color = range.color;
        event.depth = static_cast<std::int32_t>(open_.size());
        event.parent_range_id = open_.empty() ? 0 : open_.back().id;
        event.payload.kind = range.payload_kind;
        event.payload.integer = range.payload_integer;
        event.payload.real = range.payload_real;
        emit_(event);
        open_.push_back({range.end_ns, event.range_id});
    }
    std::int64_t not_nested() const { return not_nested_; }

private:
    struct Open {
        trace::TimeNs end_ns;
        trace::RangeId id;
    };
    const std::function<trace::RangeId()>& next_range_id_;
    const std::function<void(const trace::RangeEvent&)>& emit_;
    trace::ThreadId thread_ = 0;
    std::vector<Open> open_;
    std::int64_t not_nested_ = 0;
};

}  // namespace

RangeNester::RangeNester(std::string spill_prefix, std::size_t memory_bytes)
    : spill_prefix_(std::move(spill_prefix)),
      max_buffered_(std::max<std::size_t>(memory_bytes / sizeof(PendingRange), 1024)) {}

RangeNester::~RangeNester() { remove_spill_files(); }

void RangeNester::add(const PendingRange& range) {
    if (buffer_.size() >= max_buffered_) spill();
    buffer_.push_back(range);
    buffer_.back().arrival = added_++;
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

std::int64_t RangeNester::finish(const std::function<trace::RangeId()>& next_range_id,
                                 const std::function<void(const trace::RangeEvent&)>& emit) {
    StackSweep sweep(next_range_id, emit);
    if (runs_.empty()) {
        std::sort(buffer_.begin(), buffer_.end(), nests_before);
        for (const PendingRange& range : buffer_) sweep.visit(range);
        std::vector<PendingRange>().swap(buffer_);
        return sweep.not_nested();
    }
    if (!buffer_.empty()) spill();
    std::vector<PendingRange>().swap(buffer_);
    // k-way merge of the sorted runs.
    std::vector<std::unique_ptr<RunReader>> readers;
    for (const std::string& path : runs_) readers.push_back(std::make_unique<RunReader>(path));
    auto later = [&](std::size_t a, std::size_t b) { return nests_before(*readers[b]->current(), *readers[a]->current()); };
    std::priority_queue<std::size_t, std::vector<std::size_t>, decltype(later)> heap(later);
    for (std::size_t i = 0; i < readers.size(); ++i) {
        if (readers[i]->current() != nullptr) heap.push(i);
    }
    while (!heap.empty()) {
        std::size_t i = heap.top();
        heap.pop();
        sweep.visit(*readers[i]->current());
        readers[i]->advance();
        if (readers[i]->current() != nullptr) heap.push(i);
    }
    readers.clear();
    remove_spill_files();
    return sweep.not_nested();
}

}  // namespace ember::importing
