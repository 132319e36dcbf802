// softmax_cross_entropy.cu: fused softmax + cross-entropy, one block per row:
// block max, block sum of exponentials, the row's loss, then dlogits in one more pass.
// A target outside [0, classes) cannot be checked on the host without a copy back, so
// the kernel never reads past the row for it: that row's loss is NaN (which the loss
// readback, the loss scaler and the anomaly check all catch) and its dlogits are 0.
#include "engine/cuda/cuda_util.cuh"
#include "engine/ops/softmax_cross_entropy.h"

namespace ember::ops {
namespace {

__global__ void softmax_cross_entropy_kernel(const void* logits, DType lt, const int32_t* targets, float* losses,
                                             void* dlogits, DType dt, int64_t classes, float grad_scale) {
    const int64_t row = blockIdx.x;
    const int64_t base = row * classes;
    float local_max = -INFINITY;
    for (int64_t v = threadIdx.x; v < classes; v += blockDim.x)
        local_max = fmaxf(local_max, load_as_float(logits, lt, base + v));
    const float row_max = cuda::block_max(local_max);
    float local_sum = 0.0f;
    for (int64_t v = threadIdx.x; v < classes; v += blockDim.x)
        local_sum += expf(load_as_float(logits, lt, base + v) - row_max);
    const float log_sum = logf(cuda::block_sum(local_sum)) + row_max;
    const int32_t target = targets[row];
    const bool valid = target >= 0 && target < classes;
    if (threadIdx.x == 0) losses[row] = valid ? log_sum - load_as_float(logits, lt, base + target) : NAN;
    if (!dlogits) return;
    for (int64_t v = threadIdx.x; v < classes; v += blockDim.x) {
        float p = expf(load_as_float(logits, lt, base + v) - log_sum);
        store_from_float(dlogits, dt, base + v, valid ? grad_scale * (p - (v == target ? 1.0f : 0.0f)) : 0.0f);
    }
}

}  // namespace

void softmax_cross_entropy_cuda(CudaContext& ctx, const Tensor& logits, const Tensor& targets, const Tensor& losses,
                                const Tensor& dlogits, float grad_scale) {
    const char* op = "softmax_cross_entropy_cuda";
    cuda::check_float_cuda(logits, op, "logits");
    const int64_t rows = logits.rows(), classes = logits.cols();
    require(
        targets.defined() && targets.dtype == DType::i32 && targets.device == Device::cuda && targets.numel() == rows,
        op, "targets must be a cuda i32 tensor with one entry per row");
    cuda::check_f32_cuda(losses, op, "losses", rows);
    if (dlogits.defined()) {
        cuda::check_float_cuda(dlogits, op, "dlogits");
        require(dlogits.numel() == logits.numel(), op, "dlogits must be shaped like logits");
    }
    if (rows == 0) return;
    // Targets are not range-checked on the device (that would need a sync); the CPU
    // twin checks them, and out-of-range values read garbage here.
    EMBER_LAUNCH(softmax_cross_entropy_kernel, static_cast<unsigned>(rows), cuda::kThreads, 0, ctx.stream)(logits.data, logits.dtype, targets.as<int32_t>(), losses.as<float>(),
                                                   dlogits.defined() ? dlogits.data : nullptr, dlogits.dtype, classes,
                                                   grad_scale);
    EMBER_CUDA_CHECK_LAUNCH();
}

}  // namespace ember::ops
