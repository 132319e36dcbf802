// tables.h: every table of an ember trace file, declared once.
//
// A table is a row struct and a list of columns, each column naming the field of the
// row it holds; its SQL type follows from the field's C++ type. Options say what the
// field's type cannot: the primary key, the schema version that added the column and
// the DEFAULT an older file's rows read as. Everything else is derived from these
// declarations: the CREATE statements and indexes (schema.h), the writer's INSERTs and
// binders, the reader's SELECT lists and decoders, and the check that
// docs/trace-schema.md lists exactly these columns (tests/profiler/store). Adding a
// column is one line here, a field in its row struct, and kSchemaVersion.
//
// Perfetto's trace processor declares its tables the same way
// (src/trace_processor/tables/*.py): one declaration, everything else generated.
//
// [SECTION] Column and table descriptors
// [SECTION] Row structs of the tables that hold no event
// [SECTION] The declarations
// [SECTION] Every table, in file order
// [SECTION] SQL, binders and decoders derived from a declaration
#pragma once

#include "profiler/store/sqlite_util.h"
#include "profiler/trace/events.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace ember::store {

// ---------------------------------------------------------------------------
// [SECTION] Column and table descriptors
// ---------------------------------------------------------------------------

// SQL column types; `any` is an untyped column (an NVTX payload, a metadata value),
// which may hold NULL.
enum class SqlType { integer, real, text, any };

const char* sql_type_name(SqlType type);

// What a column's C++ field type cannot say.
struct ColumnOptions {
    bool primary_key = false;           // the table's one-column primary key
    int since_version = 1;              // the schema version that added the column
    const char* default_sql = nullptr;  // DEFAULT (SQL literal): what a file without the column reads
};

struct ColumnInfo {
    const char* name = nullptr;
    SqlType type = SqlType::integer;
    ColumnOptions options;
    bool not_null() const { return type != SqlType::any && !options.primary_key; }
};

struct IndexInfo {
    const char* name;
    const char* columns;  // "stream_id, start_ns"
};

// A table, without its row type: what SQL and documentation need.
struct TableInfo {
    const char* name;
    std::span<const ColumnInfo> columns;
    std::span<const IndexInfo> indexes;  // built at close (or as rows arrive, on request)
    const char* composite_key;           // "domain_id, category" (a WITHOUT ROWID table), or nullptr
    // The version-1 tables a reader requires; the others were added later, and a file
    // without them reads as having them empty.
    bool required;
    int since_version;
    int name_gap;  // spaces between the padded column names and their types in CREATE
};

// Binds one value of a row at a parameter, or reads it from a result column.
template <typename T>
inline void bind_value(Statement& s, int index, const T& value) {
    if constexpr (std::is_same_v<T, trace::Payload>)
        bind_payload(s, index, value);
    else if constexpr (std::is_same_v<T, std::string>)
        s.bind_text(index, value);
    else if constexpr (std::is_same_v<T, double>)
        s.bind(index, value);
    else if constexpr (std::is_enum_v<T>)
        s.bind(index, static_cast<std::int64_t>(static_cast<std::underlying_type_t<T>>(value)));
    else if constexpr (std::is_same_v<T, bool>)
        s.bind(index, std::int64_t{value ? 1 : 0});
    else if constexpr (std::is_same_v<T, AnyValue>)
        bind_any(s, index, value);
    else
        s.bind(index, static_cast<std::int64_t>(value));
}

template <typename T>
inline void read_value(const Statement& s, int column, T& value) {
    if constexpr (std::is_same_v<T, trace::Payload>)
        value = column_payload(s, column);
    else if constexpr (std::is_same_v<T, std::string>)
        value = s.column_text(column);
    else if constexpr (std::is_same_v<T, double>)
        value = s.column_double(column);
    else if constexpr (std::is_enum_v<T>)
        value = static_cast<T>(static_cast<std::underlying_type_t<T>>(s.column_int64(column)));
    else if constexpr (std::is_same_v<T, bool>)
        value = s.column_int64(column) != 0;
    else if constexpr (std::is_same_v<T, AnyValue>)
        value = column_any(s, column);
    else
        value = static_cast<T>(s.column_int64(column));
}

