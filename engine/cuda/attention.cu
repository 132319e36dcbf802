// attention.cu: CUDA twins of the attention helpers (ops/attention.h): an
// elementwise head permutation and a one-warp-per-row softmax (fp32 math).
#include "engine/core/cuda_check.h"
#include "engine/core/launch.h"
#include "engine/cuda/context.h"
#include "engine/ops/attention.h"

#include <cuda_runtime.h>

namespace ember::ops {

namespace {

__global__ void move_heads_kernel(const void* src, DType src_type, void* dst, DType dst_type, int64_t n, HeadLayout l,
                                  bool to_heads) {
    int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (i >= n) return;
    int64_t e = i % l.head_dim;
    int64_t t = (i / l.head_dim) % l.tokens;
    int64_t h = (i / (l.head_dim * l.tokens)) % l.heads;
    int64_t b = i / (l.head_dim * l.tokens * l.heads);
    int64_t d = l.heads * l.head_dim;
    int64_t r = (b * l.tokens + t) * (l.parts * d) + l.part * d + h * l.head_dim + e;
    if (to_heads)
        store_from_float(dst, dst_type, i, load_as_float(src, src_type, r));
    else
        store_from_float(dst, dst_type, r, load_as_float(src, src_type, i));
}

__device__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__global__ void softmax_rows_kernel(const void* s, DType s_type, void* p, DType p_type, int64_t rows, int64_t cols) {
    int64_t row = blockIdx.x * static_cast<int64_t>(blockDim.y) + threadIdx.y;
    if (row >= rows) return;
    int lane = threadIdx.x;
    float m = -INFINITY;
    for (int64_t c = lane; c < cols; c += 32) m = fmaxf(m, load_as_float(s, s_type, row * cols + c));
    m = warp_max(m);
    float sum = 0.0f;
    for (int64_t c = lane; c < cols; c += 32) sum += expf(load_as_float(s, s_type, row * cols + c) - m);
    sum = warp_sum(sum);
    for (int64_t c = lane; c < cols; c += 32)
        store_from_float(p, p_type, row * cols + c, expf(load_as_float(s, s_type, row * cols + c) - m) / sum);
}

__global__ void softmax_rows_backward_kernel(const void* p, DType p_type, const void* dp, DType dp_type, void* ds,
                                             DType ds_type, int64_t rows, int64_t cols, float scale) {
    int64_t row = blockIdx.x * static_cast<int64_t>(blockDim.y) + threadIdx.y;
    if (row >= rows) return;
    int lane = threadIdx.x;
    float dot = 0.0f;
    for (int64_t c = lane; c < cols; c += 32)
        dot += load_as_float(p, p_type, row * cols + c) * load_as_float(dp, dp_type, row * cols + c);
    dot = warp_sum(dot);
    for (int64_t c = lane; c < cols; c += 32) {
        float pv = load_as_float(p, p_type, row * cols + c);
        float g = load_as_float(dp, dp_type, row * cols + c);
        store_from_float(ds, ds_type, row * cols + c, scale * pv * (g - dot));
    }
}

}  // namespace

void move_heads_cuda(CudaContext& ctx, const Tensor& rows, const Tensor& heads, const HeadLayout& l, bool to_heads) {
    const int64_t n = heads.numel();
    if (n == 0) return;
    const int threads = 256;
    const unsigned blocks = static_cast<unsigned>((n + threads - 1) / threads);
    if (to_heads)
        EMBER_LAUNCH(move_heads_kernel, blocks, threads, 0, ctx.stream)(rows.data, rows.dtype, heads.data, heads.dtype, n, l, true);
    else
        EMBER_LAUNCH(move_heads_kernel, blocks, threads, 0, ctx.stream)(heads.data, heads.dtype, rows.data, rows.dtype, n, l, false);
    EMBER_CUDA_CHECK_LAUNCH();
}

void softmax_rows_cuda(CudaContext& ctx, const Tensor& s, const Tensor& p) {
    const int64_t rows = s.rows();
    if (rows == 0) return;
    dim3 block(32, 8);
    const unsigned blocks = static_cast<unsigned>((rows + 7) / 8);
    EMBER_LAUNCH(softmax_rows_kernel, blocks, block, 0, ctx.stream)(s.data, s.dtype, p.data, p.dtype, rows, s.cols());
    EMBER_CUDA_CHECK_LAUNCH();
}

void softmax_rows_backward_cuda(CudaContext& ctx, const Tensor& p, const Tensor& dp, const Tensor& ds, float scale) {
    const int64_t rows = p.rows();
    if (rows == 0) return;
    dim3 block(32, 8);
    const unsigned blocks = static_cast<unsigned>((rows + 7) / 8);
    EMBER_LAUNCH(softmax_rows_backward_kernel, blocks, block, 0, ctx.stream)(p.data, p.dtype, dp.data, dp.dtype, ds.data, ds.dtype, rows, p.cols(), scale);
    EMBER_CUDA_CHECK_LAUNCH();
}

}  // namespace ember::ops
