// flamegraph.cpp: building, diffing and laying out flamegraphs (flamegraph.h).
#include "viewer/model/flamegraph.h"

#include "profiler/analysis/operation_names.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace ember::viewer {

using trace::TimeNs;

const char* flame_source_name(FlameSource source) {
    switch (source) {
        case FlameSource::nvtx_ranges:
            return "NVTX ranges (wall time)";
        case FlameSource::gpu_kernels:
            return "GPU kernels by NVTX stack";
        case FlameSource::cpu_samples:
            return "CPU stack samples";
        case FlameSource::gpu_by_range:
            return "GPU time by NVTX range";
        case FlameSource::gpu_kernel_names:
            return "GPU time by kernel";
    }
    return "?";
}

double FlameNode::self() const {
    return self_value;
}

std::vector<std::string> FlameGraph::path(std::uint32_t node) const {
    std::vector<std::string> names;
    while (node != 0 && node < nodes.size()) {
        names.push_back(nodes[node].name);
        node = nodes[node].parent;
    }
    std::reverse(names.begin(), names.end());
    return names;
}

namespace {

FlameNode root_node() {
    FlameNode root;
    root.name = "all";
    return root;
}

// Adds children by name: merged (any earlier child of that name) or time order
// (only the last child).
class TreeBuilder {
  public:
    TreeBuilder(FlameGraph& graph, FlameOrder order) : graph_(graph), order_(order) {
        graph_.nodes.clear();
        graph_.nodes.push_back(root_node());
    }

    std::uint32_t child(std::uint32_t parent, const std::string& name) {
        FlameNode& parent_node = graph_.nodes[parent];
        if (order_ == FlameOrder::time_order) {
            if (!parent_node.children.empty() && graph_.nodes[parent_node.children.back()].name == name)
                return parent_node.children.back();
        } else {
            auto found = lookup_.find({parent, name});
            if (found != lookup_.end()) return found->second;
        }
        const auto id = static_cast<std::uint32_t>(graph_.nodes.size());
        FlameNode node;
        node.name = name;
        node.parent = parent;
        graph_.nodes.push_back(std::move(node));
        graph_.nodes[parent].children.push_back(id);
        if (order_ == FlameOrder::left_heavy) lookup_.emplace(std::make_pair(parent, name), id);
        return id;
    }

    // Adds `value` to `node` and its ancestors (for leaves-only sources).
    void add_inclusive(std::uint32_t node, double value) {
        graph_.nodes[node].count += 1;
        while (true) {
            graph_.nodes[node].total += value;
            if (node == 0) break;
            node = graph_.nodes[node].parent;
        }
    }

