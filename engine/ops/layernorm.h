// layernorm.h: LayerNorm over the last dim (C) of x[rows, C], as nn.LayerNorm (biased
// variance, eps inside the sqrt), in two forms so the fusion can be measured:
//   layernorm_forward_* / layernorm_backward_*   fused: one kernel for forward, one for dx
//       (Apex-style), dgamma/dbeta reduced over rows (partial sums + their ordered sum);
//   layernorm_*_unfused_*   the ops an eager framework without the fused kernel runs,
//       each reading and writing memory (intermediates in an f32 scratch tensor):
//       forward  (4 kernels): mean = row_mean(x); rstd = 1/sqrt(row_mean((x-mean)^2)+eps);
//                xhat = (x-mean)*rstd; y = xhat*gamma + beta
//       backward (11 kernels, 6 without dx): xhat again (only mean/rstd are saved);
//                g = dy*gamma; row_mean(g); g*xhat; row_mean(g*xhat);
//                dx = rstd*(g - mean(g) - xhat*mean(g*xhat)); dy*xhat;
//                dgamma = sum_rows(dy*xhat), dbeta = sum_rows(dy) (2 kernels each on cuda:
//                row-group partial sums, then their ordered sum)
// x/y/dx/dy: f32, f16, bf16 (f64 on CPU), fp32 statistics; gamma, beta, mean, rstd: f32
// (f64 also on CPU). The per-element math below is shared by both backends.
#pragma once

#include "engine/core/dtype.h"  // EMBER_HD
#include "engine/ops/common.h"

#include <cmath>

namespace ember::ops {

// 1 / sqrt(var + eps): the CPU reference calls the double form, kernels the float one.
inline double layernorm_rstd(double variance, double eps) {
    return 1.0 / std::sqrt(variance + eps);
}
EMBER_HD inline float layernorm_rstd(float variance, float eps) {
    return 1.0f / sqrtf(variance + eps);
}

template <class Real>
EMBER_HD inline Real layernorm_normalize(Real x, Real mean, Real rstd) {
    return (x - mean) * rstd;
}
template <class Real>
EMBER_HD inline Real layernorm_affine(Real xhat, Real gamma, Real beta) {
    return xhat * gamma + beta;
}
// dx for g = dy*gamma, given the row means of g and of g*xhat.
template <class Real>
EMBER_HD inline Real layernorm_input_grad(Real g, Real xhat, Real rstd, Real mean_g, Real mean_g_xhat) {
    return rstd * (g - mean_g - xhat * mean_g_xhat);
}

// save_mean/save_rstd [rows] keep the row statistics for backward.
void layernorm_forward_cpu(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& y,
                           const Tensor& save_mean, const Tensor& save_rstd, float eps = 1e-5f);
void layernorm_forward_cuda(CudaContext& ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& y,
                            const Tensor& save_mean, const Tensor& save_rstd, float eps = 1e-5f);

// dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy gamma
// dgamma = sum_rows(dy xhat), dbeta = sum_rows(dy)
void layernorm_backward_cpu(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
                            const Tensor& save_rstd, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta,
                            GradWrite input_write, GradWrite param_write);
void layernorm_backward_cuda(CudaContext& ctx, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                             const Tensor& save_mean, const Tensor& save_rstd, const Tensor& dx, const Tensor& dgamma,
                             const Tensor& dbeta, GradWrite input_write, GradWrite param_write);

// ---- unfused -------------------------------------------------------------------------
// Same arguments and results as the fused ops plus `scratch`: an f32 tensor (f32 or f64
// on CPU) with at least the element count below; its contents are overwritten.
inline int64_t layernorm_forward_unfused_scratch(int64_t rows, int64_t C) {
    return rows * C;
}  // xhat
// xhat, g, a product, mean(g), mean(g*xhat)
inline int64_t layernorm_backward_unfused_scratch(int64_t rows, int64_t C) {
    return 3 * rows * C + 2 * rows;
}

void layernorm_forward_unfused_cpu(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& y,
                                   const Tensor& save_mean, const Tensor& save_rstd, const Tensor& scratch,
                                   float eps = 1e-5f);
void layernorm_forward_unfused_cuda(CudaContext& ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    const Tensor& y, const Tensor& save_mean, const Tensor& save_rstd,
                                    const Tensor& scratch, float eps = 1e-5f);
// dx may be undefined (then only dgamma/dbeta are computed).
void layernorm_backward_unfused_cpu(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
                                    const Tensor& save_rstd, const Tensor& dx, const Tensor& dgamma,
                                    const Tensor& dbeta, const Tensor& scratch, GradWrite input_write,
                                    GradWrite param_write);
void layernorm_backward_unfused_cuda(CudaContext& ctx, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                     const Tensor& save_mean, const Tensor& save_rstd, const Tensor& dx,
                                     const Tensor& dgamma, const Tensor& dbeta, const Tensor& scratch,
                                     GradWrite input_write, GradWrite param_write);

}  // namespace ember::ops
