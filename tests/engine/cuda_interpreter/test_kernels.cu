// test_kernels.cu: the interpreter tests' own kernels (see test_kernels.h). The broken
// ones carry their mistake on a line marked BROKEN; everything else is ordinary CUDA.
#include "tests/engine/cuda_interpreter/test_kernels.h"

#include "engine/core/launch.h"

#include <cuda_runtime.h>

namespace ember::interpreter_test {
namespace {

constexpr int kThreads = 256;

__global__ void scale_kernel(const float* in, float* out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = 2.0f * in[i];
}

__global__ void scale_off_by_one_kernel(const float* in, float* out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i <= n; i += gridDim.x * blockDim.x)  // BROKEN: <=
        out[i] = 2.0f * in[i];
}

__device__ float warp_reduce(float v) {
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

__device__ float block_reduce(float v) {
    EMBER_SHARED(float, partial, [32]);
    v = warp_reduce(v);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    __syncthreads();
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    float total = 0.0f;
    for (int w = 0; w < int(blockDim.x / 32); ++w) total += partial[w];
    return total;
}

__device__ float block_reduce_missing_barrier(float v) {
    EMBER_SHARED(float, partial, [32]);
    v = warp_reduce(v);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    __syncthreads();
    if (lane == 0) partial[warp] = v;
    // BROKEN: no __syncthreads() here; warp 0 may read partial[1] before warp 1 wrote it
    float total = 0.0f;
    for (int w = 0; w < int(blockDim.x / 32); ++w) total += partial[w];
    return total;
}

__device__ float block_reduce_missing_leading_barrier(float v) {
    EMBER_SHARED(float, partial, [32]);
    v = warp_reduce(v);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    // BROKEN: no __syncthreads() here; a second call overwrites what the first still reads
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    float total = 0.0f;
    for (int w = 0; w < int(blockDim.x / 32); ++w) total += partial[w];
    return total;
}

__device__ float strided_sum(const float* in, int n) {
    float v = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) v += in[i];
    return v;
}

__global__ void block_sum_kernel(const float* in, float* out, int n) {
    const float total = block_reduce(strided_sum(in, n));
    if (threadIdx.x == 0) *out = total;
}

__global__ void block_sum_missing_barrier_kernel(const float* in, float* out, int n) {
    const float total = block_reduce_missing_barrier(strided_sum(in, n));
    if (threadIdx.x == 0) *out = total;
}

__global__ void block_sum_twice_kernel(const float* in, float* out, int n) {
    const float first = block_reduce_missing_leading_barrier(strided_sum(in, n));
    const float second = block_reduce_missing_leading_barrier(2.0f * strided_sum(in, n));
    if (threadIdx.x == 0) *out = first + second;
}

__global__ void warp_sums_kernel(const float* in, float* out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? in[i] : 0.0f;
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (threadIdx.x % 32 == 0 && i < n) out[i / 32] = v;
}

__global__ void warp_sums_wrong_offset_kernel(const float* in, float* out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? in[i] : 0.0f;
    for (int offset = 8; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);  // BROKEN: 8
    if (threadIdx.x % 32 == 0 && i < n) out[i / 32] = v;
}

__global__ void early_return_kernel(int* out) {
    if (threadIdx.x >= 48) return;  // BROKEN: these threads never reach the barrier below
    out[threadIdx.x] = 1;
    __syncthreads();
}

__global__ void different_sites_kernel(int* out) {
    if (threadIdx.x % 2 == 0) {
        out[threadIdx.x] = 1;
        __syncthreads();  // BROKEN: even threads wait here ...
    } else {
        out[threadIdx.x] = 2;
        __syncthreads();  // ... odd threads here
    }
}

__global__ void barrier_against_syncwarp_kernel(int* out) {
    if (threadIdx.x % 32 < 16)
        __syncthreads();  // BROKEN: half of each warp at a block barrier
    else
        __syncwarp();  // while the other half waits for it in a warp sync
    out[threadIdx.x] = 1;
}

__global__ void uninitialized_shared_kernel(int* out) {
    EMBER_SHARED(int, scratch, [64]);
    if (threadIdx.x < 32) scratch[threadIdx.x] = int(threadIdx.x);
    __syncthreads();
    out[threadIdx.x] = scratch[63 - threadIdx.x];  // BROKEN: scratch[32..63] is never written
}

__global__ void shared_past_the_end_kernel(int* out) {
    EMBER_SHARED(int, scratch, [64]);
    // Through a pointer, as block_sum(value, shared) indexes: UBSan's array-bounds check
    // (asan preset) does not see it, the interpreter's shared-memory check does.
    int* values = scratch;
    values[threadIdx.x] = int(threadIdx.x);
    __syncthreads();
    out[threadIdx.x] = values[threadIdx.x + 1];  // BROKEN: thread 63 reads scratch[64]
}

__global__ void reverse_kernel(const int* in, int* out, int n) {
    EMBER_SHARED_DYNAMIC(int, staged);
    const int i = threadIdx.x;
    if (i < n) staged[i] = in[i];
    __syncthreads();
    if (i < n) out[i] = staged[n - 1 - i];
}

__global__ void warp_intrinsics_kernel(int* out) {
    const int t = threadIdx.x, lane = t % 32;
    int* mine = out + 8 * t;
    mine[0] = __shfl_sync(0xffffffffu, t, 3);
    mine[1] = __shfl_up_sync(0xffffffffu, t, 1);
    mine[2] = __shfl_down_sync(0xffffffffu, t, 1);
    mine[3] = __shfl_xor_sync(0xffffffffu, t, 1, 8);
    mine[4] = static_cast<int>(__ballot_sync(0xffffffffu, lane % 2 == 1));
    mine[5] = __any_sync(0xffffffffu, lane == 5);
    mine[6] = __all_sync(0xffffffffu, lane < 32);
    mine[7] = __syncthreads_count(t % 2 == 0);
}

__global__ void shuffle_outside_mask_kernel(int* out) {
    const int lane = threadIdx.x % 32;
    if (lane < 16) out[threadIdx.x] = __shfl_sync(0x0000ffffu, lane, 20);  // BROKEN: lane 20 is not in the mask
}

__global__ void atomic_histogram_kernel(const int* values, int n, int bins, int* counts, float* weights, int* maximum,
                                        unsigned* cas_counter) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const int bin = values[i] % bins;
        atomicAdd(&counts[bin], 1);
        atomicAdd(&weights[bin], 0.5f);
        atomicMax(maximum, values[i]);
        unsigned seen = *cas_counter, assumed;
        do {
            assumed = seen;
            seen = atomicCAS(cas_counter, assumed, assumed + 1);
        } while (seen != assumed);
    }
}

