// elementwise_optimizer.cpp: per-step scalars and the cpu reference path — plain
// loops over segments and elements, norms summed in double.
#include "engine/optim/elementwise_optimizer.h"

#include "engine/optim/low_precision.h"
#include "engine/optim/optimizer_cuda.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace ember::optim {

ElementwiseOptimizer::ElementwiseOptimizer(std::string name, OptimizerBackend backend, double lr,
                                           std::vector<ParameterSegment> segments, ElementwiseSettings settings)
    : Optimizer(std::move(name), settings.base.kind, backend, lr, std::move(segments)), settings_(settings) {
    if (backend_ == OptimizerBackend::cpu) {
        // The state lives in the CPU backend's allocator, so its peaks (and NVTX memory
        // tools) see it as they see the CUDA updater's.
        host_state_.reserve(settings_.state_buffers);
        for (int b = 0; b < settings_.state_buffers; ++b) {
            host_state_.emplace_back(host_allocator(), parameter_count_ * sizeof(float));
            std::fill_n(host_state(b), parameter_count_, b == 0 ? settings_.initial_state0 : 0.0f);
        }
        host_segment_norms_.assign(segments_.size(), 0.0f);
    } else {
        cuda_ = std::make_unique<CudaMultiTensorUpdater>(segments_, parameter_count_, settings_.state_buffers,
                                                         settings_.initial_state0);
    }
}

ElementwiseOptimizer::~ElementwiseOptimizer() = default;

const float* ElementwiseOptimizer::state_buffer(int index) const {
    if (index < 0 || index >= settings_.state_buffers) return nullptr;
    if (cuda_) return cuda_->state(index);
    return host_state(index);
}

float* ElementwiseOptimizer::host_state(int index) const {
    return static_cast<float*>(host_state_[static_cast<std::size_t>(index)].data());
}

UpdateParameters ElementwiseOptimizer::parameters_for_step(int64_t step, double mu_product) const {
    UpdateParameters u = settings_.base;
    const double t = (double)step;
    u.lr = (float)lr_;
    u.first_step = step == 1;
    const bool corrected = settings_.bias_correction;
    const double bias_correction1 = corrected ? 1.0 - std::pow((double)u.beta1, t) : 1.0;
    const double bias_correction2 = corrected ? 1.0 - std::pow((double)u.beta2, t) : 1.0;
    u.bias_correction1 = (float)bias_correction1;
    u.bias_correction2 = (float)bias_correction2;
    u.bias_correction2_sqrt = (float)std::sqrt(bias_correction2);
    u.adagrad_lr = (float)(lr_ / (1.0 + (t - 1.0) * settings_.lr_decay));
    if (u.kind == OptimizerKind::nadam) {
        const double beta1 = u.beta1;
        const double mu = beta1 * (1.0 - 0.5 * std::pow(0.96, t * settings_.momentum_decay));
        const double mu_next = beta1 * (1.0 - 0.5 * std::pow(0.96, (t + 1.0) * settings_.momentum_decay));
        const double product = mu_product * mu;
        u.nadam_grad_coefficient = (float)(lr_ * (1.0 - mu) / (1.0 - product));
        u.nadam_momentum_coefficient = (float)(lr_ * mu_next / (1.0 - product * mu_next));
    }
    return u;
}

void ElementwiseOptimizer::rewind_step() {
    Optimizer::rewind_step();
    nadam_mu_product_ = previous_nadam_mu_product_;
}

OptimizerState ElementwiseOptimizer::export_state() const {
    OptimizerState state;
    state.step_count = step_count_;
    state.nadam_mu_product = nadam_mu_product_;
    if (cuda_) {
        cuda_->download(state.buffers, state.segment_norms);
    } else {
        for (int b = 0; b < settings_.state_buffers; ++b)
            state.buffers.emplace_back(host_state(b), host_state(b) + parameter_count_);
        state.segment_norms = host_segment_norms_;
    }
    if (kind_ != OptimizerKind::novograd) state.segment_norms.clear();
    return state;
}

