// layernorm.cu: fused LayerNorm. Forward: one block per row (mean, centred variance,
// normalize) writing y and the row statistics. Backward: one block per row for dx;
// dgamma/dbeta by row-group partial sums per column, added in a fixed order by a
// second kernel (deterministic, no atomics). Unfused: the chain of engine/ops/layernorm.h,
// one kernel per op, each reading and writing memory; its row reductions are one block
// per row, its column reductions the same two-stage scheme as the fused dgamma/dbeta.
#include "engine/cuda/column_sums.cuh"
#include "engine/cuda/cuda_util.cuh"
#include "engine/ops/layernorm.h"

#include <algorithm>

namespace ember::ops {
namespace {

__global__ void layernorm_forward_kernel(const void* x, DType xt, const float* gamma, const float* beta, void* y,
                                         DType yt, float* save_mean, float* save_rstd, int64_t C, float eps) {
    const int64_t base = blockIdx.x * C;
    float sum = 0.0f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) sum += load_as_float(x, xt, base + c);
    const float mean = cuda::block_sum(sum) / float(C);
    float squares = 0.0f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        float d = load_as_float(x, xt, base + c) - mean;
        squares += d * d;
    }
    const float rstd = rsqrtf(cuda::block_sum(squares) / float(C) + eps);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
        store_from_float(y, yt, base + c, (load_as_float(x, xt, base + c) - mean) * rstd * gamma[c] + beta[c]);
    if (threadIdx.x == 0) {
        save_mean[blockIdx.x] = mean;
        save_rstd[blockIdx.x] = rstd;
    }
}

__global__ void layernorm_backward_dx_kernel(const void* x, DType xt, const void* dy, DType dyt, const float* gamma,
                                             const float* save_mean, const float* save_rstd, void* dx, DType dxt,
                                             int64_t C, GradWrite write) {
    const int64_t row = blockIdx.x, base = row * C;
    const float mean = save_mean[row], rstd = save_rstd[row];
    float sum_g = 0.0f, sum_g_xhat = 0.0f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        float xhat = (load_as_float(x, xt, base + c) - mean) * rstd;
        float g = load_as_float(dy, dyt, base + c) * gamma[c];
        sum_g += g;
        sum_g_xhat += g * xhat;
    }
    const float mean_g = cuda::block_sum(sum_g) / float(C);
    const float mean_g_xhat = cuda::block_sum(sum_g_xhat) / float(C);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        float xhat = (load_as_float(x, xt, base + c) - mean) * rstd;
        float g = load_as_float(dy, dyt, base + c) * gamma[c];
        float v = rstd * (g - mean_g - xhat * mean_g_xhat);
        store_grad(dx, dxt, base + c, v, write);
    }
}

// dgamma/dbeta, stage 1: block (column tile, group) sums rows group, group + groups, ...
// for 256 neighbouring columns (coalesced), into partials in the context workspace.
__global__ void layernorm_param_partials_kernel(const void* x, DType xt, const void* dy, DType dyt,
                                                const float* save_mean, const float* save_rstd, int64_t rows, int64_t C,
                                                int groups, float2* partial) {
    const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float sum_dy = 0.0f, sum_dy_xhat = 0.0f;
    for (int64_t r = blockIdx.y; r < rows; r += groups) {
        const float d = load_as_float(dy, dyt, r * C + c);
        sum_dy += d;
        sum_dy_xhat += d * (load_as_float(x, xt, r * C + c) - save_mean[r]) * save_rstd[r];
    }
    partial[blockIdx.y * C + c] = make_float2(sum_dy, sum_dy_xhat);
}

// Stage 2: one thread per column adds the groups in order (deterministic) and writes.
__global__ void layernorm_param_finish_kernel(const float2* partial, int groups, int64_t C, float* dgamma, float* dbeta,
                                              GradWrite write) {
    EMBER_GRID_STRIDE(c, C) {
        float sum_dy = 0.0f, sum_dy_xhat = 0.0f;
        for (int group = 0; group < groups; ++group) {
            sum_dy += partial[group * C + c].x;
            sum_dy_xhat += partial[group * C + c].y;
        }
        dgamma[c] = write_grad(dgamma[c], sum_dy_xhat, write);
        dbeta[c] = write_grad(dbeta[c], sum_dy, write);
    }
}