__global__ void every_atomic_kernel(const int* values, int n, AtomicResults* r) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const int v = values[i];
        const unsigned u = static_cast<unsigned>(v);
        atomicSub(&r->sub_int, v);
        atomicSub(&r->sub_unsigned, u);
        atomicAdd(&r->add_unsigned, u);
        atomicAdd(&r->add_ull, static_cast<unsigned long long>(v));
        atomicAdd(&r->add_double, 0.25 * v);
        atomicMin(&r->min_int, v);
        atomicMin(&r->min_unsigned, u);
        atomicMax(&r->max_unsigned, u);
        atomicOr(&r->or_int, 1 << (v % 31));
        atomicOr(&r->or_unsigned, 1u << (v % 32));
        atomicAnd(&r->and_int, ~(1 << (v % 29)));
        atomicAnd(&r->and_unsigned, ~(1u << (v % 30)));
        atomicXor(&r->xor_int, v);
        atomicXor(&r->xor_unsigned, u * 2654435761u);
        unsigned long long old = static_cast<unsigned long long>(atomicExch(&r->exchange_int, v));
        old += atomicExch(&r->exchange_unsigned, u);
        old += atomicExch(&r->exchange_ull, static_cast<unsigned long long>(v));
        old += static_cast<unsigned long long>(atomicExch(&r->exchange_float, static_cast<float>(v)));
        atomicAdd(&r->exchanged_sum, old);
        int seen = r->cas_int, assumed;
        do {
            assumed = seen;
            seen = atomicCAS(&r->cas_int, assumed, assumed + 1);
        } while (seen != assumed);
        unsigned long long seen_ull = r->cas_ull, assumed_ull;
        do {
            assumed_ull = seen_ull;
            seen_ull = atomicCAS(&r->cas_ull, assumed_ull, assumed_ull + 2);
        } while (seen_ull != assumed_ull);
    }
}

