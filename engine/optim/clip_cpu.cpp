// clip_cpu.cpp: the cpu reference of global-norm gradient clipping.
#include "engine/optim/clip.h"

#include <algorithm>
#include <cmath>

namespace ember::optim {

double clip_grad_norm_cpu(float* grads, std::size_t count, double max_norm) {
    double sum = 0.0;
    for (std::size_t i = 0; i < count; ++i) sum += (double)grads[i] * grads[i];
    const double total = std::sqrt(sum);
    const float coefficient = (float)std::min(max_norm / (total + 1e-6), 1.0);
    for (std::size_t i = 0; i < count; ++i) grads[i] *= coefficient;
    return total;
}

}  // namespace ember::optim
