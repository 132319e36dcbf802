// stack_tree.h: a prefix tree of named frames with a weight per node — the one
// data structure behind folded stacks, flamegraphs and speedscope's sampled
// profiles. Node 0 is the root (the empty stack). Children are interned, so a
// million events on the same few paths cost a hash lookup each, not a string.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace ember::analysis {

class StackTree {
  public:
    struct Node {
        std::uint32_t parent = 0;
        std::string name;
        std::int64_t self_weight = 0;         // weight of stacks ending exactly here
        std::uint32_t depth = 0;              // root 0, its children 1, ...
        std::vector<std::uint32_t> children;  // in creation order
    };

    StackTree();

    static constexpr std::uint32_t kRoot = 0;

    // The child of `parent` named `name`, created when new.
    std::uint32_t child(std::uint32_t parent, const std::string& name);
    void add_weight(std::uint32_t node, std::int64_t weight) { nodes_[node].self_weight += weight; }

    const Node& node(std::uint32_t id) const { return nodes_[id]; }
    std::size_t size() const { return nodes_.size(); }
    // self weight plus the inclusive weight of every descendant.
    std::int64_t inclusive_weight(std::uint32_t id) const;
    // Inclusive weight of every node at once (index = node id), in O(nodes).
    std::vector<std::int64_t> inclusive_weights() const;
    // Names from the root's child down to `id`.
    std::vector<std::string> path(std::uint32_t id) const;

  private:
    struct EdgeHash {
        std::size_t operator()(const std::pair<std::uint32_t, std::string>& edge) const {
            return std::hash<std::string>()(edge.second) * 31u + edge.first;
        }
    };
    std::vector<Node> nodes_;
    std::unordered_map<std::pair<std::uint32_t, std::string>, std::uint32_t, EdgeHash> edges_;
};

}  // namespace ember::analysis
