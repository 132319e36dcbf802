// writer.cpp: TraceWriter — producer rings, the writer thread and its SQLite
// transactions. See writer.h for the design and docs/trace-schema.md for the file.
#include "profiler/store/writer.h"
#include "common/os.h"

#include "ember/version.h"
#include "profiler/store/batch_inserter.h"
#include "profiler/store/event_ring.h"
#include "profiler/store/schema.h"
#include "profiler/store/sqlite_util.h"
#include "profiler/store/tables.h"
#include "profiler/store/trace_files.h"
#include "profiler/store/writer_hooks.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <ctime>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace ember::store {

using namespace ember::trace;

namespace {

constexpr int kRowsPerStatement = 32;
// Records taken from one ring before looking at the others and at the clock
// (~1 ms of work: keeps commits on time even when the CPU is shared).
constexpr std::uint64_t kDrainChunk = 2048;
constexpr auto kIdleWait = std::chrono::milliseconds(2);
constexpr auto kMaxCommitInterval = std::chrono::milliseconds(250);

std::atomic<std::uint64_t> g_next_writer_serial{1};

struct LaunchConfigHash {
    std::size_t operator()(const LaunchConfig& c) const {
        std::uint64_t h = 1469598103934665603ull;
        for (std::uint32_t v : {c.grid_x, c.grid_y, c.grid_z, c.block_x, c.block_y, c.block_z, c.registers_per_thread,
                                c.static_shared_bytes, c.dynamic_shared_bytes}) {
            h = (h ^ v) * 1099511628211ull;
        }
        return static_cast<std::size_t>(h);
    }
};

struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};

// Rows registered by any thread, written by the writer thread at its next pass.
struct PendingRows {
    std::vector<std::pair<StringId, std::string>> strings;
    std::vector<ProcessInfo> processes;
    std::vector<ThreadInfo> threads;
    std::vector<DeviceInfo> devices;
    std::vector<StreamInfo> streams;
    std::vector<CounterInfo> counters;
    std::vector<FrameRow> frames;
    std::vector<StackRow> stacks;
    std::vector<std::pair<std::string, std::string>> metadata;                     // key, value (text)
    std::vector<std::pair<StreamId, std::string>> stream_names;                    // renames of registered streams
    std::vector<std::tuple<StringId, std::uint32_t, std::string>> category_names;  // domain, category, name
    bool empty() const {
        return strings.empty() && processes.empty() && threads.empty() && devices.empty() && streams.empty() &&
               counters.empty() && frames.empty() && stacks.empty() && metadata.empty() && stream_names.empty() &&
               category_names.empty();
    }
};

// track_stats kept as events arrive (Tracy keeps its statistics the same way), so
// close() need not scan every table again. Indexed by kEventTables position.
struct TrackStatsAccumulator {
    struct Stats {
        std::int64_t count = 0;
        TimeNs first_start = std::numeric_limits<TimeNs>::max();
        TimeNs last_end = std::numeric_limits<TimeNs>::min();
        TimeNs max_duration = 0;
        TimeNs last_start = std::numeric_limits<TimeNs>::min();  // of the latest event
    };
    std::unordered_map<std::uint64_t, Stats> by_table_and_track;  // (table << 32) | track
    std::uint64_t cached_key = ~0ull;
    Stats* cached = nullptr;

    // True when the event starts no earlier than the track's previous one (its
    // (track, start) index entry goes at the end of the track's part).
    bool add(std::uint32_t table, std::uint32_t track, TimeNs start, TimeNs end) {
        std::uint64_t key = (static_cast<std::uint64_t>(table) << 32) | track;
        if (key != cached_key) {  // events of one track arrive in runs
            cached = &by_table_and_track[key];
            cached_key = key;
        }
        Stats& stats = *cached;
        ++stats.count;
        stats.first_start = std::min(stats.first_start, start);
        stats.last_end = std::max(stats.last_end, end);
        stats.max_duration = std::max(stats.max_duration, end - start);
        const bool in_order = start >= stats.last_start;
        stats.last_start = start;
        return in_order;
    }
};

// How the rows of one event table arrive, for WriterOptions::index_while_writing.
struct IndexOrder {
    std::uint64_t rows = 0;
    std::uint64_t disordered = 0;  // before the track's previous start, or a correlation id below the last
    CorrelationId last_correlation = 0;
    bool indexed = false;  // its indexes exist and take each row as it is inserted
};
// A table is judged once it has this many rows; more than 1/kDisorderShare of them
// out of order drops its indexes.
constexpr std::uint64_t kRowsBeforeJudgingOrder = 65'536;
constexpr std::uint64_t kDisorderShare = 8;

// Positions in kEventTables (schema.h), checked below.
enum EventTableIndex : std::uint32_t {
    kKernelsTable,
    kMemcpysTable,
    kMemsetsTable,
    kSynchronizationsTable,
    kApiCallsTable,
    kRangesTable,
    kMarksTable,
    kCounterSamplesTable,
    kStackSamplesTable,
    kOverheadTable,
};

}  // namespace

// ---------------------------------------------------------------------------
// [SECTION] Impl
// ---------------------------------------------------------------------------

static_assert(std::string_view(kEventTables[kKernelsTable].name) == "kernels" &&
                  std::string_view(kEventTables[kApiCallsTable].name) == "api_calls" &&
                  std::string_view(kEventTables[kRangesTable].name) == "ranges" &&
                  std::string_view(kEventTables[kOverheadTable].name) == "collector_overhead",
              "EventTableIndex must follow kEventTables");

struct TraceWriter::Impl {
    std::string path;
    RunInfo run;
    WriterOptions options;
    std::uint64_t serial = g_next_writer_serial.fetch_add(1);
    std::uint64_t fork_generation_at_open = 0;  // a forked child leaves the writer alone
    sqlite3* db = nullptr;
    std::thread writer_thread;
    bool open = false;
    bool hooks_registered = false;
    bool signal_hooks = false;

