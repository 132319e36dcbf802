// clip_cuda.cu: global-norm clipping on the device in two launches: per-block sums of
// squares (double), then every block of the scale kernel adds the partials itself
// (so no third launch and no host round trip) and scales its share of gradients.
#include "engine/optim/clip.h"

#include "engine/core/cuda_check.h"
#include "engine/core/launch.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>

namespace ember::optim {

namespace {

constexpr int kThreads = 256;
constexpr int kClipBlocks = 1024;

__device__ double block_sum_double(double value, double* shared) {
    for (int offset = 16; offset > 0; offset /= 2) value += __shfl_down_sync(0xffffffffu, value, offset);
    __syncthreads();
    if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = value;
    __syncthreads();
    double total = 0.0;
    for (int w = 0; w < (int)(blockDim.x / 32); ++w) total += shared[w];
    return total;
}

__global__ void clip_sum_squares_kernel(const float* __restrict__ grads, std::size_t count,
                                        double* __restrict__ partials) {
    EMBER_SHARED(double, shared, [kThreads / 32]);
    double sum = 0.0;
    for (std::size_t i = blockIdx.x * (std::size_t)blockDim.x + threadIdx.x; i < count;
         i += (std::size_t)gridDim.x * blockDim.x)
        sum += (double)grads[i] * grads[i];
    sum = block_sum_double(sum, shared);
    if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

__global__ void clip_scale_kernel(float* __restrict__ grads, std::size_t count, const double* __restrict__ partials,
                                  int partial_count, float max_norm, float* __restrict__ total_norm_out) {
    EMBER_SHARED(double, shared, [kThreads / 32]);
    double sum = 0.0;
    for (int k = threadIdx.x; k < partial_count; k += blockDim.x) sum += partials[k];
    sum = block_sum_double(sum, shared);
    const double total = sqrt(sum);
    const float coefficient = (float)fmin((double)max_norm / (total + 1e-6), 1.0);
    if (blockIdx.x == 0 && threadIdx.x == 0) *total_norm_out = (float)total;
    for (std::size_t i = blockIdx.x * (std::size_t)blockDim.x + threadIdx.x; i < count;
         i += (std::size_t)gridDim.x * blockDim.x)
        grads[i] *= coefficient;
}

// One block adds the partials into a single float (the shard's sum of squares).
__global__ void clip_finish_sum_kernel(const double* __restrict__ partials, int partial_count,
                                       float* __restrict__ sum_out) {
    EMBER_SHARED(double, shared, [kThreads / 32]);
    double sum = 0.0;
    for (int k = threadIdx.x; k < partial_count; k += blockDim.x) sum += partials[k];
    sum = block_sum_double(sum, shared);
    if (threadIdx.x == 0) *sum_out = (float)sum;
}

// Scales by the coefficient of the all-ranks sum of squares.
__global__ void clip_scale_by_sum_kernel(float* __restrict__ grads, std::size_t count,
                                         const float* __restrict__ sum_of_squares, float max_norm,
                                         float* __restrict__ total_norm_out) {
    const double total = sqrt((double)*sum_of_squares);
    const float coefficient = (float)fmin((double)max_norm / (total + 1e-6), 1.0);
    if (blockIdx.x == 0 && threadIdx.x == 0) *total_norm_out = (float)total;
    for (std::size_t i = blockIdx.x * (std::size_t)blockDim.x + threadIdx.x; i < count;
         i += (std::size_t)gridDim.x * blockDim.x)
        grads[i] *= coefficient;
}

}  // namespace

GradientClipper::GradientClipper(std::size_t count) : count_(count) {
    blocks_ = (int)cuda::grid_stride_blocks(static_cast<int64_t>((count + kThreads - 1) / kThreads), kClipBlocks);
    EMBER_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&partials_), blocks_ * sizeof(double)));
    EMBER_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&total_norm_), sizeof(float)));
    EMBER_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&shard_sum_), sizeof(float)));
}

GradientClipper::~GradientClipper() {
    cudaFree(partials_);
    cudaFree(total_norm_);
    cudaFree(shard_sum_);
}

void GradientClipper::clip(float* grads, float max_norm, void* stream) {
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    EMBER_LAUNCH(clip_sum_squares_kernel, blocks_, kThreads, 0, s)(grads, count_, partials_);
    EMBER_CUDA_CHECK_LAUNCH();
    EMBER_LAUNCH(clip_scale_kernel, blocks_, kThreads, 0, s)(grads, count_, partials_, blocks_, max_norm, total_norm_);
    EMBER_CUDA_CHECK_LAUNCH();
}

void GradientClipper::clip_sharded(float* shard_grads, std::size_t count, float max_norm, void* stream,
                                   const SumOverRanks& sum_over_ranks) {
    if (count > count_) throw std::invalid_argument("GradientClipper::clip_sharded: shard larger than the clipper");
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    EMBER_LAUNCH(clip_sum_squares_kernel, blocks_, kThreads, 0, s)(shard_grads, count, partials_);
    EMBER_CUDA_CHECK_LAUNCH();
    EMBER_LAUNCH(clip_finish_sum_kernel, 1, kThreads, 0, s)(partials_, blocks_, shard_sum_);
    EMBER_CUDA_CHECK_LAUNCH();
    sum_over_ranks(shard_sum_, 1);
    EMBER_LAUNCH(clip_scale_by_sum_kernel, blocks_, kThreads, 0, s)(shard_grads, count, shard_sum_, max_norm,
                                                                    total_norm_);
    EMBER_CUDA_CHECK_LAUNCH();
}

float GradientClipper::read_total_norm() const {
    float value = 0.0f;
    EMBER_CUDA_CHECK(cudaMemcpy(&value, total_norm_, sizeof(float), cudaMemcpyDeviceToHost));
    return value;
}

}  // namespace ember::optim
