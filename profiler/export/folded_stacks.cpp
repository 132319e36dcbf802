// folded_stacks.cpp: building stack trees from a trace and writing them folded.
#include "profiler/export/folded_stacks.h"

#include "profiler/analysis/cpu_profile.h"
#include "profiler/analysis/enum_names.h"
#include "profiler/analysis/gpu_time_by_range.h"
#include "profiler/export/nested_events.h"

#include <fmt/format.h>

#include <iterator>
#include <vector>

namespace ember::exporting {

std::optional<StackSource> parse_stack_source(std::string_view text) {
    static constexpr analysis::EnumName<StackSource> kNames[] = {
        {StackSource::gpu, "gpu"},
        {StackSource::host, "host"},
        {StackSource::cpu, "cpu"},
    };
    return analysis::value_in(kNames, text);
}

namespace {

analysis::StackTree host_stacks(const store::TraceReader& reader) {
    analysis::StackTree tree;
    for (const trace::ThreadInfo& thread : reader.threads()) {
        std::uint32_t thread_node =
            tree.child(analysis::StackTree::kRoot,
                       fmt::format("thread {} (tid {})", thread.name.empty() ? "?" : thread.name, thread.tid));
        struct Frame {
            std::uint32_t node;
            std::int64_t start_ns;
            std::int64_t children_ns;
        };
        std::vector<Frame> open;
        store::Statement query = thread_lane_query(reader, thread.thread_id);
        for_each_nested_event(
            query,
            [&reader](store::Statement& row) {
                return std::string(reader.string(static_cast<trace::StringId>(row.column_int64(2))));
            },
            [&](const std::string& name, std::int64_t at) {
                std::uint32_t parent = open.empty() ? thread_node : open.back().node;
                open.push_back({tree.child(parent, name), at, 0});
            },
            [&](const std::string&, std::int64_t at) {
                Frame frame = open.back();
                open.pop_back();
                std::int64_t duration = at - frame.start_ns;
                tree.add_weight(frame.node, duration - frame.children_ns);
                if (!open.empty()) open.back().children_ns += duration;
            });
    }
    return tree;
}

std::string folded_name(const std::string& name) {
    std::string cleaned = name;
    for (char& c : cleaned) {
        if (c == ';') c = ':';
        if (c == '\n' || c == '\r') c = ' ';
    }
    return cleaned;
}

}  // namespace

analysis::StackTree build_stacks(const store::TraceReader& reader, StackSource source, bool include_idle) {
    if (source == StackSource::gpu) return analysis::gpu_time_by_range(reader).stacks;
    if (source == StackSource::cpu) return analysis::cpu_stack_tree(reader, include_idle);
    return host_stacks(reader);
}

void write_folded(const analysis::StackTree& stacks, OutputFile& out) {
    for (std::uint32_t node = 1; node < stacks.size(); ++node) {
        std::int64_t weight = stacks.node(node).self_weight;
        if (weight <= 0) continue;
        std::string& b = out.buffer();
        bool first = true;
        for (const std::string& name : stacks.path(node)) {
            if (!first) b += ';';
            first = false;
            b += folded_name(name);
        }
        fmt::format_to(std::back_inserter(b), " {}\n", weight);
        out.maybe_flush();
    }
    out.flush();
}

}  // namespace ember::exporting
