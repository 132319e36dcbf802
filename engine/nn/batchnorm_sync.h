// batchnorm_sync.h: the interface through which nn::BatchNorm hands its training-mode
// statistics to a cross-rank implementation (engine/dist's BatchNormSync: SyncBatchNorm,
// as torch.nn.SyncBatchNorm) without engine/nn depending on engine/dist. When
// RunContext::batchnorm_sync is set, every BatchNorm of the model — top-level or inside
// a residual block — normalizes by the statistics of the union of every rank's batch.
// Evaluation keeps using the running statistics, which then agree on every rank.
#pragma once

#include "engine/core/tensor.h"
#include "engine/ops/batchnorm.h"

namespace ember::nn {

class BatchNormSynchronizer {
  public:
    virtual ~BatchNormSynchronizer() = default;
    // As ops::batchnorm_forward_train, with mean and variance over every rank's batch.
    // A collective: every rank calls it for the same layers in the same order.
    virtual void forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& y,
                               const Tensor& running_mean, const Tensor& running_var, const Tensor& save_mean,
                               const Tensor& save_invstd, const ops::BatchNormParams& params) = 0;
    // As ops::batchnorm_backward: dgamma/dbeta are this rank's share (data parallel sums
    // them with the other gradients); dx uses the sums over every rank. A collective.
    virtual void backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
                          const Tensor& save_invstd, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta,
                          ops::GradWrite input_write, ops::GradWrite param_write) = 0;
};

}  // namespace ember::nn
