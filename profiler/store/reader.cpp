// reader.cpp: TraceReader — validation at open, small tables in memory, event
// tables streamed through prepared statements.
#include "profiler/store/reader.h"

#include "profiler/store/schema.h"
#include "profiler/store/sqlite_util.h"
#include "profiler/store/tables.h"
#include "profiler/store/table_sql.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

namespace ember::store {

using namespace ember::trace;

namespace {

constexpr TimeNs kMinTime = std::numeric_limits<TimeNs>::min();
constexpr TimeNs kMaxTime = std::numeric_limits<TimeNs>::max();

TimeNs saturating_subtract(TimeNs a, TimeNs b) {
    if (b > 0 && a < kMinTime + b) return kMinTime;
    return a - b;
}

std::uint32_t read_big_endian(const unsigned char* bytes, int count) {
    std::uint32_t value = 0;
    for (int i = 0; i < count; ++i) value = (value << 8) | bytes[i];
    return value;
}

bool file_exists(const std::string& path) {
    struct stat info {};
    return ::stat(path.c_str(), &info) == 0;
}

// Checks the 100-byte SQLite header ourselves: a clear "not an ember trace" for
// other files and "truncated" for a cut copy, before SQLite reads any page.
void check_file_header(const std::string& path) {
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0)
        throw TraceError(TraceErrorKind::not_found, path, "no such trace file: " + std::string(std::strerror(errno)));
    if (S_ISDIR(info.st_mode))
        throw TraceError(TraceErrorKind::not_a_trace, path, "is a directory, not an ember trace");
    std::ifstream file(path, std::ios::binary);
    if (!file) throw TraceError(TraceErrorKind::not_found, path, "cannot open for reading");
    unsigned char header[100] = {};
    file.read(reinterpret_cast<char*>(header), sizeof(header));
    std::streamsize got = file.gcount();
    static const char kMagic[] = "SQLite format 3";  // 16 bytes with its NUL
    if (got < 16 || std::memcmp(header, kMagic, 16) != 0) {
        if (got == 0) throw TraceError(TraceErrorKind::not_a_trace, path, "empty file, not an ember trace");
        throw TraceError(TraceErrorKind::not_a_trace, path, "not an ember trace (not an SQLite database)");
    }
    if (got < 100)
        throw TraceError(TraceErrorKind::truncated, path, "truncated: shorter than the 100-byte SQLite header");
    std::uint64_t page_size = read_big_endian(header + 16, 2);
    if (page_size == 1) page_size = 65536;
    if (page_size < 512 || (page_size & (page_size - 1)) != 0)
        throw TraceError(TraceErrorKind::corrupt, path,
                         "damaged SQLite header (page size " + std::to_string(page_size) + ")");
    std::uint64_t size = static_cast<std::uint64_t>(info.st_size);
    bool has_wal = file_exists(path + "-wal");
    if (size % page_size != 0)
        throw TraceError(TraceErrorKind::truncated, path,
                         "truncated: " + std::to_string(size) + " bytes is not a whole number of " +
                             std::to_string(page_size) + "-byte pages");
    std::uint32_t change_counter = read_big_endian(header + 24, 4);
    std::uint32_t page_count = read_big_endian(header + 28, 4);
    std::uint32_t valid_for = read_big_endian(header + 92, 4);
    if (!has_wal && page_count > 0 && change_counter == valid_for && size < page_count * page_size)
        throw TraceError(TraceErrorKind::truncated, path,
                         "truncated: the file has " + std::to_string(size) + " bytes but its header says " +
                             std::to_string(page_count * page_size));
}

}  // namespace

// ---------------------------------------------------------------------------
// [SECTION] Impl
// ---------------------------------------------------------------------------

struct TraceReader::Impl {
    std::string path;
    ReaderOptions options;
    sqlite3* db = nullptr;
    bool writable = false;

    RunInfo run;
    std::map<std::string, std::string, std::less<>> metadata;  // every run_metadata row, as text
    int schema_version = 0;
    int min_reader_version = 0;
    bool complete = false;
    bool has_indexes = false;
    // The SELECT list of each declared table the file has: its declared columns in
    // order, a column the file lacks (added by a later schema version) replaced by its
    // declared default, so rows decode the same from every version. Set by check_tables().
    std::map<std::string, std::string, std::less<>> select_lists;
    const std::string& columns_of(const TableInfo& table) const;
    template <typename Row>
    const std::string& columns_of() const {
        return columns_of(kTable<Row>);
    }
    bool has_table(const TableInfo& table) const { return select_lists.count(table.name) != 0; }
    // (table, column) of each declared column the file lacks. Set by check_tables().
    std::set<std::pair<std::string, std::string>> absent_columns;

    std::vector<ProcessInfo> processes;
    std::vector<ThreadInfo> threads;
    std::vector<DeviceInfo> devices;
    std::vector<StreamInfo> streams;
    std::vector<CounterInfo> counters;
    std::vector<NvtxCategoryName> category_names;  // by domain, category
    std::vector<std::string> strings;              // by id
    std::vector<bool> string_present;
    std::unordered_map<std::string_view, StringId> string_lookup;
    std::vector<LaunchConfig> launch_configs;  // by id
    std::vector<TrackSummary> tracks;
    std::map<std::pair<std::string, std::uint32_t>, TimeNs> max_duration_by_track;
    std::map<std::string, TimeNs> max_duration_by_table;

    // The stacks and frames tables, read in bulk the first time a stack is asked for
    // (one scan each instead of two point queries per frame), and again from the
    // highest id seen when a stack or frame is not there yet (a file still growing).
    std::mutex stack_rows_mutex;
    std::unordered_map<StackId, StackRow> stack_rows;
    std::unordered_map<FrameId, FrameRow> frame_rows;
    std::int64_t stacks_read_to = -1;  // highest stack_id read (-1: none yet)
    std::int64_t frames_read_to = -1;
    void read_stack_rows();
    void read_frame_rows();