// ---- the unfused chain's kernels ----------------------------------------------------

// out[row] = mean of in[row, :] (one block per row).
__global__ void row_mean_kernel(const void* in, DType in_type, int64_t C, float* out) {
    const int64_t base = blockIdx.x * C;
    float sum = 0.0f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) sum += load_as_float(in, in_type, base + c);
    const float total = cuda::block_sum(sum);
    if (threadIdx.x == 0) out[blockIdx.x] = total / float(C);
}

// rstd[row] = 1/sqrt(mean((x - mean)^2) + eps) (one block per row).
__global__ void row_rstd_kernel(const void* x, DType xt, const float* mean, int64_t C, float eps, float* rstd) {
    const int64_t base = blockIdx.x * C;
    const float row_mean_value = mean[blockIdx.x];
    float squares = 0.0f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        float centered = load_as_float(x, xt, base + c) - row_mean_value;
        squares += centered * centered;
    }
    const float total = cuda::block_sum(squares);
    if (threadIdx.x == 0) rstd[blockIdx.x] = layernorm_rstd(total / float(C), eps);
}

__global__ void normalize_kernel(const void* x, DType xt, const float* mean, const float* rstd, int64_t n, int64_t C,
                                 float* xhat) {
    EMBER_GRID_STRIDE(i, n) {
        xhat[i] = layernorm_normalize(load_as_float(x, xt, i), mean[i / C], rstd[i / C]);
    }
}

__global__ void affine_kernel(const float* xhat, const float* gamma, const float* beta, int64_t n, int64_t C, void* y,
                              DType yt) {
    EMBER_GRID_STRIDE(i, n) {
        store_from_float(y, yt, i, layernorm_affine(xhat[i], gamma[i % C], beta[i % C]));
    }
}

// out[i] = a[i] * b[i % period] (period = C: times gamma; period = n: elementwise).
__global__ void multiply_kernel(const void* a, DType at, const float* b, int64_t n, int64_t period, float* out) {
    EMBER_GRID_STRIDE(i, n) {
        out[i] = load_as_float(a, at, i) * b[i % period];
    }
}

__global__ void input_grad_kernel(const float* g, const float* xhat, const float* rstd, const float* mean_g,
                                  const float* mean_g_xhat, int64_t n, int64_t C, void* dx, DType dxt,
                                  GradWrite write) {
    EMBER_GRID_STRIDE(i, n) {
        const int64_t row = i / C;
        float v = layernorm_input_grad(g[i], xhat[i], rstd[row], mean_g[row], mean_g_xhat[row]);
        store_grad(dx, dxt, i, v, write);
    }
}

void check_scratch_cuda(const char* op, const Tensor& scratch, int64_t expected) {
    require(scratch.defined() && scratch.device == Device::cuda && scratch.dtype == DType::f32 &&
                scratch.numel() >= expected,
            op,
            "scratch must be a cuda f32 tensor with at least " + std::to_string(expected) + " elements" +
                (scratch.defined() ? ": " + scratch.describe() : ""));
}

}  // namespace

void layernorm_forward_cuda(CudaContext& ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& y,
                            const Tensor& save_mean, const Tensor& save_rstd, float eps) {
    const char* op = "layernorm_forward_cuda";
    cuda::check_float_cuda(x, op, "x");
    cuda::check_float_cuda(y, op, "y");
    require(same_shape(x, y), op, "x and y shapes differ");
    const int64_t rows = x.rows(), C = x.cols();
    cuda::check_f32_cuda(op, C, {{gamma, "gamma"}, {beta, "beta"}});
    cuda::check_f32_cuda(op, rows, {{save_mean, "save_mean"}, {save_rstd, "save_rstd"}});
    if (rows == 0) return;
    EMBER_LAUNCH(layernorm_forward_kernel, static_cast<unsigned>(rows), cuda::kThreads, 0, ctx.stream)(x.data, x.dtype, gamma.as<float>(), beta.as<float>(), y.data,
                                                   y.dtype, save_mean.as<float>(), save_rstd.as<float>(), C, eps);
    EMBER_CUDA_CHECK_LAUNCH();
}

