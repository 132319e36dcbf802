// activation.cu: ReLU and GELU kernels on tensors of any float dtype (fp32 math),
// and GELU as the unfused chain of eight pointwise kernels (for measuring fusion).
#include "engine/cuda/cuda_util.cuh"
#include "engine/ops/activation.h"

namespace ember::ops {
namespace {

__global__ void relu_forward_kernel(const void* x, DType xt, void* y, DType yt, int64_t n) {
    EMBER_GRID_STRIDE(i, n) store_from_float(y, yt, i, relu(load_as_float(x, xt, i)));
}

__global__ void relu_backward_kernel(const void* y, DType yt, const void* dy, DType dyt, void* dx, DType dxt, int64_t n,
                                     GradWrite write) {
    EMBER_GRID_STRIDE(i, n) {
        float v = load_as_float(dy, dyt, i) * relu_grad(load_as_float(y, yt, i));
        store_grad(dx, dxt, i, v, write);
    }
}

__global__ void gelu_forward_tensor_kernel(const void* x, DType xt, void* y, DType yt, int64_t n) {
    EMBER_GRID_STRIDE(i, n) store_from_float(y, yt, i, gelu_tanh(load_as_float(x, xt, i)));
}

__global__ void gelu_backward_tensor_kernel(const void* x, DType xt, const void* dy, DType dyt, void* dx, DType dxt,
                                            int64_t n, GradWrite write) {
    EMBER_GRID_STRIDE(i, n) {
        float v = load_as_float(dy, dyt, i) * gelu_tanh_grad(load_as_float(x, xt, i));
        store_grad(dx, dxt, i, v, write);
    }
}

// The unfused chain: each step is its own kernel, as an eager framework would run it.
__global__ void cube_kernel(const void* x, DType xt, float* t, int64_t n) {
    EMBER_GRID_STRIDE(i, n) {
        float v = load_as_float(x, xt, i);
        t[i] = v * v * v;
    }
}
__global__ void scale_kernel(float* t, float factor, int64_t n) {
    EMBER_GRID_STRIDE(i, n) t[i] *= factor;
}
__global__ void add_input_kernel(float* t, const void* x, DType xt, int64_t n) {
    EMBER_GRID_STRIDE(i, n) t[i] += load_as_float(x, xt, i);
}
__global__ void tanh_kernel(float* t, int64_t n) {
    EMBER_GRID_STRIDE(i, n) t[i] = tanhf(t[i]);
}
__global__ void add_scalar_kernel(float* t, float value, int64_t n) {
    EMBER_GRID_STRIDE(i, n) t[i] += value;
}
__global__ void multiply_input_kernel(float* t, const void* x, DType xt, int64_t n) {
    EMBER_GRID_STRIDE(i, n) t[i] *= load_as_float(x, xt, i);
}
__global__ void half_store_kernel(const float* t, void* y, DType yt, int64_t n) {
    EMBER_GRID_STRIDE(i, n) store_from_float(y, yt, i, 0.5f * t[i]);
}

void check_pointwise(const char* op, const Tensor& in, const Tensor& out) {
    cuda::check_float_cuda(in, op, "input");
    cuda::check_float_cuda(out, op, "output");
    require(in.numel() == out.numel(), op, "sizes differ: " + in.describe() + ", " + out.describe());
}

}  // namespace

void relu_forward_cuda(CudaContext& ctx, const Tensor& x, const Tensor& y) {
    check_pointwise("relu_forward_cuda", x, y);
    const int64_t n = x.numel();
    EMBER_LAUNCH(relu_forward_kernel, cuda::grid_for(n), cuda::kThreads, 0, ctx.stream)(x.data, x.dtype, y.data, y.dtype, n);
    EMBER_CUDA_CHECK_LAUNCH();
}

void relu_backward_cuda(CudaContext& ctx, const Tensor& y, const Tensor& dy, const Tensor& dx, GradWrite write) {
    check_pointwise("relu_backward_cuda", y, dx);
    check_pointwise("relu_backward_cuda", dy, dx);
    const int64_t n = dx.numel();
    EMBER_LAUNCH(relu_backward_kernel, cuda::grid_for(n), cuda::kThreads, 0, ctx.stream)(y.data, y.dtype, dy.data, dy.dtype, dx.data, dx.dtype,
                                                                  n, write);
    EMBER_CUDA_CHECK_LAUNCH();
}

void gelu_forward_cuda(CudaContext& ctx, const Tensor& x, const Tensor& y) {
    check_pointwise("gelu_forward_cuda", x, y);
    const int64_t n = x.numel();
    EMBER_LAUNCH(gelu_forward_tensor_kernel, cuda::grid_for(n), cuda::kThreads, 0, ctx.stream)(x.data, x.dtype, y.data, y.dtype, n);
    EMBER_CUDA_CHECK_LAUNCH();
}

void gelu_backward_cuda(CudaContext& ctx, const Tensor& x, const Tensor& dy, const Tensor& dx, GradWrite write) {
    check_pointwise("gelu_backward_cuda", x, dx);
    check_pointwise("gelu_backward_cuda", dy, dx);
    const int64_t n = x.numel();
    EMBER_LAUNCH(gelu_backward_tensor_kernel, cuda::grid_for(n), cuda::kThreads, 0, ctx.stream)(x.data, x.dtype, dy.data, dy.dtype, dx.data,
                                                                         dx.dtype, n, write);
    EMBER_CUDA_CHECK_LAUNCH();
}

void gelu_forward_unfused_cuda(CudaContext& ctx, const Tensor& x, const Tensor& y, const Tensor& scratch) {
    const char* op = "gelu_forward_unfused_cuda";
    check_pointwise(op, x, y);
    require(scratch.defined() && scratch.dtype == DType::f32 && scratch.device == Device::cuda &&
                scratch.numel() >= x.numel(),
            op, "scratch must be a cuda f32 tensor with at least x.numel() elements");
    const int64_t n = x.numel();
    const unsigned grid = cuda::grid_for(n);
    float* t = scratch.as<float>();
    EMBER_LAUNCH(cube_kernel, grid, cuda::kThreads, 0, ctx.stream)(x.data, x.dtype, t, n);
    EMBER_CUDA_CHECK_LAUNCH();
    EMBER_LAUNCH(scale_kernel, grid, cuda::kThreads, 0, ctx.stream)(t, kGeluCubic, n);
    EMBER_CUDA_CHECK_LAUNCH();
    EMBER_LAUNCH(add_input_kernel, grid, cuda::kThreads, 0, ctx.stream)(t, x.data, x.dtype, n);
    EMBER_CUDA_CHECK_LAUNCH();
    EMBER_LAUNCH(scale_kernel, grid, cuda::kThreads, 0, ctx.stream)(t, kGeluSqrt2OverPi, n);
    EMBER_CUDA_CHECK_LAUNCH();
    EMBER_LAUNCH(tanh_kernel, grid, cuda::kThreads, 0, ctx.stream)(t, n);
    EMBER_CUDA_CHECK_LAUNCH();
    EMBER_LAUNCH(add_scalar_kernel, grid, cuda::kThreads, 0, ctx.stream)(t, 1.0f, n);
    EMBER_CUDA_CHECK_LAUNCH();
    EMBER_LAUNCH(multiply_input_kernel, grid, cuda::kThreads, 0, ctx.stream)(t, x.data, x.dtype, n);
    EMBER_CUDA_CHECK_LAUNCH();
    EMBER_LAUNCH(half_store_kernel, grid, cuda::kThreads, 0, ctx.stream)(t, y.data, y.dtype, n);
    EMBER_CUDA_CHECK_LAUNCH();
}

}  // namespace ember::ops
