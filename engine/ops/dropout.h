// dropout.h: inverted dropout (kept elements scaled by 1/(1-p)), as nn.Dropout in
// training mode. The keep/drop decision for element i is a pure function of
// (seed, offset + i) computed by dropout_keep() below on both backends, so the CPU
// twin produces the very same mask as the kernel. The mask (u8, 1 = kept) is saved
// for backward.
#pragma once

#include "engine/ops/common.h"

namespace ember::ops {

// A stateless 64-bit mix (splitmix64 finalizer) of seed and element counter.
EMBER_HD inline uint64_t dropout_hash(uint64_t seed, uint64_t counter) {
    uint64_t z = seed + 0x9e3779b97f4a7c15ull * (counter + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Keep with probability 1 - p: compares the top 24 bits as a uniform in [0, 1).
EMBER_HD inline bool dropout_keep(uint64_t seed, uint64_t counter, float p) {
    float u = static_cast<float>(dropout_hash(seed, counter) >> 40) * (1.0f / 16777216.0f);
    return u >= p;
}

struct DropoutParams {
    float p = 0.5f;  // probability of dropping
    uint64_t seed = 0;
    uint64_t offset = 0;  // advance per step so every step draws a fresh mask
};

void dropout_forward_cpu(const Tensor& x, const Tensor& y, const Tensor& mask, const DropoutParams& params);
void dropout_forward_cuda(CudaContext& ctx, const Tensor& x, const Tensor& y, const Tensor& mask,
                          const DropoutParams& params);
// dx = dy * mask / (1 - p)
void dropout_backward_cpu(const Tensor& dy, const Tensor& mask, const Tensor& dx, float p, GradWrite write);
void dropout_backward_cuda(CudaContext& ctx, const Tensor& dy, const Tensor& mask, const Tensor& dx, float p,
                           GradWrite write);

}  // namespace ember::ops
