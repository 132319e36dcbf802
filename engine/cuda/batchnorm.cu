// batchnorm.cu: BatchNorm kernels. Per-channel sums are a deterministic two-stage
// reduction: many blocks each sum a slice of a channel into partials (in the context
// workspace), then one thread per channel adds its partials in a fixed order and
// finishes (mean; variance, invstd and running statistics; or the gradient sums).
// Reads are coalesced in both layouts: nchw blocks walk one channel plane, channels-
// last blocks read 32 neighbouring channels of a row per warp. Statistics take two
// passes (mean, then centred squares) in fp32; y and dx are grid-stride pointwise passes.
#include "engine/cuda/cuda_util.cuh"
#include "engine/ops/batchnorm.h"

namespace ember::ops {
namespace {

struct BnGeometry {
    int rank;
    bool channels_innermost;  // nhwc, or (N,C): the channel is the fastest-moving index
    int64_t n, c, spatial;
};

BnGeometry geometry(const char* op, const Tensor& x, const Tensor& y) {
    cuda::check_float_cuda(x, op, "x");
    cuda::check_float_cuda(y, op, "y");
    require(same_shape(x, y), op, "shapes differ: " + x.describe() + ", " + y.describe());
    require(x.rank == 2 || x.rank == 4, op, "x must be (N,C) or (N,C,H,W): " + x.describe());
    require(x.rank != 4 || x.layout == y.layout, op, "x and y layouts differ");
    return {x.rank, x.rank == 2 || x.layout == Layout::nhwc, x.shape[0], x.shape[1],
            x.rank == 4 ? x.shape[2] * x.shape[3] : 1};
}

__device__ __forceinline__ int64_t channel_of(const BnGeometry& g, int64_t offset) {
    return g.channels_innermost ? offset % g.c : (offset / g.spatial) % g.c;
}

// What one reduction pass sums per element (two sums at once).
enum class BnPass : int { mean = 0, centred_squares = 1, gradients = 2 };

struct BnTerms {
    BnPass pass;
    const void* x;
    DType x_type;
    const void* dy;
    DType dy_type;
    const float* mean;
    const float* invstd;
};

__device__ __forceinline__ float2 bn_terms(const BnTerms& t, int64_t offset, int64_t c) {
    const float x = load_as_float(t.x, t.x_type, offset);
    if (t.pass == BnPass::mean) return make_float2(x, 0.0f);
    const float centred = x - t.mean[c];
    if (t.pass == BnPass::centred_squares) return make_float2(centred * centred, 0.0f);
    const float d = load_as_float(t.dy, t.dy_type, offset);
    return make_float2(d, d * centred * t.invstd[c]);  // dy, dy * xhat
}

// nchw: block (c, group) sums images group, group + groups, ... of channel c.
__global__ void bn_partial_nchw_kernel(BnTerms terms, BnGeometry g, int groups, float2* partial) {
    const int64_t c = blockIdx.x;
    float first = 0.0f, second = 0.0f;
    for (int64_t n = blockIdx.y; n < g.n; n += groups) {
        const int64_t base = (n * g.c + c) * g.spatial;
        for (int64_t s = threadIdx.x; s < g.spatial; s += blockDim.x) {
            float2 t = bn_terms(terms, base + s, c);
            first += t.x;
            second += t.y;
        }
    }
    first = cuda::block_sum(first);
    second = cuda::block_sum(second);
    if (threadIdx.x == 0) partial[blockIdx.y * g.c + c] = make_float2(first, second);
}

// Channels innermost: a 32 x 8 block covers 32 channels; each of the 8 thread rows
// walks rows blockIdx.y*8 + threadIdx.y, stepping by groups*8.
constexpr int kTileChannels = 32;
constexpr int kTileRows = 8;

__global__ void bn_partial_channels_last_kernel(BnTerms terms, BnGeometry g, int groups, float2* partial) {
    EMBER_SHARED(float2, tile, [kTileRows][kTileChannels + 1]);
    const int64_t c = int64_t(blockIdx.x) * kTileChannels + threadIdx.x;
    const int64_t rows = g.n * g.spatial;
    float first = 0.0f, second = 0.0f;
    if (c < g.c)
        for (int64_t r = int64_t(blockIdx.y) * kTileRows + threadIdx.y; r < rows; r += int64_t(groups) * kTileRows) {
            float2 t = bn_terms(terms, r * g.c + c, c);
            first += t.x;
            second += t.y;
        }
    tile[threadIdx.y][threadIdx.x] = make_float2(first, second);
    __syncthreads();
    if (threadIdx.y == 0 && c < g.c) {
        float2 total = tile[0][threadIdx.x];
        for (int row = 1; row < kTileRows; ++row) {
            total.x += tile[row][threadIdx.x].x;
            total.y += tile[row][threadIdx.x].y;
        }
        partial[blockIdx.y * g.c + c] = total;
    }
}

struct BnFinish {
    BnPass pass;
    float count, eps, momentum;
    float* save_mean;
    float* save_invstd;
    float* running_mean;  // nullptr: no running statistics
    float* running_var;
    float2* totals;  // gradients pass: (sum dy, sum dy xhat) kept for the dx pass
    float* dgamma;
    float* dbeta;
    GradWrite param_write;
};

// One thread per channel adds the partials of all groups in order (deterministic).
__global__ void bn_finish_kernel(const float2* partial, int groups, int64_t C, BnFinish f) {
    EMBER_GRID_STRIDE(c, C) {
        float first = 0.0f, second = 0.0f;
        for (int group = 0; group < groups; ++group) {
            first += partial[group * C + c].x;
            second += partial[group * C + c].y;
        }
        if (f.pass == BnPass::mean) {
            f.save_mean[c] = first / f.count;
        } else if (f.pass == BnPass::centred_squares) {
            const float var = first / f.count;
            f.save_invstd[c] = rsqrtf(var + f.eps);
            if (f.running_mean) {
                const float unbiased = f.count > 1.0f ? first / (f.count - 1.0f) : var;
                f.running_mean[c] = (1.0f - f.momentum) * f.running_mean[c] + f.momentum * f.save_mean[c];
                f.running_var[c] = (1.0f - f.momentum) * f.running_var[c] + f.momentum * unbiased;
            }
        } else {
            f.totals[c] = make_float2(first, second);
            f.dgamma[c] = write_grad(f.dgamma[c], second, f.param_write);
            f.dbeta[c] = write_grad(f.dbeta[c], first, f.param_write);
        }
    }
}

// Runs one reduction pass and its finish step. Partials live in the context workspace.
void reduce_channels(CudaContext& ctx, const BnGeometry& g, const BnTerms& terms, BnFinish finish, const char* op) {
    const std::size_t per_group = std::size_t(g.c) * sizeof(float2);
    const std::size_t reserved = per_group;  // room for `totals` after the partials
    require(ctx.workspace != nullptr && ctx.workspace_bytes >= per_group + reserved, op,
            "the context workspace is too small for the channel partial sums");
    const int max_groups = static_cast<int>((ctx.workspace_bytes - reserved) / per_group);
    float2* partial = static_cast<float2*>(ctx.workspace);
    int groups = 1;
    if (g.channels_innermost) {
        const int64_t tiles = (g.c + kTileChannels - 1) / kTileChannels;
        const int64_t row_blocks = (g.n * g.spatial + kTileRows - 1) / kTileRows;
        groups = static_cast<int>(
            std::min<int64_t>({row_blocks, std::max<int64_t>(1, 1024 / tiles), int64_t(max_groups), 65535}));
        groups = std::max(groups, 1);
        dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(groups));
        dim3 block(kTileChannels, kTileRows);
        EMBER_LAUNCH(bn_partial_channels_last_kernel, grid, block, 0, ctx.stream)(terms, g, groups, partial);
    } else {
        groups =
            static_cast<int>(std::min<int64_t>({g.n, std::max<int64_t>(1, 1024 / g.c), int64_t(max_groups), 65535}));
        groups = std::max(groups, 1);
        dim3 grid(static_cast<unsigned>(g.c), static_cast<unsigned>(groups));
        EMBER_LAUNCH(bn_partial_nchw_kernel, grid, cuda::kThreads, 0, ctx.stream)(terms, g, groups, partial);
    }
    EMBER_CUDA_CHECK_LAUNCH();
    finish.totals = reinterpret_cast<float2*>(static_cast<char*>(ctx.workspace) + ctx.workspace_bytes - reserved);
    EMBER_LAUNCH(bn_finish_kernel, cuda::grid_for(g.c), cuda::kThreads, 0, ctx.stream)(partial, groups, g.c, finish);
    EMBER_CUDA_CHECK_LAUNCH();
}

// y = gamma (x - mean) invstd + beta; `invstd_is_var` makes it read a variance and
// invert it (eval mode reads running_var).
__global__ void bn_apply_kernel(const void* x, DType x_type, void* y, DType y_type, BnGeometry g, const float* mean,
                                const float* scale_source, bool invstd_is_var, float eps, const float* gamma,
                                const float* beta) {
    const int64_t total = g.n * g.c * g.spatial;
    EMBER_GRID_STRIDE(i, total) {
        const int64_t c = channel_of(g, i);
        const float invstd = invstd_is_var ? rsqrtf(scale_source[c] + eps) : scale_source[c];
        store_from_float(y, y_type, i,
                         batchnorm_apply(load_as_float(x, x_type, i), mean[c], invstd, gamma[c], beta[c]));
    }
}

// y = gamma (x - mean) invstd + beta: invstd from the batch (training, invstd_is_var
// false) or from the running variance (evaluation, true).
void apply(CudaContext& ctx, const BnGeometry& g, const Tensor& x, const Tensor& y, const Tensor& mean,
           const Tensor& scale_source, bool invstd_is_var, const Tensor& gamma, const Tensor& beta, float eps) {
    EMBER_LAUNCH(bn_apply_kernel, cuda::grid_for(x.numel()), cuda::kThreads, 0, ctx.stream)(x.data, x.dtype, y.data, y.dtype, g, mean.as<float>(),
                                                             scale_source.as<float>(), invstd_is_var, eps,
                                                             gamma.as<float>(), beta.as<float>());
    EMBER_CUDA_CHECK_LAUNCH();
}

// dx = gamma invstd / M (M dy - sum(dy) - xhat sum(dy xhat)), with the sums in `totals`.
__global__ void bn_dx_kernel(const void* x, DType x_type, const void* dy, DType dy_type, BnGeometry g,
                             const float* gamma, const float* mean, const float* invstd, const float2* totals, void* dx,
                             DType dx_type, GradWrite write) {
    const int64_t total = g.n * g.c * g.spatial;
    const float count = float(g.n * g.spatial);
    EMBER_GRID_STRIDE(i, total) {
        const int64_t c = channel_of(g, i);
        const float xhat = (load_as_float(x, x_type, i) - mean[c]) * invstd[c];
        const float v =
            gamma[c] * invstd[c] / count * (count * load_as_float(dy, dy_type, i) - totals[c].x - xhat * totals[c].y);
        store_grad(dx, dx_type, i, v, write);
    }
}

}  // namespace