void layernorm_backward_cuda(CudaContext& ctx, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                             const Tensor& save_mean, const Tensor& save_rstd, const Tensor& dx, const Tensor& dgamma,
                             const Tensor& dbeta, GradWrite input_write, GradWrite param_write) {
    const char* op = "layernorm_backward_cuda";
    cuda::check_float_cuda(x, op, "x");
    cuda::check_float_cuda(dy, op, "dy");
    require(same_shape(x, dy), op, "x and dy shapes differ");
    const int64_t rows = x.rows(), C = x.cols();
    cuda::check_f32_cuda(op, C, {{gamma, "gamma"}, {dgamma, "dgamma"}, {dbeta, "dbeta"}});
    cuda::check_f32_cuda(op, rows, {{save_mean, "save_mean"}, {save_rstd, "save_rstd"}});
    if (dx.defined()) {
        cuda::check_float_cuda(dx, op, "dx");
        require(same_shape(x, dx), op, "x and dx shapes differ");
    }
    // With no rows dx is empty but dgamma and dbeta are still written (zeros on store),
    // as the CPU twin writes them: the column sums below run for any row count.
    if (dx.defined() && rows > 0) {
        const unsigned row_blocks = static_cast<unsigned>(rows);
        EMBER_LAUNCH(layernorm_backward_dx_kernel, row_blocks, cuda::kThreads, 0, ctx.stream)(x.data, x.dtype, dy.data, dy.dtype, gamma.as<float>(), save_mean.as<float>(),
                                 save_rstd.as<float>(), dx.data, dx.dtype, C, input_write);
        EMBER_CUDA_CHECK_LAUNCH();
    }
    const cuda::ColumnGrid g = cuda::column_grid(ctx, rows, C, sizeof(float2), op);
    float2* partial = static_cast<float2*>(ctx.workspace);
    EMBER_LAUNCH(layernorm_param_partials_kernel, g.grid, cuda::kThreads, 0, ctx.stream)(x.data, x.dtype, dy.data, dy.dtype, save_mean.as<float>(), save_rstd.as<float>(), rows, C,
                             g.groups, partial);
    EMBER_CUDA_CHECK_LAUNCH();
    EMBER_LAUNCH(layernorm_param_finish_kernel, cuda::grid_for(C), cuda::kThreads, 0, ctx.stream)(partial, g.groups, C, dgamma.as<float>(),
                                                                           dbeta.as<float>(), param_write);
    EMBER_CUDA_CHECK_LAUNCH();
}

// ---- unfused --------------------------------------------------------------------------

void layernorm_forward_unfused_cuda(CudaContext& ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    const Tensor& y, const Tensor& save_mean, const Tensor& save_rstd,
                                    const Tensor& scratch, float eps) {
    const char* op = "layernorm_forward_unfused_cuda";
    cuda::check_float_cuda(x, op, "x");
    cuda::check_float_cuda(y, op, "y");
    require(same_shape(x, y), op, "x and y shapes differ");
    const int64_t rows = x.rows(), C = x.cols(), n = rows * C;
    cuda::check_f32_cuda(op, C, {{gamma, "gamma"}, {beta, "beta"}});
    cuda::check_f32_cuda(op, rows, {{save_mean, "save_mean"}, {save_rstd, "save_rstd"}});
    check_scratch_cuda(op, scratch, layernorm_forward_unfused_scratch(rows, C));
    if (rows == 0) return;
    float* mean = save_mean.as<float>();
    float* rstd = save_rstd.as<float>();
    float* xhat = scratch.as<float>();
    const unsigned row_blocks = static_cast<unsigned>(rows), grid = cuda::grid_for(n);
    EMBER_LAUNCH(row_mean_kernel, row_blocks, cuda::kThreads, 0, ctx.stream)(x.data, x.dtype, C, mean);
    EMBER_CUDA_CHECK_LAUNCH();
    EMBER_LAUNCH(row_rstd_kernel, row_blocks, cuda::kThreads, 0, ctx.stream)(x.data, x.dtype, mean, C, eps, rstd);
    EMBER_CUDA_CHECK_LAUNCH();
    EMBER_LAUNCH(normalize_kernel, grid, cuda::kThreads, 0, ctx.stream)(x.data, x.dtype, mean, rstd, n, C, xhat);
    EMBER_CUDA_CHECK_LAUNCH();
    EMBER_LAUNCH(affine_kernel, grid, cuda::kThreads, 0, ctx.stream)(xhat, gamma.as<float>(), beta.as<float>(), n, C, y.data, y.dtype);
    EMBER_CUDA_CHECK_LAUNCH();
}

