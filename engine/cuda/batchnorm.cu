// batchnorm.cu: BatchNorm kernels. Statistics: one block per channel, two passes
// (mean, then centred squares) in fp32; normalization: a grid-stride pointwise pass;
// backward: one block per channel reduces sum(dy), sum(dy xhat) and then writes dx.
#include "engine/cuda/cuda_util.cuh"
#include "engine/ops/batchnorm.h"

namespace ember::ops {
namespace {

struct BnGeometry {
    int rank;
    bool nhwc;
    int64_t n, c, spatial;
};

BnGeometry geometry(const char* op, const Tensor& x, const Tensor& y) {
    cuda::check_float_cuda(x, op, "x");
    cuda::check_float_cuda(y, op, "y");
    require(same_shape(x, y), op, "shapes differ: " + x.describe() + ", " + y.describe());
    require(x.rank == 2 || x.rank == 4, op, "x must be (N,C) or (N,C,H,W): " + x.describe());
    require(x.rank != 4 || x.layout == y.layout, op, "x and y layouts differ");
    return {x.rank, x.rank == 4 && x.layout == Layout::nhwc, x.shape[0], x.shape[1],
            x.rank == 4 ? x.shape[2] * x.shape[3] : 1};
}

__global__ void bn_statistics_kernel(const void* x, DType x_type, BnGeometry g, float eps,
                                     float momentum, float* save_mean, float* save_invstd,
                                     float* running_mean, float* running_var) {
    const int64_t c = blockIdx.x;
    const int64_t count = g.n * g.spatial;
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < count; j += blockDim.x)
        sum += load_as_float(x, x_type, cuda::channel_offset(g.rank, g.nhwc, j / g.spatial, c, j % g.spatial, g.c, g.spatial));
    const float mean = cuda::block_sum(sum) / float(count);
    float squares = 0.0f;
    for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
        float d = load_as_float(x, x_type, cuda::channel_offset(g.rank, g.nhwc, j / g.spatial, c, j % g.spatial, g.c, g.spatial)) - mean;
        squares += d * d;
    }
    squares = cuda::block_sum(squares);
    if (threadIdx.x == 0) {
        const float var = squares / float(count);
        save_mean[c] = mean;
        save_invstd[c] = rsqrtf(var + eps);
        if (running_mean) {
            const float unbiased = count > 1 ? squares / float(count - 1) : var;
            running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * mean;
            running_var[c] = (1.0f - momentum) * running_var[c] + momentum * unbiased;
        }
    }
}

// y = gamma (x - mean) invstd + beta; `invstd_is_var` makes it read a variance and
// invert it (eval mode reads running_var).
__global__ void bn_apply_kernel(const void* x, DType x_type, void* y, DType y_type, BnGeometry g,
                                const float* mean, const float* scale_source, bool invstd_is_var,
                                float eps, const float* gamma, const float* beta) {
    const int64_t total = g.n * g.c * g.spatial;
    EMBER_GRID_STRIDE(i, total) {
        int64_t c = g.rank == 2 ? i % g.c : (g.nhwc ? i % g.c : (i / g.spatial) % g.c);
        float invstd = invstd_is_var ? rsqrtf(scale_source[c] + eps) : scale_source[c];
        store_from_float(y, y_type, i,
                         batchnorm_apply(load_as_float(x, x_type, i), mean[c], invstd, gamma[c], beta[c]));
    }
}

__global__ void bn_backward_kernel(const void* x, DType x_type, const void* dy, DType dy_type,
                                   BnGeometry g, const float* gamma, const float* save_mean,
                                   const float* save_invstd, void* dx, DType dx_type,
                                   float* dgamma, float* dbeta, GradWrite input_write,
                                   GradWrite param_write) {
    const int64_t c = blockIdx.x;
    const int64_t count = g.n * g.spatial;
    const float mean = save_mean[c], invstd = save_invstd[c];
    float sum_dy = 0.0f, sum_dy_xhat = 0.0f;
    for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
        int64_t off = cuda::channel_offset(g.rank, g.nhwc, j / g.spatial, c, j % g.spatial, g.c, g.spatial);
        float d = load_as_float(dy, dy_type, off);
        sum_dy += d;
        sum_dy_xhat += d * (load_as_float(x, x_type, off) - mean) * invstd;
    }
    sum_dy = cuda::block_sum(sum_dy);
    sum_dy_xhat = cuda::block_sum(sum_dy_xhat);
    if (threadIdx.x == 0) {
        dgamma[c] = write_grad(dgamma[c], sum_dy_xhat, param_write);
        dbeta[c] = write_grad(dbeta[c], sum_dy, param_write);
    }
    if (!dx) return;
    const float scale = gamma[c] * invstd / float(count);
    for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
        int64_t off = cuda::channel_offset(g.rank, g.nhwc, j / g.spatial, c, j % g.spatial, g.c, g.spatial);
        float xhat = (load_as_float(x, x_type, off) - mean) * invstd;
        float v = scale * (float(count) * load_as_float(dy, dy_type, off) - sum_dy - xhat * sum_dy_xhat);
        float old_value = input_write == GradWrite::accumulate ? load_as_float(dx, dx_type, off) : 0.0f;
        store_from_float(dx, dx_type, off, write_grad(old_value, v, input_write));
    }
}

}  // namespace