    // Prepared statements reused across calls; a visitor that queries the same SQL
    // again while it runs gets a fresh statement.
    std::map<std::string, std::vector<std::unique_ptr<Statement>>> statement_pool;

    void open_database(bool read_write);
    void close_database();
    void validate();
    void load_metadata();
    void check_version() const;
    void check_tables();
    void load_small_tables();
    void load_track_stats();
    void detect_indexes();

    std::unique_ptr<Statement> take_statement(const std::string& sql);
    void give_back(const std::string& sql, std::unique_ptr<Statement> statement);

    // Runs `sql` (parameters bound by `bind`) and calls `row` per result row.
    template <typename Bind, typename Row>
    std::int64_t query(const std::string& sql, Bind bind, Row row);

    // WHERE clause + bounds for an EventQuery on one table.
    struct Window {
        std::string where;
        std::vector<std::int64_t> parameters;
    };
    Window window_for(const EventTableInfo& table, const EventQuery& query) const;

    const EventTableInfo& table_info(std::string_view name) const;
    StringId check_string(std::int64_t id) const;
};

void TraceReader::Impl::open_database(bool read_write) {
    int flags = (read_write ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY) | SQLITE_OPEN_NOMUTEX;
    int result = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
    if (result != SQLITE_OK) {
        std::string message = std::string("cannot open: ") + (db ? sqlite3_errmsg(db) : sqlite3_errstr(result));
        close_database();
        throw TraceError(error_kind_for(result), path, message);
    }
    writable = read_write;
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, 2000);
}

void TraceReader::Impl::close_database() {
    statement_pool.clear();
    if (db) sqlite3_close(db);
    db = nullptr;
}

std::unique_ptr<Statement> TraceReader::Impl::take_statement(const std::string& sql) {
    auto& pool = statement_pool[sql];
    if (!pool.empty()) {
        std::unique_ptr<Statement> statement = std::move(pool.back());
        pool.pop_back();
        return statement;
    }
    return std::make_unique<Statement>(db, path, sql);
}

void TraceReader::Impl::give_back(const std::string& sql, std::unique_ptr<Statement> statement) {
    statement->reset();
    sqlite3_clear_bindings(statement->get());
    statement_pool[sql].push_back(std::move(statement));
}

template <typename Bind, typename Row>
std::int64_t TraceReader::Impl::query(const std::string& sql, Bind bind, Row row) {
    std::unique_ptr<Statement> statement = take_statement(sql);
    std::int64_t count = 0;
    try {
        bind(*statement);
        while (statement->next_row()) {
            ++count;
            if (!row(*statement)) break;
        }
    } catch (...) {
        statement->reset();
        throw;
    }
    give_back(sql, std::move(statement));
    return count;
}

void TraceReader::Impl::validate() {
    // application_id is the first read of the database: SQLite reports a non-database here.
    std::int64_t application_id = 0;
    query(
        "PRAGMA application_id", [](Statement&) {},
        [&](Statement& s) {
            application_id = s.column_int64(0);
            return true;
        });
    if (application_id != kApplicationId) {
        char text[64];
        std::snprintf(text, sizeof(text), "0x%08llx", static_cast<unsigned long long>(application_id));
        throw TraceError(TraceErrorKind::not_a_trace, path,
                         std::string("an SQLite database but not an ember trace (application_id ") + text +
                             ", an ember trace has 0x454d4252)");
    }
    bool has_metadata = false;
    query(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'run_metadata'", [](Statement&) {},
        [&](Statement&) { return has_metadata = true; });
    if (!has_metadata)
        throw TraceError(TraceErrorKind::missing_table, path,
                         "missing table 'run_metadata' (every ember trace has it)");
    load_metadata();
    check_version();
    check_tables();
}

void TraceReader::Impl::load_metadata() {
    std::map<std::string, std::pair<std::int64_t, std::string>> values;
    query(
        "SELECT key, value FROM run_metadata", [](Statement&) {},
        [&](Statement& s) {
            values[s.column_text(0)] = {s.column_int64(1), s.column_text(1)};
            return true;
        });
    metadata.clear();
    for (const auto& [key, value] : values) metadata[key] = value.second;
    auto integer = [&](const char* key, bool required) -> std::int64_t {
        auto found = values.find(key);
        if (found == values.end()) {
            if (required)
                throw TraceError(TraceErrorKind::bad_value, path,
                                 std::string("run_metadata has no '") + key + "' (not a complete ember trace)");
            return 0;
        }
        return found->second.first;
    };
    auto text = [&](const char* key) -> std::string {
        auto found = values.find(key);
        return found == values.end() ? std::string() : found->second.second;
    };
    schema_version = static_cast<int>(integer(metadata_key::schema_version, true));
    min_reader_version = static_cast<int>(integer(metadata_key::min_reader_version, false));
    if (min_reader_version == 0) min_reader_version = schema_version;
    run.ember_version = text(metadata_key::ember_version);
    run.command_line = text(metadata_key::command_line);
    run.host = text(metadata_key::host);
    run.pid = integer(metadata_key::pid, false);
    run.rank = static_cast<std::int32_t>(integer(metadata_key::rank, false));
    run.world_size = static_cast<std::int32_t>(integer(metadata_key::world_size, false));
    run.rank_source = text(metadata_key::rank_source);
    run.clock_name = text(metadata_key::clock_name);
    run.clock_offset_to_wall_ns = integer(metadata_key::clock_offset_to_wall_ns, false);
    run.start_ns = integer(metadata_key::start_ns, false);
    run.end_ns = integer(metadata_key::end_ns, false);
    complete = text(metadata_key::status) == metadata_status::complete;
}

