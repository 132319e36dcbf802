// elementwise.cu: residual add, gradient accumulation, casts, layout conversion,
// fill and scale kernels.
#include "engine/cuda/cuda_util.cuh"
#include "engine/ops/elementwise.h"

namespace ember::ops {
namespace {

__global__ void add_kernel(const void* a, DType at, const void* b, DType bt, void* out, DType ot, int64_t n) {
    EMBER_GRID_STRIDE(i, n) store_from_float(out, ot, i, load_as_float(a, at, i) + load_as_float(b, bt, i));
}

__global__ void accumulate_kernel(const void* src, DType st, void* dst, DType dt, int64_t n, GradWrite write) {
    EMBER_GRID_STRIDE(i, n) {
        store_grad(dst, dt, i, load_as_float(src, st, i), write);
    }
}

__global__ void convert_layout_kernel(const void* src, DType st, bool src_nhwc, void* dst, DType dt, bool dst_nhwc,
                                      int64_t N, int64_t C, int64_t H, int64_t W) {
    EMBER_GRID_STRIDE(i, N * C * H * W) {
        int64_t w = i % W, h = (i / W) % H, c = (i / (W * H)) % C, n = i / (W * H * C);
        int64_t from = src_nhwc ? ((n * H + h) * W + w) * C + c : i;
        int64_t to = dst_nhwc ? ((n * H + h) * W + w) * C + c : i;
        store_from_float(dst, dt, to, load_as_float(src, st, from));
    }
}

__global__ void fill_kernel(void* t, DType tt, int64_t n, float value) {
    EMBER_GRID_STRIDE(i, n) store_from_float(t, tt, i, value);
}

__global__ void scale_tensor_kernel(void* t, DType tt, int64_t n, float factor) {
    EMBER_GRID_STRIDE(i, n) store_from_float(t, tt, i, load_as_float(t, tt, i) * factor);
}

}  // namespace

void add_cuda(CudaContext& ctx, const Tensor& a, const Tensor& b, const Tensor& out) {
    const char* op = "add_cuda";
    cuda::check_float_cuda(a, op, "a");
    cuda::check_float_cuda(b, op, "b");
    cuda::check_float_cuda(out, op, "out");
    require(a.numel() == b.numel() && a.numel() == out.numel(), op, "sizes differ");
    require(a.layout == b.layout && a.layout == out.layout, op, "layouts differ");
    const int64_t n = out.numel();
    EMBER_LAUNCH(add_kernel, cuda::grid_for(n), cuda::kThreads, 0, ctx.stream)(a.data, a.dtype, b.data, b.dtype, out.data, out.dtype, n);
    EMBER_CUDA_CHECK_LAUNCH();
}

void accumulate_grad_cuda(CudaContext& ctx, const Tensor& src, const Tensor& dst, GradWrite write) {
    const char* op = "accumulate_grad_cuda";
    cuda::check_float_cuda(src, op, "src");
    cuda::check_float_cuda(dst, op, "dst");
    require(src.numel() == dst.numel(), op, "sizes differ");
    const int64_t n = dst.numel();
    EMBER_LAUNCH(accumulate_kernel, cuda::grid_for(n), cuda::kThreads, 0, ctx.stream)(src.data, src.dtype, dst.data, dst.dtype, n, write);
    EMBER_CUDA_CHECK_LAUNCH();
}

void cast_cuda(CudaContext& ctx, const Tensor& src, const Tensor& dst) {
    accumulate_grad_cuda(ctx, src, dst, GradWrite::store);  // a store-mode copy is a cast
}

void convert_layout_cuda(CudaContext& ctx, const Tensor& src, const Tensor& dst) {
    const char* op = "convert_layout_cuda";
    cuda::check_float_cuda(src, op, "src");
    cuda::check_float_cuda(dst, op, "dst");
    require(src.rank == 4 && same_shape(src, dst), op, "needs two 4-D tensors of one logical shape");
    const int64_t n = src.numel();
    EMBER_LAUNCH(convert_layout_kernel, cuda::grid_for(n), cuda::kThreads, 0, ctx.stream)(src.data, src.dtype, src.layout == Layout::nhwc,
                                                                   dst.data, dst.dtype, dst.layout == Layout::nhwc,
                                                                   src.shape[0], src.shape[1], src.shape[2],
                                                                   src.shape[3]);
    EMBER_CUDA_CHECK_LAUNCH();
}

void fill_cuda(CudaContext& ctx, const Tensor& t, float value) {
    cuda::check_float_cuda(t, "fill_cuda", "t");
    EMBER_LAUNCH(fill_kernel, cuda::grid_for(t.numel()), cuda::kThreads, 0, ctx.stream)(t.data, t.dtype, t.numel(), value);
    EMBER_CUDA_CHECK_LAUNCH();
}

void scale_cuda(CudaContext& ctx, const Tensor& t, float factor) {
    cuda::check_float_cuda(t, "scale_cuda", "t");
    EMBER_LAUNCH(scale_tensor_kernel, cuda::grid_for(t.numel()), cuda::kThreads, 0, ctx.stream)(t.data, t.dtype, t.numel(), factor);
    EMBER_CUDA_CHECK_LAUNCH();
}

}  // namespace ember::ops
