// batchnorm.h: BatchNorm over the channel dim of (N,C,H,W) (either layout) or (N,C),
// as nn.BatchNorm2d/1d. Statistics and parameters are f32; x/y/dx/dy may be f32, f16
// or bf16 (f64 on CPU) and are computed in fp32 (AMP keeps normalization in fp32).
// Training uses the biased batch variance to normalize and updates running_var with
// the unbiased one, with PyTorch's momentum convention:
//   running = (1 - momentum) running + momentum batch_statistic
#pragma once

#include "engine/ops/common.h"

#include <cmath>

namespace ember::ops {

struct BatchNormParams {
    float eps = 1e-5f;
    float momentum = 0.1f;
};

// y = gamma (x - mean) invstd + beta: the per-element math both backends share.
EMBER_HD inline float batchnorm_apply(float x, float mean, float invstd, float gamma, float beta) {
    return (x - mean) * invstd * gamma + beta;
}

// save_mean/save_invstd [C] keep the batch statistics for backward.
void batchnorm_forward_train_cpu(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& y,
                                 const Tensor& running_mean, const Tensor& running_var, const Tensor& save_mean,
                                 const Tensor& save_invstd, const BatchNormParams& params);
void batchnorm_forward_train_cuda(CudaContext& ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  const Tensor& y, const Tensor& running_mean, const Tensor& running_var,
                                  const Tensor& save_mean, const Tensor& save_invstd, const BatchNormParams& params);

// Normalizes with the running statistics.
void batchnorm_forward_eval_cpu(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                                const Tensor& running_var, const Tensor& y, const BatchNormParams& params);
void batchnorm_forward_eval_cuda(CudaContext& ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                 const Tensor& running_mean, const Tensor& running_var, const Tensor& y,
                                 const BatchNormParams& params);

// Training-mode backward:
//   dx = gamma invstd / M (M dy - sum(dy) - xhat sum(dy xhat)), M = N*H*W
//   dgamma = sum(dy xhat), dbeta = sum(dy)
void batchnorm_backward_cpu(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
                            const Tensor& save_invstd, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta,
                            GradWrite input_write, GradWrite param_write);
void batchnorm_backward_cuda(CudaContext& ctx, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                             const Tensor& save_mean, const Tensor& save_invstd, const Tensor& dx, const Tensor& dgamma,
                             const Tensor& dbeta, GradWrite input_write, GradWrite param_write);

}  // namespace ember::ops