void TraceReader::Impl::check_version() const {
    if (min_reader_version > kSchemaVersion) {
        throw TraceError(TraceErrorKind::version_too_new, path,
                         "written with trace schema version " + std::to_string(schema_version) +
                             " (readable by ember schema >= " + std::to_string(min_reader_version) +
                             "); this ember reads schema version " + std::to_string(kSchemaVersion) +
                             ": upgrade ember to read it");
    }
    if (schema_version < kOldestReadableSchemaVersion) {
        throw TraceError(TraceErrorKind::version_too_old, path,
                         "written with trace schema version " + std::to_string(schema_version) +
                             ", older than the oldest this ember reads (" +
                             std::to_string(kOldestReadableSchemaVersion) + "; this ember writes version " +
                             std::to_string(kSchemaVersion) + ")");
    }
}

void TraceReader::Impl::check_tables() {
    std::set<std::string> present;
    query(
        "SELECT name FROM sqlite_master WHERE type = 'table'", [](Statement&) {},
        [&](Statement& s) {
            present.insert(s.column_text(0));
            return true;
        });
    for (const char* table : kRequiredTables) {
        if (!present.count(table))
            throw TraceError(TraceErrorKind::missing_table, path,
                             std::string("missing table '") + table + "' (trace schema version " +
                                 std::to_string(schema_version) + " requires it)");
    }
    select_lists.clear();
    absent_columns.clear();
    for (const TableInfo& table : kTables) {
        if (!present.count(table.name)) continue;
        std::set<std::string> columns;
        query(
            std::string("SELECT name FROM pragma_table_info('") + table.name + "')", [](Statement&) {},
            [&](Statement& s) {
                columns.insert(s.column_text(0));
                return true;
            });
        // Each later column on its own: a file may have been written by any mix.
        std::string list;
        for (const ColumnInfo& column : table.columns) {
            if (!list.empty()) list += ", ";
            if (!columns.count(column.name)) absent_columns.insert({table.name, column.name});
            const bool absent = !columns.count(column.name) && column.options.default_sql != nullptr;
            list += absent ? column.options.default_sql : column.name;
        }
        select_lists[table.name] = list;
    }
}

const std::string& TraceReader::Impl::columns_of(const TableInfo& table) const {
    auto found = select_lists.find(table.name);
    if (found == select_lists.end())
        throw TraceError(TraceErrorKind::missing_table, path, std::string("missing table '") + table.name + "'");
    return found->second;
}

StringId TraceReader::Impl::check_string(std::int64_t id) const {
    if (id < 0 || static_cast<std::size_t>(id) >= strings.size() || !string_present[static_cast<std::size_t>(id)])
        throw TraceError(TraceErrorKind::bad_value, path, "unknown string id " + std::to_string(id));
    return static_cast<StringId>(id);
}

void TraceReader::Impl::load_small_tables() {
    processes.clear();
    threads.clear();
    devices.clear();
    streams.clear();
    counters.clear();
    category_names.clear();
    string_lookup.clear();
    launch_configs.clear();
    std::int64_t max_id = 0, count = 0;
    query(
        "SELECT COALESCE(MAX(string_id), 0), COUNT(*) FROM strings", [](Statement&) {},
        [&](Statement& s) {
            max_id = s.column_int64(0);
            count = s.column_int64(1);
            return true;
        });
    // Ids are dense (the writer counts from 0); a wildly sparse table is damage.
    if (max_id < 0 || max_id > 4 * count + 1024)
        throw TraceError(TraceErrorKind::bad_value, path,
                         "strings table is inconsistent (largest id " + std::to_string(max_id) + " for " +
                             std::to_string(count) + " rows)");
    strings.assign(static_cast<std::size_t>(max_id) + 1, std::string());
    string_present.assign(static_cast<std::size_t>(max_id) + 1, false);
    string_present[0] = true;
    query(
        "SELECT " + columns_of<StringRow>() + " FROM strings WHERE string_id >= 0", [](Statement&) {},
        [&](Statement& s) {
            StringRow row = read_row<StringRow>(s);
            strings[row.string_id] = std::move(row.value);
            string_present[row.string_id] = true;
            return true;
        });
    string_lookup.reserve(strings.size());
    for (std::size_t id = 0; id < strings.size(); ++id)
        if (string_present[id]) string_lookup.emplace(strings[id], static_cast<StringId>(id));
    auto text = [&](std::int64_t id) { return strings[check_string(id)]; };

    // Every row of a small table, in key order.
    auto each_row = [&]<typename Row>(const char* order_by, auto use) {
        query(
            "SELECT " + columns_of<Row>() + " FROM " + TableOf<Row>::name + " ORDER BY " + order_by, [](Statement&) {},
            [&](Statement& s) {
                use(read_row<Row>(s));
                return true;
            });
    };
    each_row.operator()<ProcessRow>("pid", [&](const ProcessRow& row) {
        processes.push_back({row.pid, text(row.name_id)});
    });
    each_row.operator()<ThreadRow>("thread_id", [&](const ThreadRow& row) {
        threads.push_back({row.thread_id, row.pid, row.tid, text(row.name_id)});
    });
    each_row.operator()<DeviceRow>("device_id", [&](const DeviceRow& row) {
        devices.push_back({row.device_id, text(row.name_id), text(row.uuid_id), row.compute_capability_major,
                           row.compute_capability_minor, row.multiprocessor_count, row.memory_bytes,
                           row.memory_bandwidth_bytes_per_second});
    });
    each_row.operator()<StreamRow>("stream_id", [&](const StreamRow& row) {
        streams.push_back(
            {row.stream_id, row.device_id, row.context_id, row.cuda_stream_id, row.priority, text(row.name_id)});
    });
    // Added to version 1 later: absent from older files.
    if (has_table(kTable<NvtxCategoryRow>))
        each_row.operator()<NvtxCategoryRow>("domain_id, category", [&](const NvtxCategoryRow& row) {
            category_names.push_back({check_string(row.domain_id), row.category, text(row.name_id)});
        });
    each_row.operator()<CounterRow>("counter_id", [&](const CounterRow& row) {
        counters.push_back({row.counter_id, text(row.name_id), text(row.unit_id), row.device_id});
    });
    query(
        "SELECT " + columns_of<LaunchConfigRow>() +
            " FROM launch_configs WHERE launch_config_id BETWEEN 0 AND 100000000",
        [](Statement&) {},
        [&](Statement& s) {
            LaunchConfigRow row = read_row<LaunchConfigRow>(s);
            if (row.launch_config_id >= launch_configs.size()) launch_configs.resize(row.launch_config_id + 1);
            launch_configs[row.launch_config_id] = row;
            return true;
        });
}

