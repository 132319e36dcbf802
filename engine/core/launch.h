// launch.h: the one way our .cu files launch kernels and declare shared memory, so one
// source compiles two ways:
//   nvcc                 real launches and real __shared__ memory, token for token what
//                        `kernel<<<...>>>` and `__shared__` were before;
//   the kernel interpreter   (engine/cuda/interpreter/, whose prelude defines
//                        EMBER_CUDA_INTERPRETER) the same kernel bodies run on the CPU,
//                        one block per worker, the block's threads as fibers.
// It lives in core because every engine room with a .cu file (cuda, optim, amp, data)
// launches kernels, as every one checks CUDA calls with core/cuda_check.h.
//
//   EMBER_LAUNCH(kernel, grid, block[, shared_bytes[, stream]])(arguments...);
//   EMBER_SHARED(float, partial, [32]);          // __shared__ float partial[32];
//   EMBER_SHARED(SegmentFactors, factors);        // __shared__ SegmentFactors factors;
//   EMBER_SHARED_DYNAMIC(float, buffer);          // extern __shared__ float buffer[];
//                                                 // (inside the kernel)
// A plain `__shared__` in a .cu file does not compile for the interpreter: a host
// compiler would give every thread its own copy, so the prelude turns it into an error
// that names EMBER_SHARED.
#pragma once

#include <cstdint>

#if defined(EMBER_CUDA_INTERPRETER)

// The names below are declared by engine/cuda/interpreter/device_api.h, which the
// interpreter's prelude includes before the .cu (core includes nothing above it).
#define EMBER_LAUNCH(kernel, ...) \
    ::ember::cuda_interpreter::KernelLaunch(#kernel, __FILE__, __LINE__, kernel, __VA_ARGS__)

// A reference to this block's instance of the variable, allocated (and poisoned) the
// first time a thread of the block reaches the declaration; every access is watched
// for races between barriers.
#define EMBER_SHARED(type, name, ...)                                                                               \
    static ::ember::cuda_interpreter::SharedDeclaration ember_shared_declaration_##name{#name, __FILE__, __LINE__}; \
    auto& name = ::ember::cuda_interpreter::shared_variable<type __VA_ARGS__>(ember_shared_declaration_##name)

#define EMBER_SHARED_DYNAMIC(type, name) type* const name = ::ember::cuda_interpreter::dynamic_shared<type>()

#elif defined(__CUDACC__)

#define EMBER_LAUNCH(kernel, ...) kernel<<<__VA_ARGS__>>>
#define EMBER_SHARED(type, name, ...) __shared__ type name __VA_ARGS__
#define EMBER_SHARED_DYNAMIC(type, name) extern __shared__ type name[]

#else
#error "engine/core/launch.h is for .cu files, compiled by nvcc or through the kernel interpreter's prelude"
#endif

namespace ember::cuda {

// Blocks for a grid-stride kernel: `wanted` (at least 1) capped at `cap`, the kernel's
// own limit; the loop covers the rest. The interpreter may lower the cap so tests reach
// the grid-stride tail with a few thousand elements instead of a hundred million.
inline unsigned grid_stride_blocks(int64_t wanted, int64_t cap) {
#if defined(EMBER_CUDA_INTERPRETER)
    const int64_t lowered = ::ember::cuda_interpreter::grid_stride_cap();
    if (lowered > 0 && lowered < cap) cap = lowered;
#endif
    if (wanted > cap) wanted = cap;
    return static_cast<unsigned>(wanted < 1 ? 1 : wanted);
}

}  // namespace ember::cuda