void batchnorm_forward_train_cuda(CudaContext& ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  const Tensor& y, const Tensor& running_mean, const Tensor& running_var,
                                  const Tensor& save_mean, const Tensor& save_invstd, const BatchNormParams& params) {
    const char* op = "batchnorm_forward_train_cuda";
    BnGeometry g = geometry(op, x, y);
    cuda::check_f32_cuda(op, g.c,
                         {{gamma, "gamma"}, {beta, "beta"}, {save_mean, "save_mean"}, {save_invstd, "save_invstd"}});
    if (running_mean.defined())
        cuda::check_f32_cuda(op, g.c, {{running_mean, "running_mean"}, {running_var, "running_var"}});
    if (x.numel() == 0) return;
    BnTerms terms{BnPass::mean, x.data, x.dtype, nullptr, x.dtype, save_mean.as<float>(), nullptr};
    BnFinish finish{};
    finish.count = float(g.n * g.spatial);
    finish.eps = params.eps;
    finish.momentum = params.momentum;
    finish.save_mean = save_mean.as<float>();
    finish.save_invstd = save_invstd.as<float>();
    finish.running_mean = running_mean.defined() ? running_mean.as<float>() : nullptr;
    finish.running_var = running_mean.defined() ? running_var.as<float>() : nullptr;
    finish.pass = BnPass::mean;
    reduce_channels(ctx, g, terms, finish, op);
    terms.pass = finish.pass = BnPass::centred_squares;
    reduce_channels(ctx, g, terms, finish, op);
    apply(ctx, g, x, y, save_mean, save_invstd, false, gamma, beta, params.eps);
}

