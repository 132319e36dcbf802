// import_job.h: several inputs of one job (Kineto JSON, nsys exports, nvprof databases,
// ember traces, in any mix) into one job file, as `ember import a b c -o job.db` does.
#pragma once

#include "profiler/import/import.h"

#include <string>
#include <vector>

namespace ember::job {

// Each input is imported to a temporary ember file (ember traces are used as they are)
// and the files are merged into `output` with merge::merge_traces (ranks keep the rank
// their file gives; files with the same or no rank are numbered in input order). One
// input is imported as importing::import_file would. Throws store::TraceError; nothing
// is left at `output` on failure, and no temporary is left in any case.
importing::ImportReport import_job_file(const std::vector<std::string>& inputs, const std::string& output,
                                        const importing::ImportOptions& options = {});

}  // namespace ember::job