    // Registration (any thread).
    std::mutex registration_mutex;
    std::unordered_map<std::string, StringId, StringHash, std::equal_to<>> string_ids;
    std::unordered_map<std::uint64_t, StackId> stack_ids;  // (parent << 32 | frame) -> node
    StringId next_string_id = 1;
    ThreadId next_thread_id = 1;
    StreamId next_stream_id = 1;
    CounterId next_counter_id = 1;
    FrameId next_frame_id = 1;
    StackId next_stack_id = 1;
    std::vector<ThreadInfo> thread_rows;  // for renames
    PendingRows pending;
    std::atomic<bool> pending_nonempty{false};
    std::atomic<RangeId> next_range = 1;
    std::atomic<TimeNs> explicit_end_ns{0};

    // Producer rings.
    std::mutex rings_mutex;
    std::mutex space_mutex;  // producers waiting for a ring to drain (block policy)
    std::condition_variable space_available;
    std::atomic<int> producers_waiting{0};
    std::vector<std::shared_ptr<EventRing>> rings;
    std::atomic<std::uint64_t> rings_version{0};
    std::atomic<std::uint64_t> rings_created{0};
    std::uint64_t dropped_by_retired_rings = 0;  // writer thread

    // Writer thread control.
    std::mutex control_mutex;
    std::condition_variable wake_writer;
    std::condition_variable flush_done;
    std::atomic<bool> stop_requested{false};
    std::atomic<std::uint64_t> flush_requested{0};
    std::uint64_t flush_completed = 0;  // guarded by control_mutex
    std::string failure;                // guarded by control_mutex
    std::atomic<bool> failed{false};

    // Writer-thread state.
    BatchInserter<KernelRow> kernels;
    BatchInserter<MemcpyEvent> memcpys;
    BatchInserter<MemsetEvent> memsets;
    BatchInserter<SyncEvent> syncs;
    BatchInserter<ApiEvent> api_calls;
    BatchInserter<RangeEvent> ranges;
    BatchInserter<MarkEvent> marks;
    BatchInserter<CounterSample> counter_samples;
    BatchInserter<StackSample> stack_samples;
    BatchInserter<OverheadEvent> overheads;
    BatchInserter<DroppedRecords> dropped_rows;
    BatchInserter<CollectiveCall> collective_calls;
    BatchInserter<MemoryEvent> memory_events;
    BatchInserter<MemoryBlock> memory_blocks;
    Statement insert_string, insert_process, insert_thread, insert_device, insert_stream, insert_counter, insert_frame,
        insert_stack, insert_launch_config, insert_metadata;
    Statement rename_stream, insert_category_name;
    std::unordered_map<LaunchConfig, LaunchConfigId, LaunchConfigHash> launch_config_ids;
    TrackStatsAccumulator track_stats;
    std::array<IndexOrder, std::size(kEventTables)> index_order{};
    std::atomic<std::uint64_t> tables_indexed_at_close{0};
    std::vector<std::shared_ptr<EventRing>> drained_rings;
    std::uint64_t drained_rings_version = std::numeric_limits<std::uint64_t>::max();
    StringId writer_overflow_source = 0;
    TimeNs latest_time = std::numeric_limits<TimeNs>::min();
    bool transaction_open = false;
    bool rows_since_commit = false;
    os::SteadyClock::time_point last_commit;
    std::uint64_t handled_signal_epoch = 0;

    // Stats.
    std::atomic<std::uint64_t> events_written{0};
    std::atomic<std::uint64_t> events_dropped{0};
    std::atomic<std::uint64_t> commits{0};
    std::atomic<double> max_commit_gap_ms{0.0};
    std::atomic<double> writer_cpu_seconds{0.0};

    // --- setup ----------------------------------------------------------------------
    void open_database();
    void write_run_metadata();
    void put_metadata(const MetadataRow& row);
    void prepare_statements();

    // --- registration -----------------------------------------------------------------
    StringId intern_locked(std::string_view text);
    void mark_pending() { pending_nonempty.store(true, std::memory_order_release); }

    // --- producers ----------------------------------------------------------------------
    struct ThreadSlot {
        std::uint64_t writer_serial = 0;
        ThreadId thread_id = 0;
        std::shared_ptr<EventRing> ring;
    };
    struct ThreadSlots {
        std::vector<ThreadSlot> slots;
        std::uint64_t cached_serial = 0;  // the writer this thread recorded to last
        EventRing* cached_ring = nullptr;
        ~ThreadSlots() {
            cached_serial = 0;
            cached_ring = nullptr;
            for (ThreadSlot& slot : slots)
                if (slot.ring) slot.ring->retired.store(true, std::memory_order_release);
        }
    };
    static ThreadSlots& thread_slots() {
        static thread_local ThreadSlots slots;
        return slots;
    }
    // This thread's slot for this writer (created without registering the thread).
    ThreadSlot& slot_for_this_thread();
    ThreadId register_this_thread();
    EventRing* ring_for_this_thread();

    template <typename Event>
    bool push(RecordType type, const Event& event);

    // --- writer thread --------------------------------------------------------------------
    void run_writer_thread();
    void begin_transaction();
    void commit();
    void write_pending_rows();
    std::uint64_t drain_rings(bool everything);
    void dispatch(const Record& record);
    // Every event kind but kernels: note its time and track, queue its row.
    template <typename Event, typename Rows>
    void store_event(const Record& record, EventTableIndex table, Rows& rows);
    void store_kernel(const KernelEvent& kernel);
    void note_time(TimeNs time) { latest_time = std::max(latest_time, time); }
    // Counts the row for index_while_writing: its order on its track and, for a table
    // with a correlation index, its correlation id against the previous one.
    void note_order(EventTableIndex table, bool in_order, CorrelationId correlation);
    void drop_indexes_of_disordered_tables();
    void note_thread_cpu();
    void store_overflow_counts();
    void finish_file();
    void fail(const std::string& message);

    // --- close ----------------------------------------------------------------------------
    void build_indexes_and_track_stats();
    void close();
};

// ---------------------------------------------------------------------------
// [SECTION] Setup
// ---------------------------------------------------------------------------