  private:
    FlameGraph& graph_;
    FlameOrder order_;
    std::map<std::pair<std::uint32_t, std::string>, std::uint32_t> lookup_;
};

void finish(FlameGraph& graph) {
    for (FlameNode& node : graph.nodes) {
        double children = 0.0;
        for (std::uint32_t child : node.children) children += graph.nodes[child].total;
        node.self_value = std::max(0.0, node.total - children);
    }
    if (graph.order == FlameOrder::left_heavy) {
        for (FlameNode& node : graph.nodes)
            std::stable_sort(node.children.begin(), node.children.end(), [&graph](std::uint32_t a, std::uint32_t b) {
                return graph.nodes[a].total > graph.nodes[b].total;
            });
    }
}

// Index of the event of `row` containing `time` (start <= time < end), or -1.
std::int64_t containing(const Row& row, TimeNs time) {
    const auto& events = row.events;
    auto it = std::partition_point(events.begin(), events.end(),
                                   [time](const TimelineEvent& e) { return e.start_ns <= time; });
    if (it == events.begin()) return -1;
    --it;
    if (it->end_ns > time || (it->start_ns == time && it->end_ns == time)) return it - events.begin();
    // Overlapping rows: an earlier event may still contain the time.
    if (!row.non_overlapping) {
        for (auto back = it; back != events.begin();) {
            --back;
            if (back->end_ns > time) return back - events.begin();
            if (back->start_ns < time - row.max_duration_ns) break;
        }
    }
    return -1;
}

// "process 12 / thread 34 main": the title of a lane, the root of its subtree in time order.
std::string lane_label(const Lane& lane) {
    return lane.group + " / " + lane.title;
}

void build_nvtx(const TraceModel& model, TreeBuilder& builder, FlameGraph& graph, FlameOrder order, int only_file) {
    for (int lane_index = 0; lane_index < model.lane_count(); ++lane_index) {
        const Lane& lane = model.lane(lane_index);
        if (lane.kind != LaneKind::thread || !lane.ready.load(std::memory_order_acquire)) continue;
        if (only_file >= 0 && lane.file_index != only_file) continue;
        const std::uint32_t lane_root = order == FlameOrder::time_order ? builder.child(0, lane_label(lane)) : 0;
        // Nodes of the previous depth's events; each row's parent is found by
        // binary search in the row above.
        const Row* parent_row = nullptr;
        std::vector<std::uint32_t> parent_nodes, nodes;
        for (const Row& row : lane.rows) {
            if (row.kind != RowKind::ranges) continue;
            nodes.assign(row.events.size(), 0);
            for (std::size_t index = 0; index < row.events.size(); ++index) {
                const TimelineEvent& event = row.events[index];
                std::uint32_t parent = lane_root;
                if (parent_row != nullptr) {
                    const std::int64_t enclosing = containing(*parent_row, event.start_ns);
                    if (enclosing >= 0) parent = parent_nodes[static_cast<std::size_t>(enclosing)];
                }
                const std::uint32_t node = builder.child(parent, std::string(model.name(event.name_id)));
                graph.nodes[node].total += static_cast<double>(event.duration_ns());
                graph.nodes[node].count += 1;
                nodes[index] = node;
            }
            parent_row = &row;
            parent_nodes.swap(nodes);
        }
    }
    // Inclusive totals of the synthetic nodes (root, per-thread) from their children.
    for (std::size_t id = graph.nodes.size(); id-- > 0;) {
        FlameNode& node = graph.nodes[id];
        if (id == 0 || (order == FlameOrder::time_order && node.parent == 0)) {
            double sum = 0.0;
            for (std::uint32_t child : node.children) sum += graph.nodes[child].total;
            node.total = sum;
        }
    }
}

// What the GPU sources put on the path of a kernel.
struct GpuLevels {
    bool ranges = true;  // the launching NVTX stack
    bool kernel = true;  // the kernel's name as the leaf
};

void build_gpu_kernels(const TraceModel& model, TreeBuilder& builder, FlameOrder order, int only_file,
                       GpuLevels levels) {
    // Correlation id -> the launching API call (lane, start), per file.
    struct Launch {
        int file = 0;
        std::uint64_t correlation = 0;
        int lane = 0;
        TimeNs start_ns = 0;
        bool operator<(const Launch& other) const {
            return file != other.file ? file < other.file : correlation < other.correlation;
        }
    };
    std::vector<Launch> launches;
    for (int lane_index = 0; lane_index < model.lane_count(); ++lane_index) {
        const Lane& lane = model.lane(lane_index);
        if (lane.kind != LaneKind::thread || !lane.ready.load(std::memory_order_acquire)) continue;
        for (const Row& row : lane.rows)
            if (row.kind == RowKind::api_calls)
                for (const TimelineEvent& call : row.events)
                    if (call.link != 0) launches.push_back({lane.file_index, call.link, lane_index, call.start_ns});
    }
    std::sort(launches.begin(), launches.end());
    // Streams one after the other, each in start order: in time order the stream is
    // the root of its kernels and only consecutive kernels with the same stack merge.
    for (int lane_index = 0; lane_index < model.lane_count(); ++lane_index) {
        const Lane& lane = model.lane(lane_index);
        if (lane.kind != LaneKind::stream || !lane.ready.load(std::memory_order_acquire)) continue;
        if (only_file >= 0 && lane.file_index != only_file) continue;
        std::uint32_t lane_root = 0;
        bool lane_root_created = order == FlameOrder::left_heavy;
        for (const Row& row : lane.rows) {
            if (row.kind != RowKind::gpu_work) continue;
            for (const TimelineEvent& kernel : row.events) {
                if (kernel.kind != EventKind::kernel) continue;
                if (!lane_root_created) {  // streams without kernels get no node
                    lane_root = builder.child(0, lane_label(lane));
                    lane_root_created = true;
                }
                std::uint32_t node = lane_root;
                const Launch key{lane.file_index, kernel.link, 0, 0};
                auto found = std::lower_bound(launches.begin(), launches.end(), key);
                if (!levels.ranges) {
                    // Kernels only: no stack to look up.
                } else if (kernel.link != 0 && found != launches.end() && found->file == lane.file_index &&
                           found->correlation == kernel.link) {
                    const Lane& thread = model.lane(found->lane);
                    for (const Row& ranges : thread.rows) {
                        if (ranges.kind != RowKind::ranges) continue;
                        const std::int64_t open = containing(ranges, found->start_ns);
                        if (open < 0) break;
                        node = builder.child(
                            node, std::string(model.name(ranges.events[static_cast<std::size_t>(open)].name_id)));
                    }
                } else {
                    node = builder.child(node, "(no launch record)");
                }
                if (levels.kernel)
                    node = builder.child(node, std::string(model.name(kernel.name_id)));
                else if (node == lane_root)
                    node = builder.child(node, "(no range)");
                builder.add_inclusive(node, static_cast<double>(kernel.duration_ns()));
            }
        }
    }
}

void build_cpu_samples(const TraceModel& model, TreeBuilder& builder, FlameOrder order, int only_file,
                       bool idle_samples) {
    if (!model.loaded()) return;  // samples are published with the end of loading
    for (std::size_t index = 0; index < model.files().size(); ++index) {
        if (only_file >= 0 && static_cast<int>(index) != only_file) continue;
        const TraceFile& file = model.files()[index];
        // Time order: thread by thread, each thread's samples in time order (the
        // file's are in time order over all threads; a stable sort keeps that).
        std::vector<std::uint32_t> sample_order(file.stack_samples.size());
        for (std::size_t sample = 0; sample < sample_order.size(); ++sample)
            sample_order[sample] = static_cast<std::uint32_t>(sample);
        if (order == FlameOrder::time_order)
            std::stable_sort(sample_order.begin(), sample_order.end(), [&file](std::uint32_t a, std::uint32_t b) {
                return file.stack_samples[a].thread_id < file.stack_samples[b].thread_id;
            });
        std::uint32_t thread_root = 0;
        trace::ThreadId root_thread = 0;
        bool have_root = false;
        for (std::uint32_t sample_index : sample_order) {
            const StackSampleRef& sample = file.stack_samples[sample_index];
            if (sample.idle && !idle_samples) continue;
            if (order == FlameOrder::time_order && (!have_root || sample.thread_id != root_thread)) {
                std::string label = "thread #" + std::to_string(sample.thread_id);
                for (int lane_index = 0; lane_index < model.lane_count(); ++lane_index) {
                    const Lane& lane = model.lane(lane_index);
                    if (lane.kind == LaneKind::thread && lane.file_index == static_cast<int>(index) &&
                        lane.track_id == sample.thread_id)
                        label = lane_label(lane);
                }
                thread_root = builder.child(0, label);
                root_thread = sample.thread_id;
                have_root = true;
            }
            std::uint32_t node = thread_root;
            auto frames = file.stack_frames.find(sample.stack_id);
            if (frames != file.stack_frames.end())
                for (std::uint32_t frame : frames->second) node = builder.child(node, file.frame_names[frame]);
            if (node == thread_root) node = builder.child(node, "(empty stack)");
            builder.add_inclusive(node, 1.0);
        }
    }
}

}  // namespace

