// autocast.h: ember's mixed-precision policy, decided once per model rather than per
// op call. Under fp16 or bf16:
//   low precision   GEMM and convolution inputs (activations and a low-precision copy
//                   of the weights, refreshed by the optimizer after every step)
//   fp32            master weights and gradients, reductions, softmax, the loss, and
//                   BatchNorm / LayerNorm statistics (the ops compute these in fp32
//                   whatever their input dtype)
// fp16 additionally needs dynamic loss scaling (loss_scaler.h); bf16 has fp32's range.
#pragma once

#include "engine/core/dtype.h"
#include "engine/optim/optimizer.h"

#include <string>

namespace ember::amp {

enum class Precision : uint8_t { fp32 = 0, fp16 = 1, bf16 = 2 };

const char* precision_name(Precision precision);     // "fp32", "fp16", "bf16"
Precision parse_precision(const std::string& name);  // throws std::invalid_argument naming it

struct AutocastPolicy {
    Precision precision = Precision::fp32;

    // dtype of activations between layers and of GEMM/conv operands.
    DType compute_dtype() const;
    // dtype of reductions, softmax, loss and normalization statistics.
    DType reduction_dtype() const { return DType::f32; }
    DType master_dtype() const { return DType::f32; }
    bool low_precision() const { return precision != Precision::fp32; }
    bool needs_loss_scaling() const { return precision == Precision::fp16; }
    // What the optimizer writes after its update (the low-precision weight copy).
    optim::LowPrecision optimizer_copy() const;
};

}  // namespace ember::amp
