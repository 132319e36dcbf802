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
#include <utility>
#include <vector>

namespace ember::merge {

struct RankAlignment {
    int rank = 0;
    std::string path;            // the rank's input file
    trace::TimeNs shift_ns = 0;  // added to every timestamp of the rank
    std::string how;             // "reference", "clock anchor N" or the wall-clock fallback
};

struct MergeResult {
    std::vector<RankAlignment> ranks;  // in merged order (by recorded rank)
};

// Where each input goes when the caller knows it (the job analysis aligned the ranks on
// their collectives, analysis/collectives.h): its rank and shift, one per input.
struct RankPlacement {
    int rank = 0;
    trace::TimeNs shift_ns = 0;
    std::string how;
};

struct MergeOptions {
    // One per input, or none: then the files' ranks and clock anchors decide.
    std::vector<RankPlacement> placements;
    // Extra run_metadata keys of the job file.
    std::vector<std::pair<std::string, std::string>> metadata;
};

// Writes `output` (replacing it) from `inputs`. Throws store::TraceError naming the
// file for unreadable inputs or an unwritable output.
MergeResult merge_traces(const std::vector<std::string>& inputs, const std::string& output,
                         const MergeOptions& options = {});

}  // namespace ember::merge
