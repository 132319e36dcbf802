// duration_summary.h: per-name duration statistics — the GPU kernel summary (the
// shape of Nsight Systems' cuda_gpu_kern_sum), the CUDA API summary, the NVTX
// range summary, and the GPU memory operation summaries by time and by size (the
// shapes of cuda_gpu_mem_time_sum and cuda_gpu_mem_size_sum). Every number is
// exact: durations are collected per name and sorted, so the median is the true
// median, not an estimate.
#pragma once

#include "profiler/store/reader.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::analysis {

struct DurationStats {
    std::int64_t instances = 0;
    std::int64_t total_ns = 0;
    double average_ns = 0.0;
    double median_ns = 0.0;  // mean of the two middle values for an even count
    std::int64_t min_ns = 0;
    std::int64_t max_ns = 0;
    double stddev_ns = 0.0;  // sample standard deviation (n - 1); 0 for one instance
};

// Statistics of `durations` (sorted in place). All zero for an empty vector.
DurationStats summarize_durations(std::vector<std::int64_t>& durations);

struct DurationSummaryRow {
    std::string name;
    std::string domain;  // NVTX summaries only ("" = default domain)
    std::string style;   // NVTX summaries only: "push/pop" or "start/end"
    DurationStats stats;
    double time_percent = 0.0;  // share of the summed total of all rows
};

enum class SummarySort { total, instances, average, median, min, max, name };
std::optional<SummarySort> parse_summary_sort(
    std::string_view text);  // "total", "instances", "avg", "med", "min", "max", "name"

// Sorts rows (largest first for numbers; ties and `name` by name ascending) and
// keeps the first `top` (0 = all). time_percent is computed before the cut.
void sort_and_cut(std::vector<DurationSummaryRow>& rows, SummarySort sort, std::size_t top);

// One row per kernel name.
std::vector<DurationSummaryRow> kernel_summary(const store::TraceReader& reader);
// One row per CUDA API function.
std::vector<DurationSummaryRow> api_summary(const store::TraceReader& reader);
// One row per NVTX (domain, name, style).
std::vector<DurationSummaryRow> range_summary(const store::TraceReader& reader);

// One row per memory operation, named as Nsight Systems names them:
// "[CUDA memcpy HtoD]", "[CUDA memcpy DtoH]", "[CUDA memcpy DtoD]", "[CUDA memcpy HtoH]",
// "[CUDA memcpy PtoP]", "[CUDA memcpy Unknown]", "[CUDA memset]". Durations in ns.
std::vector<DurationSummaryRow> memory_time_summary(const store::TraceReader& reader);
// The same rows over the operations' sizes: every `*_ns` field of DurationStats holds
// bytes instead (total_ns = total bytes, median_ns = median bytes, ...).
std::vector<DurationSummaryRow> memory_size_summary(const store::TraceReader& reader);

}  // namespace ember::analysis