void TraceReader::Impl::load_track_stats() {
    auto add = [&](Statement& s) {
        const TrackStatsRow row = read_row<TrackStatsRow>(s);
        TrackSummary summary;
        summary.event_table = row.event_table;
        const EventTableInfo& info = table_info(summary.event_table);
        std::string_view track_column = info.track_column;
        summary.track.kind = track_column == "stream_id"    ? TrackKind::stream
                             : track_column == "counter_id" ? TrackKind::counter
                                                            : TrackKind::thread;
        summary.track.id = row.track_id;
        summary.event_count = row.event_count;
        summary.first_start_ns = row.first_start_ns;
        summary.last_end_ns = row.last_end_ns;
        summary.max_duration_ns = row.max_duration_ns;
        tracks.push_back(summary);
        return true;
    };
    query(
        "SELECT " + columns_of<TrackStatsRow>() + " FROM track_stats ORDER BY event_table, track_id", [](Statement&) {},
        add);
    if (tracks.empty()) {
        // No track_stats: the writer did not close (killed). Compute them by scanning.
        for (const EventTableInfo& table : kEventTables)
            query(
                track_stats_select_sql(table), [](Statement&) {}, add);
    }
    for (const TrackSummary& summary : tracks) {
        max_duration_by_track[{summary.event_table, summary.track.id}] = summary.max_duration_ns;
        TimeNs& table_max = max_duration_by_table[summary.event_table];
        table_max = std::max(table_max, summary.max_duration_ns);
    }
}

void TraceReader::Impl::detect_indexes() {
    std::set<std::string> present;
    query(
        "SELECT name FROM sqlite_master WHERE type = 'index'", [](Statement&) {},
        [&](Statement& s) {
            present.insert(s.column_text(0));
            return true;
        });
    int found = 0;
    for (const TableInfo& table : kTables)
        for (const IndexInfo& index : table.indexes) found += static_cast<int>(present.count(index.name));
    has_indexes = found == kIndexCount;
}

const EventTableInfo& TraceReader::Impl::table_info(std::string_view name) const {
    for (const EventTableInfo& table : kEventTables)
        if (name == table.name) return table;
    throw TraceError(TraceErrorKind::bad_value, path, "no event table named '" + std::string(name) + "'");
}

TraceReader::Impl::Window TraceReader::Impl::window_for(const EventTableInfo& table, const EventQuery& q) const {
    Window window;
    bool instant = std::strcmp(table.start_column, table.end_column) == 0;
    std::string start = table.start_column;
    if (q.track) {
        window.where += std::string(table.track_column) + " = ? AND ";
        window.parameters.push_back(*q.track);
    }
    if (q.rowid_bounded()) {
        window.where += "rowid > ? AND rowid <= ? AND ";
        window.parameters.push_back(q.after_rowid);
        window.parameters.push_back(q.upto_rowid);
    }
    if (instant) {
        window.where += start + " >= ? AND " + start + " < ?";
        window.parameters.push_back(q.begin_ns);
        window.parameters.push_back(q.end_ns);
        return window;
    }
    // An event overlapping [begin, end) starts before `end` and no earlier than
    // begin - (longest event on the track): a bounded scan of (track, start).
    TimeNs longest = 0;
    if (q.track) {
        auto found = max_duration_by_track.find({table.name, *q.track});
        longest = found == max_duration_by_track.end() ? 0 : found->second;
    } else {
        auto found = max_duration_by_table.find(table.name);
        longest = found == max_duration_by_table.end() ? 0 : found->second;
    }
    if (q.begin_ns == kMinTime && q.end_ns == kMaxTime) {
        window.where += "1";
        return window;
    }
    window.where += start + " >= ? AND " + start + " < ? AND " + table.end_column + " > ?";
    window.parameters.push_back(saturating_subtract(q.begin_ns, longest));
    window.parameters.push_back(q.end_ns);
    window.parameters.push_back(q.begin_ns);
    return window;
}

// ---------------------------------------------------------------------------
// [SECTION] Row decoding (read_row of tables.h; a kernel's launch config by its id)
// ---------------------------------------------------------------------------

namespace {

KernelEvent read_kernel(const Statement& s, const TraceReader& reader) {
    KernelRow row = read_row<KernelRow>(s);
    row.launch = reader.launch_config(row.launch_config_id);
    return row;
}

}  // namespace

// ---------------------------------------------------------------------------
// [SECTION] TraceReader
// ---------------------------------------------------------------------------

