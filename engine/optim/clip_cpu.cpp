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

double clip_grad_norm_sharded_cpu(float* shard_grads, std::size_t count, double max_norm,
                                  const SumOverRanks& sum_over_ranks) {
    double sum = 0.0;
    for (std::size_t i = 0; i < count; ++i) sum += (double)shard_grads[i] * shard_grads[i];
    float total_squares = static_cast<float>(sum);
    sum_over_ranks(&total_squares, 1);
    const double total = std::sqrt(static_cast<double>(total_squares));
    const float coefficient = (float)std::min(max_norm / (total + 1e-6), 1.0);
    for (std::size_t i = 0; i < count; ++i) shard_grads[i] *= coefficient;
    return total;
}

}  // namespace ember::optim
