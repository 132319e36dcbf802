// prelude.h: included first by every translation unit that compiles a .cu file for the
// kernel interpreter (CMake generates them: "#include prelude.h" then "#include x.cu").
// It brings the CUDA headers in their host form, then the device API the kernels use
// (device_api.h) under the CUDA names, so the kernel source compiles unchanged with the
// host compiler. Order matters: the CUDA headers must be read before the macros below
// exist (device_launch_parameters.h would otherwise declare `threadIdx` as a variable).
#pragma once

#define EMBER_CUDA_INTERPRETER 1

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

#include <cmath>

#include "engine/cuda/interpreter/device_api.h"

#define threadIdx (::ember::cuda_interpreter::thread_index())
#define blockIdx (::ember::cuda_interpreter::block_index())
#define blockDim (::ember::cuda_interpreter::block_dim())
#define gridDim (::ember::cuda_interpreter::grid_dim())

#if !defined(__launch_bounds__)
#define __launch_bounds__(...)
#endif

// On the host `__shared__` would give each simulated thread a private copy: refuse it.
#undef __shared__
#define __shared__ \
    static_assert(false, "declare shared memory with EMBER_SHARED / EMBER_SHARED_DYNAMIC (engine/core/launch.h)");

#include "engine/core/launch.h"