TraceReader::TraceReader(const std::string& path, ReaderOptions options) : impl_(std::make_unique<Impl>()) {
    Impl& impl = *impl_;
    impl.path = path;
    impl.options = options;
    check_file_header(path);
    impl.open_database(options.build_missing_indexes);
    try {
        impl.validate();
        impl.load_small_tables();
        impl.detect_indexes();
        if (options.build_missing_indexes && !impl.has_indexes) build_missing_indexes();
        impl.load_track_stats();
    } catch (...) {
        impl.close_database();
        throw;
    }
}

TraceReader::~TraceReader() {
    impl_->close_database();
}

const std::string& TraceReader::path() const {
    return impl_->path;
}
const RunInfo& TraceReader::run() const {
    return impl_->run;
}
int TraceReader::schema_version() const {
    return impl_->schema_version;
}
int TraceReader::min_reader_version() const {
    return impl_->min_reader_version;
}
bool TraceReader::complete() const {
    return impl_->complete;
}
bool TraceReader::has_indexes() const {
    return impl_->has_indexes;
}
std::optional<std::string> TraceReader::metadata(std::string_view key) const {
    auto found = impl_->metadata.find(key);
    if (found == impl_->metadata.end()) return std::nullopt;
    return found->second;
}

const std::vector<ProcessInfo>& TraceReader::processes() const {
    return impl_->processes;
}
const std::vector<ThreadInfo>& TraceReader::threads() const {
    return impl_->threads;
}
const std::vector<DeviceInfo>& TraceReader::devices() const {
    return impl_->devices;
}
const std::vector<StreamInfo>& TraceReader::streams() const {
    return impl_->streams;
}
const std::vector<CounterInfo>& TraceReader::counters() const {
    return impl_->counters;
}

const std::vector<NvtxCategoryName>& TraceReader::nvtx_category_names() const {
    return impl_->category_names;
}

std::string_view TraceReader::nvtx_category_name(StringId domain_id, std::uint32_t category) const {
    for (const NvtxCategoryName& named : impl_->category_names)
        if (named.domain_id == domain_id && named.category == category) return named.name;
    return "";
}

const ThreadInfo* TraceReader::thread(ThreadId id) const {
    for (const ThreadInfo& t : impl_->threads)
        if (t.thread_id == id) return &t;
    return nullptr;
}
const StreamInfo* TraceReader::stream(StreamId id) const {
    for (const StreamInfo& s : impl_->streams)
        if (s.stream_id == id) return &s;
    return nullptr;
}
const DeviceInfo* TraceReader::device(DeviceId id) const {
    for (const DeviceInfo& d : impl_->devices)
        if (d.device_id == id) return &d;
    return nullptr;
}
const CounterInfo* TraceReader::counter(CounterId id) const {
    for (const CounterInfo& c : impl_->counters)
        if (c.counter_id == id) return &c;
    return nullptr;
}

std::string_view TraceReader::string(StringId id) const {
    return impl_->strings[impl_->check_string(id)];
}

std::optional<StringId> TraceReader::find_string(std::string_view text) const {
    auto found = impl_->string_lookup.find(text);
    if (found == impl_->string_lookup.end()) return std::nullopt;
    return found->second;
}

std::size_t TraceReader::string_count() const {
    return impl_->string_lookup.size();
}

LaunchConfig TraceReader::launch_config(LaunchConfigId id) const {
    if (id >= impl_->launch_configs.size())
        throw TraceError(TraceErrorKind::bad_value, impl_->path, "unknown launch config id " + std::to_string(id));
    return impl_->launch_configs[id];
}

void TraceReader::Impl::read_stack_rows() {
    query(
        "SELECT " + columns_of<StackRow>() + " FROM stacks WHERE stack_id > ?",
        [&](Statement& s) { s.bind(1, stacks_read_to); },
        [&](Statement& s) {
            const StackRow row = read_row<StackRow>(s);
            stack_rows[row.stack_id] = row;
            stacks_read_to = std::max<std::int64_t>(stacks_read_to, row.stack_id);
            return true;
        });
}

void TraceReader::Impl::read_frame_rows() {
    query(
        "SELECT " + columns_of<FrameRow>() + " FROM frames WHERE frame_id > ?",
        [&](Statement& s) { s.bind(1, frames_read_to); },
        [&](Statement& s) {
            const FrameRow row = read_row<FrameRow>(s);
            frame_rows[row.frame_id] = row;
            frames_read_to = std::max<std::int64_t>(frames_read_to, row.frame_id);
            return true;
        });
}

std::vector<FrameInfo> TraceReader::stack_frames(StackId stack) const {
    std::lock_guard lock(impl_->stack_rows_mutex);
    std::vector<FrameInfo> frames;
    StackId node = stack;
    // A stack deeper than this is a cycle (damage), not a program.
    for (int depth = 0; node != 0 && depth < 100000; ++depth) {
        auto row = impl_->stack_rows.find(node);
        if (row == impl_->stack_rows.end()) {
            impl_->read_stack_rows();
            row = impl_->stack_rows.find(node);
            if (row == impl_->stack_rows.end())
                throw TraceError(TraceErrorKind::bad_value, impl_->path, "unknown stack id " + std::to_string(node));
        }
        const FrameId frame_id = row->second.frame_id;
        auto frame = impl_->frame_rows.find(frame_id);
        if (frame == impl_->frame_rows.end()) {
            impl_->read_frame_rows();
            frame = impl_->frame_rows.find(frame_id);
        }
        // A stack row naming no frame row gives no frame, as the point query did.
        if (frame != impl_->frame_rows.end())
            frames.push_back({frame_id, std::string(string(frame->second.function_id)),
                              std::string(string(frame->second.module_id)), frame->second.address, frame->second.line});
        node = row->second.parent_stack_id;
    }
    std::reverse(frames.begin(), frames.end());
    return frames;
}