template <typename T>
constexpr SqlType sql_type_of() {
    if constexpr (std::is_same_v<T, trace::Payload> || std::is_same_v<T, AnyValue>)
        return SqlType::any;
    else if constexpr (std::is_same_v<T, std::string>)
        return SqlType::text;
    else if constexpr (std::is_floating_point_v<T>)
        return SqlType::real;
    else {
        static_assert(std::is_integral_v<T> || std::is_enum_v<T>, "a column holds a number, text or payload");
        return SqlType::integer;
    }
}

// A column of a row type: its description and the field it holds.
template <typename Row>
struct Column {
    ColumnInfo info;
    void (*bind)(Statement& statement, int parameter, const Row& row);
    void (*read)(const Statement& statement, int column, Row& row);
};

template <typename Member>
struct MemberType;
template <typename T, typename Class>
struct MemberType<T Class::*> {
    using type = T;
};

// A column before its row type is known: `field<&Row::member>("name")`.
template <auto Member>
struct Field {
    ColumnInfo info;
};
template <auto Member>
constexpr Field<Member> field(const char* name, ColumnOptions options = {}) {
    using T = typename MemberType<decltype(Member)>::type;
    return Field<Member>{ColumnInfo{name, sql_type_of<T>(), options}};
}

template <typename Row, auto Member>
void bind_member(Statement& s, int parameter, const Row& row) {
    bind_value(s, parameter, row.*Member);
}
template <typename Row, auto Member>
void read_member(const Statement& s, int column, Row& row) {
    read_value(s, column, row.*Member);
}

// The columns of `Row`, in table order.
template <typename Row, auto... Members>
constexpr std::array<Column<Row>, sizeof...(Members)> columns(Field<Members>... fields) {
    return {Column<Row>{fields.info, &bind_member<Row, Members>, &read_member<Row, Members>}...};
}

// Each table specialises TableOf<Row> with `name`, `columns` and, where it has them,
// `indexes`, `composite_key`, `required` and `since_version` (the defaults below).
struct TableDefaults {
    static constexpr std::span<const IndexInfo> indexes{};
    static constexpr const char* composite_key = nullptr;
    static constexpr bool required = true;
    static constexpr int since_version = 1;
    static constexpr int name_gap = 1;
};
template <typename Row>
struct TableOf;

// ---------------------------------------------------------------------------
// [SECTION] Row structs of the tables that hold no event
// ---------------------------------------------------------------------------
// Event tables hold trace:: structs (events.h) directly; kernels hold KernelRow.

struct MetadataRow {
    std::string key;
    AnyValue value;
};
struct StringRow {
    trace::StringId string_id = 0;
    std::string value;
};
struct ProcessRow {
    std::int64_t pid = 0;
    trace::StringId name_id = trace::kNoString;
};
struct ThreadRow {
    trace::ThreadId thread_id = 0;
    std::int64_t pid = 0;
    std::int64_t tid = 0;
    trace::StringId name_id = trace::kNoString;
};
struct DeviceRow {
    trace::DeviceId device_id = 0;
    trace::StringId name_id = trace::kNoString;
    trace::StringId uuid_id = trace::kNoString;
    std::int32_t compute_capability_major = 0;
    std::int32_t compute_capability_minor = 0;
    std::int32_t multiprocessor_count = 0;
    std::int64_t memory_bytes = 0;
    double memory_bandwidth_bytes_per_second = 0.0;
};
struct StreamRow {
    trace::StreamId stream_id = 0;
    trace::DeviceId device_id = 0;
    std::uint32_t context_id = 0;
    std::uint64_t cuda_stream_id = 0;
    std::int32_t priority = 0;
    trace::StringId name_id = trace::kNoString;
};
struct CounterRow {
    trace::CounterId counter_id = 0;
    trace::StringId name_id = trace::kNoString;
    trace::StringId unit_id = trace::kNoString;
    trace::DeviceId device_id = trace::kNoDevice;
};
struct LaunchConfigRow : trace::LaunchConfig {
    trace::LaunchConfigId launch_config_id = 0;
};
struct FrameRow {
    trace::FrameId frame_id = 0;
    trace::StringId function_id = trace::kNoString;
    trace::StringId module_id = trace::kNoString;
    std::uint64_t address = 0;
    std::int32_t line = -1;
};
struct StackRow {
    trace::StackId stack_id = 0;
    trace::StackId parent_stack_id = 0;
    trace::FrameId frame_id = 0;
};
// A kernel row names its launch configuration, stored once per distinct one.
struct KernelRow : trace::KernelEvent {
    trace::LaunchConfigId launch_config_id = 0;
};
struct NvtxCategoryRow {
    trace::StringId domain_id = trace::kNoString;
    std::uint32_t category = 0;
    trace::StringId name_id = trace::kNoString;
};
struct TrackStatsRow {
    std::string event_table;
    std::uint32_t track_id = 0;
    std::int64_t event_count = 0;
    trace::TimeNs first_start_ns = 0;
    trace::TimeNs last_end_ns = 0;
    trace::TimeNs max_duration_ns = 0;
};

