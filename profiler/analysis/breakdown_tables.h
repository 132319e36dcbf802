// breakdown_tables.h: the GPU breakdown reports of `ember stats` (temporal,
// kernel_types, overlap, idle_breakdown, launches, queue, gpu_timeline, step_breakdown)
// as tables.
// Each takes gpu_work() of the chosen convention; the definitions are in
// gpu_breakdown.h and launches.h.
#pragma once

#include "profiler/analysis/gpu_breakdown.h"
#include "profiler/analysis/launches.h"
#include "profiler/analysis/step_breakdown.h"
#include "profiler/analysis/report_table.h"

#include <vector>

namespace ember::analysis {

Table temporal_table(const std::vector<RankGpuWork>& work);
// Two tables: the combinations ("kernel_types") and the top names of each class
// ("kernel_types_top", `top` per class).
std::vector<Table> kernel_type_tables(const store::TraceReader& reader, const std::vector<RankGpuWork>& work,
                                      std::size_t top);
Table overlap_table(const std::vector<RankGpuWork>& work);
Table idle_breakdown_table(const std::vector<RankGpuWork>& work, trace::TimeNs kernel_wait_threshold_ns);
Table launches_table(const store::TraceReader& reader, const std::vector<RankGpuWork>& work, std::size_t top,
                     const LaunchOptions& options = {});
Table queue_table(const std::vector<RankGpuWork>& work);
Table gpu_timeline_table(const std::vector<RankGpuWork>& work);
// The TensorBoard-style overview: per step (and rank), each instant in one category;
// the title says what the convention dropped (tb's trailing steps) or assumed (no
// steps: one step "0").
Table step_breakdown_table(const std::vector<StepBreakdownRow>& rows, const StepBreakdownNotes& notes,
                           StepConvention convention);

// The line an empty GPU report prints instead of an empty table.
std::string no_gpu_work_note(const store::TraceReader& reader);

}  // namespace ember::analysis
