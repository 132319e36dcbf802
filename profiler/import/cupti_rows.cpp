// cupti_rows.cpp: see cupti_rows.h.
#include "profiler/import/cupti_rows.h"

#include "profiler/import/decimal_time.h"

#include <fmt/format.h>

#include <algorithm>

namespace ember::importing {

trace::MemcpyDirection cupti_copy_direction(std::int64_t kind) {
    switch (kind) {
        case 1:
        case 3:
            return trace::MemcpyDirection::host_to_device;
        case 2:
        case 4:
            return trace::MemcpyDirection::device_to_host;
        case 5:
        case 6:
        case 7:
        case 8:
            return trace::MemcpyDirection::device_to_device;
        case 9:
            return trace::MemcpyDirection::host_to_host;
        case 10:
            return trace::MemcpyDirection::peer_to_peer;
        default:
            return trace::MemcpyDirection::unknown;
    }
}

CuptiRows::CuptiRows(ImportSink& sink, std::string_view what, std::string_view time_origin)
    : sink_(sink), path_(sink.input()), what_(what), time_origin_(time_origin) {}

CuptiRows::~CuptiRows() = default;

void CuptiRows::open_database() {
    connection_ =
        std::make_unique<store::Connection>(path_, store::Connection::Mode::read_only, "cannot open " + what_);
    db_ = connection_->get();
    store::Statement list(db_, path_, "SELECT name FROM sqlite_master WHERE type = 'table'");
    while (list.next_row()) tables_.insert(list.column_text(0));
}

bool CuptiRows::reject(const TableScan& scan, std::string_view reason, const std::string& what) {
    if (sink_.options().strict) scan.fail(what);
    sink_.invalid(fmt::format("{}: {}", scan.table(), reason), scan.where(what));
    return false;
}

bool CuptiRows::valid_interval(const TableScan& scan, std::int64_t start, std::int64_t end) {
    if (start > kLargestTimeNs || start < -kLargestTimeNs || end > kLargestTimeNs || end < -kLargestTimeNs) {
        return reject(scan, "time out of range",
                      fmt::format("start {} / end {} lies beyond ±146 years of {}", start, end, time_origin_));
    }
    if (end >= start) return true;
    return reject(scan, "negative duration",
                  fmt::format("end {} lies before start {} (negative duration)", end, start));
}

std::optional<std::uint64_t> CuptiRows::byte_count(const TableScan& scan, int column) {
    const std::int64_t bytes = scan.integer(column);
    if (bytes >= 0) return static_cast<std::uint64_t>(bytes);
    reject(scan, "negative size", fmt::format("bytes is {}", bytes));
    return std::nullopt;
}

trace::CorrelationId CuptiRows::correlation_of(const TableScan& scan, int column) {
    const std::optional<std::int64_t> value = scan.maybe_integer(column);
    return value && *value > 0 && *value < 0xffffffffll ? static_cast<trace::CorrelationId>(*value) : 0;
}

trace::LaunchConfig CuptiRows::launch_of(const TableScan& scan, int first) {
    auto u32 = [&](int offset, std::uint32_t fallback) {
        std::optional<std::int64_t> v = scan.maybe_integer(first + offset);
        return v ? static_cast<std::uint32_t>(std::clamp<std::int64_t>(*v, 0, 0xffffffffll)) : fallback;
    };
    trace::LaunchConfig launch;
    launch.grid_x = u32(0, 1);
    launch.grid_y = u32(1, 1);
    launch.grid_z = u32(2, 1);
    launch.block_x = u32(3, 1);
    launch.block_y = u32(4, 1);
    launch.block_z = u32(5, 1);
    launch.registers_per_thread = u32(6, 0);
    launch.static_shared_bytes = u32(7, 0);
    launch.dynamic_shared_bytes = u32(8, 0);
    return launch;
}

std::optional<std::pair<trace::DeviceId, trace::StreamId>> CuptiRows::gpu_track(const TableScan& scan,
                                                                                int device_column, int stream_column,
                                                                                int context_column) {
    const std::int64_t device = scan.integer(device_column);
    const std::int64_t stream = scan.integer(stream_column);
    if (device < 0 || device > 1'000'000 || stream < 0) {
        reject(scan, "impossible device or stream",
               fmt::format("deviceId {} / streamId {} is not a device and stream", device, stream));
        return std::nullopt;
    }
    const auto key = std::make_pair(device, stream);
    auto found = streams_.find(key);
    if (found != streams_.end()) return std::make_pair(static_cast<trace::DeviceId>(device), found->second);
    const std::int64_t context = scan.maybe_integer(context_column).value_or(0);
    auto priority = stream_priorities_.find({context, stream});
    if (priority == stream_priorities_.end()) priority = stream_priorities_.find({kAnyContext, stream});
    const trace::StreamId id =
        sink_.stream(static_cast<trace::DeviceId>(device), static_cast<std::uint64_t>(stream),
                     static_cast<std::uint32_t>(context), priority != stream_priorities_.end() ? priority->second : 0);
    if (null_streams_.count(key))
        sink_.name_stream(static_cast<trace::DeviceId>(device), static_cast<std::uint64_t>(stream), "default");
    streams_.emplace(key, id);
    return std::make_pair(static_cast<trace::DeviceId>(device), id);
}

}  // namespace ember::importing