void layernorm_backward_unfused_cuda(CudaContext& ctx, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                     const Tensor& save_mean, const Tensor& save_rstd, const Tensor& dx,
                                     const Tensor& dgamma, const Tensor& dbeta, const Tensor& scratch,
                                     GradWrite input_write, GradWrite param_write) {
    const char* op = "layernorm_backward_unfused_cuda";
    cuda::check_float_cuda(x, op, "x");
    cuda::check_float_cuda(dy, op, "dy");
    require(same_shape(x, dy), op, "x and dy shapes differ");
    const int64_t rows = x.rows(), C = x.cols(), n = rows * C;
    cuda::check_f32_cuda(op, C, {{gamma, "gamma"}, {dgamma, "dgamma"}, {dbeta, "dbeta"}});
    cuda::check_f32_cuda(op, rows, {{save_mean, "save_mean"}, {save_rstd, "save_rstd"}});
    if (dx.defined()) {
        cuda::check_float_cuda(dx, op, "dx");
        require(same_shape(x, dx), op, "x and dx shapes differ");
    }
    check_scratch_cuda(op, scratch, layernorm_backward_unfused_scratch(rows, C));
    if (rows == 0) {  // dx is empty, but dgamma and dbeta are sums over no rows (zeros on store)
        cuda::column_sums(ctx, op, dy.data, dy.dtype, 0, C, dgamma.as<float>(), param_write);
        cuda::column_sums(ctx, op, dy.data, dy.dtype, 0, C, dbeta.as<float>(), param_write);
        return;
    }
    float* xhat = scratch.as<float>();
    float* g = xhat + n;
    float* product = g + n;
    float* mean_g = product + n;
    float* mean_g_xhat = mean_g + rows;
    const float* rstd = save_rstd.as<float>();
    const unsigned row_blocks = static_cast<unsigned>(rows), grid = cuda::grid_for(n);
    EMBER_LAUNCH(normalize_kernel, grid, cuda::kThreads, 0, ctx.stream)(x.data, x.dtype, save_mean.as<float>(), rstd, n, C, xhat);
    EMBER_CUDA_CHECK_LAUNCH();
    if (dx.defined()) {
        EMBER_LAUNCH(multiply_kernel, grid, cuda::kThreads, 0, ctx.stream)(dy.data, dy.dtype, gamma.as<float>(), n, C, g);
        EMBER_CUDA_CHECK_LAUNCH();
        EMBER_LAUNCH(row_mean_kernel, row_blocks, cuda::kThreads, 0, ctx.stream)(g, DType::f32, C, mean_g);
        EMBER_CUDA_CHECK_LAUNCH();
        EMBER_LAUNCH(multiply_kernel, grid, cuda::kThreads, 0, ctx.stream)(g, DType::f32, xhat, n, n, product);
        EMBER_CUDA_CHECK_LAUNCH();
        EMBER_LAUNCH(row_mean_kernel, row_blocks, cuda::kThreads, 0, ctx.stream)(product, DType::f32, C, mean_g_xhat);
        EMBER_CUDA_CHECK_LAUNCH();
        EMBER_LAUNCH(input_grad_kernel, grid, cuda::kThreads, 0, ctx.stream)(g, xhat, rstd, mean_g, mean_g_xhat, n, C, dx.data, dx.dtype, input_write);
        EMBER_CUDA_CHECK_LAUNCH();
    }
    EMBER_LAUNCH(multiply_kernel, grid, cuda::kThreads, 0, ctx.stream)(dy.data, dy.dtype, xhat, n, n, product);
    EMBER_CUDA_CHECK_LAUNCH();
    cuda::column_sums(ctx, op, product, DType::f32, rows, C, dgamma.as<float>(), param_write);
    cuda::column_sums(ctx, op, dy.data, dy.dtype, rows, C, dbeta.as<float>(), param_write);
}

}  // namespace ember::ops
