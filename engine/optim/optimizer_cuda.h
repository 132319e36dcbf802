// optimizer_cuda.h: the device side of the elementwise optimizers. The flat buffers
// are cut into chunks (at most kOptimizerChunkElements each, never spanning two
// segments); the chunk and segment tables live in device memory. One update kernel
// walks chunks grid-stride and calls update_element() (update_rules.h):
//   fused       one launch over all chunks (+1 reduction launch for LARS/NovoGrad,
//               +2 for LAMB's reduction and second phase)
//   per tensor  the same kernels launched once per segment over its chunks
// Per-segment norms come from a reduction kernel writing one partial sum of squares
// per chunk; update blocks add up their segment's partials in double.
// Every pointer and table is fixed at construction and step() does no host-side
// bookkeeping between launches, so a step can be captured in a CUDA graph; the
// per-step scalars (UpdateParameters) are kernel arguments, so a replay is only valid
// while they are unchanged (see ElementwiseOptimizer::next_step_parameters()).
#pragma once

#include "engine/optim/optimizer.h"

#include <cstddef>
#include <vector>

namespace ember::optim {

constexpr std::size_t kOptimizerChunkElements = 16384;

class CudaMultiTensorUpdater {
  public:
    // cudaMalloc's the state buffers (state 0 filled with initial_state0, others 0),
    // the tables and the partial sums. Throws ember::CudaError without a device.
    CudaMultiTensorUpdater(const std::vector<ParameterSegment>& segments, std::size_t parameter_count,
                           int state_buffers, float initial_state0);
    ~CudaMultiTensorUpdater();
    CudaMultiTensorUpdater(const CudaMultiTensorUpdater&) = delete;
    CudaMultiTensorUpdater& operator=(const CudaMultiTensorUpdater&) = delete;

    // One step on device pointers; returns the number of kernel launches made.
    int step(const UpdateParameters& u, bool fused, float* params, const float* grads, const StepOptions& options);

    const float* state(int index) const { return state_[index]; }

    // Host copies of the state buffers and NovoGrad's per-segment norms (synchronous).
    void download(std::vector<std::vector<float>>& buffers, std::vector<float>& segment_norms) const;
    void upload(const std::vector<std::vector<float>>& buffers, const std::vector<float>& segment_norms);

  private:
    std::size_t parameter_count_ = 0;
    int state_buffers_ = 0;
    float* state_[3] = {nullptr, nullptr, nullptr};
    int chunk_count_ = 0;
    std::size_t segment_count_ = 0;
    std::vector<int> segment_first_chunk_;  // host copy: per-tensor launch ranges
    std::vector<int> segment_chunk_count_;
    void* device_chunks_ = nullptr;    // OptimizerChunk[chunk_count_]
    void* device_segments_ = nullptr;  // OptimizerSegmentEntry[segments]
    float* partials_ = nullptr;        // 3 per chunk: grad^2, param^2, update^2
    // NovoGrad's per-segment norms: [kNormsPrevious] read by the update kernel,
    // [kNormsLatest] written by it (see optimizer_reduce_kernel).
    static constexpr int kNormsPrevious = 0;
    static constexpr int kNormsLatest = 1;
    float* segment_norms_[2] = {nullptr, nullptr};
};

}  // namespace ember::optim