// ---------------------------------------------------------------------------
// [SECTION] The declarations
// ---------------------------------------------------------------------------
// docs/trace-schema.md says what each column means; a test keeps its tables equal to these.

inline constexpr ColumnOptions kPrimaryKey{.primary_key = true};
constexpr ColumnOptions added_in(int version, const char* default_sql) {
    return {false, version, default_sql};
}

template <>
struct TableOf<MetadataRow> : TableDefaults {
    static constexpr const char* name = "run_metadata";
    static constexpr auto columns =
        store::columns<MetadataRow>(field<&MetadataRow::key>("key", kPrimaryKey), field<&MetadataRow::value>("value"));
};
template <>
struct TableOf<StringRow> : TableDefaults {
    static constexpr const char* name = "strings";
    static constexpr auto columns = store::columns<StringRow>(field<&StringRow::string_id>("string_id", kPrimaryKey),
                                                              field<&StringRow::value>("value"));
};
template <>
struct TableOf<ProcessRow> : TableDefaults {
    static constexpr const char* name = "processes";
    static constexpr auto columns =
        store::columns<ProcessRow>(field<&ProcessRow::pid>("pid", kPrimaryKey), field<&ProcessRow::name_id>("name_id"));
};
template <>
struct TableOf<ThreadRow> : TableDefaults {
    static constexpr const char* name = "threads";
    static constexpr auto columns =
        store::columns<ThreadRow>(field<&ThreadRow::thread_id>("thread_id", kPrimaryKey), field<&ThreadRow::pid>("pid"),
                                  field<&ThreadRow::tid>("tid"), field<&ThreadRow::name_id>("name_id"));
};
template <>
struct TableOf<DeviceRow> : TableDefaults {
    using R = DeviceRow;
    static constexpr const char* name = "devices";
    static constexpr int name_gap = 2;  // as its CREATE statement was first written
    static constexpr auto columns = store::columns<R>(
        field<&R::device_id>("device_id", kPrimaryKey), field<&R::name_id>("name_id"), field<&R::uuid_id>("uuid_id"),
        field<&R::compute_capability_major>("compute_capability_major"),
        field<&R::compute_capability_minor>("compute_capability_minor"),
        field<&R::multiprocessor_count>("multiprocessor_count"), field<&R::memory_bytes>("memory_bytes"),
        field<&R::memory_bandwidth_bytes_per_second>("memory_bandwidth_bytes_per_second"));
};
template <>
struct TableOf<StreamRow> : TableDefaults {
    using R = StreamRow;
    static constexpr const char* name = "streams";
    static constexpr auto columns =
        store::columns<R>(field<&R::stream_id>("stream_id", kPrimaryKey), field<&R::device_id>("device_id"),
                          field<&R::context_id>("context_id"), field<&R::cuda_stream_id>("cuda_stream_id"),
                          field<&R::priority>("priority"), field<&R::name_id>("name_id"));
};
template <>
struct TableOf<CounterRow> : TableDefaults {
    using R = CounterRow;
    static constexpr const char* name = "counters";
    static constexpr auto columns =
        store::columns<R>(field<&R::counter_id>("counter_id", kPrimaryKey), field<&R::name_id>("name_id"),
                          field<&R::unit_id>("unit_id"), field<&R::device_id>("device_id"));
};
template <>
struct TableOf<LaunchConfigRow> : TableDefaults {
    using R = LaunchConfigRow;
    static constexpr const char* name = "launch_configs";
    static constexpr auto columns = store::columns<R>(
        field<&R::launch_config_id>("launch_config_id", kPrimaryKey), field<&R::grid_x>("grid_x"),
        field<&R::grid_y>("grid_y"), field<&R::grid_z>("grid_z"), field<&R::block_x>("block_x"),
        field<&R::block_y>("block_y"), field<&R::block_z>("block_z"),
        field<&R::registers_per_thread>("registers_per_thread"), field<&R::static_shared_bytes>("static_shared_bytes"),
        field<&R::dynamic_shared_bytes>("dynamic_shared_bytes"));
};
template <>
struct TableOf<FrameRow> : TableDefaults {
    using R = FrameRow;
    static constexpr const char* name = "frames";
    static constexpr auto columns = store::columns<R>(
        field<&R::frame_id>("frame_id", kPrimaryKey), field<&R::function_id>("function_id"),
        field<&R::module_id>("module_id"), field<&R::address>("address"), field<&R::line>("line", added_in(2, "-1")));
};
template <>
struct TableOf<StackRow> : TableDefaults {
    using R = StackRow;
    static constexpr const char* name = "stacks";
    static constexpr auto columns =
        store::columns<R>(field<&R::stack_id>("stack_id", kPrimaryKey), field<&R::parent_stack_id>("parent_stack_id"),
                          field<&R::frame_id>("frame_id"));
};
template <>
struct TableOf<KernelRow> : TableDefaults {
    using R = KernelRow;
    static constexpr const char* name = "kernels";
    static constexpr auto columns = store::columns<R>(
        field<&R::start_ns>("start_ns"), field<&R::end_ns>("end_ns"), field<&R::device_id>("device_id"),
        field<&R::stream_id>("stream_id"), field<&R::correlation_id>("correlation_id"), field<&R::name_id>("name_id"),
        field<&R::launch_config_id>("launch_config_id"), field<&R::graph_id>("graph_id", added_in(3, "0")),
        field<&R::graph_node_id>("graph_node_id", added_in(3, "0")));
    static constexpr IndexInfo index_list[] = {{"kernels_by_stream_start", "stream_id, start_ns"},
                                               {"kernels_by_correlation", "correlation_id"}};
    static constexpr std::span<const IndexInfo> indexes = index_list;
};
template <>
struct TableOf<trace::MemcpyEvent> : TableDefaults {
    using R = trace::MemcpyEvent;
    static constexpr const char* name = "memcpys";
    static constexpr auto columns = store::columns<R>(
        field<&R::start_ns>("start_ns"), field<&R::end_ns>("end_ns"), field<&R::device_id>("device_id"),
        field<&R::stream_id>("stream_id"), field<&R::correlation_id>("correlation_id"),
        field<&R::direction>("direction"), field<&R::bytes>("bytes"), field<&R::source_kind>("source_kind"),
        field<&R::destination_kind>("destination_kind"), field<&R::peer_device_id>("peer_device_id"),
        field<&R::graph_id>("graph_id", added_in(3, "0")), field<&R::graph_node_id>("graph_node_id", added_in(3, "0")));
    static constexpr IndexInfo index_list[] = {{"memcpys_by_stream_start", "stream_id, start_ns"},
                                               {"memcpys_by_correlation", "correlation_id"}};
    static constexpr std::span<const IndexInfo> indexes = index_list;
};
template <>
struct TableOf<trace::MemsetEvent> : TableDefaults {
    using R = trace::MemsetEvent;
    static constexpr const char* name = "memsets";
    static constexpr auto columns = store::columns<R>(
        field<&R::start_ns>("start_ns"), field<&R::end_ns>("end_ns"), field<&R::device_id>("device_id"),
        field<&R::stream_id>("stream_id"), field<&R::correlation_id>("correlation_id"), field<&R::bytes>("bytes"),
        field<&R::value>("value"), field<&R::memory_kind>("memory_kind"),
        field<&R::graph_id>("graph_id", added_in(3, "0")), field<&R::graph_node_id>("graph_node_id", added_in(3, "0")));
    static constexpr IndexInfo index_list[] = {{"memsets_by_stream_start", "stream_id, start_ns"},
                                               {"memsets_by_correlation", "correlation_id"}};
    static constexpr std::span<const IndexInfo> indexes = index_list;
};
template <>
struct TableOf<trace::SyncEvent> : TableDefaults {
    using R = trace::SyncEvent;
    static constexpr const char* name = "synchronizations";
    static constexpr auto columns = store::columns<R>(
        field<&R::start_ns>("start_ns"), field<&R::end_ns>("end_ns"), field<&R::device_id>("device_id"),
        field<&R::stream_id>("stream_id"), field<&R::correlation_id>("correlation_id"), field<&R::kind>("kind"),
        field<&R::cuda_event_id>("cuda_event_id"));
    static constexpr IndexInfo index_list[] = {{"synchronizations_by_stream_start", "stream_id, start_ns"},
                                               {"synchronizations_by_correlation", "correlation_id"}};
    static constexpr std::span<const IndexInfo> indexes = index_list;
};
template <>
struct TableOf<trace::ApiEvent> : TableDefaults {
    using R = trace::ApiEvent;
    static constexpr const char* name = "api_calls";
    static constexpr auto columns = store::columns<R>(
        field<&R::start_ns>("start_ns"), field<&R::end_ns>("end_ns"), field<&R::thread_id>("thread_id"),
        field<&R::correlation_id>("correlation_id"), field<&R::name_id>("name_id"), field<&R::result>("result"),
        field<&R::stack_id>("stack_id", added_in(3, "0")));
    static constexpr IndexInfo index_list[] = {{"api_calls_by_thread_start", "thread_id, start_ns"},
                                               {"api_calls_by_correlation", "correlation_id"}};
    static constexpr std::span<const IndexInfo> indexes = index_list;
};
template <>
struct TableOf<trace::RangeEvent> : TableDefaults {
    using R = trace::RangeEvent;
    static constexpr const char* name = "ranges";
    static constexpr auto columns = store::columns<R>(
        field<&R::range_id>("range_id", kPrimaryKey), field<&R::start_ns>("start_ns"), field<&R::end_ns>("end_ns"),
        field<&R::thread_id>("thread_id"), field<&R::domain_id>("domain_id"), field<&R::name_id>("name_id"),
        field<&R::category>("category"), field<&R::color>("color"), field<&R::depth>("depth"),
        field<&R::parent_range_id>("parent_range_id"), field<&R::payload>("payload"));
    static constexpr IndexInfo index_list[] = {{"ranges_by_thread_start", "thread_id, start_ns"}};
    static constexpr std::span<const IndexInfo> indexes = index_list;
};
template <>
struct TableOf<trace::MarkEvent> : TableDefaults {
    using R = trace::MarkEvent;
    static constexpr const char* name = "marks";
    static constexpr auto columns =
        store::columns<R>(field<&R::time_ns>("time_ns"), field<&R::thread_id>("thread_id"),
                          field<&R::domain_id>("domain_id"), field<&R::name_id>("name_id"),
                          field<&R::category>("category"), field<&R::color>("color"), field<&R::payload>("payload"));
    static constexpr IndexInfo index_list[] = {{"marks_by_thread_time", "thread_id, time_ns"}};
    static constexpr std::span<const IndexInfo> indexes = index_list;
};
template <>
struct TableOf<trace::CounterSample> : TableDefaults {
    using R = trace::CounterSample;
    static constexpr const char* name = "counter_samples";
    static constexpr auto columns = store::columns<R>(field<&R::counter_id>("counter_id"),
                                                      field<&R::time_ns>("time_ns"), field<&R::value>("value"));
    static constexpr IndexInfo index_list[] = {{"counter_samples_by_counter_time", "counter_id, time_ns"}};
    static constexpr std::span<const IndexInfo> indexes = index_list;
};
template <>
struct TableOf<trace::StackSample> : TableDefaults {
    using R = trace::StackSample;
    static constexpr const char* name = "stack_samples";
    static constexpr auto columns =
        store::columns<R>(field<&R::time_ns>("time_ns"), field<&R::thread_id>("thread_id"),
                          field<&R::stack_id>("stack_id"), field<&R::idle>("idle", added_in(2, "0")));
    static constexpr IndexInfo index_list[] = {{"stack_samples_by_thread_time", "thread_id, time_ns"}};
    static constexpr std::span<const IndexInfo> indexes = index_list;
};
template <>
struct TableOf<trace::DroppedRecords> : TableDefaults {
    using R = trace::DroppedRecords;
    static constexpr const char* name = "dropped_records";
    static constexpr auto columns = store::columns<R>(field<&R::time_ns>("time_ns"), field<&R::source_id>("source_id"),
                                                      field<&R::thread_id>("thread_id"), field<&R::count>("count"));
};
template <>
struct TableOf<trace::OverheadEvent> : TableDefaults {
    using R = trace::OverheadEvent;
    static constexpr const char* name = "collector_overhead";
    static constexpr auto columns = store::columns<R>(field<&R::start_ns>("start_ns"), field<&R::end_ns>("end_ns"),
                                                      field<&R::thread_id>("thread_id"), field<&R::name_id>("name_id"));
    static constexpr IndexInfo index_list[] = {{"collector_overhead_by_thread_start", "thread_id, start_ns"}};
    static constexpr std::span<const IndexInfo> indexes = index_list;
};
template <>
struct TableOf<trace::CollectiveCall> : TableDefaults {
    using R = trace::CollectiveCall;
    static constexpr const char* name = "collective_calls";
    static constexpr bool required = false;
    static constexpr int since_version = 4;
    static constexpr auto columns = store::columns<R>(
        field<&R::start_ns>("start_ns"), field<&R::track_id>("track_id"), field<&R::on_stream>("on_stream"),
        field<&R::name_id>("name_id"), field<&R::group_name_id>("group_name_id"),
        field<&R::group_desc_id>("group_desc_id"), field<&R::group_ranks_id>("group_ranks_id"),
        field<&R::group_size>("group_size"), field<&R::sequence>("sequence"), field<&R::in_elements>("in_elements"),
        field<&R::out_elements>("out_elements"), field<&R::dtype_id>("dtype_id"));
};
template <>
struct TableOf<trace::MemoryEvent> : TableDefaults {
    using R = trace::MemoryEvent;
    static constexpr const char* name = "memory_events";
    static constexpr bool required = false;
    static constexpr int since_version = 5;
    static constexpr auto columns = store::columns<R>(
        field<&R::time_ns>("time_ns"), field<&R::device_id>("device_id"), field<&R::action>("action"),
        field<&R::address>("address"), field<&R::bytes>("bytes"), field<&R::cuda_stream>("cuda_stream"),
        field<&R::stack_id>("stack_id"), field<&R::device_free_bytes>("device_free_bytes"),
        field<&R::thread_id>("thread_id", added_in(6, "0")));
};
template <>
struct TableOf<trace::MemoryBlock> : TableDefaults {
    using R = trace::MemoryBlock;
    static constexpr const char* name = "memory_blocks";
    static constexpr bool required = false;
    static constexpr int since_version = 5;
    static constexpr auto columns = store::columns<R>(
        field<&R::time_ns>("time_ns"), field<&R::device_id>("device_id"), field<&R::state>("state"),
        field<&R::expandable_segment>("expandable_segment"), field<&R::small_pool>("small_pool"),
        field<&R::segment_address>("segment_address"), field<&R::segment_bytes>("segment_bytes"),
        field<&R::address>("address"), field<&R::bytes>("bytes"), field<&R::requested_bytes>("requested_bytes"),
        field<&R::cuda_stream>("cuda_stream"), field<&R::stack_id>("stack_id"));
};
// Added to version 1 after its first files were written: names given to NVTX
// categories (nvtxNameCategory, nvtxDomainNameCategory), per domain.
template <>
struct TableOf<NvtxCategoryRow> : TableDefaults {
    using R = NvtxCategoryRow;
    static constexpr const char* name = "nvtx_categories";
    static constexpr bool required = false;
    static constexpr const char* composite_key = "domain_id, category";
    static constexpr auto columns = store::columns<R>(field<&R::domain_id>("domain_id"),
                                                      field<&R::category>("category"), field<&R::name_id>("name_id"));
};
// Derived, written at close: one row per event table and track.
template <>
struct TableOf<TrackStatsRow> : TableDefaults {
    using R = TrackStatsRow;
    static constexpr const char* name = "track_stats";
    static constexpr const char* composite_key = "event_table, track_id";
    static constexpr auto columns =
        store::columns<R>(field<&R::event_table>("event_table"), field<&R::track_id>("track_id"),
                          field<&R::event_count>("event_count"), field<&R::first_start_ns>("first_start_ns"),
                          field<&R::last_end_ns>("last_end_ns"), field<&R::max_duration_ns>("max_duration_ns"));
};