TraceReader::Snapshot::Snapshot(const TraceReader& reader) : reader_(&reader) {
    exec_sql(reader.impl_->db, reader.impl_->path, "BEGIN");
}

TraceReader::Snapshot::~Snapshot() {
    // A read transaction: ending it cannot lose anything, and a destructor must not throw.
    if (reader_) sqlite3_exec(reader_->impl_->db, "ROLLBACK", nullptr, nullptr, nullptr);
}

TraceReader::Snapshot TraceReader::snapshot() const {
    return Snapshot(*this);
}

std::vector<std::int64_t> TraceReader::highest_rowids() const {
    std::vector<std::int64_t> marks;
    for (const EventTableInfo& table : kEventTables)
        impl_->query(
            std::string("SELECT COALESCE(MAX(rowid), 0) FROM ") + table.name, [](Statement&) {},
            [&](Statement& s) {
                marks.push_back(s.column_int64(0));
                return false;
            });
    return marks;
}

void TraceReader::reload_small_tables() {
    impl_->load_small_tables();
}

std::vector<std::pair<StringId, std::string>> TraceReader::strings_from(StringId first) const {
    std::vector<std::pair<StringId, std::string>> rows;
    for (std::size_t id = first; id < impl_->strings.size(); ++id)
        if (impl_->string_present[id]) rows.emplace_back(static_cast<StringId>(id), impl_->strings[id]);
    return rows;
}

std::vector<DroppedRecords> TraceReader::dropped_records() const {
    std::vector<DroppedRecords> rows;
    impl_->query(
        "SELECT " + impl_->columns_of<DroppedRecords>() + " FROM dropped_records ORDER BY time_ns", [](Statement&) {},
        [&](Statement& s) {
            rows.push_back(read_row<DroppedRecords>(s));
            return true;
        });
    return rows;
}

std::uint64_t TraceReader::total_dropped() const {
    std::uint64_t total = 0;
    for (const DroppedRecords& row : dropped_records()) total += row.count;
    return total;
}

std::vector<CollectiveCall> TraceReader::collective_calls() const {
    std::vector<CollectiveCall> rows;
    if (!impl_->has_table(kTable<CollectiveCall>)) return rows;
    impl_->query(
        "SELECT " + impl_->columns_of<CollectiveCall>() +
            " FROM collective_calls ORDER BY start_ns, on_stream, track_id",
        [](Statement&) {},
        [&](Statement& s) {
            rows.push_back(read_row<CollectiveCall>(s));
            return true;
        });
    return rows;
}

std::int64_t TraceReader::for_each_memory_event(const Visitor<MemoryEvent>& visit,
                                                std::optional<DeviceId> device) const {
    if (!impl_->has_table(kTable<MemoryEvent>)) return 0;
    std::int64_t visited = 0;
    std::string sql = "SELECT " + impl_->columns_of<MemoryEvent>() + " FROM memory_events";
    if (device) sql += " WHERE device_id = ?";
    sql += " ORDER BY device_id, time_ns, rowid";
    impl_->query(
        sql,
        [&](Statement& s) {
            if (device) s.bind(1, static_cast<std::int64_t>(*device));
        },
        [&](Statement& s) {
            ++visited;
            return visit(read_row<MemoryEvent>(s));
        });
    return visited;
}

std::vector<std::pair<DeviceId, std::int64_t>> TraceReader::memory_event_devices() const {
    std::vector<std::pair<DeviceId, std::int64_t>> devices;
    if (!impl_->has_table(kTable<MemoryEvent>)) return devices;
    impl_->query(
        "SELECT device_id, COUNT(*) FROM memory_events GROUP BY device_id ORDER BY device_id", [](Statement&) {},
        [&](Statement& s) {
            devices.emplace_back(static_cast<DeviceId>(s.column_int64(0)), s.column_int64(1));
            return true;
        });
    return devices;
}

std::int64_t TraceReader::memory_event_count() const {
    if (!impl_->has_table(kTable<MemoryEvent>)) return 0;
    std::int64_t count = 0;
    impl_->query(
        "SELECT COUNT(*) FROM memory_events", [](Statement&) {},
        [&](Statement& s) {
            count = s.column_int64(0);
            return false;
        });
    return count;
}

std::vector<MemoryBlock> TraceReader::memory_blocks() const {
    std::vector<MemoryBlock> rows;
    if (!impl_->has_table(kTable<MemoryBlock>)) return rows;
    impl_->query(
        "SELECT " + impl_->columns_of<MemoryBlock>() +
            " FROM memory_blocks ORDER BY device_id, segment_address, address, rowid",
        [](Statement&) {},
        [&](Statement& s) {
            rows.push_back(read_row<MemoryBlock>(s));
            return true;
        });
    return rows;
}

const std::vector<TrackSummary>& TraceReader::tracks() const {
    return impl_->tracks;
}

std::int64_t TraceReader::event_count(std::string_view table) const {
    const EventTableInfo& info = impl_->table_info(table);
    std::int64_t count = 0;
    impl_->query(
        std::string("SELECT COUNT(*) FROM ") + info.name, [](Statement&) {},
        [&](Statement& s) {
            count = s.column_int64(0);
            return true;
        });
    return count;
}