void TraceWriter::Impl::open_database() {
    std::error_code ignored;
    if (std::filesystem::exists(path, ignored)) {
        if (!options.overwrite)
            throw TraceError(TraceErrorKind::io, path, "file exists (WriterOptions::overwrite is off)");
        remove_trace_files(path);
    }
    // NOMUTEX: only one thread uses the connection at a time (the constructor, then the
    // writer thread, then close()), so SQLite's per-call mutex is pure cost.
    int result =
        sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
    if (result != SQLITE_OK) {
        std::string message =
            std::string("cannot create trace file: ") + (db ? sqlite3_errmsg(db) : sqlite3_errstr(result));
        sqlite3_close(db);
        db = nullptr;
        throw TraceError(TraceErrorKind::not_found, path, message);
    }
    const bool journal = options.journal == WriterOptions::Journal::wal;
    std::string pragmas = std::string("PRAGMA page_size = 8192;") +
                          (journal ? "PRAGMA journal_mode = WAL;"
                                     "PRAGMA synchronous = NORMAL;"
                                     "PRAGMA wal_autocheckpoint = 16384;"
                                   : "PRAGMA journal_mode = OFF;"
                                     "PRAGMA synchronous = OFF;") +
                          "PRAGMA cache_size = -" +
                          std::to_string(std::max<std::int64_t>(options.page_cache_bytes / 1024, 2048)) + ";" +
                          "PRAGMA application_id = " + std::to_string(kApplicationId) + ";" +
                          "PRAGMA user_version = " + std::to_string(kSchemaVersion) + ";";
    exec_sql(db, path, pragmas.c_str());
    exec_sql(db, path, "BEGIN");
    exec_sql(db, path, create_tables_sql().c_str());
    if (options.index_while_writing) {
        exec_sql(db, path, create_indexes_sql().c_str());
        for (IndexOrder& order : index_order) order.indexed = true;
    }
    exec_sql(db, path, "INSERT INTO strings (string_id, value) VALUES (0, '')");
    exec_sql(db, path, "INSERT INTO stacks (stack_id, parent_stack_id, frame_id) VALUES (0, 0, 0)");
    prepare_statements();
    write_run_metadata();
    exec_sql(db, path, "COMMIT");
}

void TraceWriter::Impl::prepare_statements() {
    kernels.prepare(db, path, kRowsPerStatement);
    memcpys.prepare(db, path, kRowsPerStatement);
    memsets.prepare(db, path, kRowsPerStatement);
    syncs.prepare(db, path, kRowsPerStatement);
    api_calls.prepare(db, path, kRowsPerStatement);
    ranges.prepare(db, path, kRowsPerStatement);
    marks.prepare(db, path, kRowsPerStatement);
    counter_samples.prepare(db, path, kRowsPerStatement);
    stack_samples.prepare(db, path, kRowsPerStatement);
    overheads.prepare(db, path, kRowsPerStatement);
    dropped_rows.prepare(db, path, 1);
    collective_calls.prepare(db, path, kRowsPerStatement / 4);
    memory_events.prepare(db, path, kRowsPerStatement / 2);
    memory_blocks.prepare(db, path, kRowsPerStatement / 4);

    // Registrations of a thread, stream, ... may come again (a rename): the last wins.
    insert_string = Statement(db, path, insert_sql<StringRow>());
    insert_process = Statement(db, path, insert_sql<ProcessRow>("OR REPLACE"));
    insert_thread = Statement(db, path, insert_sql<ThreadRow>("OR REPLACE"));
    insert_device = Statement(db, path, insert_sql<DeviceRow>("OR REPLACE"));
    insert_stream = Statement(db, path, insert_sql<StreamRow>("OR REPLACE"));
    insert_counter = Statement(db, path, insert_sql<CounterRow>("OR REPLACE"));
    insert_frame = Statement(db, path, insert_sql<FrameRow>());
    insert_stack = Statement(db, path, insert_sql<StackRow>());
    insert_launch_config = Statement(db, path, insert_sql<LaunchConfigRow>());
    insert_metadata = Statement(db, path, insert_sql<MetadataRow>("OR REPLACE"));
    rename_stream = Statement(db, path, "UPDATE streams SET name_id = ? WHERE stream_id = ?");
    insert_category_name = Statement(db, path, insert_sql<NvtxCategoryRow>("OR REPLACE"));
}

void TraceWriter::Impl::write_run_metadata() {
    for (const MetadataRow& row : run_metadata_rows(run, kSchemaVersion, kMinReaderVersionWritten)) put_metadata(row);
}

void TraceWriter::Impl::put_metadata(const MetadataRow& row) {
    bind_row(insert_metadata, 1, row);
    insert_metadata.step_done();
}

// ---------------------------------------------------------------------------
// [SECTION] Registration
// ---------------------------------------------------------------------------

StringId TraceWriter::Impl::intern_locked(std::string_view text) {
    if (text.empty()) return kNoString;
    auto found = string_ids.find(text);
    if (found != string_ids.end()) return found->second;
    StringId id = next_string_id++;
    string_ids.emplace(std::string(text), id);
    pending.strings.emplace_back(id, std::string(text));
    mark_pending();
    return id;
}

// ---------------------------------------------------------------------------
// [SECTION] Producers
// ---------------------------------------------------------------------------

TraceWriter::Impl::ThreadSlot& TraceWriter::Impl::slot_for_this_thread() {
    ThreadSlots& slots = thread_slots();
    for (ThreadSlot& slot : slots.slots)
        if (slot.writer_serial == serial) return slot;
    // Forget slots of writers that have closed (their rings hold memory).
    std::erase_if(slots.slots, [](const ThreadSlot& slot) {
        return slot.ring && slot.ring->closed.load(std::memory_order_acquire);
    });
    slots.slots.push_back(ThreadSlot{serial, 0, nullptr});
    return slots.slots.back();
}

ThreadId TraceWriter::Impl::register_this_thread() {
    ThreadSlot& slot = slot_for_this_thread();
    if (slot.thread_id != 0) return slot.thread_id;
    ThreadInfo info;
    info.pid = ::getpid();
    info.tid = os::thread_id();
    info.name = os::thread_name();
    ThreadId id;
    {
        std::lock_guard lock(registration_mutex);
        id = next_thread_id++;
        info.thread_id = id;
        info.name = info.name.empty() ? "thread " + std::to_string(info.tid) : info.name;
        thread_rows.push_back(info);
        pending.threads.push_back(info);
        mark_pending();
    }
    slot.thread_id = id;
    if (slot.ring) slot.ring->set_thread_id(id);
    return id;
}

