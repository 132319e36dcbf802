// import_sink.h: what every importer writes through — a store::TraceWriter (block
// policy: an import never drops an event) plus what importers share: a string cache
// (one writer call per distinct string), registries that turn a source's own ids
// (pid/tid, device/stream) into ember's thread and stream ids, nesting of host
// ranges, the counts of the report, and the end of an import: the run's metadata,
// the import_* keys, and the rename of the temporary file onto the output.
#pragma once

#include "profiler/import/import.h"
#include "profiler/import/range_nesting.h"
#include "profiler/store/writer.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ember::store {
class TraceEditor;
}  // namespace ember::store

namespace ember::importing {

// Cache key of a thread (pid, tid) or a stream (device, stream number).
struct IdPair {
    std::int64_t first = 0;
    std::int64_t second = 0;
    bool operator==(const IdPair&) const = default;
};
struct IdPairHash {
    std::size_t operator()(const IdPair& key) const noexcept {
        std::uint64_t h = static_cast<std::uint64_t>(key.first) * 0x9E3779B97F4A7C15ull;
        h ^= static_cast<std::uint64_t>(key.second) + 0x7F4A7C159E3779B9ull + (h << 6) + (h >> 2);
        return static_cast<std::size_t>(h);
    }
};

struct TransparentStringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view text) const noexcept { return std::hash<std::string_view>{}(text); }
};

// The correlation ids of CUDA API calls and of GPU work, so that the count of GPU events
// linked to their launch needs no query over the finished file. Ids come in runs (CUPTI
// numbers them in sequence, from wherever the process had got to), so they are held in
// pages of 65,536 ids (a bit per API call, a count per GPU event: 72 KiB), made as ids
// arrive. More than 256 pages (18 MiB), or more than 255 GPU events on one id, leaves
// the count to the query (linked() is empty).
class LinkTally {
  public:
    LinkTally();
    ~LinkTally();
    void api_call(std::uint64_t correlation_id);
    void gpu_event(std::uint64_t correlation_id);
    std::optional<std::int64_t> linked() const;

  private:
    struct Page;
    Page* page_of(std::uint64_t correlation_id);
    std::unordered_map<std::uint64_t, std::unique_ptr<Page>> pages_;
    std::uint64_t last_key_ = ~std::uint64_t{0};
    Page* last_page_ = nullptr;
    bool gave_up_ = false;
};

class ImportSink {
  public:
    // Writes to `temporary_output` (created beside the output by the caller); `input`
    // names the source in messages and metadata.
    ImportSink(const std::string& input, const std::string& temporary_output, SourceFormat format,
               const ImportOptions& options);
    ~ImportSink();  // an unfinished sink closes its writer quietly and removes its files
    ImportSink(const ImportSink&) = delete;
    ImportSink& operator=(const ImportSink&) = delete;

    const std::string& input() const { return input_; }
    const ImportOptions& options() const { return options_; }
    // The run's facts: importers fill them in any time before finish().
    trace::RunInfo& run() { return run_; }

    // --- names and tracks -----------------------------------------------------------
    trace::StringId intern(std::string_view text);
    // A host thread by (pid, tid), registered on first use ("thread <tid>" until named).
    trace::ThreadId thread(std::int64_t pid, std::int64_t tid);
    void name_thread(std::int64_t pid, std::int64_t tid, std::string_view name);
    bool has_thread(std::int64_t pid, std::int64_t tid) const;
    // A GPU stream by (device, the source's stream number); registered on first use.
    trace::StreamId stream(trace::DeviceId device, std::uint64_t stream_number, std::uint32_t context = 0,
                           std::int32_t priority = 0);
    void name_stream(trace::DeviceId device, std::uint64_t stream_number, std::string_view name);
    // Device facts (registered at finish(); devices seen only in events get a bare row).
    void describe_device(const trace::DeviceInfo& device);
    void name_process(std::int64_t pid, std::string_view name);
    trace::CounterId counter(std::string_view name, std::string_view unit, trace::DeviceId device);
    void name_nvtx_category(trace::StringId domain, std::uint32_t category, std::string_view name);

