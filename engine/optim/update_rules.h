// update_rules.h: the per-element arithmetic of every elementwise optimizer, as
// __host__ __device__ functions. The CPU reference (optimizer_cpu.cpp) and the CUDA
// kernels (optimizer_cuda.cu) both call update_element(), so the CPU tests exercise
// the exact arithmetic the GPU runs. The equations, with their sources, are written
// out in docs/optimizers.md.
//
// A step is computed in three layers:
//   1. the host fills UpdateParameters once per step (lr, bias corrections, ...);
//   2. per segment, segment_factors() turns that segment's squared norms (needed by
//      LARS, LAMB and NovoGrad) into SegmentFactors;
//   3. per element, update_element() updates one parameter and its state.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define EMBER_OPTIM_HD __host__ __device__
#else
#define EMBER_OPTIM_HD
#endif

namespace ember::optim {

enum class OptimizerKind : int32_t {
    sgd = 0,
    adagrad,
    adadelta,
    rmsprop,
    adam,
    adamw,
    nadam,
    adamax,
    lamb,
    lars,
    novograd,
    lbfgs,
};

// Bits of ParameterSegment::flags.
constexpr uint32_t kSegmentNoWeightDecay = 1u;

// Everything one step of one optimizer needs, computed on the host. Plain floats and
// ints so it can be passed by value to a kernel.
struct UpdateParameters {
    OptimizerKind kind = OptimizerKind::sgd;
    int32_t phase = 0;       // LAMB: 1 = moments + update, 2 = apply the trust ratio
    int32_t first_step = 0;  // 1 on the first step (SGD momentum buffer, NovoGrad norm)
    int32_t maximize = 0;
    float grad_scale = 1.0f;  // gradients are multiplied by this first (1 / loss scale)

    float lr = 0.0f;
    float weight_decay = 0.0f;  // per segment, replaced by 0 where kSegmentNoWeightDecay
    float eps = 0.0f;

    // SGD, RMSprop, LARS
    float momentum = 0.0f;
    float dampening = 0.0f;
    int32_t nesterov = 0;
    // RMSprop (alpha), Adadelta (rho)
    float alpha = 0.0f;
    int32_t centered = 0;
    // Adagrad: lr / (1 + (t - 1) lr_decay)
    float adagrad_lr = 0.0f;

    // Adam family, LAMB, NovoGrad
    float beta1 = 0.0f;
    float beta2 = 0.0f;
    float bias_correction1 = 1.0f;       // 1 - beta1^t (1 when bias correction is off)
    float bias_correction2 = 1.0f;       // 1 - beta2^t
    float bias_correction2_sqrt = 1.0f;  // sqrt(1 - beta2^t)
    int32_t amsgrad = 0;
    int32_t decoupled_weight_decay = 0;  // AdamW, NAdam(decoupled), LAMB adam_w_mode
    // NAdam: the two coefficients of the update (see docs/optimizers.md)
    float nadam_grad_coefficient = 0.0f;
    float nadam_momentum_coefficient = 0.0f;

    // LAMB / NovoGrad (Apex)
    float beta3 = 1.0f;          // 1 - beta1 with grad averaging, else 1
    float max_grad_norm = 0.0f;  // LAMB: global clipping threshold, <= 0 disables
    int32_t use_nvlamb = 0;
    int32_t reg_inside_moment = 0;
    int32_t init_zero = 0;

