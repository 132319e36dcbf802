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

class GradientSynchronizer {
public:
    virtual ~GradientSynchronizer() = default;
    virtual void begin_backward(bool synchronize) = 0;
    virtual void layer_gradients_ready(std::size_t layer_index) = 0;
    virtual void finish_gradients() = 0;
};

}  // namespace ember::nn