    // --- events ---------------------------------------------------------------------
    void kernel(const trace::KernelEvent& event);
    void memcpy(const trace::MemcpyEvent& event);
    void memset(const trace::MemsetEvent& event);
    void sync(const trace::SyncEvent& event);
    void api_call(const trace::ApiEvent& event);
    // A push/pop-style range: depth and parent are assigned at finish().
    void nested_range(const PendingRange& range);
    // A start/end range (depth -1, no parent).
    void start_end_range(trace::RangeEvent event);
    void mark(const trace::MarkEvent& event);
    void counter_sample(const trace::CounterSample& sample);
    void overhead(const trace::OverheadEvent& event);
    // Kineto's collective metadata of a kernel or range recorded before it.
    void collective_call(const trace::CollectiveCall& call);
    // Sampled CPU call stacks: frames and stack nodes as the writer interns them
    // (intern_stack with the outermost frame first), then one sample per stack.
    trace::FrameId frame(std::string_view function, std::string_view module, std::uint64_t address,
                         std::int32_t line = -1);
    trace::StackId stack(std::span<const trace::FrameId> frames_outermost_first);
    void stack_sample(const trace::StackSample& sample);
    // A caching allocator's events and the blocks of its state (PyTorch memory snapshots).
    void memory_event(const trace::MemoryEvent& event);
    void memory_block(const trace::MemoryBlock& block);
    // A line about the input as a whole (ImportCounts::notes, and run_metadata import_notes).
    void note(std::string line);
    // A run_metadata key beyond the run's own (e.g. a snapshot's allocator settings).
    void metadata(std::string_view key, std::string_view value);
    void skip(std::string_view reason, std::int64_t count = 1);
    // An event that breaks the format's rules, skipped (the importers throw instead under
    // ImportOptions::strict): counted under `reason`, `where` kept for the first.
    void invalid(std::string_view reason, std::string where);
    void count_nccl_kernel() { ++counts_.nccl_kernels; }
    void count_synchronizations_from_calls(std::int64_t count) { counts_.synchronizations_from_calls += count; }

    // Earliest start / latest end of anything recorded (the run's bounds by default).
    trace::TimeNs earliest_ns() const { return earliest_; }
    trace::TimeNs latest_ns() const { return latest_; }
    bool any_event() const { return earliest_ <= latest_; }

    // Nests the ranges, closes the writer, stores the run's metadata and import_*
    // keys, and renames the temporary file onto `output`. Returns the counts.
    ImportCounts finish(const std::string& output);

  private:
    void note_interval(trace::TimeNs start, trace::TimeNs end);
    [[noreturn]] void writer_refused(const char* what);
    // Writes one event through `write` (TraceWriter::record_kernel, ...), widens the
    // import's span to it and counts it in `count`; `what` names it if the writer refuses.
    template <typename Event>
    void record(bool (store::TraceWriter::*write)(const Event&), const Event& event, const char* what,
                std::int64_t& count);
    void emit_range(const trace::RangeEvent& range);
    void renest_withdrawn_ranges(store::TraceEditor& editor);
    void renest_all_ranges(store::TraceEditor& editor);
    void write_metadata(const std::string& path);
    void register_devices();
    void remove_temporary_files();

    std::string input_;
    std::string temporary_output_;
    SourceFormat format_;
    ImportOptions options_;
    trace::RunInfo run_;
    std::unique_ptr<store::TraceWriter> writer_;
    std::unique_ptr<RangeNester> nester_;  // until the metadata is written (renest_withdrawn_ranges)
    bool ranges_in_final_order_ = false;   // nester_ emits ranges early only with the ids of nesting at the end
    std::uint64_t start_end_ranges_ = 0;
    std::vector<trace::RangeEvent> held_start_end_ranges_;  // written by renest_all_ranges
    std::unordered_map<std::string, trace::StringId, TransparentStringHash, std::equal_to<>> strings_;
    std::unordered_map<IdPair, trace::ThreadId, IdPairHash> threads_;
    std::unordered_map<IdPair, std::string, IdPairHash> thread_names_;  // named before first use
    std::unordered_map<IdPair, trace::StreamId, IdPairHash> streams_;
    std::unordered_map<IdPair, std::string, IdPairHash> stream_names_;  // named before first use
    std::map<trace::DeviceId, trace::DeviceInfo> devices_;
    std::map<std::int64_t, std::string> processes_;
    std::map<std::tuple<std::string, std::string, trace::DeviceId>, trace::CounterId> counters_;
    ImportCounts counts_;
    LinkTally links_;
    trace::TimeNs earliest_;
    trace::TimeNs latest_;
    bool finished_ = false;
};

}  // namespace ember::importing
