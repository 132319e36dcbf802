// gradient_sync.h: the interface through which nn::Trainer hands gradient
// synchronization to a data-parallel implementation (engine/dist's DataParallel) without
// engine/nn depending on it. Per optimizer step the trainer calls:
//   begin_backward(synchronize)   before each micro-batch's backward; synchronize is
//                                 true only on the last micro-batch (no communication
//                                 on accumulation micro-batches)
//   layer_gradients_ready(i)      from Model::backward after layer i (its gradients final)
//   finish_gradients()            after the last backward, before the optimizer: the
//                                 gradient buffer then holds the synchronized gradients
#pragma once

#include <cstddef>

namespace ember::nn {

// Elements [begin, end) of the flat gradient buffer.
struct GradientRange {
    std::size_t begin = 0;
    std::size_t end = 0;
};

class GradientSynchronizer {
  public:
    virtual ~GradientSynchronizer() = default;
    virtual void begin_backward(bool synchronize) = 0;
    virtual void layer_gradients_ready(std::size_t layer_index) = 0;
    virtual void finish_gradients() = 0;
    // The part of the flat gradient buffer that holds final values on this rank after
    // finish_gradients(): all of it, except under ZeRO-1's reduce-scatter (this rank's
    // shard, the only part its optimizer reads).
    virtual GradientRange final_gradients(std::size_t flat_length) const { return {0, flat_length}; }
    // Sums `count` floats over every rank, in place: host memory on the cpu backend,
    // device memory ordered on `stream` on cuda. How a global gradient norm is formed
    // from per-shard sums of squares. A collective: every rank calls it.
    virtual void sum_over_ranks(float* values, std::size_t count, void* stream) = 0;
};

}  // namespace ember::nn
