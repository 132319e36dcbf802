// sync_batchnorm.h: SyncBatchNorm - BatchNorm whose batch statistics are those of the
// union of every rank's batch (torch.nn.SyncBatchNorm). Without it each rank
// normalizes by its own small batch and data parallel training is no longer the
// single-process training of the union batch.
//
// BatchNormSync is the math, plugged into nn::BatchNorm through RunContext::batchnorm_sync
// (engine/nn/batchnorm_sync.h), so one setting turns every BatchNorm of a model into a
// synchronized one, including those inside residual blocks (`ember train --set
// distributed.sync_batchnorm=true`). Forward all-reduces per channel the sum and count
// (-> mean) and then the sum of squared deviations (-> variance; two passes, as the CPU
// BatchNorm does); backward all-reduces sum(dy) and sum(dy * xhat), which the input
// gradient needs. Parameter gradients are this rank's share; DataParallel all-reduces
// them like every other gradient.
//
// SyncBatchNorm is the same as a layer of its own (a BatchNorm that always synchronizes):
// same parameter names and layout as nn::BatchNorm, so checkpoints interchange.
//
// CPU backend, f32 statistics and activations, NCHW, NHWC or [N, C] inputs (the
// reference). A CUDA version (the same sums on the NCCL communicator) is not written
// yet: cuda tensors are refused with a message.
#pragma once

#include "engine/distributed/communicator.h"
#include "engine/nn/batchnorm_sync.h"
#include "engine/nn/conv_layers.h"
#include "engine/nn/layer.h"

namespace ember::distributed {

class BatchNormSync final : public nn::BatchNormSynchronizer {
  public:
    explicit BatchNormSync(Communicator& communicator) : communicator_(communicator) {}
    void forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& y,
                       const Tensor& running_mean, const Tensor& running_var, const Tensor& save_mean,
                       const Tensor& save_invstd, const ops::BatchNormParams& params) override;
    void backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
                  const Tensor& save_invstd, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta,
                  ops::GradWrite input_write, ops::GradWrite param_write) override;

  private:
    Communicator& communicator_;
};

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
    nn::BatchNorm norm_;
    BatchNormSync sync_;
};

}  // namespace ember::distributed
