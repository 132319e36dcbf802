// dropout.cu: inverted dropout with the counter-based mask of engine/ops/dropout.h.
#include "engine/cuda/cuda_util.cuh"
#include "engine/ops/dropout.h"

namespace ember::ops {
namespace {

__global__ void dropout_forward_kernel(const void* x, DType xt, void* y, DType yt, uint8_t* mask, int64_t n,
                                       DropoutParams params, float scale) {
    EMBER_GRID_STRIDE(i, n) {
        bool keep = dropout_keep(params.seed, params.offset + static_cast<uint64_t>(i), params.p);
        mask[i] = keep ? 1 : 0;
        store_from_float(y, yt, i, keep ? load_as_float(x, xt, i) * scale : 0.0f);
    }
}

__global__ void dropout_backward_kernel(const void* dy, DType dyt, const uint8_t* mask, void* dx, DType dxt, int64_t n,
                                        float scale, GradWrite write) {
    EMBER_GRID_STRIDE(i, n) {
        float v = mask[i] ? load_as_float(dy, dyt, i) * scale : 0.0f;
        store_grad(dx, dxt, i, v, write);
    }
}

void check_mask(const char* op, const Tensor& mask, int64_t n) {
    require(mask.defined() && mask.dtype == DType::u8 && mask.device == Device::cuda && mask.numel() == n, op,
            "mask must be a cuda u8 tensor with one entry per element");
}

}  // namespace

void dropout_forward_cuda(CudaContext& ctx, const Tensor& x, const Tensor& y, const Tensor& mask,
                          const DropoutParams& params) {
    const char* op = "dropout_forward_cuda";
    cuda::check_float_cuda(x, op, "x");
    cuda::check_float_cuda(y, op, "y");
    require(x.numel() == y.numel(), op, "x and y sizes differ");
    check_mask(op, mask, x.numel());
    require(params.p >= 0.0f && params.p < 1.0f, op, "p must be in [0, 1)");
    const int64_t n = x.numel();
    EMBER_LAUNCH(dropout_forward_kernel, cuda::grid_for(n), cuda::kThreads, 0, ctx.stream)(x.data, x.dtype, y.data, y.dtype,
                                                                    mask.as<uint8_t>(), n, params,
                                                                    1.0f / (1.0f - params.p));
    EMBER_CUDA_CHECK_LAUNCH();
}

void dropout_backward_cuda(CudaContext& ctx, const Tensor& dy, const Tensor& mask, const Tensor& dx, float p,
                           GradWrite write) {
    const char* op = "dropout_backward_cuda";
    cuda::check_float_cuda(dy, op, "dy");
    cuda::check_float_cuda(dx, op, "dx");
    require(dy.numel() == dx.numel(), op, "dy and dx sizes differ");
    check_mask(op, mask, dx.numel());
    const int64_t n = dx.numel();
    EMBER_LAUNCH(dropout_backward_kernel, cuda::grid_for(n), cuda::kThreads, 0, ctx.stream)(dy.data, dy.dtype, mask.as<uint8_t>(), dx.data,
                                                                     dx.dtype, n, 1.0f / (1.0f - p), write);
    EMBER_CUDA_CHECK_LAUNCH();
}

}  // namespace ember::ops
