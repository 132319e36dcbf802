// job_input.cpp: see job_input.h.
#include "cli/job_input.h"

#include "cli/trace_input.h"
#include "profiler/import/import.h"
#include "profiler/job/job.h"

#include <fmt/core.h>

#include <atomic>
#include <mutex>

namespace ember::cli {

namespace {

analysis::CollectiveExchange* g_exchange = nullptr;

// Many files: one line for all their imports instead of one each.
constexpr std::size_t kFilesNamedOneByOne = 8;

std::string quiet_ember_trace_for(const std::string& path, std::atomic<std::int64_t>& imported) {
    importing::OpenTraceOptions options;
    options.import.strict = strict_import();
    options.on_import = [&](const importing::OpenedTrace&) { ++imported; };
    return importing::open_as_ember_trace(path, options);
}

}  // namespace

void set_job_exchange(analysis::CollectiveExchange* exchange) {
    g_exchange = exchange;
}
analysis::CollectiveExchange* job_exchange() {
    return g_exchange;
}
bool prints_output() {
    return g_exchange == nullptr || g_exchange->process() == 0;
}

Job read_job(const std::vector<std::string>& files, std::string_view command) {
    Job job;
    job.files = files;
    job::JobFilesOptions options;
    std::atomic<std::int64_t> imported{0};
    std::mutex print;
    const bool one_by_one = files.size() <= kFilesNamedOneByOne && prints_output();
    options.ember_trace_for = [&](const std::string& path) {
        if (!one_by_one) return quiet_ember_trace_for(path, imported);
        std::lock_guard<std::mutex> lock(print);
        return ember_trace_for(path, command);
    };
    job.collectives = job::analyze_job_files(files, options, g_exchange);
    if (!one_by_one && imported > 0 && prints_output())
        fmt::print(stderr, "ember {}: read {} of the files through their imports (cached)\n", command, imported.load());
    return job;
}

std::string job_trace(const Job& job, std::string_view command) {
    std::vector<std::string> traces;
    std::atomic<std::int64_t> imported{0};
    for (const std::string& file : job.files) traces.push_back(quiet_ember_trace_for(file, imported));
    (void)command;
    return job::job_trace_file(job.files, traces, job.collectives);
}

}  // namespace ember::cli
