// interpreter.h: the host-side controls of the kernel interpreter, for tests.
//
// The interpreter runs our own __global__ kernels, unchanged, on the CPU: every kernel
// launch (EMBER_LAUNCH, engine/core/launch.h) executes its blocks on worker threads,
// one block at a time per worker, each thread of the block a fiber; __syncthreads is a
// block barrier and the warp intrinsics exchange values among the 32 fibers of a warp.
// A program links it instead of libcudart: its CUDA runtime (cuda_runtime.cpp) keeps
// "device" memory in host memory and runs every launch synchronously.
//
// While a kernel runs, every load and store it makes is checked (memcheck.cpp):
//   shared_memory_race        two threads of a block touch one shared address between
//                             two barriers (or warp synchronisations), one of them writing
//   uninitialized_shared_read a shared address read before any thread of the block wrote it
//   shared_out_of_bounds      an access outside every shared variable of the block
//   global_out_of_bounds      an access outside every live cudaMalloc/cudaHostAlloc block
//   barrier_divergence        __syncthreads not reached by every thread of the block, or
//                             reached at different call sites
//   warp_divergence           a warp intrinsic whose mask names a lane that never joins,
//                             or lanes that disagree on the operation or the mask
//   kernel_exception          a C++ exception escaping a kernel
// Each finding names the kernel, the block, the thread and the address, is printed to
// stderr, and makes the launch fail: cudaGetLastError() returns cudaErrorIllegalAddress
// (out of bounds) or cudaErrorLaunchFailure (the rest), with the finding in
// cudaGetErrorString, so EMBER_CUDA_CHECK_LAUNCH() throws a CudaError that says what
// was found. An out-of-bounds access stops the launch before it happens; races are
// reported and execution goes on, as compute-sanitizer's racecheck does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::cuda_interpreter {

enum class FindingKind {
    shared_memory_race,
    uninitialized_shared_read,
    shared_out_of_bounds,
    global_out_of_bounds,
    barrier_divergence,
    warp_divergence,
    kernel_exception,
};
const char* finding_kind_name(FindingKind kind);

struct Finding {
    FindingKind kind;
    std::string kernel;  // as written at the launch site
    unsigned block[3] = {0, 0, 0};
    unsigned thread[3] = {0, 0, 0};
    uintptr_t address = 0;  // 0 where no address is involved (barriers, warps)
    std::string message;    // the whole report, one line
};

// Every finding since the last call, of every launch, in the order they were found.
std::vector<Finding> take_findings();

// Lowers the block cap of grid-stride kernels (ember::cuda::grid_stride_blocks) so a
// test reaches the grid-stride tail with few elements; 0 restores the kernels' own caps.
void set_grid_stride_cap(unsigned blocks);

// Worker threads that run blocks (default: the hardware's; also EMBER_CUDA_INTERPRETER_WORKERS).
void set_workers(int workers);
int workers();

// Kernels launched so far by this process: the launch site's file and the kernel's name.
struct KernelLaunchCount {
    std::string file;
    std::string kernel;
    uint64_t launches = 0;
};
std::vector<KernelLaunchCount> launched_kernels();

}  // namespace ember::cuda_interpreter
