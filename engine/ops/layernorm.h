// layernorm.h: fused LayerNorm over the last dim (C) of x[rows, C], as nn.LayerNorm
// (biased variance, eps inside the sqrt), one kernel for forward and one for dx
// (Apex-style), with dgamma/dbeta reduced over rows. x/y/dx/dy: f32, f16, bf16 (f64 on
// CPU), fp32 statistics; gamma, beta, mean, rstd: f32.
#pragma once

#include "engine/ops/common.h"

namespace ember::ops {

// save_mean/save_rstd [rows] keep the row statistics for backward.
void layernorm_forward_cpu(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                           const Tensor& y, const Tensor& save_mean, const Tensor& save_rstd,
                           float eps = 1e-5f);
void layernorm_forward_cuda(CudaContext& ctx, const Tensor& x, const Tensor& gamma,
                            const Tensor& beta, const Tensor& y, const Tensor& save_mean,
                            const Tensor& save_rstd, float eps = 1e-5f);

// dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy gamma
// dgamma = sum_rows(dy xhat), dbeta = sum_rows(dy)
void layernorm_backward_cpu(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                            const Tensor& save_mean, const Tensor& save_rstd, const Tensor& dx,
                            const Tensor& dgamma, const Tensor& dbeta, GradWrite input_write,
                            GradWrite param_write);
void layernorm_backward_cuda(CudaContext& ctx, const Tensor& x, const Tensor& dy,
                             const Tensor& gamma, const Tensor& save_mean, const Tensor& save_rstd,
                             const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta,
                             GradWrite input_write, GradWrite param_write);

}  // namespace ember::ops
