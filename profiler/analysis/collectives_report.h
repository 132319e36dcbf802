// collectives_report.h: `ember stats --report collectives` as tables: each rank's wait
// and lateness with its clock offset, the straggler with its evidence and what it was
// doing instead, and the matched collectives. In JSON they form one object,
// reports.collectives = {ranks: [...], straggler: R or null, collectives: [...], ...}.
#pragma once

#include "profiler/analysis/collectives.h"
#include "profiler/analysis/report_table.h"

#include <cstddef>
#include <vector>

namespace ember::analysis {

// `top`: the collectives listed in text (the most waited-for first; 0 = all). JSON and
// CSV list every collective.
std::vector<Table> collectives_tables(const JobCollectives& job, std::size_t top = 10, bool text = true);

// `ember diff` of two jobs: each rank's wait in the collectives, how often it arrived
// last, in A and in B, and the straggler of each (the collectives report's numbers).
// `top`: the ranks listed, most changed first (0 = all). In JSON: reports.job_diff =
// {ranks: [...], a: {straggler, recoverable_ns, wait_ns}, b: {...}}.
std::vector<Table> job_diff_tables(const JobCollectives& a, const JobCollectives& b, std::size_t top = 15);

}  // namespace ember::analysis
