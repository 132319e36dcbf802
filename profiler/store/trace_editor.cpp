// trace_editor.cpp: TraceEditor — amending a closed trace in one transaction.
#include "profiler/store/trace_editor.h"

#include "profiler/store/schema.h"
#include "profiler/store/tables.h"

namespace ember::store {

using namespace ember::trace;

namespace {

// "WHERE range_id BETWEEN ?1 AND ?2 [AND thread_id = ?3] [AND depth >= 0]".
std::string range_window(std::optional<ThreadId> thread, bool nested_only) {
    std::string where = " WHERE range_id BETWEEN ?1 AND ?2";
    if (thread) where += " AND thread_id = ?3";
    if (nested_only) where += " AND depth >= 0";
    return where;
}

void bind_range_window(Statement& statement, RangeId first, RangeId last, std::optional<ThreadId> thread) {
    statement.bind(1, first);
    statement.bind(2, last);
    if (thread) statement.bind(3, *thread);
}

}  // namespace

TraceEditor::TraceEditor(const std::string& path) : connection_(path, Connection::Mode::read_write) {
    exec_sql(connection_.get(), path, "PRAGMA journal_mode = MEMORY; PRAGMA synchronous = OFF");
    exec_sql(connection_.get(), path, "BEGIN");
    put_metadata_ = Statement(connection_.get(), path, insert_sql<MetadataRow>("OR REPLACE"));
}

TraceEditor::~TraceEditor() {
    put_metadata_ = {};
    insert_range_ = {};
    // Rolling back cannot lose committed work, and a destructor must not throw.
    if (!committed_) sqlite3_exec(connection_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
}

RangeId TraceEditor::largest_range_id() {
    Statement largest(connection_.get(), path(), "SELECT COALESCE(MAX(range_id), 0) FROM ranges");
    largest.next_row();
    return static_cast<RangeId>(largest.column_int64(0));
}

bool TraceEditor::RangeCursor::next(RangeEvent& range) {
    if (!statement_.next_row()) return false;
    range = read_row<RangeEvent>(statement_);
    return true;
}

TraceEditor::RangeCursor TraceEditor::ranges_by_id(RangeId first, RangeId last, std::optional<ThreadId> thread,
                                                   bool nested_only) {
    Statement select(connection_.get(), path(),
                     "SELECT " + column_list(kTable<RangeEvent>) + " FROM ranges" + range_window(thread, nested_only) +
                         " ORDER BY range_id");
    bind_range_window(select, first, last, thread);
    return RangeCursor(std::move(select));
}

std::int64_t TraceEditor::delete_ranges(RangeId first, RangeId last, std::optional<ThreadId> thread, bool nested_only) {
    Statement remove(connection_.get(), path(), "DELETE FROM ranges" + range_window(thread, nested_only));
    bind_range_window(remove, first, last, thread);
    remove.step_done();
    return sqlite3_changes(connection_.get());
}

void TraceEditor::insert_range(const RangeEvent& range) {
    if (!insert_range_) insert_range_ = Statement(connection_.get(), path(), insert_sql<RangeEvent>());
    bind_row(insert_range_, 1, range);
    insert_range_.step_done();
}

void TraceEditor::recount_range_track_stats(std::optional<ThreadId> thread) {
    const EventTableInfo* ranges = nullptr;
    for (const EventTableInfo& table : kEventTables)
        if (std::string_view(table.name) == TableOf<RangeEvent>::name) ranges = &table;
    Statement forget(
        connection_.get(), path(),
        std::string("DELETE FROM track_stats WHERE event_table = 'ranges'") + (thread ? " AND track_id = ?1" : ""));
    Statement count(connection_.get(), path(),
                    "INSERT INTO track_stats " + track_stats_select_sql(*ranges, thread ? "thread_id = ?1" : ""));
    if (thread) {
        forget.bind(1, *thread);
        count.bind(1, *thread);
    }
    forget.step_done();
    count.step_done();
}

void TraceEditor::replace_run_info(const RunInfo& run) {
    for (const MetadataRow& row : run_info_rows(run)) {
        bind_row(put_metadata_, 1, row);
        put_metadata_.step_done();
    }
}

void TraceEditor::set_metadata(std::string_view key, std::int64_t value) {
    bind_row(put_metadata_, 1, MetadataRow{std::string(key), AnyValue::of_integer(value)});
    put_metadata_.step_done();
}

void TraceEditor::set_metadata(std::string_view key, std::string_view value) {
    bind_row(put_metadata_, 1, MetadataRow{std::string(key), AnyValue::of_text(std::string(value))});
    put_metadata_.step_done();
}

std::int64_t TraceEditor::linked_gpu_event_count() {
    // The writer built the correlation_id indexes: these are index lookups.
    std::string sql = "SELECT 0";
    for (const char* table : {TableOf<KernelRow>::name, TableOf<MemcpyEvent>::name, TableOf<MemsetEvent>::name})
        sql += std::string(" + (SELECT COUNT(*) FROM ") + table +
               " g WHERE g.correlation_id != 0 AND EXISTS (SELECT 1 FROM api_calls a WHERE a.correlation_id = "
               "g.correlation_id))";
    Statement count(connection_.get(), path(), sql);
    count.next_row();
    return count.column_int64(0);
}

void TraceEditor::commit() {
    put_metadata_ = {};
    insert_range_ = {};
    exec_sql(connection_.get(), path(), "COMMIT");
    committed_ = true;
}

}  // namespace ember::store
