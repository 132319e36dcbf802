// live_refresh.h: helpers of the model's live refresh (live_refresh.cpp) that the
// loader shares: the high-water rowid of each event table.
#pragma once

#include "profiler/store/reader.h"

#include <cstdint>
#include <vector>

namespace ember::viewer {

// MAX(rowid) of every event table (store::kEventTables order), 0 for an empty table.
// Inside a read transaction these name exactly the rows that transaction sees.
std::vector<std::int64_t> highest_rowids(const store::TraceReader& reader);

}  // namespace ember::viewer
