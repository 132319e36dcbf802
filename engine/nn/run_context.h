// run_context.h: what a layer's forward/backward needs besides its tensors: the
// backend (and its CUDA context), where temporaries go (the activation pool), the
// parameter store, the activation dtype chosen by the autocast policy, training vs
// evaluation, how parameter gradients are written (store after "set to none",
// accumulate otherwise), the dropout seed/offset and the op switches.
#pragma once

#include "engine/nn/activation_pool.h"
#include "engine/nn/batchnorm_sync.h"
#include "engine/nn/parameters.h"
#include "engine/ops/dispatch.h"

namespace ember::nn {

struct LayerSwitches {
    bool fused_gelu = true;       // GELU in the GEMM epilogue / one kernel; off: the 8-kernel chain
    bool fused_layernorm = true;  // one kernel forward, one for dx; off: the 4 + 11 kernel chain
    bool per_layer_nvtx = false;  // an NVTX range per layer, named after it
};

// An ops::OpContext (backend and CUDA context), so layers call ops::<name>(ctx, ...).
struct RunContext : ops::OpContext {
    ActivationPool* pool = nullptr;  // temporaries of the current layer
    ParameterStore* parameters = nullptr;
    DType activation_dtype = DType::f32;  // between layers (f16/bf16 under AMP, f64 in grad checks)
    bool training = true;
    bool recomputing = false;  // activation checkpointing: forward again inside backward
    ops::GradWrite parameter_write = ops::GradWrite::accumulate;
    uint64_t dropout_seed = 0;
    uint64_t dropout_offset = 0;  // advanced by the model every step
    LayerSwitches switches;
    // Set by data-parallel runs with SyncBatchNorm (engine/dist): BatchNorm layers then
    // compute training statistics over every rank's batch.
    BatchNormSynchronizer* batchnorm_sync = nullptr;

    Tensor allocate(DType dtype, const TensorShape& shape) const { return pool->allocate(dtype, shape); }
    Tensor allocate(const TensorShape& shape) const { return pool->allocate(activation_dtype, shape); }
    // A 4-D temporary in the given memory order (channels-last models: a layer's
    // output and input gradient keep the layout of its input).
    Tensor allocate(DType dtype, const TensorShape& shape, Layout layout) const {
        Tensor t = pool->allocate(dtype, shape);
        t.layout = layout;
        return t;
    }
};

}  // namespace ember::nn