void batchnorm_forward_eval_cuda(CudaContext& ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                 const Tensor& running_mean, const Tensor& running_var, const Tensor& y,
                                 const BatchNormParams& params) {
    const char* op = "batchnorm_forward_eval_cuda";
    BnGeometry g = geometry(op, x, y);
    cuda::check_f32_cuda(
        op, g.c, {{gamma, "gamma"}, {beta, "beta"}, {running_mean, "running_mean"}, {running_var, "running_var"}});
    if (x.numel() == 0) return;
    apply(ctx, g, x, y, running_mean, running_var, true, gamma, beta, params.eps);
}

void batchnorm_backward_cuda(CudaContext& ctx, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                             const Tensor& save_mean, const Tensor& save_invstd, const Tensor& dx, const Tensor& dgamma,
                             const Tensor& dbeta, GradWrite input_write, GradWrite param_write) {
    const char* op = "batchnorm_backward_cuda";
    BnGeometry g = geometry(op, x, dy);
    if (dx.defined()) geometry(op, x, dx);
    cuda::check_f32_cuda(op, g.c,
                         {{gamma, "gamma"},
                          {save_mean, "save_mean"},
                          {save_invstd, "save_invstd"},
                          {dgamma, "dgamma"},
                          {dbeta, "dbeta"}});
    if (x.numel() == 0) return;
    BnTerms terms{BnPass::gradients,      x.data, x.dtype, dy.data, dy.dtype, save_mean.as<float>(),
                  save_invstd.as<float>()};
    BnFinish finish{};
    finish.pass = BnPass::gradients;
    finish.dgamma = dgamma.as<float>();
    finish.dbeta = dbeta.as<float>();
    finish.param_write = param_write;
    reduce_channels(ctx, g, terms, finish, op);
    if (!dx.defined()) return;
    const float2* totals = reinterpret_cast<const float2*>(static_cast<const char*>(ctx.workspace) +
                                                           ctx.workspace_bytes - std::size_t(g.c) * sizeof(float2));
    EMBER_LAUNCH(bn_dx_kernel, cuda::grid_for(x.numel()), cuda::kThreads, 0, ctx.stream)(x.data, x.dtype, dy.data, dy.dtype, g, gamma.as<float>(),
                                                          save_mean.as<float>(), save_invstd.as<float>(), totals,
                                                          dx.data, dx.dtype, input_write);
    EMBER_CUDA_CHECK_LAUNCH();
}

}  // namespace ember::ops
