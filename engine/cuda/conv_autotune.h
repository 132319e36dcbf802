// conv_autotune.h: the cuDNN algorithm cache behind CudaContext::cudnn_benchmark.
// Key: (direction, shapes, strides/pads/dilations, dtype, layout). With benchmark on,
// the first use of a key runs cudnnFind*AlgorithmEx (times every algorithm that fits
// the workspace) and keeps the fastest, as torch.backends.cudnn.benchmark does; off,
// cudnnGet*Algorithm_v7 heuristics decide. Later uses are a map lookup.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace ember {

enum class ConvDirection : uint8_t { forward = 0, backward_data = 1, backward_filter = 2 };

struct ConvAlgoKey {
    ConvDirection direction;
    bool benchmark;               // a heuristic choice never masquerades as a timed one
    bool deterministic = false;   // chosen among deterministic algorithms only
    std::vector<int64_t> fields;  // shapes, params, dtype, layout
    bool operator<(const ConvAlgoKey& other) const {
        return std::tie(direction, benchmark, deterministic, fields) <
               std::tie(other.direction, other.benchmark, other.deterministic, other.fields);
    }
};

struct ConvAlgoChoice {
    int algorithm = 0;  // cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
    std::size_t workspace_bytes = 0;
    float time_ms = -1.0f;    // measured by Find (benchmark), -1 for heuristics
    bool tensor_ops = false;  // math type CUDNN_TENSOR_OP_MATH
};

class ConvAlgoCache {
  public:
    const ConvAlgoChoice* find(const ConvAlgoKey& key) const {
        auto it = entries_.find(key);
        return it == entries_.end() ? nullptr : &it->second;
    }
    void insert(const ConvAlgoKey& key, const ConvAlgoChoice& choice) { entries_[key] = choice; }
    std::size_t size() const { return entries_.size(); }
    uint64_t searches() const { return searches_; }  // Find/Get calls made (cache misses)
    void count_search() { ++searches_; }
    void clear() { entries_.clear(); }

  private:
    std::map<ConvAlgoKey, ConvAlgoChoice> entries_;
    uint64_t searches_ = 0;
};

}  // namespace ember
