// steps.cpp: see steps.h.
#include "profiler/analysis/steps.h"

#include "common/nvtx_contract.h"
#include "profiler/store/sqlite_util.h"
#include "profiler/trace/step_names.h"

#include <string>

namespace ember::analysis {

bool is_step_range_name(std::string_view name) {
    return name == nvtx::range::kStep || name.starts_with(nvtx::range::kProfilerStepPrefix);
}

std::map<std::int32_t, std::vector<StepRange>> step_ranges(const store::TraceReader& reader, const RankMap& ranks) {
    std::map<std::int32_t, std::vector<StepRange>> steps;
    std::vector<trace::StringId> names;
    for (const auto& [id, text] : reader.strings_from(0))
        if (is_step_range_name(text)) names.push_back(id);
    reader.for_each_range_named(names, [&](const trace::RangeEvent& range) {
        StepRange step;
        step.start_ns = range.start_ns;
        step.end_ns = range.end_ns;
        step.thread_id = range.thread_id;
        step.domain_id = range.domain_id;
        step.range_id = range.range_id;
        step.number = trace::profiler_step_number(reader.string(range.name_id));
        if (!step.number && range.payload.kind == trace::PayloadKind::integer) step.number = range.payload.integer;
        steps[ranks.of_thread(step.thread_id)].push_back(step);
        return true;
    });
    return steps;
}

}  // namespace ember::analysis