// ---------------------------------------------------------------------------
// [SECTION] Every table, in file order
// ---------------------------------------------------------------------------

template <typename Row, std::size_t N>
constexpr std::array<ColumnInfo, N> infos_of(const std::array<Column<Row>, N>& columns) {
    std::array<ColumnInfo, N> infos{};
    for (std::size_t i = 0; i < N; ++i) infos[i] = columns[i].info;
    return infos;
}
template <typename Row>
inline constexpr auto kColumnInfos = infos_of(TableOf<Row>::columns);

template <typename Row>
inline constexpr TableInfo kTable{TableOf<Row>::name,          kColumnInfos<Row>,      TableOf<Row>::indexes,
                                  TableOf<Row>::composite_key, TableOf<Row>::required, TableOf<Row>::since_version,
                                  TableOf<Row>::name_gap};

// In the order the writer creates them (and their indexes).
inline constexpr TableInfo kTables[] = {
    kTable<MetadataRow>,
    kTable<StringRow>,
    kTable<ProcessRow>,
    kTable<ThreadRow>,
    kTable<DeviceRow>,
    kTable<StreamRow>,
    kTable<CounterRow>,
    kTable<LaunchConfigRow>,
    kTable<FrameRow>,
    kTable<StackRow>,
    kTable<KernelRow>,
    kTable<trace::MemcpyEvent>,
    kTable<trace::MemsetEvent>,
    kTable<trace::SyncEvent>,
    kTable<trace::ApiEvent>,
    kTable<trace::RangeEvent>,
    kTable<trace::MarkEvent>,
    kTable<trace::CounterSample>,
    kTable<trace::StackSample>,
    kTable<trace::DroppedRecords>,
    kTable<trace::OverheadEvent>,
    kTable<trace::CollectiveCall>,
    kTable<trace::MemoryEvent>,
    kTable<trace::MemoryBlock>,
    kTable<NvtxCategoryRow>,
    kTable<TrackStatsRow>,
};

