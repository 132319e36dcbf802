// test_kernels.h: kernels that exist only for the kernel interpreter's own tests
// (test_kernels.cu, compiled through the interpreter like the engine's): deliberately
// broken ones, each with the mistake a check must catch, beside correct twins, and small
// kernels that pin down the semantics of the intrinsics. Every function launches one
// kernel on device pointers and returns cudaGetLastError() after it.
#pragma once

#include <cuda_runtime_api.h>

namespace ember::interpreter_test {

// out[i] = 2 in[i] over a grid-stride loop of `blocks` x 256 threads; the broken twin's
// bound is `i <= n`.
cudaError_t scale_by_two(const float* in, float* out, int n, unsigned blocks);
cudaError_t scale_by_two_off_by_one(const float* in, float* out, int n, unsigned blocks);

// One block of 256 threads sums in[0..n) into *out with the warp-shuffle-then-shared-
// memory reduction of engine/cuda/cuda_util.cuh. Broken twins: without the __syncthreads
// between the shared writes and the reads, and (called twice in a row) without the one
// that protects the reads of the previous call.
cudaError_t block_sum(const float* in, float* out, int n);
cudaError_t block_sum_missing_barrier(const float* in, float* out, int n);
cudaError_t block_sum_twice_missing_leading_barrier(const float* in, float* out, int n);

// One warp per 32 elements: out[w] = sum of in[32w .. 32w+32). The broken twin's
// butterfly starts at offset 8 instead of 16 (a wrong shuffle offset).
cudaError_t warp_sums(const float* in, float* out, int n);
cudaError_t warp_sums_wrong_offset(const float* in, float* out, int n);

// Barrier divergence, three ways, in one block of 64 threads.
enum class Divergence { threads_return_early, different_call_sites, barrier_against_syncwarp };
cudaError_t divergent_barrier(int* out, Divergence kind);

// Shared memory misuse in one block of 64 threads.
cudaError_t uninitialized_shared_read(int* out);
cudaError_t shared_index_past_the_end(int* out);

// out[i] = in[n - 1 - i] through `extern __shared__` memory (one block, n <= 1024).
cudaError_t reverse_through_dynamic_shared(const int* in, int* out, int n);

// Warp intrinsics of one block of 64 threads; each thread writes 8 results to
// out[8 * thread ...]: __shfl_sync from lane 3, __shfl_up_sync 1, __shfl_down_sync 1 and
// __shfl_xor_sync 1 at width 8, __ballot_sync(lane odd), __any_sync(lane == 5),
// __all_sync(lane < 32), __syncthreads_count(thread even).
cudaError_t warp_intrinsics(int* out);
// __shfl_sync(0x0000ffff, v, 20) from the lower 16 lanes: reads a lane outside the mask.
cudaError_t shuffle_outside_mask(int* out);

// A histogram of `n` values into `bins` with atomicAdd (int and float), atomicMax of the
// values and a CAS-built counter, over `blocks` blocks of 128 threads.
cudaError_t atomic_histogram(const int* values, int n, int bins, int* counts, float* weights, int* maximum,
                             unsigned* cas_counter, unsigned blocks);

// Every CUDA atomic under each value type it takes, over `n` values from `blocks` blocks
// of 128 threads, into one field per (operation, type) of a default AtomicResults.
struct AtomicResults {
    int sub_int = 0;
    unsigned sub_unsigned = 0;
    unsigned add_unsigned = 0;
    unsigned long long add_ull = 0;
    double add_double = 0.0;
    int min_int = 1 << 30;             // starts high
    unsigned min_unsigned = 1u << 30;  // starts high
    unsigned max_unsigned = 0;
    int or_int = 0;
    unsigned or_unsigned = 0;
    int and_int = -1;                     // all bits set
    unsigned and_unsigned = 0xffffffffu;  // all bits set
    int xor_int = 0;
    unsigned xor_unsigned = 0;
    int exchange_int = 0;
    unsigned exchange_unsigned = 0;
    unsigned long long exchange_ull = 0;
    float exchange_float = 0.0f;
    unsigned long long exchanged_sum = 0;  // every old value the four exchanges returned, summed
    int cas_int = 0;                       // counters built from atomicCAS
    unsigned long long cas_ull = 0;
};
cudaError_t every_atomic(const int* values, int n, AtomicResults* results, unsigned blocks);

// Launches scale_by_two with any configuration (for the launch checks).
cudaError_t launch_with(dim3 grid, dim3 block, size_t dynamic_shared_bytes, const float* in, float* out, int n);

}  // namespace ember::interpreter_test