// The shared body of every for_each_*: SELECT columns WHERE window ORDER BY start.
// Without a track, an indexed file is read one track at a time (each in index
// order) and the tracks merged by start time, which avoids sorting the whole
// table; a file without indexes lets SQLite sort.
struct VisitAccess {
    template <typename Event, typename Decode>
    static std::int64_t run(TraceReader::Impl& impl, const char* table_name, const char* columns,
                            const EventQuery& query, const Visitor<Event>& visit, Decode decode) {
        const EventTableInfo& table = impl.table_info(table_name);
        // Per-track merging needs the track list, which is the file's at open: rows
        // selected by rowid (a growing file's new rows) may be on newer tracks.
        if (!query.track && impl.has_indexes && !query.rowid_bounded()) {
            std::vector<std::uint32_t> tracks;
            for (const TrackSummary& summary : impl.tracks)
                if (summary.event_table == table.name) tracks.push_back(summary.track.id);
            if (tracks.size() > 1) return merge_tracks(impl, table, columns, query, tracks, visit, decode);
            if (tracks.size() == 1) {
                EventQuery one_track = query;
                one_track.track = tracks[0];
                return run(impl, table_name, columns, one_track, visit, decode);
            }
        }
        TraceReader::Impl::Window window = impl.window_for(table, query);
        std::string sql = select_sql(table, columns, window);
        std::int64_t visited = 0;
        impl.query(
            sql,
            [&](Statement& s) {
                for (std::size_t i = 0; i < window.parameters.size(); ++i)
                    s.bind(static_cast<int>(i + 1), window.parameters[i]);
            },
            [&](Statement& s) {
                ++visited;
                return visit(decode(s));
            });
        return visited;
    }

    static std::string select_sql(const EventTableInfo& table, const char* columns,
                                  const TraceReader::Impl::Window& window) {
        return std::string("SELECT ") + columns + " FROM " + table.name + " WHERE " + window.where + " ORDER BY " +
               table.start_column;
    }

    template <typename Event, typename Decode>
    static std::int64_t merge_tracks(TraceReader::Impl& impl, const EventTableInfo& table, const char* columns,
                                     const EventQuery& query, const std::vector<std::uint32_t>& tracks,
                                     const Visitor<Event>& visit, Decode decode) {
        struct Cursor {
            std::string sql;
            std::unique_ptr<Statement> statement;
            Event head{};
            bool has_head = false;
        };
        std::vector<Cursor> cursors(tracks.size());
        auto advance = [&](Cursor& cursor) {
            cursor.has_head = cursor.statement->next_row();
            if (cursor.has_head) cursor.head = decode(*cursor.statement);
        };
        std::int64_t visited = 0;
        try {
            for (std::size_t i = 0; i < tracks.size(); ++i) {
                EventQuery one_track = query;
                one_track.track = tracks[i];
                TraceReader::Impl::Window window = impl.window_for(table, one_track);
                cursors[i].sql = select_sql(table, columns, window);
                cursors[i].statement = impl.take_statement(cursors[i].sql);
                for (std::size_t p = 0; p < window.parameters.size(); ++p)
                    cursors[i].statement->bind(static_cast<int>(p + 1), window.parameters[p]);
                advance(cursors[i]);
            }
            for (;;) {
                // Few tracks (threads, streams): a linear scan for the earliest head is enough.
                Cursor* earliest = nullptr;
                for (Cursor& cursor : cursors)
                    if (cursor.has_head && (!earliest || start_of(cursor.head) < start_of(earliest->head)))
                        earliest = &cursor;
                if (!earliest) break;
                ++visited;
                if (!visit(earliest->head)) break;
                advance(*earliest);
            }
        } catch (...) {
            for (Cursor& cursor : cursors)
                if (cursor.statement) cursor.statement->reset();
            throw;
        }
        for (Cursor& cursor : cursors)
            if (cursor.statement) impl.give_back(cursor.sql, std::move(cursor.statement));
        return visited;
    }
};

std::int64_t TraceReader::for_each_kernel(const EventQuery& q, const Visitor<KernelEvent>& visit) const {
    Impl& impl = *impl_;
    return VisitAccess::run<KernelEvent>(impl, TableOf<KernelRow>::name, impl.columns_of<KernelRow>().c_str(), q, visit,
                                         [&](const Statement& s) { return read_kernel(s, *this); });
}

namespace {
// for_each_* of an event type whose rows are the event struct itself.
template <typename Event>
std::int64_t visit_rows(TraceReader::Impl& impl, const EventQuery& q, const Visitor<Event>& visit) {
    return VisitAccess::run<Event>(impl, TableOf<Event>::name, impl.columns_of<Event>().c_str(), q, visit,
                                   [](const Statement& s) { return read_row<Event>(s); });
}
}  // namespace

std::int64_t TraceReader::for_each_memcpy(const EventQuery& q, const Visitor<MemcpyEvent>& visit) const {
    return visit_rows(*impl_, q, visit);
}
std::int64_t TraceReader::for_each_memset(const EventQuery& q, const Visitor<MemsetEvent>& visit) const {
    return visit_rows(*impl_, q, visit);
}
std::int64_t TraceReader::for_each_sync(const EventQuery& q, const Visitor<SyncEvent>& visit) const {
    return visit_rows(*impl_, q, visit);
}
std::int64_t TraceReader::for_each_api_call(const EventQuery& q, const Visitor<ApiEvent>& visit) const {
    return visit_rows(*impl_, q, visit);
}
std::int64_t TraceReader::for_each_range(const EventQuery& q, const Visitor<RangeEvent>& visit) const {
    return visit_rows(*impl_, q, visit);
}
std::int64_t TraceReader::for_each_mark(const EventQuery& q, const Visitor<MarkEvent>& visit) const {
    return visit_rows(*impl_, q, visit);
}
std::int64_t TraceReader::for_each_counter_sample(const EventQuery& q, const Visitor<CounterSample>& visit) const {
    return visit_rows(*impl_, q, visit);
}
std::int64_t TraceReader::for_each_stack_sample(const EventQuery& q, const Visitor<StackSample>& visit) const {
    return visit_rows(*impl_, q, visit);
}
std::int64_t TraceReader::for_each_overhead(const EventQuery& q, const Visitor<OverheadEvent>& visit) const {
    return visit_rows(*impl_, q, visit);
}

