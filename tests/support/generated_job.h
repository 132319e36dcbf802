// generated_job.h: a generated job (profiler/synth/synthetic_job.h, `ember synth
// --ranks R`) written into a folder of its own that goes with it: its rank files and
// the truth per rank, for the tests of the job analysis and of the viewer's Job view.
// The linking target needs ember::profiler_synth.
#pragma once

#include "profiler/synth/synthetic_job.h"
#include "profiler/synth/synthetic_trace.h"
#include "tests/support/temp_dir.h"

#include <string>
#include <vector>

namespace ember::test_support {

struct GeneratedJob {
    // The job of `options` as <temp dir>/<stem>-XXXXXX/job.rank<r>.db (job.db for one rank).
    GeneratedJob(const synth::SyntheticJobOptions& options, const std::string& stem) : dir(stem) {
        truth = synth::write_synthetic_job(dir.path("job.db"), options);
        files = synth::synthetic_rank_paths(dir.path("job.db"), options.ranks);
    }

    TempDir dir;
    std::string folder = dir.folder();
    std::vector<std::string> files;  // rank 0 first
    std::vector<synth::SyntheticJobTruth> truth;
};

}  // namespace ember::test_support