EventRing* TraceWriter::Impl::ring_for_this_thread() {
    ThreadSlots& slots = thread_slots();
    if (slots.cached_serial == serial) return slots.cached_ring;
    ThreadSlot& slot = slot_for_this_thread();
    if (!slot.ring) {
        slot.ring = std::make_shared<EventRing>(options.ring_capacity_events);
        slot.ring->set_thread_id(slot.thread_id);
        std::lock_guard lock(rings_mutex);
        rings.push_back(slot.ring);
        rings_version.fetch_add(1, std::memory_order_release);
        rings_created.fetch_add(1, std::memory_order_relaxed);
    }
    slots.cached_serial = serial;
    slots.cached_ring = slot.ring.get();
    return slots.cached_ring;
}

template <typename Event>
bool TraceWriter::Impl::push(RecordType type, const Event& event) {
    if (fork_generation() != fork_generation_at_open) return false;  // in a forked child
    EventRing* ring = ring_for_this_thread();
    if (ring->closed.load(std::memory_order_relaxed)) return false;
    if (ring->try_push(type, event)) return true;
    if (options.overflow == OverflowPolicy::drop) {
        ring->dropped.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    // Block policy: sleep until the writer has emptied half the ring, so a waiting
    // producer neither spins on the CPU the writer needs nor wakes per event.
    for (;;) {
        {
            std::unique_lock lock(space_mutex);
            producers_waiting.fetch_add(1, std::memory_order_acq_rel);
            wake_writer.notify_one();
            space_available.wait_for(lock, std::chrono::milliseconds(5), [&] {
                return ring->free_space() >= ring->capacity() / 2 || ring->closed.load(std::memory_order_acquire);
            });
            producers_waiting.fetch_sub(1, std::memory_order_acq_rel);
        }
        if (ring->try_push(type, event)) return true;
        if (ring->closed.load(std::memory_order_acquire)) return false;
    }
}

// ---------------------------------------------------------------------------
// [SECTION] Writer thread
// ---------------------------------------------------------------------------

void TraceWriter::Impl::begin_transaction() {
    exec_sql(db, path, "BEGIN");
    transaction_open = true;
}

void TraceWriter::Impl::commit() {
    kernels.finish();
    memcpys.finish();
    memsets.finish();
    syncs.finish();
    api_calls.finish();
    ranges.finish();
    marks.finish();
    counter_samples.finish();
    stack_samples.finish();
    overheads.finish();
    store_overflow_counts();
    dropped_rows.finish();
    collective_calls.finish();
    memory_events.finish();
    memory_blocks.finish();
    exec_sql(db, path, "COMMIT");
    transaction_open = false;
    if (options.index_while_writing) drop_indexes_of_disordered_tables();
    auto now = os::SteadyClock::now();
    double gap_ms = std::chrono::duration<double, std::milli>(now - last_commit).count();
    if (gap_ms > max_commit_gap_ms.load(std::memory_order_relaxed)) max_commit_gap_ms.store(gap_ms);
    last_commit = now;
    rows_since_commit = false;
    commits.fetch_add(1, std::memory_order_relaxed);
    note_thread_cpu();
    begin_transaction();
}

void TraceWriter::Impl::note_thread_cpu() {
    writer_cpu_seconds.store(os::thread_cpu_seconds());
}

void TraceWriter::Impl::store_overflow_counts() {
    for (const std::shared_ptr<EventRing>& ring : drained_rings) {
        std::uint64_t lost = ring->dropped.exchange(0, std::memory_order_acq_rel);
        if (lost == 0) continue;
        if (writer_overflow_source == 0) {
            std::lock_guard lock(registration_mutex);
            writer_overflow_source = intern_locked("writer buffer full");
        }
        write_pending_rows();  // the source string before the row that names it
        DroppedRecords row;
        row.time_ns = latest_time == std::numeric_limits<TimeNs>::min() ? run.start_ns : latest_time;
        row.source_id = writer_overflow_source;
        row.thread_id = ring->thread_id();
        row.count = lost;
        dropped_rows.add(row);
        events_dropped.fetch_add(lost, std::memory_order_relaxed);
        rows_since_commit = true;
    }
}

void TraceWriter::Impl::write_pending_rows() {
    if (!pending_nonempty.load(std::memory_order_acquire)) return;
    PendingRows rows;
    {
        std::lock_guard lock(registration_mutex);
        std::swap(rows, pending);
        pending_nonempty.store(false, std::memory_order_relaxed);
    }
    auto insert = [](Statement& statement, const auto& row) {
        bind_row(statement, 1, row);
        statement.step_done();
    };
    for (const auto& [id, text] : rows.strings) insert(insert_string, StringRow{id, text});
    auto intern_now = [&](const std::string& text) {
        std::lock_guard lock(registration_mutex);
        return intern_locked(text);
    };
    // Names registered along with processes/threads/... were interned by the caller.
    for (const ProcessInfo& p : rows.processes) insert(insert_process, ProcessRow{p.pid, intern_now(p.name)});
    for (const ThreadInfo& t : rows.threads)
        insert(insert_thread, ThreadRow{t.thread_id, t.pid, t.tid, intern_now(t.name)});
    for (const DeviceInfo& d : rows.devices)
        insert(insert_device, DeviceRow{d.device_id, intern_now(d.name), intern_now(d.uuid), d.compute_capability_major,
                                        d.compute_capability_minor, d.multiprocessor_count, d.memory_bytes,
                                        d.memory_bandwidth_bytes_per_second});
    for (const StreamInfo& s : rows.streams)
        insert(insert_stream,
               StreamRow{s.stream_id, s.device_id, s.context_id, s.cuda_stream_id, s.priority, intern_now(s.name)});
    for (const auto& [stream_id, name] : rows.stream_names) {  // after the rows they rename
        rename_stream.bind(1, intern_now(name));
        rename_stream.bind(2, stream_id);
        rename_stream.step_done();
    }
    for (const auto& [domain_id, category, name] : rows.category_names)
        insert(insert_category_name, NvtxCategoryRow{domain_id, category, intern_now(name)});
    for (const CounterInfo& c : rows.counters)
        insert(insert_counter, CounterRow{c.counter_id, intern_now(c.name), intern_now(c.unit), c.device_id});
    for (const FrameRow& frame : rows.frames) insert(insert_frame, frame);
    for (const StackRow& stack : rows.stacks) insert(insert_stack, stack);
    for (const auto& [key, value] : rows.metadata) put_metadata(MetadataRow{key, AnyValue::of_text(value)});
    rows_since_commit = true;
    // Interning a name above may have queued its string: write it in this pass.
    if (pending_nonempty.load(std::memory_order_acquire)) write_pending_rows();
}

void TraceWriter::Impl::dispatch(const Record& record) {
    switch (record.type) {
        case RecordType::kernel:
            return store_kernel(record.load<KernelEvent>());
        case RecordType::memcpy:
            return store_event<MemcpyEvent>(record, kMemcpysTable, memcpys);
        case RecordType::memset:
            return store_event<MemsetEvent>(record, kMemsetsTable, memsets);
        case RecordType::sync:
            return store_event<SyncEvent>(record, kSynchronizationsTable, syncs);
        case RecordType::api_call:
            return store_event<ApiEvent>(record, kApiCallsTable, api_calls);
        case RecordType::range:
            return store_event<RangeEvent>(record, kRangesTable, ranges);
        case RecordType::mark:
            return store_event<MarkEvent>(record, kMarksTable, marks);
        case RecordType::counter:
            return store_event<CounterSample>(record, kCounterSamplesTable, counter_samples);
        case RecordType::stack_sample:
            return store_event<StackSample>(record, kStackSamplesTable, stack_samples);
        case RecordType::overhead:
            return store_event<OverheadEvent>(record, kOverheadTable, overheads);
        case RecordType::dropped: {
            auto e = record.load<DroppedRecords>();
            events_dropped.fetch_add(e.count, std::memory_order_relaxed);
            dropped_rows.add(e);
            return;
        }
        case RecordType::collective_call:
            collective_calls.add(record.load<CollectiveCall>());
            return;
        case RecordType::memory_event: {
            auto e = record.load<MemoryEvent>();
            note_time(e.time_ns);
            memory_events.add(e);
            return;
        }
        case RecordType::memory_block:
            memory_blocks.add(record.load<MemoryBlock>());
            return;
    }
}

template <typename Event, typename Rows>
void TraceWriter::Impl::store_event(const Record& record, EventTableIndex table, Rows& rows) {
    const Event event = record.load<Event>();
    note_time(trace::end_of(event));
    const bool in_order = track_stats.add(table, trace::track_of(event), trace::start_of(event), trace::end_of(event));
    if constexpr (requires { event.correlation_id; }) {
        note_order(table, in_order, event.correlation_id);
    } else {
        note_order(table, in_order, 0);
    }
    rows.add(event);
}

// A kernel row refers to its launch configuration, stored once per distinct one.
void TraceWriter::Impl::store_kernel(const KernelEvent& kernel) {
    auto found = launch_config_ids.find(kernel.launch);
    if (found == launch_config_ids.end()) {
        LaunchConfigId id = static_cast<LaunchConfigId>(launch_config_ids.size() + 1);
        const LaunchConfig& c = kernel.launch;
        LaunchConfigRow row;
        static_cast<LaunchConfig&>(row) = c;
        row.launch_config_id = id;
        bind_row(insert_launch_config, 1, row);
        insert_launch_config.step_done();
        found = launch_config_ids.emplace(c, id).first;
    }
    note_time(kernel.end_ns);
    note_order(kKernelsTable, track_stats.add(kKernelsTable, kernel.stream_id, kernel.start_ns, kernel.end_ns),
               kernel.correlation_id);
    KernelRow row;
    static_cast<KernelEvent&>(row) = kernel;
    row.launch_config_id = found->second;
    kernels.add(row);
}

void TraceWriter::Impl::note_order(EventTableIndex table, bool in_order, CorrelationId correlation) {
    IndexOrder& order = index_order[table];
    if (!order.indexed) return;  // no index fills as rows arrive (a live recording, or given up)
    ++order.rows;
    if (kEventTables[table].correlation_index != nullptr && correlation != 0) {
        if (correlation < order.last_correlation) in_order = false;
        order.last_correlation = correlation;
    }
    if (!in_order) ++order.disordered;
}

// Rows in no order would land all over an index that outgrows the page cache (a read
// and a write of a page per row); sorting them once at close() costs far less.
void TraceWriter::Impl::drop_indexes_of_disordered_tables() {
    for (std::size_t table = 0; table < index_order.size(); ++table) {
        IndexOrder& order = index_order[table];
        if (!order.indexed || order.rows < kRowsBeforeJudgingOrder) continue;
        if (order.disordered * kDisorderShare <= order.rows) continue;
        for (const char* index : {kEventTables[table].track_index, kEventTables[table].correlation_index}) {
            if (index != nullptr) exec_sql(db, path, (std::string("DROP INDEX IF EXISTS ") + index).c_str());
        }
        order.indexed = false;
        tables_indexed_at_close.fetch_add(1, std::memory_order_relaxed);
    }
}

std::uint64_t TraceWriter::Impl::drain_rings(bool everything) {
    if (drained_rings_version != rings_version.load(std::memory_order_acquire)) {
        std::lock_guard lock(rings_mutex);
        drained_rings = rings;
        drained_rings_version = rings_version.load(std::memory_order_relaxed);
    }
    write_pending_rows();
    std::uint64_t total = 0;
    bool any_retired = false;
    for (const std::shared_ptr<EventRing>& ring : drained_rings) {
        // A flush takes what the ring holds now (bounded by its capacity), never
        // "until empty": a busy producer would keep that from ending.
        std::uint64_t available = ring->available();
        std::uint64_t count = everything ? available : std::min(available, kDrainChunk);
        for (std::uint64_t i = 0; i < count; ++i) dispatch(ring->at(i));
        ring->release(count);
        total += count;
        if (producers_waiting.load(std::memory_order_acquire) > 0 && ring->free_space() >= ring->capacity() / 2) {
            std::lock_guard lock(space_mutex);  // pairs with the waiter's predicate check
            space_available.notify_all();
        }
        if (ring->retired.load(std::memory_order_acquire)) any_retired = true;
    }
    if (total) {
        events_written.fetch_add(total, std::memory_order_relaxed);
        rows_since_commit = true;
    }
    if (any_retired) {
        // A retired ring receives nothing more; drop it once empty (its drop count first).
        store_overflow_counts();
        std::lock_guard lock(rings_mutex);
        std::erase_if(rings, [](const std::shared_ptr<EventRing>& ring) {
            return ring->retired.load(std::memory_order_acquire) && ring->available() == 0 && ring->dropped.load() == 0;
        });
        rings_version.fetch_add(1, std::memory_order_release);
    }
    return total;
}

void TraceWriter::Impl::run_writer_thread() {
    block_flush_signals_in_this_thread();
    pthread_setname_np(pthread_self(), "ember trace");
    try {
        last_commit = os::SteadyClock::now();
        begin_transaction();
        auto interval = std::min(options.commit_interval, std::chrono::milliseconds(kMaxCommitInterval));
        // Commit early (at 3/4 of the interval): on a busy machine a pass and the
        // commit itself can take tens of milliseconds.
        auto commit_after = interval * 3 / 4;
        for (;;) {
            bool stopping = stop_requested.load(std::memory_order_acquire);
            std::uint64_t flush_target = flush_requested.load(std::memory_order_acquire);
            std::uint64_t signal_epoch = signal_flush_epoch(FlushStage::writers);
            bool signal_flush = signal_hooks && signal_epoch != handled_signal_epoch;
            bool must_flush = stopping || signal_flush || flush_target > flush_completed;

            std::uint64_t drained = drain_rings(must_flush);
            auto now = os::SteadyClock::now();
            if (must_flush || (rows_since_commit && now - last_commit >= commit_after)) {
                if (rows_since_commit || must_flush) commit();
            }
            if (signal_flush) {
                handled_signal_epoch = signal_epoch;
                acknowledge_signal_flush(FlushStage::writers);
            }
            if (flush_target > flush_completed) {
                std::lock_guard lock(control_mutex);
                flush_completed = flush_target;
                flush_done.notify_all();
            }
            if (stopping) break;
            if (drained == 0) {
                std::unique_lock lock(control_mutex);
                wake_writer.wait_for(lock, kIdleWait);
            }
        }
        finish_file();
    } catch (const std::exception& error) {
        fail(error.what());
    }
    // Stop counting as a writer a signal handler waits for (acknowledging a flush
    // request that raced with the end of this thread).
    if (signal_hooks) {
        if (signal_flush_epoch(FlushStage::writers) != handled_signal_epoch && !failed.load())
            acknowledge_signal_flush(FlushStage::writers);
        remove_signal_flush_participant(FlushStage::writers);
    }
}

void TraceWriter::Impl::finish_file() {
    TimeNs end = explicit_end_ns.load();
    if (end == 0)
        end = std::max(run.start_ns, latest_time == std::numeric_limits<TimeNs>::min() ? run.start_ns : latest_time);
    put_metadata(MetadataRow{metadata_key::end_ns, AnyValue::of_integer(end)});
    put_metadata(MetadataRow{metadata_key::status, AnyValue::of_text(metadata_status::complete)});
    exec_sql(db, path, "COMMIT");
    transaction_open = false;
    commits.fetch_add(1, std::memory_order_relaxed);
    note_thread_cpu();
    for (const auto& ring : drained_rings) ring->closed.store(true, std::memory_order_release);
    std::lock_guard lock(space_mutex);
    space_available.notify_all();
}

void TraceWriter::Impl::fail(const std::string& message) {
    failed.store(true);
    {
        std::lock_guard lock(control_mutex);
        // TraceError messages already start with "<path>: "; keep the rest.
        std::string prefix = path + ": ";
        if (failure.empty()) failure = message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
        flush_completed = std::numeric_limits<std::uint64_t>::max();
        flush_done.notify_all();
    }
    std::lock_guard lock(rings_mutex);
    for (const auto& ring : rings) ring->closed.store(true, std::memory_order_release);
    if (signal_hooks) acknowledge_signal_flush(FlushStage::writers);
}

// ---------------------------------------------------------------------------
// [SECTION] Close
// ---------------------------------------------------------------------------

void TraceWriter::Impl::build_indexes_and_track_stats() {
    // Sorting for CREATE INDEX may use a helper thread (the writer thread is gone).
    // Each sort task buffers up to cache_size before spilling sorted runs to temp
    // files: 16 MiB keeps close() within ~50 MiB over ingest whatever the trace
    // length (measured: 10 M events peak 122 MiB, and no slower than 64 MiB).
    exec_sql(db, path, "PRAGMA threads = 2");
    exec_sql(db, path, "PRAGMA cache_size = -16384");
    exec_sql(db, path, "BEGIN");
    exec_sql(db, path, create_indexes_sql().c_str());
    exec_sql(db, path, "DELETE FROM track_stats");
    Statement insert(db, path, insert_sql<TrackStatsRow>());
    for (const auto& [key, stats] : track_stats.by_table_and_track) {
        bind_row(insert, 1,
                 TrackStatsRow{kEventTables[key >> 32].name, static_cast<std::uint32_t>(key & 0xffffffffu), stats.count,
                               stats.first_start, stats.last_end, stats.max_duration});
        insert.step_done();
    }
    insert = {};
    exec_sql(db, path, "COMMIT");
}

void TraceWriter::Impl::close() {
    if (!open) return;
    open = false;
    if (fork_generation() != fork_generation_at_open) {
        // A forked child: the writer thread and the file belong to the parent, which
        // keeps writing. Touch nothing (not the thread, not the SQLite connection);
        // ~TraceWriter leaks this Impl for the same reason.
        return;
    }
    stop_requested.store(true, std::memory_order_release);
    wake_writer.notify_all();
    if (writer_thread.joinable()) writer_thread.join();
    {
        std::lock_guard lock(rings_mutex);
        for (const auto& ring : rings) ring->closed.store(true, std::memory_order_release);
    }
    if (hooks_registered) unregister_for_exit(this);
    std::string error;
    {
        std::lock_guard lock(control_mutex);
        error = failure;
    }
    try {
        if (error.empty() && options.build_indexes_on_close) build_indexes_and_track_stats();
        // A finished trace is one self-contained file (no -wal/-shm beside it) — unless
        // a reader still has it open (`ember view --attach`, in this process or
        // another): SQLite cannot leave WAL mode then. The file stays in WAL mode with
        // everything checkpointed that the reader allows; it opens either way.
        if (error.empty()) {
            try {
                exec_sql(db, path, "PRAGMA journal_mode = DELETE");
            } catch (const TraceError&) {
                const int code = sqlite3_errcode(db);
                if (code != SQLITE_BUSY && code != SQLITE_LOCKED) throw;
                sqlite3_exec(db, "PRAGMA wal_checkpoint(PASSIVE)", nullptr, nullptr, nullptr);
            }
        }
    } catch (const TraceError& index_error) {
        error = index_error.what();
    }
    // Finalize statements before closing the connection.
    kernels = {};
    memcpys = {};
    memsets = {};
    syncs = {};
    api_calls = {};
    ranges = {};
    marks = {};
    counter_samples = {};
    stack_samples = {};
    overheads = {};
    dropped_rows = {};
    collective_calls = {};
    memory_events = {};
    memory_blocks = {};
    insert_string = {};
    insert_process = {};
    insert_thread = {};
    insert_device = {};
    insert_stream = {};
    insert_counter = {};
    insert_frame = {};
    insert_stack = {};
    insert_launch_config = {};
    insert_metadata = {};
    rename_stream = {};
    insert_category_name = {};
    int result = sqlite3_close(db);
    db = nullptr;
    if (result != SQLITE_OK && error.empty()) error = std::string("closing: ") + sqlite3_errstr(result);
    if (!error.empty()) {
        std::string prefix = path + ": ";
        if (error.rfind(prefix, 0) == 0) error = error.substr(prefix.size());
        throw TraceError(TraceErrorKind::io, path, error);
    }
}

// ---------------------------------------------------------------------------
// [SECTION] TraceWriter
// ---------------------------------------------------------------------------

TraceWriter::TraceWriter(const std::string& path, const RunInfo& run, WriterOptions options)
    : impl_(std::make_unique<Impl>()) {
    Impl& impl = *impl_;
    impl.path = path;
    impl.run = run;
    impl.options = options;
    install_fork_handler();
    impl.fork_generation_at_open = fork_generation();
    impl.open_database();
    impl.open = true;
    if (options.close_at_exit) {
        Impl* raw = impl_.get();
        register_for_exit(raw, [raw] {
            try {
                raw->close();
            } catch (const std::exception& error) {
                std::fprintf(stderr, "ember: closing trace at exit: %s\n", error.what());
            }
        });
        impl.hooks_registered = true;
    }
    if (options.install_signal_handlers) {
        impl.handled_signal_epoch = signal_flush_epoch(FlushStage::writers);
        add_signal_flush_participant(FlushStage::writers);
        impl.signal_hooks = true;
    }
    impl.writer_thread = std::thread([raw = impl_.get()] { raw->run_writer_thread(); });
}

TraceWriter::~TraceWriter() {
    if (fork_generation() != impl_->fork_generation_at_open) {
        // In a forked child: destroying the Impl would finalize the parent's statements
        // and destroy a std::thread this process does not have. Leak it instead.
        impl_->open = false;
        unregister_for_exit(impl_.get());
        (void)impl_.release();
        return;
    }
    try {
        close();
    } catch (const std::exception& error) {
        std::fprintf(stderr, "ember: closing trace: %s\n", error.what());
    }
}

const std::string& TraceWriter::path() const {
    return impl_->path;
}

StringId TraceWriter::intern(std::string_view text) {
    std::lock_guard lock(impl_->registration_mutex);
    return impl_->intern_locked(text);
}

void TraceWriter::register_process(const ProcessInfo& process) {
    std::lock_guard lock(impl_->registration_mutex);
    impl_->intern_locked(process.name);
    impl_->pending.processes.push_back(process);
    impl_->mark_pending();
}

ThreadId TraceWriter::register_thread(const ThreadInfo& thread) {
    std::lock_guard lock(impl_->registration_mutex);
    ThreadInfo row = thread;
    row.thread_id = impl_->next_thread_id++;
    impl_->intern_locked(row.name);
    impl_->thread_rows.push_back(row);
    impl_->pending.threads.push_back(row);
    impl_->mark_pending();
    return row.thread_id;
}

ThreadId TraceWriter::current_thread() {
    return impl_->register_this_thread();
}

void TraceWriter::set_thread_name(ThreadId thread, std::string_view name) {
    std::lock_guard lock(impl_->registration_mutex);
    for (ThreadInfo& row : impl_->thread_rows) {
        if (row.thread_id != thread) continue;
        row.name = std::string(name);
        impl_->intern_locked(row.name);
        impl_->pending.threads.push_back(row);
        impl_->mark_pending();
    }
}

void TraceWriter::register_device(const DeviceInfo& device) {
    std::lock_guard lock(impl_->registration_mutex);
    impl_->intern_locked(device.name);
    impl_->intern_locked(device.uuid);
    impl_->pending.devices.push_back(device);
    impl_->mark_pending();
}

StreamId TraceWriter::register_stream(const StreamInfo& stream) {
    std::lock_guard lock(impl_->registration_mutex);
    StreamInfo row = stream;
    row.stream_id = impl_->next_stream_id++;
    impl_->intern_locked(row.name);
    impl_->pending.streams.push_back(row);
    impl_->mark_pending();
    return row.stream_id;
}

void TraceWriter::set_stream_name(StreamId stream, std::string_view name) {
    std::lock_guard lock(impl_->registration_mutex);
    impl_->intern_locked(name);
    impl_->pending.stream_names.emplace_back(stream, std::string(name));
    impl_->mark_pending();
}

void TraceWriter::name_nvtx_category(StringId domain_id, std::uint32_t category, std::string_view name) {
    std::lock_guard lock(impl_->registration_mutex);
    impl_->intern_locked(name);
    impl_->pending.category_names.emplace_back(domain_id, category, std::string(name));
    impl_->mark_pending();
}

CounterId TraceWriter::register_counter(const CounterInfo& counter) {
    std::lock_guard lock(impl_->registration_mutex);
    CounterInfo row = counter;
    row.counter_id = impl_->next_counter_id++;
    impl_->intern_locked(row.name);
    impl_->intern_locked(row.unit);
    impl_->pending.counters.push_back(row);
    impl_->mark_pending();
    return row.counter_id;
}

FrameId TraceWriter::intern_frame(std::string_view function, std::string_view module, std::uint64_t address,
                                  std::int32_t line) {
    std::lock_guard lock(impl_->registration_mutex);
    FrameId id = impl_->next_frame_id++;
    StringId function_id = impl_->intern_locked(function);
    StringId module_id = impl_->intern_locked(module);
    impl_->pending.frames.push_back(FrameRow{id, function_id, module_id, address, line});
    impl_->mark_pending();
    return id;
}

StackId TraceWriter::intern_stack(StackId parent, FrameId frame) {
    std::lock_guard lock(impl_->registration_mutex);
    std::uint64_t key = (static_cast<std::uint64_t>(parent) << 32) | frame;
    auto found = impl_->stack_ids.find(key);
    if (found != impl_->stack_ids.end()) return found->second;
    StackId id = impl_->next_stack_id++;
    impl_->stack_ids.emplace(key, id);
    impl_->pending.stacks.push_back(StackRow{id, parent, frame});
    impl_->mark_pending();
    return id;
}

StackId TraceWriter::intern_stack(std::span<const FrameId> frames_outermost_first) {
    StackId node = 0;
    for (FrameId frame : frames_outermost_first) node = intern_stack(node, frame);
    return node;
}

RangeId TraceWriter::next_range_id() {
    return impl_->next_range.fetch_add(1, std::memory_order_relaxed);
}

void TraceWriter::set_end_time(TimeNs end_ns) {
    impl_->explicit_end_ns.store(end_ns);
}

void TraceWriter::set_metadata(std::string_view key, std::string_view value) {
    for (const char* reserved : {metadata_key::schema_version, metadata_key::min_reader_version,
                                 metadata_key::ember_version, metadata_key::command_line, metadata_key::host,
                                 metadata_key::pid, metadata_key::rank, metadata_key::end_ns, metadata_key::status})
        if (key == reserved)
            throw std::invalid_argument("run_metadata key '" + std::string(key) + "' belongs to RunInfo");
    std::lock_guard lock(impl_->registration_mutex);
    impl_->pending.metadata.emplace_back(std::string(key), std::string(value));
    impl_->mark_pending();
}

bool TraceWriter::record_kernel(const KernelEvent& e) {
    return impl_->push(RecordType::kernel, e);
}
bool TraceWriter::record_memcpy(const MemcpyEvent& e) {
    return impl_->push(RecordType::memcpy, e);
}
bool TraceWriter::record_memset(const MemsetEvent& e) {
    return impl_->push(RecordType::memset, e);
}
bool TraceWriter::record_sync(const SyncEvent& e) {
    return impl_->push(RecordType::sync, e);
}
bool TraceWriter::record_api_call(const ApiEvent& e) {
    return impl_->push(RecordType::api_call, e);
}
bool TraceWriter::record_range(const RangeEvent& e) {
    return impl_->push(RecordType::range, e);
}
bool TraceWriter::record_mark(const MarkEvent& e) {
    return impl_->push(RecordType::mark, e);
}
bool TraceWriter::record_counter(const CounterSample& e) {
    return impl_->push(RecordType::counter, e);
}
bool TraceWriter::record_stack_sample(const StackSample& e) {
    return impl_->push(RecordType::stack_sample, e);
}
bool TraceWriter::record_overhead(const OverheadEvent& e) {
    return impl_->push(RecordType::overhead, e);
}
bool TraceWriter::record_dropped(const DroppedRecords& e) {
    return impl_->push(RecordType::dropped, e);
}
bool TraceWriter::record_collective_call(const CollectiveCall& e) {
    return impl_->push(RecordType::collective_call, e);
}
bool TraceWriter::record_memory_event(const MemoryEvent& e) {
    return impl_->push(RecordType::memory_event, e);
}
bool TraceWriter::record_memory_block(const MemoryBlock& e) {
    return impl_->push(RecordType::memory_block, e);
}

void TraceWriter::flush() {
    Impl& impl = *impl_;
    if (!impl.open) throw TraceError(TraceErrorKind::closed, impl.path, "flush() after close()");
    std::uint64_t target = impl.flush_requested.fetch_add(1, std::memory_order_acq_rel) + 1;
    impl.wake_writer.notify_all();
    std::unique_lock lock(impl.control_mutex);
    impl.flush_done.wait(lock, [&] { return impl.flush_completed >= target; });
    if (!impl.failure.empty()) throw TraceError(TraceErrorKind::io, impl.path, impl.failure);
}

void TraceWriter::close() {
    impl_->close();
}

bool TraceWriter::is_open() const {
    return impl_->open;
}

WriterStats TraceWriter::stats() const {
    const Impl& impl = *impl_;
    WriterStats stats;
    stats.events_written = impl.events_written.load();
    stats.events_dropped = impl.events_dropped.load();
    stats.events_recorded = stats.events_written;  // updated below with what rings still hold
    {
        std::lock_guard lock(const_cast<std::mutex&>(impl.rings_mutex));
        for (const auto& ring : impl.rings) stats.events_recorded += ring->available();
    }
    stats.commits = impl.commits.load();
    stats.producer_threads = impl.rings_created.load();
    stats.max_commit_gap_ms = impl.max_commit_gap_ms.load();
    stats.writer_thread_cpu_seconds = impl.writer_cpu_seconds.load();
    stats.tables_indexed_at_close = impl.tables_indexed_at_close.load();
    return stats;
}

}  // namespace ember::store