void ElementwiseOptimizer::import_state(const OptimizerState& state) {
    auto mismatch = [&](const std::string& what) { throw std::invalid_argument(name_ + ": import_state: " + what); };
    if ((int)state.buffers.size() != settings_.state_buffers)
        mismatch(std::to_string(state.buffers.size()) + " state buffers given, " +
                 std::to_string(settings_.state_buffers) + " expected");
    for (std::size_t b = 0; b < state.buffers.size(); ++b)
        if (state.buffers[b].size() != parameter_count_)
            mismatch("state buffer " + std::to_string(b) + " has " + std::to_string(state.buffers[b].size()) +
                     " elements, " + std::to_string(parameter_count_) + " expected");
    std::vector<float> norms = state.segment_norms;
    if (kind_ == OptimizerKind::novograd && norms.size() != segments_.size())
        mismatch(std::to_string(norms.size()) + " segment norms given, " + std::to_string(segments_.size()) +
                 " expected");
    norms.resize(segments_.size(), 0.0f);
    step_count_ = state.step_count;
    nadam_mu_product_ = previous_nadam_mu_product_ = state.nadam_mu_product;
    if (cuda_) {
        cuda_->upload(state.buffers, norms);
    } else {
        for (int b = 0; b < settings_.state_buffers; ++b)
            std::copy(state.buffers[b].begin(), state.buffers[b].end(), host_state(b));
        host_segment_norms_ = norms;
    }
}

void ElementwiseOptimizer::step(float* params, const float* grads, const StepOptions& options) {
    ++step_count_;
    UpdateParameters u = parameters_for_step(step_count_, nadam_mu_product_);
    previous_nadam_mu_product_ = nadam_mu_product_;
    if (u.kind == OptimizerKind::nadam) {
        const double t = (double)step_count_;
        nadam_mu_product_ *= (double)u.beta1 * (1.0 - 0.5 * std::pow(0.96, t * settings_.momentum_decay));
    }
    u.grad_scale = options.grad_scale;
    if (backend_ == OptimizerBackend::cpu) {
        step_cpu(u, params, grads, options);
        last_step_launches_ = 0;
    } else {
        last_step_launches_ = cuda_->step(u, backend_ == OptimizerBackend::cuda_fused, params, grads, options);
    }
}

void ElementwiseOptimizer::step_cpu(const UpdateParameters& base, float* params, const float* grads,
                                    const StepOptions& options) {
    if (options.skip_flag && *options.skip_flag != 0) return;
    UpdateParameters u = base;
    float* state[3] = {nullptr, nullptr, nullptr};
    for (int b = 0; b < settings_.state_buffers; ++b) state[b] = host_state(b);
    const int low_precision = (int)options.low_precision;
    const bool needs_norms =
        u.kind == OptimizerKind::lars || u.kind == OptimizerKind::lamb || u.kind == OptimizerKind::novograd;

    const std::size_t segment_count = segments_.size();
    std::vector<double> grad_squares(segment_count, 0.0), param_squares(segment_count, 0.0),
        update_squares(segment_count, 0.0);
    double global_grad_squares = 0.0;
    if (needs_norms) {
        for (std::size_t s = 0; s < segment_count; ++s) {
            const ParameterSegment& seg = segments_[s];
            for (std::size_t i = seg.offset; i < seg.offset + seg.length; ++i) {
                grad_squares[s] += (double)grads[i] * grads[i];
                param_squares[s] += (double)params[i] * params[i];
            }
            global_grad_squares += grad_squares[s];
        }
    }

    if (u.kind == OptimizerKind::lamb) {
        // Phase 1: moments and the update direction (into state 2), then its norms.
        u.phase = 1;
        for (std::size_t s = 0; s < segment_count; ++s) {
            const ParameterSegment& seg = segments_[s];
            SegmentFactors f =
                segment_factors(u, seg.flags, grad_squares[s], param_squares[s], 0.0, global_grad_squares, 0.0f);
            for (std::size_t i = seg.offset; i < seg.offset + seg.length; ++i) {
                update_element(u, f, i, params, grads, state[0], state[1], state[2]);
                update_squares[s] += (double)state[2][i] * state[2][i];
            }
        }
        u.phase = 2;
    }

    for (std::size_t s = 0; s < segment_count; ++s) {
        const ParameterSegment& seg = segments_[s];
        SegmentFactors f = segment_factors(u, seg.flags, grad_squares[s], param_squares[s], update_squares[s],
                                           global_grad_squares, host_segment_norms_[s]);
        for (std::size_t i = seg.offset; i < seg.offset + seg.length; ++i) {
            update_element(u, f, i, params, grads, state[0], state[1], state[2]);
            if (low_precision) store_low_precision(options.low_precision_params, i, params[i], low_precision);
        }
        if (u.kind == OptimizerKind::novograd) host_segment_norms_[s] = f.novograd_norm;
    }
}

}  // namespace ember::optim
