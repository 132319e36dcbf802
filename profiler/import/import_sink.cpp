// import_sink.cpp: the writer side every importer shares.
//
// Index:
//   [SECTION] Linked GPU events
//   [SECTION] Setup and teardown
//   [SECTION] Names and tracks
//   [SECTION] Events
//   [SECTION] Finishing: nesting, close, metadata, rename
#include "profiler/import/import_sink.h"
#include "common/json_string.h"

#include "profiler/store/schema.h"
#include "profiler/store/sqlite_util.h"
#include "profiler/store/trace_editor.h"
#include "profiler/store/trace_files.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <algorithm>
#include <array>
#include <optional>
#include <limits>
#include <stdexcept>

namespace ember::importing {

using store::TraceError;
using store::TraceErrorKind;

// ---------------------------------------------------------------------------
// [SECTION] Linked GPU events
// ---------------------------------------------------------------------------

namespace {
constexpr int kLinkPageBits = 16;
constexpr std::size_t kLinkPageIds = std::size_t{1} << kLinkPageBits;
constexpr std::size_t kMaxLinkPages = 256;
}  // namespace

struct LinkTally::Page {
    std::array<std::uint64_t, kLinkPageIds / 64> api_bits{};
    std::array<std::uint8_t, kLinkPageIds> gpu_counts{};
};

LinkTally::LinkTally() = default;
LinkTally::~LinkTally() = default;

LinkTally::Page* LinkTally::page_of(std::uint64_t correlation_id) {
    if (gave_up_) return nullptr;
    const std::uint64_t key = correlation_id >> kLinkPageBits;
    if (key == last_key_) return last_page_;
    auto found = pages_.find(key);
    if (found == pages_.end()) {
        if (pages_.size() == kMaxLinkPages) {
            gave_up_ = true;
            pages_.clear();
            last_page_ = nullptr;
            last_key_ = ~std::uint64_t{0};
            return nullptr;
        }
        found = pages_.emplace(key, std::make_unique<Page>()).first;
    }
    last_key_ = key;
    last_page_ = found->second.get();
    return last_page_;
}

void LinkTally::api_call(std::uint64_t correlation_id) {
    if (correlation_id == 0) return;
    Page* page = page_of(correlation_id);
    if (page == nullptr) return;
    const std::size_t index = correlation_id & (kLinkPageIds - 1);
    page->api_bits[index / 64] |= std::uint64_t{1} << (index % 64);
}

void LinkTally::gpu_event(std::uint64_t correlation_id) {
    if (correlation_id == 0) return;
    Page* page = page_of(correlation_id);
    if (page == nullptr) return;
    std::uint8_t& count = page->gpu_counts[correlation_id & (kLinkPageIds - 1)];
    if (count == 255) {
        gave_up_ = true;
        pages_.clear();
        last_page_ = nullptr;
        last_key_ = ~std::uint64_t{0};
        return;
    }
    ++count;
}

std::optional<std::int64_t> LinkTally::linked() const {
    if (gave_up_) return std::nullopt;
    std::int64_t linked = 0;
    for (const auto& [key, page] : pages_) {
        for (std::size_t word = 0; word < page->api_bits.size(); ++word) {
            for (std::uint64_t bits = page->api_bits[word]; bits != 0; bits &= bits - 1) {
                linked += page->gpu_counts[word * 64 + static_cast<std::size_t>(__builtin_ctzll(bits))];
            }
        }
    }
    return linked;
}

// ---------------------------------------------------------------------------
// [SECTION] Setup and teardown
// ---------------------------------------------------------------------------

ImportSink::ImportSink(const std::string& input, const std::string& temporary_output, SourceFormat format,
                       const ImportOptions& options)
    : input_(input),
      temporary_output_(temporary_output),
      format_(format),
      options_(options),
      earliest_(std::numeric_limits<trace::TimeNs>::max()),
      latest_(std::numeric_limits<trace::TimeNs>::min()) {
    store::WriterOptions writer_options;
    // An import must never lose an event: the parser waits for the writer thread.
    writer_options.overflow = store::OverflowPolicy::block;
    writer_options.install_signal_handlers = false;
    writer_options.close_at_exit = false;
    writer_options.overwrite = true;
    // The temporary file is renamed onto the output only once complete and synced
    // (finish()): a failed import leaves nothing to recover, so no journal. Sources
    // list most tracks in time order, so the indexes grow as the rows arrive instead
    // of being sorted on one core after the last event.
    writer_options.journal = store::WriterOptions::Journal::none;
    writer_options.index_while_writing = true;
    writer_ = std::make_unique<store::TraceWriter>(temporary_output_, run_, writer_options);
    nester_ = std::make_unique<RangeNester>(temporary_output_ + ".ranges", options.range_sort_memory_bytes);
    // A Chrome trace lists each thread's "X" events by start, parents first (Chrome's
    // own and ember's export do): nested as they come, they are written while the rest
    // of the file is parsed. A Kineto trace often lists one thread's CPU ops in that
    // order too, but its annotations or Python functions may follow them, and several
    // threads interleave: its ranges are written early only where they get the ids
    // nesting at the end gives, so that its imports stay what they were, row by row.
    // Nsight Systems' tables are unordered: those are nested at the end.
    if (format_ == SourceFormat::chrome) {
        nester_->emit_while_in_order([this] { return writer_->next_range_id(); },
                                     [this](const trace::RangeEvent& range) { emit_range(range); });
    } else if (format_ == SourceFormat::kineto) {
        ranges_in_final_order_ = true;
        nester_->emit_while_in_final_order([this] { return writer_->next_range_id(); },
                                           [this](const trace::RangeEvent& range) { emit_range(range); });
    }
}

ImportSink::~ImportSink() {
    if (finished_) return;
    nester_.reset();
    if (writer_ != nullptr) {
        try {
            writer_->close();
        } catch (const std::exception&) {
            // The import failed already; its own error is the one that matters.
        }
        writer_.reset();
    }
    remove_temporary_files();
}

void ImportSink::remove_temporary_files() {
    store::remove_trace_files(temporary_output_);
}

void ImportSink::writer_refused(const char* what) {
    writer_->flush();  // throws the writer thread's error, naming the file
    throw TraceError(TraceErrorKind::io, temporary_output_, fmt::format("the trace writer refused a {}", what));
}

// ---------------------------------------------------------------------------
// [SECTION] Names and tracks
// ---------------------------------------------------------------------------

trace::StringId ImportSink::intern(std::string_view text) {
    if (text.empty()) return trace::kNoString;
    auto found = strings_.find(text);
    if (found != strings_.end()) return found->second;
    trace::StringId id = writer_->intern(text);
    strings_.emplace(std::string(text), id);
    return id;
}

namespace {

// Threads and streams are registered on first use under the name given for them so far
// (a file may name a thread before or after its first event).
template <typename Id, typename Register>
Id find_or_register(std::unordered_map<IdPair, Id, IdPairHash>& ids,
                    const std::unordered_map<IdPair, std::string, IdPairHash>& names, IdPair key,
                    Register&& register_named) {
    auto found = ids.find(key);
    if (found != ids.end()) return found->second;
    auto named = names.find(key);
    const Id id = register_named(named != names.end() ? named->second : std::string());
    ids.emplace(key, id);
    return id;
}

// Remembers the name for a later registration, and renames what is registered already.
template <typename Id, typename Rename>
void remember_name(const std::unordered_map<IdPair, Id, IdPairHash>& ids,
                   std::unordered_map<IdPair, std::string, IdPairHash>& names, IdPair key, std::string_view name,
                   Rename&& rename) {
    names[key] = std::string(name);
    auto found = ids.find(key);
    if (found != ids.end()) rename(found->second, name);
}

}  // namespace

trace::ThreadId ImportSink::thread(std::int64_t pid, std::int64_t tid) {
    return find_or_register(threads_, thread_names_, IdPair{pid, tid}, [&](const std::string& name) {
        trace::ThreadInfo info;
        info.pid = pid;
        info.tid = tid;
        info.name = name;
        const trace::ThreadId id = writer_->register_thread(info);
        if (!processes_.count(pid)) processes_.emplace(pid, std::string());
        return id;
    });
}

bool ImportSink::has_thread(std::int64_t pid, std::int64_t tid) const {
    return threads_.count(IdPair{pid, tid}) != 0;
}

void ImportSink::name_thread(std::int64_t pid, std::int64_t tid, std::string_view name) {
    remember_name(threads_, thread_names_, IdPair{pid, tid}, name,
                  [&](trace::ThreadId id, std::string_view text) { writer_->set_thread_name(id, text); });
}

trace::StreamId ImportSink::stream(trace::DeviceId device, std::uint64_t stream_number, std::uint32_t context,
                                   std::int32_t priority) {
    const IdPair key{device, static_cast<std::int64_t>(stream_number)};
    return find_or_register(streams_, stream_names_, key, [&](const std::string& name) {
        trace::StreamInfo info;
        info.device_id = device;
        info.context_id = context;
        info.cuda_stream_id = stream_number;
        info.priority = priority;
        info.name = name;
        const trace::StreamId id = writer_->register_stream(info);
        if (!devices_.count(device)) {
            trace::DeviceInfo bare;
            bare.device_id = device;
            devices_.emplace(device, bare);
        }
        return id;
    });
}

void ImportSink::name_stream(trace::DeviceId device, std::uint64_t stream_number, std::string_view name) {
    remember_name(streams_, stream_names_, IdPair{device, static_cast<std::int64_t>(stream_number)}, name,
                  [&](trace::StreamId id, std::string_view text) { writer_->set_stream_name(id, text); });
}

void ImportSink::describe_device(const trace::DeviceInfo& device) {
    devices_[device.device_id] = device;
}

void ImportSink::name_process(std::int64_t pid, std::string_view name) {
    processes_[pid] = std::string(name);
}

trace::CounterId ImportSink::counter(std::string_view name, std::string_view unit, trace::DeviceId device) {
    auto key = std::make_tuple(std::string(name), std::string(unit), device);
    auto found = counters_.find(key);
    if (found != counters_.end()) return found->second;
    trace::CounterInfo info;
    info.name = std::string(name);
    info.unit = std::string(unit);
    info.device_id = device;
    trace::CounterId id = writer_->register_counter(info);
    counters_.emplace(std::move(key), id);
    return id;
}

void ImportSink::name_nvtx_category(trace::StringId domain, std::uint32_t category, std::string_view name) {
    writer_->name_nvtx_category(domain, category, name);
}

// ---------------------------------------------------------------------------
// [SECTION] Events
// ---------------------------------------------------------------------------

void ImportSink::note_interval(trace::TimeNs start, trace::TimeNs end) {
    if (start < earliest_) earliest_ = start;
    if (end > latest_) latest_ = end;
}

template <typename Event>
void ImportSink::record(bool (store::TraceWriter::*write)(const Event&), const Event& event, const char* what,
                        std::int64_t& count) {
    if (!((*writer_).*write)(event)) writer_refused(what);
    note_interval(trace::start_of(event), trace::end_of(event));
    ++count;
}

void ImportSink::kernel(const trace::KernelEvent& event) {
    record(&store::TraceWriter::record_kernel, event, "kernel", counts_.kernels);
    links_.gpu_event(event.correlation_id);
}

void ImportSink::memcpy(const trace::MemcpyEvent& event) {
    record(&store::TraceWriter::record_memcpy, event, "memcpy", counts_.memcpys);
    links_.gpu_event(event.correlation_id);
}

void ImportSink::memset(const trace::MemsetEvent& event) {
    record(&store::TraceWriter::record_memset, event, "memset", counts_.memsets);
    links_.gpu_event(event.correlation_id);
}

void ImportSink::sync(const trace::SyncEvent& event) {
    record(&store::TraceWriter::record_sync, event, "synchronization", counts_.synchronizations);
}

void ImportSink::api_call(const trace::ApiEvent& event) {
    record(&store::TraceWriter::record_api_call, event, "CUDA API call", counts_.api_calls);
    links_.api_call(event.correlation_id);
}

void ImportSink::nested_range(const PendingRange& range) {
    nester_->add(range);
    note_interval(range.start_ns, range.end_ns);
}

void ImportSink::start_end_range(trace::RangeEvent event) {
    event.depth = -1;
    event.parent_range_id = 0;
    ++start_end_ranges_;
    if (ranges_in_final_order_) {
        // Nesting at the end numbers the nested ranges after every start/end range: any
        // emitted before this one no longer have its ids. Once withdrawn, this range
        // waits for renest_all_ranges() with the id it has without them.
        nester_->withdraw_early();
        if (nester_->early_withdrawn()) {
            event.range_id = static_cast<trace::RangeId>(start_end_ranges_);
            note_interval(event.start_ns, event.end_ns);
            held_start_end_ranges_.push_back(event);
            return;
        }
    }
    event.range_id = writer_->next_range_id();
    record(&store::TraceWriter::record_range, event, "range", counts_.ranges);
}

void ImportSink::mark(const trace::MarkEvent& event) {
    record(&store::TraceWriter::record_mark, event, "mark", counts_.marks);
}

void ImportSink::counter_sample(const trace::CounterSample& sample) {
    record(&store::TraceWriter::record_counter, sample, "counter sample", counts_.counter_samples);
}

void ImportSink::overhead(const trace::OverheadEvent& event) {
    record(&store::TraceWriter::record_overhead, event, "overhead event", counts_.overheads);
}

void ImportSink::collective_call(const trace::CollectiveCall& call) {
    if (!writer_->record_collective_call(call)) writer_refused("collective call");
    ++counts_.collective_calls;
}

trace::FrameId ImportSink::frame(std::string_view function, std::string_view module, std::uint64_t address,
                                 std::int32_t line) {
    return writer_->intern_frame(function, module, address, line);
}

trace::StackId ImportSink::stack(std::span<const trace::FrameId> frames_outermost_first) {
    return writer_->intern_stack(frames_outermost_first);
}

void ImportSink::stack_sample(const trace::StackSample& sample) {
    record(&store::TraceWriter::record_stack_sample, sample, "stack sample", counts_.stack_samples);
}

void ImportSink::memory_event(const trace::MemoryEvent& event) {
    if (!writer_->record_memory_event(event)) writer_refused("memory event");
    note_interval(event.time_ns, event.time_ns);
    ++counts_.memory_events;
}

void ImportSink::memory_block(const trace::MemoryBlock& block) {
    if (!writer_->record_memory_block(block)) writer_refused("memory block");
    ++counts_.memory_blocks;
}

void ImportSink::metadata(std::string_view key, std::string_view value) {
    writer_->set_metadata(key, value);
}

void ImportSink::note(std::string line) {
    counts_.notes.push_back(std::move(line));
}

void ImportSink::skip(std::string_view reason, std::int64_t count) {
    auto found = counts_.skipped.find(reason);
    if (found != counts_.skipped.end()) {
        found->second += count;
    } else {
        counts_.skipped.emplace(std::string(reason), count);
    }
}

void ImportSink::invalid(std::string_view reason, std::string where) {
    auto found = counts_.invalid.find(reason);
    if (found == counts_.invalid.end())
        found = counts_.invalid.emplace(std::string(reason), ImportCounts::Invalid{0, std::move(where)}).first;
    ++found->second.count;
}

// ---------------------------------------------------------------------------
// [SECTION] Finishing: nesting, close, metadata, rename
// ---------------------------------------------------------------------------

void ImportSink::register_devices() {
    for (const auto& [id, device] : devices_) writer_->register_device(device);
}

namespace {

// The file's data on disk before it is renamed into place.
void sync_file(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw TraceError(TraceErrorKind::io, path, fmt::format("cannot reopen: {}", std::strerror(errno)));
    int result = ::fdatasync(fd);
    int error = errno;
    ::close(fd);
    if (result != 0) throw TraceError(TraceErrorKind::io, path, fmt::format("cannot sync: {}", std::strerror(error)));
}

}  // namespace

// A thread whose range came out of order after some of its ranges were nested as they
// came: those early rows are read back, nested with the thread's later ranges into new
// rows, and deleted; the thread's track_stats row is counted anew from what stays.
void ImportSink::renest_withdrawn_ranges(store::TraceEditor& editor) {
    const std::vector<WithdrawnRanges>& withdrawn_threads = nester_->withdrawn();
    if (withdrawn_threads.empty()) return;
    trace::RangeId next_id = editor.largest_range_id() + 1;
    // range_id is the rowid: the new rows lie past every early one the cursor reads.
    std::optional<store::TraceEditor::RangeCursor> early;
    auto early_of = [&](const WithdrawnRanges& withdrawn) -> std::function<bool(PendingRange&)> {
        early.emplace(editor.ranges_by_id(withdrawn.first, withdrawn.last, withdrawn.thread_id, true));
        return [&early](PendingRange& range) {
            trace::RangeEvent row;
            if (!early->next(row)) return false;
            range = pending_range_of(row);
            return true;
        };
    };
    auto emit = [&](const trace::RangeEvent& range) {
        editor.insert_range(range);
        ++counts_.ranges;
    };
    counts_.ranges_not_nested += nester_->renest_withdrawn(
        early_of, [&] { return next_id++; }, emit);
    early.reset();

    for (const WithdrawnRanges& withdrawn : withdrawn_threads) {
        const std::int64_t removed = editor.delete_ranges(withdrawn.first, withdrawn.last, withdrawn.thread_id, true);
        if (static_cast<std::uint64_t>(removed) != withdrawn.count) {
            throw TraceError(TraceErrorKind::io, editor.path(),
                             fmt::format("removing {} early ranges of thread {} removed {}", withdrawn.count,
                                         withdrawn.thread_id, removed));
        }
        counts_.ranges -= static_cast<std::int64_t>(withdrawn.count);
        editor.recount_range_track_stats(withdrawn.thread_id);
    }
}

// A Kineto import whose early ranges were withdrawn (a range came that sorts before
// them, or a start/end range took an id after them): they are read back and deleted,
// and every range is written as nesting at the end writes it: the start/end ranges
// held back with the ids they had, then all nested ranges, numbered after them. The
// ranges' track_stats rows are counted anew.
void ImportSink::renest_all_ranges(store::TraceEditor& editor) {
    if (!ranges_in_final_order_ || !nester_->early_withdrawn()) return;
    const WithdrawnRanges early_ids = nester_->emitted_early();
    {
        store::TraceEditor::RangeCursor early =
            editor.ranges_by_id(early_ids.first, early_ids.last, std::nullopt, false);
        nester_->take_back_early([&early](PendingRange& range) {
            trace::RangeEvent row;
            if (!early.next(row)) return false;
            range = pending_range_of(row);
            return true;
        });
    }
    const std::int64_t removed = editor.delete_ranges(early_ids.first, early_ids.last, std::nullopt, false);
    if (static_cast<std::uint64_t>(removed) != early_ids.count) {
        throw TraceError(TraceErrorKind::io, editor.path(),
                         fmt::format("removing {} early ranges removed {}", early_ids.count, removed));
    }
    counts_.ranges -= static_cast<std::int64_t>(early_ids.count);
    auto emit = [&](const trace::RangeEvent& range) {
        editor.insert_range(range);
        ++counts_.ranges;
    };
    for (const trace::RangeEvent& range : held_start_end_ranges_) emit(range);
    trace::RangeId next_id = static_cast<trace::RangeId>(start_end_ranges_) + 1;
    counts_.ranges_not_nested += nester_->renest_all([&] { return next_id++; }, emit);
    editor.recount_range_track_stats(std::nullopt);
}

void ImportSink::write_metadata(const std::string& path) {
    // The file is still the import's temporary, renamed onto the output only after this
    // commit and one fdatasync below.
    store::TraceEditor editor(path);
    // Counted while the events went by; the query only where the ids were too large.
    std::optional<std::int64_t> linked = links_.linked();
    counts_.flows = linked ? *linked : editor.linked_gpu_event_count();
    counts_.unlinked_gpu_events = counts_.kernels + counts_.memcpys + counts_.memsets - counts_.flows;

    std::string skipped = "{";
    for (const auto& [reason, count] : counts_.skipped) {
        if (skipped.size() > 1) skipped += ',';
        skipped += text::json_string(reason) + ":" + std::to_string(count);
    }
    skipped += '}';

    std::error_code ignored;
    std::string absolute_input = std::filesystem::absolute(input_, ignored).string();
    struct stat info {};
    std::int64_t input_bytes = 0, input_mtime_ns = 0;
    if (::stat(input_.c_str(), &info) == 0) {
        input_bytes = static_cast<std::int64_t>(info.st_size);
        input_mtime_ns = static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec;
    }

    renest_withdrawn_ranges(editor);
    renest_all_ranges(editor);
    auto put_int = [&](const char* key, std::int64_t value) { editor.set_metadata(key, value); };
    auto put_text = [&](const char* key, std::string_view value) { editor.set_metadata(key, value); };
    editor.replace_run_info(run_);
    put_int(import_metadata_key::import_version, kImportVersion);
    put_text(import_metadata_key::source_format, source_format_name(format_));
    put_text(import_metadata_key::source_path, absolute_input);
    put_int(import_metadata_key::source_bytes, input_bytes);
    put_int(import_metadata_key::source_mtime_ns, input_mtime_ns);
    put_int(import_metadata_key::linked_gpu_events, counts_.flows);
    put_int(import_metadata_key::unlinked_gpu_events, counts_.unlinked_gpu_events);
    put_int(import_metadata_key::ranges_not_nested, counts_.ranges_not_nested);
    put_text(import_metadata_key::skipped_events, skipped);
    put_int(import_metadata_key::invalid_events, counts_.invalid_total());
    if (!counts_.invalid.empty()) put_text(import_metadata_key::invalid_summary, counts_.invalid_summary());
    if (counts_.synchronizations_from_calls > 0)
        put_int(trace::kSynchronizationsFromCallsKey, counts_.synchronizations_from_calls);
    if (!counts_.notes.empty()) {
        std::string notes;
        for (const std::string& line : counts_.notes) notes += (notes.empty() ? "" : "\n") + line;
        put_text(import_metadata_key::notes, notes);
    }
    editor.commit();
    sync_file(path);
}

void ImportSink::emit_range(const trace::RangeEvent& range) {
    if (!writer_->record_range(range)) writer_refused("range");
    ++counts_.ranges;
}

ImportCounts ImportSink::finish(const std::string& output) {
    counts_.ranges_not_nested += nester_->finish([this] { return writer_->next_range_id(); },
                                                 [this](const trace::RangeEvent& range) { emit_range(range); });

    if (run_.pid != 0 && !processes_.count(run_.pid)) processes_.emplace(run_.pid, std::string());
    for (const auto& [pid, name] : processes_) writer_->register_process({pid, name});
    register_devices();
    // The run's window: what the importer found (a profiler span, a session) or the events.
    if (run_.start_ns == 0 && any_event()) run_.start_ns = earliest_;
    if (run_.end_ns == 0) run_.end_ns = any_event() ? std::max(latest_, run_.start_ns) : run_.start_ns;
    writer_->set_end_time(run_.end_ns);
    writer_->close();
    writer_.reset();

    write_metadata(temporary_output_);
    nester_.reset();
    store::move_trace_into_place(temporary_output_, output, "the imported trace " + temporary_output_);
    finished_ = true;
    return counts_;
}

}  // namespace ember::importing
