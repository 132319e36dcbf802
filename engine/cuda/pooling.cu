// pooling.cu: max/avg pooling kernels. Forward: one thread per output. Backward is a
// gather (one thread per input, visiting the outputs whose window covers it), which
// needs no atomics, is deterministic, and supports any dtype and both write modes.
#include "engine/cuda/cuda_util.cuh"
#include "engine/ops/pooling.h"

namespace ember::ops {
namespace {

struct PoolGeometry {
    int64_t n, c, h, w, p, q;
    bool nhwc;
    Pool2dParams params;
};

PoolGeometry geometry(const char* op, const Tensor& x, const Tensor& y, const Pool2dParams& p) {
    cuda::check_float_cuda(x, op, "input");
    cuda::check_float_cuda(y, op, "output");
    require(x.rank == 4 && y.rank == 4 && x.layout == y.layout, op, "input and output must be 4-D with one layout");
    int64_t out_h = (x.shape[2] + 2 * p.pad_h - p.kernel_h) / p.stride_h + 1;
    int64_t out_w = (x.shape[3] + 2 * p.pad_w - p.kernel_w) / p.stride_w + 1;
    require(y.shape[0] == x.shape[0] && y.shape[1] == x.shape[1] && y.shape[2] == out_h && y.shape[3] == out_w, op,
            "output shape mismatch: " + y.describe());
    return {x.shape[0], x.shape[1], x.shape[2], x.shape[3], out_h, out_w, x.layout == Layout::nhwc, p};
}

__device__ __forceinline__ int64_t offset(bool nhwc, int64_t n, int64_t c, int64_t h, int64_t w, int64_t C, int64_t H,
                                          int64_t W) {
    return nhwc ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w;
}

// Decomposes a flat logical NCHW index.
__device__ __forceinline__ void unflatten(int64_t i, int64_t C, int64_t H, int64_t W, int64_t& n, int64_t& c,
                                          int64_t& h, int64_t& w) {
    w = i % W;
    h = (i / W) % H;
    c = (i / (W * H)) % C;
    n = i / (W * H * C);
}

__global__ void maxpool_forward_kernel(const void* x, DType xt, void* y, DType yt, int32_t* argmax, PoolGeometry g) {
    const int64_t total = g.n * g.c * g.p * g.q;
    EMBER_GRID_STRIDE(i, total) {
        int64_t n, c, oh, ow;
        unflatten(i, g.c, g.p, g.q, n, c, oh, ow);
        float best = 0.0f;
        int32_t best_index = -1;
        for (int kh = 0; kh < g.params.kernel_h; ++kh) {
            int64_t h = oh * g.params.stride_h - g.params.pad_h + kh;
            if (h < 0 || h >= g.h) continue;
            for (int kw = 0; kw < g.params.kernel_w; ++kw) {
                int64_t w = ow * g.params.stride_w - g.params.pad_w + kw;
                if (w < 0 || w >= g.w) continue;
                float v = load_as_float(x, xt, offset(g.nhwc, n, c, h, w, g.c, g.h, g.w));
                if (best_index < 0 || v > best) {
                    best = v;
                    best_index = static_cast<int32_t>(h * g.w + w);
                }
            }
        }
        int64_t out = offset(g.nhwc, n, c, oh, ow, g.c, g.p, g.q);
        store_from_float(y, yt, out, best);
        argmax[out] = best_index;
    }
}

// Outputs whose window covers input row h: [first, last).
__device__ __forceinline__ void covering(int64_t h, int pad, int kernel, int stride, int64_t limit, int64_t& first,
                                         int64_t& last) {
    first = (h + pad < kernel) ? 0 : (h + pad - kernel) / stride + 1;
    last = (h + pad) / stride + 1;
    if (last > limit) last = limit;
}

// The outputs [first_h, last_h) x [first_w, last_w) whose windows cover input (h, w).
struct CoveringOutputs {
    int64_t first_h, last_h, first_w, last_w;
};

__device__ __forceinline__ CoveringOutputs covering_outputs(const PoolGeometry& g, int64_t h, int64_t w) {
    CoveringOutputs o;
    covering(h, g.params.pad_h, g.params.kernel_h, g.params.stride_h, g.p, o.first_h, o.last_h);
    covering(w, g.params.pad_w, g.params.kernel_w, g.params.stride_w, g.q, o.first_w, o.last_w);
    return o;
}

__global__ void maxpool_backward_kernel(const void* dy, DType dyt, const int32_t* argmax, void* dx, DType dxt,
                                        PoolGeometry g, GradWrite write) {
    const int64_t total = g.n * g.c * g.h * g.w;
    EMBER_GRID_STRIDE(i, total) {
        int64_t n, c, h, w;
        unflatten(i, g.c, g.h, g.w, n, c, h, w);
        const CoveringOutputs o = covering_outputs(g, h, w);
        const int32_t self = static_cast<int32_t>(h * g.w + w);
        float sum = 0.0f;
        for (int64_t oh = o.first_h; oh < o.last_h; ++oh)
            for (int64_t ow = o.first_w; ow < o.last_w; ++ow) {
                int64_t out = offset(g.nhwc, n, c, oh, ow, g.c, g.p, g.q);
                if (argmax[out] == self) sum += load_as_float(dy, dyt, out);
            }
        int64_t in = offset(g.nhwc, n, c, h, w, g.c, g.h, g.w);
        store_grad(dx, dxt, in, sum, write);
    }
}

__global__ void avgpool_forward_kernel(const void* x, DType xt, void* y, DType yt, PoolGeometry g) {
    const int64_t total = g.n * g.c * g.p * g.q;
    const float inv_divisor = 1.0f / float(g.params.kernel_h * g.params.kernel_w);
    EMBER_GRID_STRIDE(i, total) {
        int64_t n, c, oh, ow;
        unflatten(i, g.c, g.p, g.q, n, c, oh, ow);
        float sum = 0.0f;
        for (int kh = 0; kh < g.params.kernel_h; ++kh) {
            int64_t h = oh * g.params.stride_h - g.params.pad_h + kh;
            if (h < 0 || h >= g.h) continue;
            for (int kw = 0; kw < g.params.kernel_w; ++kw) {
                int64_t w = ow * g.params.stride_w - g.params.pad_w + kw;
                if (w >= 0 && w < g.w) sum += load_as_float(x, xt, offset(g.nhwc, n, c, h, w, g.c, g.h, g.w));
            }
        }
        store_from_float(y, yt, offset(g.nhwc, n, c, oh, ow, g.c, g.p, g.q), sum * inv_divisor);
    }
}

__global__ void avgpool_backward_kernel(const void* dy, DType dyt, void* dx, DType dxt, PoolGeometry g,
                                        GradWrite write) {
    const int64_t total = g.n * g.c * g.h * g.w;
    const float inv_divisor = 1.0f / float(g.params.kernel_h * g.params.kernel_w);
    EMBER_GRID_STRIDE(i, total) {
        int64_t n, c, h, w;
        unflatten(i, g.c, g.h, g.w, n, c, h, w);
        const CoveringOutputs o = covering_outputs(g, h, w);
        float sum = 0.0f;
        for (int64_t oh = o.first_h; oh < o.last_h; ++oh)
            for (int64_t ow = o.first_w; ow < o.last_w; ++ow)
                sum += load_as_float(dy, dyt, offset(g.nhwc, n, c, oh, ow, g.c, g.p, g.q));
        int64_t in = offset(g.nhwc, n, c, h, w, g.c, g.h, g.w);
        store_grad(dx, dxt, in, sum * inv_divisor, write);
    }
}

void check_argmax(const char* op, const Tensor& argmax, const Tensor& y) {
    require(
        argmax.defined() && argmax.dtype == DType::i32 && argmax.device == Device::cuda && argmax.numel() == y.numel(),
        op, "argmax must be a cuda i32 tensor shaped like the output");
}

}  // namespace

void maxpool2d_forward_cuda(CudaContext& ctx, const Tensor& x, const Tensor& y, const Tensor& argmax,
                            const Pool2dParams& params) {
    PoolGeometry g = geometry("maxpool2d_forward_cuda", x, y, params);
    check_argmax("maxpool2d_forward_cuda", argmax, y);
    EMBER_LAUNCH(maxpool_forward_kernel, cuda::grid_for(y.numel()), cuda::kThreads, 0, ctx.stream)(x.data, x.dtype, y.data, y.dtype,
                                                                    argmax.as<int32_t>(), g);
    EMBER_CUDA_CHECK_LAUNCH();
}

void maxpool2d_backward_cuda(CudaContext& ctx, const Tensor& dy, const Tensor& argmax, const Tensor& dx,
                             const Pool2dParams& params, GradWrite write) {
    PoolGeometry g = geometry("maxpool2d_backward_cuda", dx, dy, params);
    check_argmax("maxpool2d_backward_cuda", argmax, dy);
    EMBER_LAUNCH(maxpool_backward_kernel, cuda::grid_for(dx.numel()), cuda::kThreads, 0, ctx.stream)(dy.data, dy.dtype, argmax.as<int32_t>(), dx.data,
                                                                     dx.dtype, g, write);
    EMBER_CUDA_CHECK_LAUNCH();
}

void avgpool2d_forward_cuda(CudaContext& ctx, const Tensor& x, const Tensor& y, const Pool2dParams& params) {
    PoolGeometry g = geometry("avgpool2d_forward_cuda", x, y, params);
    EMBER_LAUNCH(avgpool_forward_kernel, cuda::grid_for(y.numel()), cuda::kThreads, 0, ctx.stream)(x.data, x.dtype, y.data, y.dtype, g);
    EMBER_CUDA_CHECK_LAUNCH();
}

void avgpool2d_backward_cuda(CudaContext& ctx, const Tensor& dy, const Tensor& dx, const Pool2dParams& params,
                             GradWrite write) {
    PoolGeometry g = geometry("avgpool2d_backward_cuda", dx, dy, params);
    EMBER_LAUNCH(avgpool_backward_kernel, cuda::grid_for(dx.numel()), cuda::kThreads, 0, ctx.stream)(dy.data, dy.dtype, dx.data, dx.dtype, g, write);
    EMBER_CUDA_CHECK_LAUNCH();
}

}  // namespace ember::ops
