// import_job.cpp: several inputs into one job file, through the importers and the merge.
#include "profiler/job/import_job.h"

#include "profiler/merge/merge.h"
#include "profiler/store/trace_files.h"

namespace ember::job {

importing::ImportReport import_job_file(const std::vector<std::string>& inputs, const std::string& output,
                                        const importing::ImportOptions& options) {
    if (inputs.size() <= 1) return importing::import_trace(inputs, output, options);
    // Each input as an ember file (imported to a temporary), then merged into a temporary
    // renamed onto `output`, so a failure leaves no job file behind.
    struct Temporaries {
        std::vector<std::string> paths;
        ~Temporaries() {
            for (const std::string& path : paths) store::remove_trace_files(path);
        }
    } temporaries;
    importing::ImportReport report;
    std::vector<std::string> rank_files;
    for (const std::string& input : inputs) {
        const importing::SourceFormat format =
            options.format == importing::SourceFormat::auto_detect ? importing::detect_format(input) : options.format;
        if (format == importing::SourceFormat::ember) {
            importing::ImportedFile as_is;
            as_is.input = input;
            as_is.output = output;
            as_is.format = format;
            as_is.input_bytes = importing::file_size(input);
            report.files.push_back(as_is);
            rank_files.push_back(input);
            continue;
        }
        importing::ImportOptions one = options;
        one.format = format;
        std::string path = importing::temporary_path(output, options.temporary_directory, "rank");
        temporaries.paths.push_back(path);
        importing::ImportedFile imported = importing::import_file(input, path, one);
        imported.output = output;
        report.files.push_back(std::move(imported));
        rank_files.push_back(path);
    }
    std::string job = importing::temporary_path(output, options.temporary_directory, "merging");
    temporaries.paths.push_back(job);
    merge::merge_traces(rank_files, job);
    store::move_trace_into_place(job, output, "the job trace");
    report.outputs.push_back(output);
    report.merged = true;
    return report;
}

}  // namespace ember::job
