// steps.cpp: see steps.h.
#include "profiler/analysis/steps.h"

#include "common/nvtx_contract.h"
#include "profiler/analysis/sql_query.h"
#include "profiler/trace/step_names.h"

#include <string>

namespace ember::analysis {

bool is_step_range_name(std::string_view name) {
    return name == nvtx::range::kStep || name.starts_with(nvtx::range::kProfilerStepPrefix);
}

std::map<std::int32_t, std::vector<StepRange>> step_ranges(const store::TraceReader& reader, const RankMap& ranks) {
    std::map<std::int32_t, std::vector<StepRange>> steps;
    std::string ids;
    for (const auto& [id, text] : reader.strings_from(0))
        if (is_step_range_name(text)) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    if (ids.empty()) return steps;
    SqlQuery query(reader.database(), reader.path(),
                   "SELECT start_ns, end_ns, thread_id, domain_id, name_id, range_id, "
                   "CASE WHEN typeof(payload) = 'integer' THEN payload END FROM ranges WHERE name_id IN (" +
                       ids + ") ORDER BY start_ns, range_id");
    while (query.next_row()) {
        StepRange step;
        step.start_ns = query.int64(0);
        step.end_ns = query.int64(1);
        step.thread_id = static_cast<trace::ThreadId>(query.int64(2));
        step.domain_id = static_cast<trace::StringId>(query.int64(3));
        step.range_id = static_cast<trace::RangeId>(query.int64(5));
        step.number = trace::profiler_step_number(reader.string(static_cast<trace::StringId>(query.int64(4))));
        if (!step.number && !query.is_null(6)) step.number = query.int64(6);
        steps[ranks.of_thread(step.thread_id)].push_back(step);
    }
    return steps;
}

}  // namespace ember::analysis