FlameGraph build_flamegraph(const TraceModel& model, FlameSource source, FlameOrder order, int only_file,
                            bool idle_samples) {
    FlameGraph graph;
    graph.source = source;
    graph.order = order;
    graph.unit = source == FlameSource::cpu_samples ? "samples" : "ns";
    TreeBuilder builder(graph, order);
    if (source == FlameSource::nvtx_ranges)
        build_nvtx(model, builder, graph, order, only_file);
    else if (source == FlameSource::gpu_kernels)
        build_gpu_kernels(model, builder, order, only_file, {true, true});
    else if (source == FlameSource::gpu_by_range)
        build_gpu_kernels(model, builder, order, only_file, {true, false});
    else if (source == FlameSource::gpu_kernel_names)
        build_gpu_kernels(model, builder, order, only_file, {false, true});
    else if (source == FlameSource::cpu_samples)
        build_cpu_samples(model, builder, order, only_file, idle_samples);
    finish(graph);
    return graph;
}

namespace {

void merge_into(FlameGraph& out, std::uint32_t out_node, const FlameGraph& graph, std::uint32_t node, bool baseline,
                std::map<std::pair<std::uint32_t, std::string>, std::uint32_t>& lookup) {
    for (std::uint32_t child : graph.nodes[node].children) {
        const FlameNode& source = graph.nodes[child];
        const std::string name = analysis::normalise_name(source.name);
        std::uint32_t target;
        auto found = lookup.find({out_node, name});
        if (found != lookup.end()) {
            target = found->second;
        } else {
            target = static_cast<std::uint32_t>(out.nodes.size());
            FlameNode created;
            created.name = name;
            created.parent = out_node;
            out.nodes.push_back(std::move(created));
            out.nodes[out_node].children.push_back(target);
            lookup.emplace(std::make_pair(out_node, name), target);
        }
        if (baseline)
            out.nodes[target].baseline += source.total;
        else {
            out.nodes[target].total += source.total;
            out.nodes[target].count += source.count;
        }
        merge_into(out, target, graph, child, baseline, lookup);
    }
}

}  // namespace

