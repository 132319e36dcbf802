// job_input.h: several FILE arguments as one job, the way every reading command
// (`stats`, `merge`, `diff`, `export`) takes them: each file imported when it is not an
// ember trace (once, cached), the job's collectives analysed (profiler/job), and, for
// the reports that read every event, one job file of them on the aligned clocks.
//
// Under mpirun/srun `ember` runs `ember-mpi` (cli/mpi_main.cpp), which installs an MPI
// exchange here: the files are then sharded over the processes, and only the first
// process prints.
#pragma once

#include "profiler/analysis/collectives.h"

#include <string>
#include <string_view>
#include <vector>

namespace ember::cli {

struct Job {
    std::vector<std::string> files;  // as given, in command-line order
    analysis::JobCollectives collectives;
};

// Throws store::TraceError naming the first unreadable file.
Job read_job(const std::vector<std::string>& files, std::string_view command);

// The job file of `job` (cached, profiler/job/job.h). Throws store::TraceError.
std::string job_trace(const Job& job, std::string_view command);

// The processes the job is sharded over (nullptr: this process alone).
void set_job_exchange(analysis::CollectiveExchange* exchange);
analysis::CollectiveExchange* job_exchange();
// False on every MPI process but the first: they read their shard and stay silent.
bool prints_output();

}  // namespace ember::cli
