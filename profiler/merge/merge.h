// merge.h: one job trace from the per-rank trace files of a distributed run.
//
// Every rank's events are copied onto rank 0's time base: ranks align on their
// `clock/anchor` marks (simultaneous by construction: each follows a barrier), or on
// the recorded wall-clock offsets when two files share no anchor. Each rank becomes a
// process of its own with its own GPUs; ids unique only within one process (devices,
// streams, correlation ids) are remapped so nothing collides. `ember merge` and the
// importers' job files use it; the viewer and tests can call it directly.
#pragma once

#include "profiler/trace/events.h"

#include <string>
#include <vector>

namespace ember::merge {

struct RankAlignment {
    int rank = 0;
    std::string path;          // the rank's input file
    trace::TimeNs shift_ns = 0;  // added to every timestamp of the rank
    std::string how;           // "reference", "clock anchor N" or the wall-clock fallback
};

struct MergeResult {
    std::vector<RankAlignment> ranks;  // in merged order (by recorded rank)
};

// Writes `output` (replacing it) from `inputs`. Throws store::TraceError naming the
// file for unreadable inputs or an unwritable output.
MergeResult merge_traces(const std::vector<std::string>& inputs, const std::string& output);

}  // namespace ember::merge
