// trace_editor.h: TraceEditor, the one way to change a trace file after its writer has
// closed. An import uses it on its finished temporary file, before renaming it into
// place: to nest again the ranges that came out of order (read back, deleted, written
// anew, their track_stats counted again) and to replace the run's metadata with what
// the whole input said. Every row it reads or writes goes through the table
// declarations (tables.h), as TraceWriter's and TraceReader's do.
#pragma once

#include "profiler/store/sqlite_util.h"
#include "profiler/trace/events.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ember::store {

class TraceEditor {
  public:
    // Opens `path` (a closed ember trace) read-write and begins one transaction.
    // The file must not be in place yet (an import's temporary): a crash before commit()
    // leaves nothing to repair, so the edit keeps no rollback journal on disk and does
    // not sync. Throws TraceError naming the file.
    explicit TraceEditor(const std::string& path);
    ~TraceEditor();  // rolls back what was not committed
    TraceEditor(const TraceEditor&) = delete;
    TraceEditor& operator=(const TraceEditor&) = delete;

    const std::string& path() const { return connection_.path(); }

    // --- ranges -------------------------------------------------------------------------
    trace::RangeId largest_range_id();
    // The ranges with range_id in [first, last] (on `thread` only, when given; push/pop
    // ranges only, depth >= 0, when `nested_only`), by range_id: next() gives each.
    class RangeCursor {
      public:
        bool next(trace::RangeEvent& range);

      private:
        friend class TraceEditor;
        explicit RangeCursor(Statement statement) : statement_(std::move(statement)) {}
        Statement statement_;
    };
    RangeCursor ranges_by_id(trace::RangeId first, trace::RangeId last, std::optional<trace::ThreadId> thread,
                             bool nested_only);
    // Deletes the same rows; returns how many it deleted.
    std::int64_t delete_ranges(trace::RangeId first, trace::RangeId last, std::optional<trace::ThreadId> thread,
                               bool nested_only);
    void insert_range(const trace::RangeEvent& range);
    // Counts the ranges' track_stats rows anew (of one thread, or of every thread).
    void recount_range_track_stats(std::optional<trace::ThreadId> thread);

    // --- run metadata ---------------------------------------------------------------------
    // Replaces every RunInfo key but the writer's own (versions, ember_version, status).
    void replace_run_info(const trace::RunInfo& run);
    void set_metadata(std::string_view key, std::int64_t value);
    void set_metadata(std::string_view key, std::string_view value);

    // GPU operations (kernels, memcpys, memsets) whose correlation id names an API call.
    std::int64_t linked_gpu_event_count();

    // Commits the transaction (the file is then synced and renamed by its owner).
    void commit();

  private:
    Connection connection_;
    Statement put_metadata_;
    Statement insert_range_;
    bool committed_ = false;
};

}  // namespace ember::store
