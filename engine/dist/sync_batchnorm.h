// sync_batchnorm.h: SyncBatchNorm - BatchNorm whose batch statistics are those of the
// union of every rank's batch (torch.nn.SyncBatchNorm). Without it each rank
// normalizes by its own small batch and data parallel training is no longer the
// single-process training of the union batch.
//
// Forward all-reduces per channel the sum (-> mean) and then the sum of squared
// deviations (-> variance; two passes, as the CPU BatchNorm does); backward all-reduces
// sum(dy) and sum(dy * xhat), which the input gradient needs. Parameter gradients are
// this rank's share; DataParallel all-reduces them like every other gradient.
// Same parameter names and layout as nn::BatchNorm, so checkpoints interchange.
//
// CPU backend, f32 activations, NCHW or [N, C] inputs (the reference). A CUDA version
// (the same sums on the NCCL communicator) is not written yet: cuda models throw.
#pragma once

#include "engine/dist/communicator.h"
#include "engine/nn/layer.h"
#include "engine/ops/batchnorm.h"

namespace ember::dist {

class SyncBatchNorm : public nn::Layer {
public:
    SyncBatchNorm(std::string name, int64_t channels, Communicator& communicator, float momentum = 0.1f,
                  float eps = 1e-5f);
    const char* kind() const override { return "sync_batchnorm"; }
    nn::TensorShape output_shape(const nn::TensorShape& input) const override;
    void register_parameters(nn::ParameterStore& store) override;
    Tensor forward(nn::RunContext& ctx, const Tensor& x) override;
    Tensor backward(nn::RunContext& ctx, const Tensor& dy, bool need_input_grad) override;

private:
    int64_t channels_;
    Communicator& communicator_;
    ops::BatchNormParams params_;
    nn::ParameterRef gamma_, beta_, running_mean_, running_var_;
    Tensor x_;
    std::vector<double> mean_, invstd_;
    double count_ = 0.0;  // samples x spatial over every rank
};

}  // namespace ember::dist