    // LARS (Apex LARC around SGD)
    float trust_coefficient = 0.0f;
    int32_t lars_clip = 0;
};

// Per-segment quantities derived from norms. grad_sum_squares etc. are sums of squares
// over the segment (gradients unscaled: grad_scale is applied here).
struct SegmentFactors {
    float weight_decay = 0.0f;
    float lars_scale = 1.0f;         // LARS: adaptive lr multiplying the gradient
    int32_t lars_adapt = 0;          // LARS: 0 when a norm is zero (gradient left as is)
    float lamb_grad_divisor = 1.0f;  // LAMB: global gradient clipping divisor
    float lamb_ratio = 0.0f;         // LAMB phase 2: lr * trust ratio
    float novograd_norm = 0.0f;      // NovoGrad: this step's blended per-segment grad norm
};

EMBER_OPTIM_HD inline SegmentFactors segment_factors(const UpdateParameters& u, uint32_t flags, double grad_sum_squares,
                                                     double param_sum_squares, double update_sum_squares,
                                                     double global_grad_sum_squares, float previous_novograd_norm) {
    SegmentFactors f;
    f.weight_decay = (flags & kSegmentNoWeightDecay) ? 0.0f : u.weight_decay;
    const double scale2 = (double)u.grad_scale * (double)u.grad_scale;
    if (u.kind == OptimizerKind::lars) {
        const float param_norm = (float)sqrt(param_sum_squares);
        const float grad_norm = (float)sqrt(grad_sum_squares * scale2);
        if (param_norm != 0.0f && grad_norm != 0.0f) {
            float adaptive = u.trust_coefficient * param_norm / (grad_norm + param_norm * f.weight_decay + u.eps);
            if (u.lars_clip) adaptive = fminf(adaptive / u.lr, 1.0f);
            f.lars_scale = adaptive;
            f.lars_adapt = 1;
        }
    } else if (u.kind == OptimizerKind::lamb) {
        const float global_norm = (float)sqrt(global_grad_sum_squares * scale2);
        if (u.max_grad_norm > 0.0f && global_norm > u.max_grad_norm)
            f.lamb_grad_divisor = global_norm / u.max_grad_norm;
        f.lamb_ratio = u.lr;
        if (u.use_nvlamb || f.weight_decay != 0.0f) {
            const float param_norm = (float)sqrt(param_sum_squares);
            const float update_norm = (float)sqrt(update_sum_squares);
            if (param_norm != 0.0f && update_norm != 0.0f) f.lamb_ratio = u.lr * (param_norm / update_norm);
        }
    } else if (u.kind == OptimizerKind::novograd) {
        const float grad_norm2 = (float)(grad_sum_squares * scale2);
        // Apex keeps the norm (not its square) and blends in the squared domain; the
        // first step starts from this step's norm unless init_zero.
        const float previous = (u.first_step && !u.init_zero) ? sqrtf(grad_norm2) : previous_novograd_norm;
        f.novograd_norm = sqrtf(u.beta2 * previous * previous + (1.0f - u.beta2) * grad_norm2);
    }
    return f;
}

// SGD's step direction (also LARS's, on the adapted gradient): the gradient itself
// without momentum, else the momentum buffer (updated in place) with optional dampening
// and Nesterov, as torch.optim.SGD. `buffers` is null when there is no momentum.
EMBER_OPTIM_HD inline float momentum_direction(const UpdateParameters& u, float g, float* buffers, std::size_t i) {
    if (u.momentum == 0.0f) return g;
    const float buf = u.first_step ? g : u.momentum * buffers[i] + (1.0f - u.dampening) * g;
    buffers[i] = buf;
    return u.nesterov ? g + u.momentum * buf : buf;
}

// Adam's and NAdam's first step: weight decay (decoupled: on the parameter; else L2,
// on the gradient), then the moments m and v updated in state0 and state1.
struct AdamMoments {
    float m, v;
};
EMBER_OPTIM_HD inline AdamMoments adam_moments(const UpdateParameters& u, float wd, float& p, float& g, float* state0,
                                               float* state1, std::size_t i) {
    if (wd != 0.0f) {
        if (u.decoupled_weight_decay)
            p *= 1.0f - u.lr * wd;
        else
            g += wd * p;
    }
    const float m = u.beta1 * state0[i] + (1.0f - u.beta1) * g;
    const float v = u.beta2 * state1[i] + (1.0f - u.beta2) * g * g;
    state0[i] = m;
    state1[i] = v;
    return {m, v};
}

// Updates params[i] and its state. state0..state2 are the optimizer's state buffers
// (null where unused); their meaning per optimizer is listed in optimizer.h.
EMBER_OPTIM_HD inline void update_element(const UpdateParameters& u, const SegmentFactors& f, std::size_t i,
                                          float* params, const float* grads, float* state0, float* state1,
                                          float* state2) {
    float p = params[i];
    float g = grads[i] * u.grad_scale;
    if (u.maximize) g = -g;
    const float wd = f.weight_decay;

    switch (u.kind) {
        case OptimizerKind::sgd: {
            if (wd != 0.0f) g += wd * p;
            p -= u.lr * momentum_direction(u, g, state0, i);
            break;
        }
        case OptimizerKind::adagrad: {
            if (wd != 0.0f) g += wd * p;
            float sum = state0[i] + g * g;
            state0[i] = sum;
            p -= u.adagrad_lr * g / (sqrtf(sum) + u.eps);
            break;
        }
        case OptimizerKind::adadelta: {
            if (wd != 0.0f) g += wd * p;
            float square_avg = u.alpha * state0[i] + (1.0f - u.alpha) * g * g;
            float std_dev = sqrtf(square_avg + u.eps);
            float delta = sqrtf(state1[i] + u.eps) / std_dev * g;
            state0[i] = square_avg;
            state1[i] = u.alpha * state1[i] + (1.0f - u.alpha) * delta * delta;
            p -= u.lr * delta;
            break;
        }
        case OptimizerKind::rmsprop: {
            if (wd != 0.0f) g += wd * p;
            float square_avg = u.alpha * state0[i] + (1.0f - u.alpha) * g * g;
            state0[i] = square_avg;
            float avg;
            if (u.centered) {
                float grad_avg = u.alpha * state1[i] + (1.0f - u.alpha) * g;
                state1[i] = grad_avg;
                avg = sqrtf(square_avg - grad_avg * grad_avg) + u.eps;
            } else {
                avg = sqrtf(square_avg) + u.eps;
            }
            if (u.momentum > 0.0f) {
                float buf = u.momentum * state2[i] + g / avg;
                state2[i] = buf;
                p -= u.lr * buf;
            } else {
                p -= u.lr * g / avg;
            }
            break;
        }
        case OptimizerKind::adam:
        case OptimizerKind::adamw: {
            const auto [m, v] = adam_moments(u, wd, p, g, state0, state1, i);
            float v_used = v;
            if (u.amsgrad) {
                v_used = fmaxf(state2[i], v);
                state2[i] = v_used;
            }
            float denom = sqrtf(v_used) / u.bias_correction2_sqrt + u.eps;
            p -= (u.lr / u.bias_correction1) * m / denom;
            break;
        }
        case OptimizerKind::nadam: {
            const auto [m, v] = adam_moments(u, wd, p, g, state0, state1, i);
            float denom = sqrtf(v / u.bias_correction2) + u.eps;
            p -= u.nadam_grad_coefficient * g / denom;
            p -= u.nadam_momentum_coefficient * m / denom;
            break;
        }
        case OptimizerKind::adamax: {
            if (wd != 0.0f) g += wd * p;
            float m = u.beta1 * state0[i] + (1.0f - u.beta1) * g;
            float exp_inf = fmaxf(u.beta2 * state1[i], fabsf(g) + u.eps);
            state0[i] = m;
            state1[i] = exp_inf;
            p -= (u.lr / u.bias_correction1) * m / exp_inf;
            break;
        }
        case OptimizerKind::lamb: {
            if (u.phase == 1) {
                // state2 holds the update direction between the two phases.
                float scaled = g / f.lamb_grad_divisor;
                if (!u.decoupled_weight_decay) scaled += wd * p;
                float m = u.beta1 * state0[i] + u.beta3 * scaled;
                float v = u.beta2 * state1[i] + (1.0f - u.beta2) * scaled * scaled;
                state0[i] = m;
                state1[i] = v;
                float update = (m / u.bias_correction1) / (sqrtf(v / u.bias_correction2) + u.eps);
                if (u.decoupled_weight_decay) update += wd * p;
                state2[i] = update;
                return;  // phase 1 leaves the parameter alone
            }
            p -= f.lamb_ratio * state2[i];
            break;
        }
        case OptimizerKind::lars: {
            if (f.lars_adapt) g = (g + wd * p) * f.lars_scale;
            p -= u.lr * momentum_direction(u, g, state0, i);
            break;
        }
        case OptimizerKind::novograd: {
            float denom = f.novograd_norm / u.bias_correction2_sqrt + u.eps;
            if (u.reg_inside_moment) {
                float scaled = g / denom + wd * p;
                float m = u.beta1 * state0[i] + u.beta3 * scaled;
                state0[i] = m;
                p -= u.lr * (m / u.bias_correction1);
            } else {
                float m = u.beta1 * state0[i] + u.beta3 * g;
                state0[i] = m;
                p -= u.lr * ((m / u.bias_correction1) / denom + wd * p);
            }
            break;
        }
        case OptimizerKind::lbfgs:
            break;  // not elementwise: see lbfgs.h
    }
    params[i] = p;
}

}  // namespace ember::optim
