// sync_batchnorm.cpp: batch statistics and their gradients summed over every rank
// (sync_batchnorm.h). Plain loops: this is the reference the CUDA version will match.
#include "engine/dist/sync_batchnorm.h"

#include "engine/nn/parameters.h"
#include "engine/nn/run_context.h"

#include <cmath>

namespace ember::dist {

namespace {
struct ChannelView {
    int64_t samples = 0, channels = 0, spatial = 1;
};

ChannelView view_of(const Tensor& x) {
    ChannelView v;
    v.samples = x.shape[0];
    v.channels = x.shape[1];
    v.spatial = x.rank == 4 ? x.shape[2] * x.shape[3] : 1;
    return v;
}

// Element (n, c, i) of an NCHW (or [N, C]) tensor.
int64_t element(const ChannelView& v, int64_t n, int64_t c, int64_t i) { return (n * v.channels + c) * v.spatial + i; }

void write_gradient(float* target, double value, ops::GradWrite write) {
    *target = write == ops::GradWrite::store ? static_cast<float>(value) : *target + static_cast<float>(value);
}
}  // namespace

SyncBatchNorm::SyncBatchNorm(std::string name, int64_t channels, Communicator& communicator, float momentum,
                             float eps)
    : Layer(std::move(name)), channels_(channels), communicator_(communicator) {
    params_.momentum = momentum;
    params_.eps = eps;
}

nn::TensorShape SyncBatchNorm::output_shape(const nn::TensorShape& input) const {
    if ((input.rank != 2 && input.rank != 4) || input.dims[1] != channels_)
        nn::layer_error(*this, "expects [N, " + std::to_string(channels_) + "(, H, W)], got " + input.describe());
    return input;
}

void SyncBatchNorm::register_parameters(nn::ParameterStore& store) {
    gamma_ = store.add_parameter(name_ + ".weight", {channels_}, nn::ParameterInit::constant(1.0), true);
    beta_ = store.add_parameter(name_ + ".bias", {channels_}, nn::ParameterInit::constant(0.0), true);
    running_mean_ = store.add_state(name_ + ".running_mean", {channels_}, nn::ParameterInit::constant(0.0));
    running_var_ = store.add_state(name_ + ".running_var", {channels_}, nn::ParameterInit::constant(1.0));
}

Tensor SyncBatchNorm::forward(nn::RunContext& ctx, const Tensor& x) {
    output_shape(nn::shape_of(x));
    if (ctx.on_cuda() || x.dtype != DType::f32 || x.layout != Layout::nchw)
        nn::layer_error(*this, "runs on the cpu backend with f32 NCHW activations only, got " + x.describe());
    Tensor y = ctx.allocate(x.dtype, nn::shape_of(x));
    nn::ParameterStore& store = *ctx.parameters;
    const float* gamma = store.parameter(gamma_).as<float>();
    const float* beta = store.parameter(beta_).as<float>();
    const ChannelView v = view_of(x);
    const float* in = x.as<float>();
    float* out = y.as<float>();
    if (!ctx.training) {
        const float* running_mean = store.state(running_mean_).as<float>();
        const float* running_var = store.state(running_var_).as<float>();
        for (int64_t n = 0; n < v.samples; ++n)
            for (int64_t c = 0; c < v.channels; ++c) {
                const double invstd = 1.0 / std::sqrt(static_cast<double>(running_var[c]) + params_.eps);
                for (int64_t i = 0; i < v.spatial; ++i) {
                    const int64_t e = element(v, n, c, i);
                    out[e] = ops::batchnorm_apply(in[e], running_mean[c], static_cast<float>(invstd), gamma[c], beta[c]);
                }
            }
        x_ = Tensor{};
        return y;
    }
    // Pass 1: the global sum and count give the mean.
    std::vector<float> sums(static_cast<std::size_t>(v.channels + 1), 0.0f);
    for (int64_t c = 0; c < v.channels; ++c) {
        double sum = 0.0;
        for (int64_t n = 0; n < v.samples; ++n)
            for (int64_t i = 0; i < v.spatial; ++i) sum += in[element(v, n, c, i)];
        sums[static_cast<std::size_t>(c)] = static_cast<float>(sum);
    }
    sums.back() = static_cast<float>(v.samples * v.spatial);
    communicator_.allreduce_sum(sums.data(), sums.size());
    count_ = sums.back();
    mean_.assign(static_cast<std::size_t>(v.channels), 0.0);
    for (int64_t c = 0; c < v.channels; ++c) mean_[static_cast<std::size_t>(c)] = sums[static_cast<std::size_t>(c)] / count_;
    // Pass 2: squared deviations from the global mean give the (biased) variance.
    std::vector<float> squares(static_cast<std::size_t>(v.channels), 0.0f);
    for (int64_t c = 0; c < v.channels; ++c) {
        double sum = 0.0;
        for (int64_t n = 0; n < v.samples; ++n)
            for (int64_t i = 0; i < v.spatial; ++i) {
                const double d = in[element(v, n, c, i)] - mean_[static_cast<std::size_t>(c)];
                sum += d * d;
            }
        squares[static_cast<std::size_t>(c)] = static_cast<float>(sum);
    }
    communicator_.allreduce_sum(squares.data(), squares.size());
    invstd_.assign(static_cast<std::size_t>(v.channels), 0.0);
    float* running_mean = store.state(running_mean_).as<float>();
    float* running_var = store.state(running_var_).as<float>();
    for (int64_t c = 0; c < v.channels; ++c) {
        const std::size_t k = static_cast<std::size_t>(c);
        const double variance = squares[k] / count_;
        invstd_[k] = 1.0 / std::sqrt(variance + params_.eps);
        for (int64_t n = 0; n < v.samples; ++n)
            for (int64_t i = 0; i < v.spatial; ++i) {
                const int64_t e = element(v, n, c, i);
                out[e] = static_cast<float>((in[e] - mean_[k]) * invstd_[k] * gamma[c] + beta[c]);
            }
        if (!ctx.recomputing) {  // activation checkpointing: the statistics move once per step
            const double m = params_.momentum;
            const double unbiased = count_ > 1 ? squares[k] / (count_ - 1) : variance;
            running_mean[c] = static_cast<float>((1 - m) * running_mean[c] + m * mean_[k]);
            running_var[c] = static_cast<float>((1 - m) * running_var[c] + m * unbiased);
        }
    }
    x_ = x;
    return y;
}

Tensor SyncBatchNorm::backward(nn::RunContext& ctx, const Tensor& dy, bool need_input_grad) {
    if (!x_.defined()) nn::layer_error(*this, "backward without a training forward");
    nn::ParameterStore& store = *ctx.parameters;
    const ChannelView v = view_of(x_);
    const float* in = x_.as<float>();
    const float* grad_out = dy.as<float>();
    // Local sums of dy and dy * xhat: this rank's parameter gradients, and (all-reduced)
    // the input gradient's terms.
    std::vector<float> sums(static_cast<std::size_t>(2 * v.channels), 0.0f);
    for (int64_t c = 0; c < v.channels; ++c) {
        const std::size_t k = static_cast<std::size_t>(c);
        double sum_dy = 0.0, sum_dy_xhat = 0.0;
        for (int64_t n = 0; n < v.samples; ++n)
            for (int64_t i = 0; i < v.spatial; ++i) {
                const int64_t e = element(v, n, c, i);
                sum_dy += grad_out[e];
                sum_dy_xhat += grad_out[e] * (in[e] - mean_[k]) * invstd_[k];
            }
        write_gradient(store.gradient(gamma_).as<float>() + c, sum_dy_xhat, ctx.parameter_write);
        write_gradient(store.gradient(beta_).as<float>() + c, sum_dy, ctx.parameter_write);
        sums[k] = static_cast<float>(sum_dy);
        sums[k + static_cast<std::size_t>(v.channels)] = static_cast<float>(sum_dy_xhat);
    }
    if (!need_input_grad) return Tensor{};
    communicator_.allreduce_sum(sums.data(), sums.size());
    Tensor dx = ctx.allocate(dy.dtype, nn::shape_of(x_));
    float* grad_in = dx.as<float>();
    const float* gamma = store.parameter(gamma_).as<float>();
    for (int64_t c = 0; c < v.channels; ++c) {
        const std::size_t k = static_cast<std::size_t>(c);
        const double sum_dy = sums[k], sum_dy_xhat = sums[k + static_cast<std::size_t>(v.channels)];
        const double scale = gamma[c] * invstd_[k] / count_;
        for (int64_t n = 0; n < v.samples; ++n)
            for (int64_t i = 0; i < v.spatial; ++i) {
                const int64_t e = element(v, n, c, i);
                const double xhat = (in[e] - mean_[k]) * invstd_[k];
                grad_in[e] = static_cast<float>(scale * (count_ * grad_out[e] - sum_dy - xhat * sum_dy_xhat));
            }
    }
    return dx;
}

}  // namespace ember::dist
