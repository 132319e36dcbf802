// writer.h: TraceWriter, the one way events get into an ember trace file.
//
// Shape: any number of producer threads call record_*(); each has its own bounded
// lock-free ring (single producer, single consumer) that one writer thread drains
// into SQLite with prepared multi-row INSERTs inside large transactions (WAL,
// synchronous=NORMAL). The writer thread commits at least every
// WriterOptions::commit_interval (<= 250 ms), so a killed process loses at most
// that much. close(), normal exit (atexit) and SIGINT/SIGTERM flush everything.
// When a ring is full the event is dropped and counted (OverflowPolicy::drop, the
// collector's choice: never stall the traced program) or the producer waits
// (OverflowPolicy::block, for synthetic traces and benchmarks). Dropped counts are
// stored in `dropped_records`; nothing is lost silently.
//
// Memory is bounded by (threads x ring size) + SQLite's page cache, whatever the
// trace length.
//
// Typical use:
//   ember::store::TraceWriter writer("run.db", run_info);
//   auto thread = writer.current_thread();
//   auto stream = writer.register_stream({.device_id = 0, .cuda_stream_id = 7});
//   auto name = writer.intern("sgemm_128x64");
//   writer.record_kernel({.start_ns = t0, .end_ns = t1, .stream_id = stream, .name_id = name});
//   writer.close();
#pragma once

#include "profiler/store/trace_error.h"
#include "profiler/trace/events.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace ember::store {

enum class OverflowPolicy {
    drop,   // a full ring drops the event and counts it (record_* returns false)
    block,  // a full ring makes the producer wait for the writer thread
};

struct WriterOptions {
    // Events each producer thread may have in flight before overflow (rounded up to
    // a power of two). 96 bytes each; pages become resident only as they are used.
    std::size_t ring_capacity_events = 1 << 16;
    OverflowPolicy overflow = OverflowPolicy::drop;
    // Longest time between commits; at most 250 ms (the crash-loss bound).
    std::chrono::milliseconds commit_interval{200};
    // SQLite page cache of the writer connection.
    std::int64_t page_cache_bytes = 64ll << 20;
    // Flush on SIGINT/SIGTERM, then let the signal do what it would have done.
    bool install_signal_handlers = true;
    // close() the writer at exit() if its owner did not.
    bool close_at_exit = true;
    // Build the indexes and track_stats at close() (seconds for 10^8 events).
    bool build_indexes_on_close = true;
    // Create the indexes at open and fill them as rows arrive, so close() has none to
    // build. Cheap while each track's rows come in time order and correlation ids
    // rise (an insert lands at the end of its part of an index, in cached pages); a
    // table whose rows come in another order (over 1/8 of its first 65,536 or more)
    // has its indexes dropped at the next commit and built at close() as usual.
    // For a writer fed from a file (an import); a live recording keeps the default.
    bool index_while_writing = false;
    // How commits reach the disk. wal: a killed process leaves every committed event
    // readable (the collectors' need). none: no journal and no syncs, for a file that
    // nobody reads before close() and that is thrown away when writing fails (an
    // import's temporary file, which its owner syncs and renames).
    enum class Journal { wal, none };
    Journal journal = Journal::wal;
    // Replace an existing file at `path` (otherwise opening an existing file is an error).
    bool overwrite = true;
};

// Running totals, readable at any time.
struct WriterStats {
    std::uint64_t events_recorded = 0;  // accepted into a ring
    std::uint64_t events_written = 0;   // inserted into SQLite (committed or about to be)
    std::uint64_t events_dropped = 0;   // rejected by a full ring (drop policy)
    std::uint64_t commits = 0;
    std::uint64_t producer_threads = 0;      // rings created so far
    double max_commit_gap_ms = 0.0;          // longest observed time between two commits
    double writer_thread_cpu_seconds = 0.0;  // CPU time of the writer thread so far (updated per commit)
    // Tables whose indexes index_while_writing gave up (rows out of order): close()
    // builds them.
    std::uint64_t tables_indexed_at_close = 0;
};

class TraceWriter {
  public:
    // Creates the file, its tables and run_metadata, and starts the writer thread.
    // Throws TraceError (kind io / not_found) naming the path.
    TraceWriter(const std::string& path, const trace::RunInfo& run, WriterOptions options = {});
    // close(); errors are printed to stderr, never thrown from a destructor.
    ~TraceWriter();
    TraceWriter(const TraceWriter&) = delete;
    TraceWriter& operator=(const TraceWriter&) = delete;

    const std::string& path() const;