// The declared table named `name`; nullptr for a name that is no ember table.
constexpr const TableInfo* find_table(std::string_view name) {
    for (const TableInfo& table : kTables)
        if (name == table.name) return &table;
    return nullptr;
}

// Number of declared indexes.
constexpr int declared_index_count() {
    int count = 0;
    for (const TableInfo& table : kTables) count += static_cast<int>(table.indexes.size());
    return count;
}

// ---------------------------------------------------------------------------
// [SECTION] SQL, binders and decoders derived from a declaration
// ---------------------------------------------------------------------------

// "CREATE TABLE IF NOT EXISTS ..." of one table.
std::string create_table_sql(const TableInfo& table);
// Every table's CREATE statement, then (with_indexes) every index's.
std::string create_tables_sql();
std::string create_indexes_sql();
// "a, b, c": the table's columns in order.
std::string column_list(const TableInfo& table);
// "INSERT <verb> INTO t (a, b, c) VALUES (?, ?, ?)"; verb: "", "OR REPLACE", "OR FAIL".
std::string insert_sql(const TableInfo& table, std::string_view verb = {});

template <typename Row>
std::string insert_sql(std::string_view verb = {}) {
    return insert_sql(kTable<Row>, verb);
}

// Binds every column of `row` from parameter `first` on, in table order. The calls are
// through constant function pointers: the compiler binds each field directly.
template <typename Row>
inline void bind_row(Statement& s, int first, const Row& row) {
    constexpr const auto& columns = TableOf<Row>::columns;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
        (columns[I].bind(s, first + static_cast<int>(I), row), ...);
    }
    (std::make_index_sequence<columns.size()>{});
}

// Reads a row from result columns first.. of a SELECT of the table's columns in order.
template <typename Row>
inline Row read_row(const Statement& s, int first = 0) {
    constexpr const auto& columns = TableOf<Row>::columns;
    Row row{};
    [&]<std::size_t... I>(std::index_sequence<I...>) {
        (columns[I].read(s, first + static_cast<int>(I), row), ...);
    }
    (std::make_index_sequence<columns.size()>{});
    return row;
}

// Position of `column` in the table (a compile-time error for a name it lacks, when
// evaluated at compile time).
template <typename Row>
constexpr int column_index(std::string_view column) {
    const auto& columns = TableOf<Row>::columns;
    for (std::size_t i = 0; i < columns.size(); ++i)
        if (column == columns[i].info.name) return static_cast<int>(i);
    throw "no such column";
}

}  // namespace ember::store
