#include "engine/ops/gelu.h"

namespace ember::ops {

void gelu_forward_cpu(const float* in, float* out, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) out[i] = gelu_tanh(in[i]);
}

void gelu_backward_cpu(const float* in, const float* grad_out, float* grad_in, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) grad_in[i] = grad_out[i] * gelu_tanh_grad(in[i]);
}

}  // namespace ember::ops
