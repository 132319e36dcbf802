// job.h: several rank files as one job, for every command that reads traces.
//
// `analyze_job_files` reads each rank file once, in parallel over the cores (and, given
// an exchange, over MPI processes, each reading its own shard of the files), keeps only
// each rank's collectives (analysis/collectives.h), and returns the job's analysis:
// matched collectives, aligned clocks, waits, the straggler and what it was doing.
//
// Ranks come from the files (analysis::RankCollectives::rank_from: the recorder's rank,
// Kineto's distributedInfo.rank, ...). When a file knows no rank, or two files claim the
// same one, every file's rank is its position on the command line, and the rows say so.
#pragma once

#include "profiler/analysis/collectives.h"
#include "profiler/merge/merge.h"

#include <functional>
#include <string>
#include <vector>

namespace ember::job {

struct JobFilesOptions {
    unsigned threads = 0;            // readers at once; 0: one per core
    std::size_t activity_rows = 10;  // rows of what the straggler was doing (0: skip that read)
    // Turns a file as given into an ember trace to read (imports a foreign format);
    // called from the reading threads. Default: the path itself.
    std::function<std::string(const std::string&)> ember_trace_for;
};

// `paths` as the user gave them, in command-line order. Throws store::TraceError for an
// unreadable file (the first failure, naming it). With `exchange`, this process reads the
// files whose position is its process number modulo the processes; every process gets
// the same answer.
analysis::JobCollectives analyze_job_files(const std::vector<std::string>& paths, const JobFilesOptions& options = {},
                                           analysis::CollectiveExchange* exchange = nullptr);

// Where each of `paths` goes in a job file: its rank and its shift onto the reference
// rank's clock, as `job` found them. Throws store::TraceError for a file that holds
// several ranks (a job file cannot be merged again).
std::vector<merge::RankPlacement> rank_placements(const std::vector<std::string>& paths,
                                                  const analysis::JobCollectives& job);

// One job file of the rank files (`ember merge`'s), each rank numbered and shifted as
// `job` says (its clocks aligned on the collectives), for the reports that read every
// event. Kept in the user's cache, keyed by the files (paths, sizes, modification
// times) and the shifts, and reused while they hold. `paths` as given, `traces` the
// ember traces read for them. Throws store::TraceError.
std::string job_trace_file(const std::vector<std::string>& paths, const std::vector<std::string>& traces,
                           const analysis::JobCollectives& job);

}  // namespace ember::job