namespace {
// The rows of one table holding `correlation`, by start.
template <typename Row, typename Decode>
auto rows_by_correlation(TraceReader::Impl& impl, CorrelationId correlation, Decode decode) {
    std::vector<decltype(decode(std::declval<const Statement&>()))> events;
    impl.query(
        "SELECT " + impl.columns_of<Row>() + " FROM " + TableOf<Row>::name +
            " WHERE correlation_id = ? ORDER BY start_ns",
        [&](Statement& s) { s.bind(1, correlation); },
        [&](Statement& s) {
            events.push_back(decode(s));
            return true;
        });
    return events;
}
}  // namespace

std::vector<KernelEvent> TraceReader::kernels_by_correlation(CorrelationId id) const {
    return rows_by_correlation<KernelRow>(*impl_, id, [&](const Statement& s) { return read_kernel(s, *this); });
}

std::vector<MemcpyEvent> TraceReader::memcpys_by_correlation(CorrelationId id) const {
    return rows_by_correlation<MemcpyEvent>(*impl_, id, [](const Statement& s) { return read_row<MemcpyEvent>(s); });
}

std::vector<MemsetEvent> TraceReader::memsets_by_correlation(CorrelationId id) const {
    return rows_by_correlation<MemsetEvent>(*impl_, id, [](const Statement& s) { return read_row<MemsetEvent>(s); });
}

std::optional<ApiEvent> TraceReader::api_call_by_correlation(CorrelationId id) const {
    std::optional<ApiEvent> event;
    impl_->query(
        "SELECT " + impl_->columns_of<ApiEvent>() +
            " FROM api_calls WHERE correlation_id = ? ORDER BY start_ns LIMIT 1",
        [&](Statement& s) { s.bind(1, id); },
        [&](Statement& s) {
            event = read_row<ApiEvent>(s);
            return false;
        });
    return event;
}

std::optional<RangeEvent> TraceReader::range(RangeId id) const {
    std::optional<RangeEvent> event;
    impl_->query(
        "SELECT " + impl_->columns_of<RangeEvent>() + " FROM ranges WHERE range_id = ?",
        [&](Statement& s) { s.bind(1, id); },
        [&](Statement& s) {
            event = read_row<RangeEvent>(s);
            return false;
        });
    return event;
}

std::int64_t TraceReader::for_each_range_named(std::span<const StringId> names,
                                               const Visitor<RangeEvent>& visit) const {
    if (names.empty()) return 0;
    std::string list;
    for (StringId name : names) list += (list.empty() ? "" : ",") + std::to_string(name);
    std::int64_t visited = 0;
    impl_->query(
        "SELECT " + impl_->columns_of<RangeEvent>() + " FROM ranges WHERE name_id IN (" + list +
            ") ORDER BY start_ns, range_id",
        [](Statement&) {},
        [&](Statement& s) {
            ++visited;
            return visit(read_row<RangeEvent>(s));
        });
    return visited;
}

std::vector<RangeEvent> TraceReader::child_ranges(RangeId id) const {
    std::vector<RangeEvent> events;
    std::optional<RangeEvent> parent = range(id);
    if (!parent) return events;
    // Children lie on the parent's thread and start inside it: a scan of the
    // (thread_id, start_ns) index over the parent's interval, no index of its own.
    impl_->query(
        "SELECT " + impl_->columns_of<RangeEvent>() +
            " FROM ranges WHERE thread_id = ? AND start_ns >= ? AND start_ns < ? AND parent_range_id = ? "
            "ORDER BY start_ns",
        [&](Statement& s) {
            s.bind(1, parent->thread_id);
            s.bind(2, parent->start_ns);
            s.bind(3, std::max(parent->end_ns, parent->start_ns + 1));
            s.bind(4, id);
        },
        [&](Statement& s) {
            events.push_back(read_row<RangeEvent>(s));
            return true;
        });
    return events;
}

void TraceReader::build_missing_indexes() {
    Impl& impl = *impl_;
    if (!impl.writable) {
        impl.close_database();
        impl.open_database(true);
    }
    exec_sql(impl.db, impl.path, "PRAGMA threads = 2");
    exec_sql(impl.db, impl.path, "BEGIN");
    exec_sql(impl.db, impl.path, create_indexes_sql().c_str());
    exec_sql(impl.db, impl.path, "DELETE FROM track_stats");
    for (const EventTableInfo& table : kEventTables)
        exec_sql(impl.db, impl.path, ("INSERT INTO track_stats " + track_stats_select_sql(table)).c_str());
    exec_sql(impl.db, impl.path, "COMMIT");
    impl.detect_indexes();
    impl.tracks.clear();
    impl.max_duration_by_track.clear();
    impl.max_duration_by_table.clear();
    impl.load_track_stats();
}

Statement query(const TraceReader& reader, TableSql sql) {
    const TraceReader::Impl& impl = *reader.impl_;
    if (impl.absent_columns.empty()) return Statement(impl.db, impl.path, sql.text());
    return Statement(impl.db, impl.path,
                     with_file_defaults(sql.text(), [&](const TableInfo& table, const ColumnInfo& column) {
                         return impl.absent_columns.count({table.name, column.name}) != 0;
                     }));
}

}  // namespace ember::store