FlameGraph difference_flamegraph(const FlameGraph& baseline, const FlameGraph& current) {
    FlameGraph out;
    out.source = current.source;
    out.order = FlameOrder::left_heavy;
    out.unit = current.unit;
    out.is_difference = true;
    out.nodes.push_back(root_node());
    std::map<std::pair<std::uint32_t, std::string>, std::uint32_t> lookup;
    if (!current.nodes.empty()) {
        out.nodes[0].total = current.nodes[0].total;
        merge_into(out, 0, current, 0, false, lookup);
    }
    if (!baseline.nodes.empty()) {
        out.nodes[0].baseline = baseline.nodes[0].total;
        merge_into(out, 0, baseline, 0, true, lookup);
    }
    finish(out);
    return out;
}

std::vector<FlameBox> layout_flamegraph(const FlameGraph& graph, std::uint32_t focus, double min_fraction) {
    std::vector<FlameBox> boxes;
    if (graph.nodes.empty()) return boxes;
    if (focus >= graph.nodes.size()) focus = 0;
    // Ancestors of the focus, full width.
    std::vector<std::uint32_t> ancestors;
    for (std::uint32_t node = focus; node != 0; node = graph.nodes[node].parent) ancestors.push_back(node);
    ancestors.push_back(0);
    std::reverse(ancestors.begin(), ancestors.end());
    for (std::size_t depth = 0; depth + 1 < ancestors.size(); ++depth)
        boxes.push_back({ancestors[depth], static_cast<int>(depth), 0.0, 1.0});
    const double focus_total = graph.nodes[focus].total;
    if (focus_total <= 0.0) {
        boxes.push_back({focus, static_cast<int>(ancestors.size()) - 1, 0.0, 1.0});
        return boxes;
    }
    struct Pending {
        std::uint32_t node;
        int depth;
        double x0;
    };
    std::vector<Pending> stack{{focus, static_cast<int>(ancestors.size()) - 1, 0.0}};
    while (!stack.empty()) {
        const Pending item = stack.back();
        stack.pop_back();
        const FlameNode& node = graph.nodes[item.node];
        const double width = node.total / focus_total;
        boxes.push_back({item.node, item.depth, item.x0, item.x0 + width});
        double x = item.x0;
        for (std::uint32_t child : node.children) {
            const double child_width = graph.nodes[child].total / focus_total;
            if (child_width >= min_fraction) stack.push_back({child, item.depth + 1, x});
            x += child_width;
        }
    }
    return boxes;
}

}  // namespace ember::viewer
