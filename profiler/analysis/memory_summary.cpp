// memory_summary.cpp: memcpy and memset totals grouped in SQL.
#include "profiler/analysis/memory_summary.h"

#include "profiler/store/table_sql.h"

#include <map>
#include <utility>

namespace ember::analysis {

namespace {

using trace::MemcpyDirection;
using trace::MemoryKind;

// Which memory kind describes a copy: its host side, or "device" between devices.
MemoryKind described_kind(MemcpyDirection direction, MemoryKind source, MemoryKind destination) {
    switch (direction) {
        case MemcpyDirection::host_to_device:
        case MemcpyDirection::host_to_host:
            return source;
        case MemcpyDirection::device_to_host:
            return destination;
        case MemcpyDirection::device_to_device:
        case MemcpyDirection::peer_to_peer:
            return MemoryKind::device;
        default:
            return source;
    }
}

// Report order of directions (enum order puts "unknown" first).
int direction_rank(MemcpyDirection direction) {
    switch (direction) {
        case MemcpyDirection::host_to_device:
            return 0;
        case MemcpyDirection::device_to_host:
            return 1;
        case MemcpyDirection::device_to_device:
            return 2;
        case MemcpyDirection::host_to_host:
            return 3;
        case MemcpyDirection::peer_to_peer:
            return 4;
        default:
            return 5;
    }
}

constexpr int kMemsetRank = 6;

struct Totals {
    std::int64_t count = 0, bytes = 0, ns = 0;
};

}  // namespace

std::vector<MemoryOperationRow> memory_summary(const store::TraceReader& reader) {
    // (operation rank, memory kind) -> totals
    std::map<std::pair<int, int>, Totals> groups;
    {
        store::Statement query = store::query(
            reader,
            "SELECT direction, source_kind, destination_kind, COUNT(*), SUM(bytes), SUM(end_ns - start_ns) "
            "FROM memcpys GROUP BY direction, source_kind, destination_kind");
        while (query.next_row()) {
            auto direction = static_cast<MemcpyDirection>(query.column_int64(0));
            MemoryKind kind = described_kind(direction, static_cast<MemoryKind>(query.column_int64(1)),
                                             static_cast<MemoryKind>(query.column_int64(2)));
            Totals& totals = groups[{direction_rank(direction), static_cast<int>(kind)}];
            totals.count += query.column_int64(3);
            totals.bytes += query.column_int64(4);
            totals.ns += query.column_int64(5);
        }
    }
    {
        store::Statement query = store::query(
            reader,
            "SELECT memory_kind, COUNT(*), SUM(bytes), SUM(end_ns - start_ns) FROM memsets GROUP BY memory_kind");
        while (query.next_row()) {
            Totals& totals = groups[{kMemsetRank, static_cast<int>(query.column_int64(0))}];
            totals.count += query.column_int64(1);
            totals.bytes += query.column_int64(2);
            totals.ns += query.column_int64(3);
        }
    }
    static constexpr MemcpyDirection kDirectionByRank[] = {
        MemcpyDirection::host_to_device, MemcpyDirection::device_to_host, MemcpyDirection::device_to_device,
        MemcpyDirection::host_to_host,   MemcpyDirection::peer_to_peer,   MemcpyDirection::unknown};
    std::vector<MemoryOperationRow> rows;
    for (const auto& [key, totals] : groups) {
        MemoryOperationRow row;
        row.operation = key.first == kMemsetRank ? "memset" : trace::direction_name(kDirectionByRank[key.first]);
        row.memory = trace::memory_kind_name(static_cast<MemoryKind>(key.second));
        row.count = totals.count;
        row.total_bytes = totals.bytes;
        row.total_ns = totals.ns;
        // bytes per ns is exactly GB/s.
        row.bandwidth_gb_per_s =
            totals.ns > 0 ? static_cast<double>(totals.bytes) / static_cast<double>(totals.ns) : 0.0;
        rows.push_back(std::move(row));
    }
    return rows;
}

}  // namespace ember::analysis
