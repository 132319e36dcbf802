// flamegraph.h: flamegraph trees built from a TraceModel, their layout, and the
// difference of two of them.
//
// Sources (speedscope/Tracy): NVTX ranges by wall time (a range's value is its
// duration, children are the ranges nested in it on the same thread), GPU kernel
// time by the NVTX stack that launched it (kernel -> API call by correlation id ->
// ranges open on the launching thread at that moment), and CPU stack samples (value
// = samples). Orders: merged "left heavy" (same names under the same parent merge,
// heaviest first) and "time order" (as speedscope: events or samples in time order,
// one subtree per thread or stream, and only consecutive equal names under the same
// parent merge, so consecutive identical stacks become one box). Both orders hold
// the same total.
#pragma once

#include "viewer/model/trace_model.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ember::viewer {

// gpu_by_range: the GPU time each NVTX stack launched, the stack's innermost range
// holding it ("(no range)" for kernels launched outside any); gpu_kernel_names: the
// GPU time of each kernel name, flat. Both are the kernel graph with a level left
// out, so they hold the same total.
enum class FlameSource : std::uint8_t {
    nvtx_ranges = 0,
    gpu_kernels = 1,
    cpu_samples = 2,
    gpu_by_range = 3,
    gpu_kernel_names = 4,
};
inline constexpr int kFlameSourceCount = 5;
enum class FlameOrder : std::uint8_t { left_heavy = 0, time_order = 1 };

const char* flame_source_name(FlameSource source);

struct FlameNode {
    std::string name;
    double total = 0.0;      // inclusive value: ns (ranges, kernels) or samples
    double baseline = 0.0;   // difference graphs: the baseline's inclusive value
    std::int64_t count = 0;  // events (or samples) merged into this node
    std::uint32_t parent = 0;
    std::vector<std::uint32_t> children;               // in drawing order
    double self() const;                               // total minus the children's totals (set by finish)
    double delta() const { return total - baseline; }  // difference graphs: B - A
    double self_value = 0.0;
};

struct FlameGraph {
    FlameSource source = FlameSource::nvtx_ranges;
    FlameOrder order = FlameOrder::left_heavy;
    bool is_difference = false;
    std::string unit = "ns";       // "ns" or "samples"
    std::vector<FlameNode> nodes;  // nodes[0] is the root ("all")
    double total() const { return nodes.empty() ? 0.0 : nodes[0].total; }
    // Names from the root to `node`, root excluded.
    std::vector<std::string> path(std::uint32_t node) const;
};

// Builds from the lanes that are ready (call after loading for the whole trace);
// with `only_file` >= 0, from that file's lanes only (difference of two files). CPU
// samples count the active ones unless `idle_samples` (as `ember stats` and --idle).
FlameGraph build_flamegraph(const TraceModel& model, FlameSource source, FlameOrder order, int only_file = -1,
                            bool idle_samples = false);

// A graph shaped like `current` (left heavy) whose nodes also carry the baseline's
// value for the same path (0 when the path is new); paths only in the baseline are
// added with total 0 so nothing silently vanishes from the data. Paths are matched by
// the names `ember diff` matches (analysis::normalise_name: "ProfilerStep#12" and
// "ProfilerStep#3" are one frame, template arguments collapse), and carry them.
// A node's change is total - baseline (FlameNode::delta).
FlameGraph difference_flamegraph(const FlameGraph& baseline, const FlameGraph& current);

// A box to draw: its node, depth (0 = root) and horizontal extent as a fraction of
// the zoomed node's width.
struct FlameBox {
    std::uint32_t node = 0;
    int depth = 0;
    double x0 = 0.0;
    double x1 = 0.0;
};

// Boxes for a view zoomed on `focus`: its ancestors span the whole width, its
// subtree is laid out below; boxes narrower than `min_fraction` are skipped with
// their subtrees (so the count is bounded by the pixels, not the tree).
std::vector<FlameBox> layout_flamegraph(const FlameGraph& graph, std::uint32_t focus, double min_fraction);

}  // namespace ember::viewer
