// reader.h: TraceReader, the one way anything reads an ember trace file.
//
// Opening validates the file (SQLite header, application id, schema version,
// required tables) and throws TraceError naming the file and, for version
// problems, both versions. Small tables (strings, threads, devices, streams,
// counters, launch configs) are loaded at open; event tables are never loaded
// whole: for_each_*() streams rows in start-time order through a callback, so a
// 10^8-event trace reads in bounded memory.
//
// Queries by track and time window use the (track, start) indexes and the
// per-track longest duration in track_stats: "events of track T overlapping
// [t0, t1)" costs O(log n + answer). A trace whose writer was killed has no
// indexes and no track_stats: every query still answers (by scanning; track
// stats are recomputed at open), and build_missing_indexes() repairs it.
//
// A reader is used from one thread at a time.
#pragma once

#include "profiler/store/trace_error.h"
#include "profiler/trace/events.h"

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ember::store {

class Statement;
class TableSql;

struct ReaderOptions {
    // Open read-write and build the indexes a killed writer never built (changes
    // the file). Without it the file is opened read-only.
    bool build_missing_indexes = false;
};

// Which events a for_each_*() visits: those on `track` (all tracks when empty)
// that overlap [begin_ns, end_ns) — an interval event overlaps when
// start < end_ns and end > begin_ns; an instant when begin_ns <= time < end_ns —
// and, for a file still being written, that were stored after_rowid < rowid <=
// upto_rowid (the writer only appends, so a table's rowids only grow: the rows above
// the highest rowid seen at an earlier read are exactly the new ones).
struct EventQuery {
    std::optional<std::uint32_t> track;  // StreamId, ThreadId or CounterId by table
    trace::TimeNs begin_ns = std::numeric_limits<trace::TimeNs>::min();
    trace::TimeNs end_ns = std::numeric_limits<trace::TimeNs>::max();
    std::int64_t after_rowid = 0;
    std::int64_t upto_rowid = std::numeric_limits<std::int64_t>::max();
    bool rowid_bounded() const { return after_rowid > 0 || upto_rowid < std::numeric_limits<std::int64_t>::max(); }
};

// One lane's summary: which table, which track, how many events, when.
struct TrackSummary {
    std::string event_table;  // "kernels", "ranges", ...
    trace::Track track;
    std::int64_t event_count = 0;
    trace::TimeNs first_start_ns = 0;
    trace::TimeNs last_end_ns = 0;
    trace::TimeNs max_duration_ns = 0;
};

// A visitor returns true to continue, false to stop early.
template <typename Event>
using Visitor = std::function<bool(const Event&)>;

// A name given to an NVTX category (nvtxNameCategory, nvtxDomainNameCategory).
struct NvtxCategoryName {
    trace::StringId domain_id = trace::kNoString;  // kNoString: the default domain
    std::uint32_t category = 0;
    std::string name;
};

class TraceReader {
  public:
    // Throws TraceError: not_found, not_a_trace, truncated, corrupt,
    // version_too_new, version_too_old, missing_table.
    explicit TraceReader(const std::string& path, ReaderOptions options = {});
    ~TraceReader();
    TraceReader(const TraceReader&) = delete;
    TraceReader& operator=(const TraceReader&) = delete;

    const std::string& path() const;

    // --- Metadata -------------------------------------------------------------------
    const trace::RunInfo& run() const;
    int schema_version() const;      // of the file
    int min_reader_version() const;  // of the file
    bool complete() const;           // closed cleanly (status "complete")
    bool has_indexes() const;        // all declared indexes (tables.h) present
    // Any run_metadata value by key (RunInfo's and the extra ones writers set, e.g.
    // "cpu_sample_period_ns"); nullopt when the file has no such key.
    std::optional<std::string> metadata(std::string_view key) const;

    // --- Small tables (loaded at open) ------------------------------------------------
    const std::vector<trace::ProcessInfo>& processes() const;
    const std::vector<trace::ThreadInfo>& threads() const;
    const std::vector<trace::DeviceInfo>& devices() const;
    const std::vector<trace::StreamInfo>& streams() const;
    const std::vector<trace::CounterInfo>& counters() const;
    // nullptr when unknown.
    const trace::ThreadInfo* thread(trace::ThreadId id) const;
    const trace::StreamInfo* stream(trace::StreamId id) const;
    const trace::DeviceInfo* device(trace::DeviceId id) const;
    const trace::CounterInfo* counter(trace::CounterId id) const;

    // The text of an interned string; "" for kNoString. Throws TraceError
    // (bad_value) for an id the file does not hold.
    std::string_view string(trace::StringId id) const;
    std::optional<trace::StringId> find_string(std::string_view text) const;
    std::size_t string_count() const;

    trace::LaunchConfig launch_config(trace::LaunchConfigId id) const;

    // Named NVTX categories, by domain then category; empty for a file written
    // before the nvtx_categories table existed.
    const std::vector<NvtxCategoryName>& nvtx_category_names() const;
    // The name of `category` in the domain `domain_id`; "" when it has none.
    std::string_view nvtx_category_name(trace::StringId domain_id, std::uint32_t category) const;

    // Call stacks: frames of a stack node, outermost first.
    std::vector<trace::FrameInfo> stack_frames(trace::StackId stack) const;

    // Every row of dropped_records, and their sum.
    std::vector<trace::DroppedRecords> dropped_records() const;
    std::uint64_t total_dropped() const;
    // Every row of collective_calls (Kineto's collective metadata), by start; empty for
    // a file older than schema version 4.
    std::vector<trace::CollectiveCall> collective_calls() const;
    // GPU memory (schema 5; none in older files): allocator events by device, then time,
    // then the order they were recorded in; `device` limits them to one device. Returns
    // the number visited.
    std::int64_t for_each_memory_event(const Visitor<trace::MemoryEvent>& visit,
                                       std::optional<trace::DeviceId> device = std::nullopt) const;
    std::int64_t memory_event_count() const;
    // The devices with memory events and how many each has, by device.
    std::vector<std::pair<trace::DeviceId, std::int64_t>> memory_event_devices() const;
    // The allocator state's blocks, by device, segment address, then address.
    std::vector<trace::MemoryBlock> memory_blocks() const;

    // Per-lane summaries (one per event table and track holding events).
    const std::vector<TrackSummary>& tracks() const;
    // Row count of one event table ("kernels", ...). Throws for an unknown name.
    std::int64_t event_count(std::string_view table) const;

    // --- Events, streamed in start-time order ------------------------------------------
    // Track of each: kernels/memcpys/memsets/syncs -> StreamId; api calls, ranges,
    // marks, stack samples, overhead -> ThreadId; counter samples -> CounterId.
    // Returns the number of events visited.
    std::int64_t for_each_kernel(const EventQuery& query, const Visitor<trace::KernelEvent>& visit) const;
    std::int64_t for_each_memcpy(const EventQuery& query, const Visitor<trace::MemcpyEvent>& visit) const;
    std::int64_t for_each_memset(const EventQuery& query, const Visitor<trace::MemsetEvent>& visit) const;
    std::int64_t for_each_sync(const EventQuery& query, const Visitor<trace::SyncEvent>& visit) const;
    std::int64_t for_each_api_call(const EventQuery& query, const Visitor<trace::ApiEvent>& visit) const;
    std::int64_t for_each_range(const EventQuery& query, const Visitor<trace::RangeEvent>& visit) const;
    std::int64_t for_each_mark(const EventQuery& query, const Visitor<trace::MarkEvent>& visit) const;
    std::int64_t for_each_counter_sample(const EventQuery& query, const Visitor<trace::CounterSample>& visit) const;
    std::int64_t for_each_stack_sample(const EventQuery& query, const Visitor<trace::StackSample>& visit) const;
    std::int64_t for_each_overhead(const EventQuery& query, const Visitor<trace::OverheadEvent>& visit) const;
    // The same for code written once for every kind: for_each<trace::KernelEvent>(...).
    template <typename Event>
    std::int64_t for_each(const EventQuery& query, const Visitor<Event>& visit) const;

    // --- Flows: API call <-> GPU work by correlation id ----------------------------------
    std::vector<trace::KernelEvent> kernels_by_correlation(trace::CorrelationId id) const;
    std::vector<trace::MemcpyEvent> memcpys_by_correlation(trace::CorrelationId id) const;
    std::vector<trace::MemsetEvent> memsets_by_correlation(trace::CorrelationId id) const;
    std::optional<trace::ApiEvent> api_call_by_correlation(trace::CorrelationId id) const;

    std::optional<trace::RangeEvent> range(trace::RangeId id) const;
    // The ranges named one of `names` (on every thread), by start then range_id.
    std::int64_t for_each_range_named(std::span<const trace::StringId> names,
                                      const Visitor<trace::RangeEvent>& visit) const;
    // Direct children of a range (parent_range_id == id), in start order.
    std::vector<trace::RangeEvent> child_ranges(trace::RangeId id) const;

    // Adds missing indexes and track_stats (opens the file read-write for it).
    void build_missing_indexes();

    // --- A file still being written ------------------------------------------------------
    // While a Snapshot lives, every query of this reader sees the file as it was when the
    // snapshot began (one SQLite read transaction), so rowid marks, counts and rows of
    // different tables agree. It ends when destroyed; at most one at a time per reader.
    class Snapshot {
      public:
        Snapshot(Snapshot&& other) noexcept : reader_(other.reader_) { other.reader_ = nullptr; }
        Snapshot& operator=(Snapshot&&) = delete;
        Snapshot(const Snapshot&) = delete;
        ~Snapshot();

      private:
        friend class TraceReader;
        explicit Snapshot(const TraceReader& reader);
        const TraceReader* reader_;
    };
    [[nodiscard]] Snapshot snapshot() const;
    // The highest rowid of every event table, in kEventTables order (0 for an empty
    // table): the rows stored after a read are exactly those above these marks.
    std::vector<std::int64_t> highest_rowids() const;
    // Reads the small tables again (strings, processes, threads, devices, streams,
    // counters, category names, launch configs) to see rows a writer added after open.
    // References and string views returned by the accessors before it are invalid after.
    void reload_small_tables();
    // Every interned string whose id is at least `first`, by id.
    std::vector<std::pair<trace::StringId, std::string>> strings_from(trace::StringId first) const;

    struct Impl;  // reader.cpp and its helpers

  private:
    // store::query() (table_sql.h) is the one way to run SQL of one's own on the file.
    friend Statement query(const TraceReader& reader, TableSql sql);
    std::unique_ptr<Impl> impl_;
};

template <>
inline std::int64_t TraceReader::for_each(const EventQuery& q, const Visitor<trace::KernelEvent>& v) const {
    return for_each_kernel(q, v);
}
template <>
inline std::int64_t TraceReader::for_each(const EventQuery& q, const Visitor<trace::MemcpyEvent>& v) const {
    return for_each_memcpy(q, v);
}
template <>
inline std::int64_t TraceReader::for_each(const EventQuery& q, const Visitor<trace::MemsetEvent>& v) const {
    return for_each_memset(q, v);
}
template <>
inline std::int64_t TraceReader::for_each(const EventQuery& q, const Visitor<trace::SyncEvent>& v) const {
    return for_each_sync(q, v);
}
template <>
inline std::int64_t TraceReader::for_each(const EventQuery& q, const Visitor<trace::ApiEvent>& v) const {
    return for_each_api_call(q, v);
}
template <>
inline std::int64_t TraceReader::for_each(const EventQuery& q, const Visitor<trace::RangeEvent>& v) const {
    return for_each_range(q, v);
}
template <>
inline std::int64_t TraceReader::for_each(const EventQuery& q, const Visitor<trace::MarkEvent>& v) const {
    return for_each_mark(q, v);
}
template <>
inline std::int64_t TraceReader::for_each(const EventQuery& q, const Visitor<trace::CounterSample>& v) const {
    return for_each_counter_sample(q, v);
}
template <>
inline std::int64_t TraceReader::for_each(const EventQuery& q, const Visitor<trace::StackSample>& v) const {
    return for_each_stack_sample(q, v);
}
template <>
inline std::int64_t TraceReader::for_each(const EventQuery& q, const Visitor<trace::OverheadEvent>& v) const {
    return for_each_overhead(q, v);
}

}  // namespace ember::store
