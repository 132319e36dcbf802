// run_diff.h: the viewer's diff mode (`ember view A B --diff`, the "Diff" tab): run B
// compared with run A by the trace library's `ember diff` (profiler/analysis/
// trace_diff.h), B's timeline shifted so its steps line up with A's, and a clicked
// row of the diff tables turned into the events it names in both timelines.
//
// The diff is computed from the files, not from the lanes: compute_run_diff() opens
// its own readers, so it runs on a background thread while the UI draws (like the
// loader and the GPU breakdowns), and its numbers are exactly those `ember diff A B`
// prints.
#pragma once

#include "profiler/analysis/trace_diff.h"
#include "viewer/model/search.h"
#include "viewer/model/trace_model.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::viewer {

// The step windows of each run (file time: the model adds TraceFile::shift_ns) and
// the diff of B against A.
struct RunDiff {
    analysis::TraceDiff diff;
    std::vector<analysis::DiffStep> a_steps, b_steps;
    bool a_has_steps = false, b_has_steps = false;  // false: the run is one step (no step ranges)
    std::string error;                              // set when the files could not be compared
};

// Reads both files (any thread; throws nothing: a failure is `error`).
std::unique_ptr<RunDiff> compute_run_diff(const std::string& a_path, const std::string& b_path);

// The shift of file 1 (model time = file time + shift) that puts the start of B's
// step at `step_index` (its position among B's steps, from 0) where A's step at the
// same position starts; none when either run has no such step. Aligning never moves A.
std::optional<trace::TimeNs> step_alignment_shift(const RunDiff& diff, const TraceModel& model, std::size_t step_index);

// The name tables of the diff. cpu_functions rows name sampled stacks, which the
// timeline does not draw: they highlight nothing there.
enum class DiffTable : std::uint8_t { kernels = 0, ranges, api, cpu_functions };
const char* diff_table_title(DiffTable table);  // "Kernels and copies", ...
const std::vector<analysis::NameDelta>& diff_rows(const analysis::TraceDiff& diff, DiffTable table);

// The name a model name has in the diff's table: normalise_name(), and for GPU copies
// and memsets the tables' name the model keeps for them (TraceModel::operation_name:
// "Memcpy HtoD (pinned -> device)" is "[CUDA memcpy HtoD]").
std::string diff_table_name(const TraceModel& model, DiffTable table, std::uint32_t name_id);

// Sets `search` to the events a click on the row `name` of `table` highlights: the
// events of both files whose name is that row's name in the diff, in the rows that
// table counts (kernels and copies: GPU work; ranges: NVTX ranges; api: API calls).
void highlight_diff_row(EventSearch& search, const TraceModel& model, DiffTable table, const std::string& name);

// Events `search` matches, per file (the "8 in A, 8 in B" of a highlighted row).
std::vector<std::int64_t> matches_per_file(const EventSearch& search, const TraceModel& model);

}  // namespace ember::viewer