cudaError_t finish() {
    return cudaGetLastError();
}

}  // namespace

cudaError_t scale_by_two(const float* in, float* out, int n, unsigned blocks) {
    EMBER_LAUNCH(scale_kernel, blocks, kThreads)(in, out, n);
    return finish();
}
cudaError_t scale_by_two_off_by_one(const float* in, float* out, int n, unsigned blocks) {
    EMBER_LAUNCH(scale_off_by_one_kernel, blocks, kThreads)(in, out, n);
    return finish();
}
cudaError_t block_sum(const float* in, float* out, int n) {
    EMBER_LAUNCH(block_sum_kernel, 1, kThreads)(in, out, n);
    return finish();
}
cudaError_t block_sum_missing_barrier(const float* in, float* out, int n) {
    EMBER_LAUNCH(block_sum_missing_barrier_kernel, 1, kThreads)(in, out, n);
    return finish();
}
cudaError_t block_sum_twice_missing_leading_barrier(const float* in, float* out, int n) {
    EMBER_LAUNCH(block_sum_twice_kernel, 1, kThreads)(in, out, n);
    return finish();
}
cudaError_t warp_sums(const float* in, float* out, int n) {
    EMBER_LAUNCH(warp_sums_kernel, (n + kThreads - 1) / kThreads, kThreads)(in, out, n);
    return finish();
}
cudaError_t warp_sums_wrong_offset(const float* in, float* out, int n) {
    EMBER_LAUNCH(warp_sums_wrong_offset_kernel, (n + kThreads - 1) / kThreads, kThreads)(in, out, n);
    return finish();
}
cudaError_t divergent_barrier(int* out, Divergence kind) {
    switch (kind) {
        case Divergence::threads_return_early:
            EMBER_LAUNCH(early_return_kernel, 1, 64)(out);
            break;
        case Divergence::different_call_sites:
            EMBER_LAUNCH(different_sites_kernel, 1, 64)(out);
            break;
        case Divergence::barrier_against_syncwarp:
            EMBER_LAUNCH(barrier_against_syncwarp_kernel, 1, 64)(out);
            break;
    }
    return finish();
}
cudaError_t uninitialized_shared_read(int* out) {
    EMBER_LAUNCH(uninitialized_shared_kernel, 1, 64)(out);
    return finish();
}
cudaError_t shared_index_past_the_end(int* out) {
    EMBER_LAUNCH(shared_past_the_end_kernel, 1, 64)(out);
    return finish();
}
cudaError_t reverse_through_dynamic_shared(const int* in, int* out, int n) {
    EMBER_LAUNCH(reverse_kernel, 1, n, n * sizeof(int), nullptr)(in, out, n);
    return finish();
}
cudaError_t warp_intrinsics(int* out) {
    EMBER_LAUNCH(warp_intrinsics_kernel, 1, 64)(out);
    return finish();
}
cudaError_t shuffle_outside_mask(int* out) {
    EMBER_LAUNCH(shuffle_outside_mask_kernel, 1, 32)(out);
    return finish();
}
cudaError_t atomic_histogram(const int* values, int n, int bins, int* counts, float* weights, int* maximum,
                             unsigned* cas_counter, unsigned blocks) {
    EMBER_LAUNCH(atomic_histogram_kernel, blocks, 128)(values, n, bins, counts, weights, maximum, cas_counter);
    return finish();
}
cudaError_t every_atomic(const int* values, int n, AtomicResults* results, unsigned blocks) {
    EMBER_LAUNCH(every_atomic_kernel, blocks, 128)(values, n, results);
    return finish();
}
cudaError_t launch_with(dim3 grid, dim3 block, size_t dynamic_shared_bytes, const float* in, float* out, int n) {
    EMBER_LAUNCH(scale_kernel, grid, block, dynamic_shared_bytes, nullptr)(in, out, n);
    return finish();
}

}  // namespace ember::interpreter_test
