// stack_tree.cpp: StackTree node interning and weights.
#include "profiler/analysis/stack_tree.h"

#include <algorithm>

namespace ember::analysis {

StackTree::StackTree() {
    nodes_.emplace_back();
}

std::uint32_t StackTree::child(std::uint32_t parent, const std::string& name) {
    auto [position, inserted] = edges_.try_emplace({parent, name}, static_cast<std::uint32_t>(nodes_.size()));
    if (inserted) {
        Node node;
        node.parent = parent;
        node.name = name;
        node.depth = nodes_[parent].depth + 1;
        nodes_.push_back(std::move(node));
        nodes_[parent].children.push_back(position->second);
    }
    return position->second;
}

std::int64_t StackTree::inclusive_weight(std::uint32_t id) const {
    // Iterative: trees from deep recursion (nested ranges) must not overflow the stack.
    std::int64_t total = 0;
    std::vector<std::uint32_t> pending{id};
    while (!pending.empty()) {
        std::uint32_t current = pending.back();
        pending.pop_back();
        total += nodes_[current].self_weight;
        for (std::uint32_t c : nodes_[current].children) pending.push_back(c);
    }
    return total;
}

std::vector<std::int64_t> StackTree::inclusive_weights() const {
    // A node is always created after its parent, so one pass from the last node
    // back to the root has every child summed before its parent is added.
    std::vector<std::int64_t> weights(nodes_.size());
    for (std::size_t id = nodes_.size(); id-- > 0;) {
        weights[id] += nodes_[id].self_weight;
        if (id != kRoot) weights[nodes_[id].parent] += weights[id];
    }
    return weights;
}

std::vector<std::string> StackTree::path(std::uint32_t id) const {
    std::vector<std::string> names;
    while (id != kRoot) {
        names.push_back(nodes_[id].name);
        id = nodes_[id].parent;
    }
    std::reverse(names.begin(), names.end());
    return names;
}

}  // namespace ember::analysis
