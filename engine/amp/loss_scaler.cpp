// loss_scaler.cpp: the scale update policy and the CPU inf/NaN check (loss_scaler.h).
#include "engine/amp/loss_scaler.h"

#include <cmath>
#include <stdexcept>

namespace ember::amp {

DynamicLossScaler::DynamicLossScaler(const LossScalerOptions& options) : options_(options) {
    if (!(options.initial_scale > 0) || !(options.growth_factor > 1) || !(options.backoff_factor > 0) ||
        !(options.backoff_factor < 1) || options.growth_interval < 1)
        throw std::invalid_argument(
            "loss scaler: need initial_scale > 0, growth_factor > 1, 0 < backoff_factor < 1, growth_interval >= 1");
    state_.scale = options.initial_scale;
}

bool DynamicLossScaler::update(bool found_inf) {
    if (found_inf) {
        state_.scale *= options_.backoff_factor;
        state_.growth_tracker = 0;
        ++state_.skipped_steps;
        return false;
    }
    if (++state_.growth_tracker >= options_.growth_interval) {
        state_.scale *= options_.growth_factor;
        state_.growth_tracker = 0;
        ++state_.growth_count;
    }
    return true;
}

bool all_finite_cpu(const float* values, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
        if (!std::isfinite(values[i])) return false;
    return true;
}

}  // namespace ember::amp
