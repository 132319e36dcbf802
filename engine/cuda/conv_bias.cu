// conv_bias.cu: per-channel bias add (conv forward) and per-channel gradient sums
// (conv bias backward in either layout; nn.Linear bias backward).
#include "engine/cuda/column_sums.cuh"
#include "engine/cuda/cuda_util.cuh"
#include "engine/ops/conv.h"
#include "engine/ops/gemm.h"

#include <algorithm>

namespace ember::ops {
namespace {

__global__ void bias_add_kernel(const void* bias, DType bias_type, void* y, DType y_type, int64_t total, int64_t C,
                                int64_t spatial, bool nhwc) {
    EMBER_GRID_STRIDE(i, total) {
        int64_t c = nhwc ? i % C : (i / spatial) % C;
        float v = load_as_float(y, y_type, i) + load_as_float(bias, bias_type, c);
        store_from_float(y, y_type, i, v);
    }
}

// One block per channel: sum over n and spatial positions.
__global__ void channel_sum_kernel(const void* dy, DType dy_type, int rank, bool nhwc, int64_t N, int64_t C,
                                   int64_t spatial, float* out, GradWrite write) {
    const int64_t c = blockIdx.x;
    const int64_t count = N * spatial;
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
        int64_t n = j / spatial, s = j % spatial;
        sum += load_as_float(dy, dy_type, cuda::channel_offset(rank, nhwc, n, c, s, C, spatial));
    }
    sum = cuda::block_sum(sum);
    if (threadIdx.x == 0) out[c] = write_grad(out[c], sum, write);
}

}  // namespace

void conv_bias_add_cuda(CudaContext& ctx, const Tensor& bias, const Tensor& y) {
    cuda::check_float_cuda(bias, "conv2d_forward_cuda", "bias");
    require(bias.numel() == y.shape[1], "conv2d_forward_cuda", "bias must have K elements");
    const int64_t total = y.numel();
    EMBER_LAUNCH(bias_add_kernel, cuda::grid_for(total), cuda::kThreads, 0, ctx.stream)(bias.data, bias.dtype, y.data, y.dtype, total, y.shape[1],
                                                             y.shape[2] * y.shape[3], y.layout == Layout::nhwc);
    EMBER_CUDA_CHECK_LAUNCH();
}

void conv2d_backward_bias_cuda(CudaContext& ctx, const Tensor& dy, const Tensor& dbias, GradWrite write) {
    const char* op = "conv2d_backward_bias_cuda";
    cuda::check_float_cuda(dy, op, "dy");
    require(dy.rank == 4, op, "dy must be 4-D");
    cuda::check_f32_cuda(dbias, op, "dbias", dy.shape[1]);
    if (dy.shape[1] == 0) return;
    if (dy.layout == Layout::nhwc) {  // [N*P*Q, K] in memory: a column sum
        cuda::column_sums(ctx, op, dy.data, dy.dtype, dy.shape[0] * dy.shape[2] * dy.shape[3], dy.shape[1],
                          dbias.as<float>(), write);
        return;
    }
    EMBER_LAUNCH(channel_sum_kernel, static_cast<unsigned>(dy.shape[1]), cuda::kThreads, 0, ctx.stream)(dy.data, dy.dtype, 4, dy.layout == Layout::nhwc, dy.shape[0],
                                                   dy.shape[1], dy.shape[2] * dy.shape[3], dbias.as<float>(), write);
    EMBER_CUDA_CHECK_LAUNCH();
}

void bias_backward_cuda(CudaContext& ctx, const Tensor& dy, const Tensor& dbias, GradWrite write) {
    const char* op = "bias_backward_cuda";
    cuda::check_float_cuda(dy, op, "dy");
    const int64_t rows = dy.rows(), cols = dy.cols();
    cuda::check_f32_cuda(dbias, op, "dbias", cols);
    if (cols == 0) return;
    cuda::column_sums(ctx, op, dy.data, dy.dtype, rows, cols, dbias.as<float>(), write);
}

}  // namespace ember::ops

namespace ember::cuda {
namespace {

// Channels innermost (linear dy [rows, C], channels-last conv dy): the two stages of
// cuda::column_sums (column_sums.cuh).
__global__ void column_partials_kernel(const void* in, DType in_type, int64_t rows, int64_t C, int groups,
                                       float* partial) {
    const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float sum = 0.0f;
    for (int64_t r = blockIdx.y; r < rows; r += groups) sum += load_as_float(in, in_type, r * C + c);
    partial[blockIdx.y * C + c] = sum;
}

__global__ void column_finish_kernel(const float* partial, int groups, int64_t C, float* out, ops::GradWrite write) {
    EMBER_GRID_STRIDE(c, C) {
        float sum = 0.0f;
        for (int group = 0; group < groups; ++group) sum += partial[group * C + c];
        out[c] = ops::write_grad(out[c], sum, write);
    }
}

}  // namespace

void column_sums(CudaContext& ctx, const char* op, const void* in, DType in_type, int64_t rows, int64_t C, float* out,
                 ops::GradWrite write) {
    const ColumnGrid g = column_grid(ctx, rows, C, sizeof(float), op);
    float* partial = static_cast<float*>(ctx.workspace);
    EMBER_LAUNCH(column_partials_kernel, g.grid, kThreads, 0, ctx.stream)(in, in_type, rows, C, g.groups, partial);
    EMBER_CUDA_CHECK_LAUNCH();
    EMBER_LAUNCH(column_finish_kernel, grid_for(C), kThreads, 0, ctx.stream)(partial, g.groups, C, out, write);
    EMBER_CUDA_CHECK_LAUNCH();
}

}  // namespace ember::cuda