    // --- Registration: any thread; ids are returned at once, rows are written by
    // the writer thread before any event recorded after the call. -----------------

    // Interns `text`; the same text always gets the same id in this file. Takes a
    // mutex: collectors cache ids for names they see repeatedly.
    trace::StringId intern(std::string_view text);

    void register_process(const trace::ProcessInfo& process);
    // Returns the new thread's id (ThreadInfo::thread_id is ignored).
    trace::ThreadId register_thread(const trace::ThreadInfo& thread);
    // The calling OS thread, registered on first call (with pid, gettid() and its
    // pthread name) and cached per thread afterwards. Recording events does not
    // register a thread: a collector's buffer thread that records kernels for other
    // threads stays out of `threads` unless it calls this.
    trace::ThreadId current_thread();
    void set_thread_name(trace::ThreadId thread, std::string_view name);
    void register_device(const trace::DeviceInfo& device);  // device_id is the caller's
    // Returns the new stream's id (StreamInfo::stream_id is ignored).
    trace::StreamId register_stream(const trace::StreamInfo& stream);
    // Renames a registered stream (nvtxNameCudaStream arriving after its first record).
    void set_stream_name(trace::StreamId stream, std::string_view name);
    // Names NVTX category `category` of the domain named by `domain_id` (kNoString:
    // the default domain), as nvtxNameCategory / nvtxDomainNameCategory do; naming
    // it again replaces the name. Stored in the nvtx_categories table.
    void name_nvtx_category(trace::StringId domain_id, std::uint32_t category, std::string_view name);
    // Returns the new counter's id (CounterInfo::counter_id is ignored).
    trace::CounterId register_counter(const trace::CounterInfo& counter);
    // Call stacks as a prefix tree: intern_stack(parent, frame) returns the node for
    // "parent's stack, then frame". Stack 0 is the empty stack (the root).
    // A Python frame passes its line (>= 0) and co_filename as `module`; native
    // frames leave `line` at -1.
    trace::FrameId intern_frame(std::string_view function, std::string_view module, std::uint64_t address,
                                std::int32_t line = -1);
    trace::StackId intern_stack(trace::StackId parent, trace::FrameId frame);
    // Interns a whole stack given outermost frame first; returns its leaf node.
    trace::StackId intern_stack(std::span<const trace::FrameId> frames_outermost_first);
    // A fresh id for RangeEvent::range_id (ids are unique within the file).
    trace::RangeId next_range_id();
    // Overrides RunInfo::end_ns (otherwise close() uses the latest event end seen).
    void set_end_time(trace::TimeNs end_ns);
    // A key of run_metadata beyond RunInfo (e.g. "cpu_sample_hz"); setting it again
    // replaces the value. Keys of RunInfo itself are refused (std::invalid_argument).
    void set_metadata(std::string_view key, std::string_view value);

    // --- Events: any thread, lock-free; false when the event was dropped (ring full
    // under OverflowPolicy::drop, or the writer is closed / failed). ---------------
    bool record_kernel(const trace::KernelEvent& event);
    bool record_memcpy(const trace::MemcpyEvent& event);
    bool record_memset(const trace::MemsetEvent& event);
    bool record_sync(const trace::SyncEvent& event);
    bool record_api_call(const trace::ApiEvent& event);
    bool record_range(const trace::RangeEvent& event);
    bool record_mark(const trace::MarkEvent& event);
    bool record_counter(const trace::CounterSample& sample);
    bool record_stack_sample(const trace::StackSample& sample);
    bool record_overhead(const trace::OverheadEvent& event);
    // Losses seen elsewhere (e.g. CUPTI's dropped-record count). Stored as given.
    bool record_dropped(const trace::DroppedRecords& dropped);
    // Kineto's collective metadata of a kernel or range (stored in collective_calls).
    bool record_collective_call(const trace::CollectiveCall& call);
    // A caching allocator's event (memory_events) and one block of its state (memory_blocks).
    bool record_memory_event(const trace::MemoryEvent& event);
    bool record_memory_block(const trace::MemoryBlock& block);

    // --- Lifetime -----------------------------------------------------------------

    // Returns when everything recorded (by any thread) before the call is committed.
    // Throws TraceError if the writer thread hit an error.
    void flush();
    // Flushes, writes end time, overflow counts and status "complete", builds
    // indexes and track_stats (WriterOptions::build_indexes_on_close), closes the
    // file. Idempotent. Throws TraceError on failure (the events committed so far
    // stay readable).
    void close();
    bool is_open() const;

    WriterStats stats() const;

    struct Impl;  // writer.cpp and its helpers

  private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace ember::store
