// common.h: conventions shared by every op family in engine/ops/.
//
// Every op exists twice with the same arguments:
//   ops::<name>_cpu(args...)                  the reference (plain loops, OpenBLAS)
//   ops::<name>_cuda(CudaContext& ctx, args...)  the CUDA backend, enqueued on ctx.stream
// Tensors are views (engine/core/tensor.h); outputs are preallocated by the caller and
// their shapes checked. CPU ops take cpu tensors, CUDA ops cuda tensors.
//
// Backward ops write gradients in one of two modes, chosen per call:
//   GradWrite::store       overwrite (the first write after "gradients set to none")
//   GradWrite::accumulate  add to what is there (gradient accumulation, residual joins)
#pragma once

#include "engine/core/tensor.h"

namespace ember {
struct CudaContext;  // engine/cuda/context.h: stream, cuBLAS(Lt)/cuDNN handles, autotune cache
}

namespace ember::ops {

enum class GradWrite : uint8_t { store = 0, accumulate = 1 };

// dst = value (store) or dst += value (accumulate); the one place the two modes differ.
EMBER_HD inline float write_grad(float old_value, float value, GradWrite mode) {
    return mode == GradWrite::accumulate ? old_value + value : value;
}

// write_grad into element i of a float tensor of any dtype (fp32 math); the element is
// read only when accumulating.
EMBER_HD inline void store_grad(void* data, DType t, int64_t i, float value, GradWrite mode) {
    const float old_value = mode == GradWrite::accumulate ? load_as_float(data, t, i) : 0.0f;
    store_from_float(data, t, i, write_grad(old_value, value, mode));
}

}  // namespace ember::ops