void batchnorm_forward_train_cuda(CudaContext& ctx, const Tensor& x, const Tensor& gamma,
                                  const Tensor& beta, const Tensor& y, const Tensor& running_mean,
                                  const Tensor& running_var, const Tensor& save_mean,
                                  const Tensor& save_invstd, const BatchNormParams& params) {
    const char* op = "batchnorm_forward_train_cuda";
    BnGeometry g = geometry(op, x, y);
    cuda::check_f32_cuda(gamma, op, "gamma", g.c);
    cuda::check_f32_cuda(beta, op, "beta", g.c);
    cuda::check_f32_cuda(save_mean, op, "save_mean", g.c);
    cuda::check_f32_cuda(save_invstd, op, "save_invstd", g.c);
    if (running_mean.defined()) {
        cuda::check_f32_cuda(running_mean, op, "running_mean", g.c);
        cuda::check_f32_cuda(running_var, op, "running_var", g.c);
    }
    if (g.c == 0) return;
    bn_statistics_kernel<<<static_cast<unsigned>(g.c), cuda::kThreads, 0, ctx.stream>>>(
        x.data, x.dtype, g, params.eps, params.momentum, save_mean.as<float>(),
        save_invstd.as<float>(), running_mean.defined() ? running_mean.as<float>() : nullptr,
        running_mean.defined() ? running_var.as<float>() : nullptr);
    EMBER_CUDA_CHECK_LAUNCH();
    bn_apply_kernel<<<cuda::grid_for(x.numel()), cuda::kThreads, 0, ctx.stream>>>(
        x.data, x.dtype, y.data, y.dtype, g, save_mean.as<float>(), save_invstd.as<float>(), false,
        params.eps, gamma.as<float>(), beta.as<float>());
    EMBER_CUDA_CHECK_LAUNCH();
}

void batchnorm_forward_eval_cuda(CudaContext& ctx, const Tensor& x, const Tensor& gamma,
                                 const Tensor& beta, const Tensor& running_mean,
                                 const Tensor& running_var, const Tensor& y,
                                 const BatchNormParams& params) {
    const char* op = "batchnorm_forward_eval_cuda";
    BnGeometry g = geometry(op, x, y);
    cuda::check_f32_cuda(gamma, op, "gamma", g.c);
    cuda::check_f32_cuda(beta, op, "beta", g.c);
    cuda::check_f32_cuda(running_mean, op, "running_mean", g.c);
    cuda::check_f32_cuda(running_var, op, "running_var", g.c);
    if (x.numel() == 0) return;
    bn_apply_kernel<<<cuda::grid_for(x.numel()), cuda::kThreads, 0, ctx.stream>>>(
        x.data, x.dtype, y.data, y.dtype, g, running_mean.as<float>(), running_var.as<float>(),
        true, params.eps, gamma.as<float>(), beta.as<float>());
    EMBER_CUDA_CHECK_LAUNCH();
}

void batchnorm_backward_cuda(CudaContext& ctx, const Tensor& x, const Tensor& dy,
                             const Tensor& gamma, const Tensor& save_mean,
                             const Tensor& save_invstd, const Tensor& dx, const Tensor& dgamma,
                             const Tensor& dbeta, GradWrite input_write, GradWrite param_write) {
    const char* op = "batchnorm_backward_cuda";
    BnGeometry g = geometry(op, x, dy);
    if (dx.defined()) geometry(op, x, dx);
    require(!dx.defined() || dx.layout == x.layout || x.rank == 2, op, "dx layout differs from x");
    for (auto [t, name] : {std::pair{gamma, "gamma"}, {save_mean, "save_mean"},
                           {save_invstd, "save_invstd"}, {dgamma, "dgamma"}, {dbeta, "dbeta"}})
        cuda::check_f32_cuda(t, op, name, g.c);
    if (g.c == 0) return;
    bn_backward_kernel<<<static_cast<unsigned>(g.c), cuda::kThreads, 0, ctx.stream>>>(
        x.data, x.dtype, dy.data, dy.dtype, g, gamma.as<float>(), save_mean.as<float>(),
        save_invstd.as<float>(), dx.defined() ? dx.data : nullptr, dx.dtype, dgamma.as<float>(),
        dbeta.as<float>(), input_write, param_write);
    EMBER_CUDA_CHECK_LAUNCH();
}

}  // namespace ember::ops
