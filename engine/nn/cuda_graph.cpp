// cuda_graph.cpp: CUDA Graph capture, update and replay (cuda_graph.h).
#include "engine/nn/cuda_graph.h"

#include "engine/core/cuda_check.h"

namespace ember::nn {

CudaGraph::~CudaGraph() {
    if (exec_) cudaGraphExecDestroy(exec_);
}

void CudaGraph::capture(cudaStream_t stream, const std::function<void()>& work) {
    EMBER_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    try {
        work();
    } catch (...) {
        cudaGraph_t abandoned = nullptr;
        cudaStreamEndCapture(stream, &abandoned);
        if (abandoned) cudaGraphDestroy(abandoned);
        throw;
    }
    cudaGraph_t graph = nullptr;
    EMBER_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    bool updated = false;
    if (exec_) {
        cudaGraphExecUpdateResultInfo info{};
        if (cudaGraphExecUpdate(exec_, graph, &info) == cudaSuccess) {
            updated = true;
            ++updates_in_place_;
        } else {
            cudaGetLastError();  // clear the update failure; instantiate afresh below
            EMBER_CUDA_CHECK(cudaGraphExecDestroy(exec_));
            exec_ = nullptr;
        }
    }
    if (!updated) {
        cudaError_t status = cudaGraphInstantiate(&exec_, graph, 0);
        cudaGraphDestroy(graph);
        EMBER_CUDA_CHECK(status);
    } else {
        EMBER_CUDA_CHECK(cudaGraphDestroy(graph));
    }
    ++captures_;
}

void CudaGraph::replay(cudaStream_t stream) {
    EMBER_CUDA_CHECK(cudaGraphLaunch(exec_, stream));
    ++replays_;
}

}  // namespace ember::nn
