// cuda_graph.h: capture of a stream's work into a CUDA Graph and its replay. The first
// capture instantiates an executable graph; a later capture of the same topology with
// new kernel arguments updates it in place (cudaGraphExecUpdate), falling back to a
// fresh instantiation when the topology changed.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>

namespace ember::nn {

class CudaGraph {
  public:
    CudaGraph() = default;
    ~CudaGraph();
    CudaGraph(const CudaGraph&) = delete;
    CudaGraph& operator=(const CudaGraph&) = delete;

    // Runs `work` with `stream` in capture mode (nothing executes) and keeps the result.
    void capture(cudaStream_t stream, const std::function<void()>& work);
    void replay(cudaStream_t stream);
    bool ready() const { return exec_ != nullptr; }
    int captures() const { return captures_; }
    long replays() const { return replays_; }
    int updates_in_place() const { return updates_in_place_; }

  private:
    cudaGraphExec_t exec_ = nullptr;
    int captures_ = 0;
    int updates_in_place_ = 0;
    long replays_ = 0;
};

}  // namespace ember::nn
