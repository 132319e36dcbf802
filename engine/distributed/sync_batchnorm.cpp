// sync_batchnorm.cpp: batch statistics and their gradients summed over every rank
// (sync_batchnorm.h). Plain loops: this is the reference a CUDA version will match.
#include "engine/distributed/sync_batchnorm.h"

#include "engine/nn/run_context.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace ember::distributed {

namespace {

// Element (n, c, i) of an (N, C, H, W) tensor in either layout, i = h * W + w, or of [N, C].
struct ChannelView {
    int64_t samples = 0, channels = 0, spatial = 1;
    bool channels_last = false;
    int64_t element(int64_t n, int64_t c, int64_t i) const {
        return channels_last ? (n * spatial + i) * channels + c : (n * channels + c) * spatial + i;
    }
};

ChannelView view_of(const Tensor& x, const char* what) {
    if (x.device != Device::cpu || x.dtype != DType::f32)
        throw std::invalid_argument(std::string("SyncBatchNorm ") + what +
                                    ": runs on the cpu backend with f32 tensors only (a CUDA version is not "
                                    "written yet), got " +
                                    x.describe());
    ChannelView v;
    v.samples = x.shape[0];
    v.channels = x.shape[1];
    v.spatial = x.rank == 4 ? x.shape[2] * x.shape[3] : 1;
    v.channels_last = x.rank == 4 && x.layout == Layout::nhwc;
    return v;
}

void write(float* target, double value, ops::GradWrite mode) {
    *target = mode == ops::GradWrite::store ? static_cast<float>(value) : *target + static_cast<float>(value);
}

}  // namespace

void BatchNormSync::forward_train(const Tensor& x, const Tensor& gamma_tensor, const Tensor& beta_tensor,
                                  const Tensor& y, const Tensor& running_mean_tensor, const Tensor& running_var_tensor,
                                  const Tensor& save_mean, const Tensor& save_invstd,
                                  const ops::BatchNormParams& params) {
    const ChannelView v = view_of(x, "forward");
    view_of(save_mean, "statistics");
    const float* in = x.as<float>();
    float* out = y.as<float>();
    const float* gamma = gamma_tensor.as<float>();
    const float* beta = beta_tensor.as<float>();
    float* running_mean = running_mean_tensor.as<float>();
    float* running_var = running_var_tensor.as<float>();
    float* mean = save_mean.as<float>();
    float* invstd = save_invstd.as<float>();
    const std::size_t channels = static_cast<std::size_t>(v.channels);

    // Pass 1: the global sum and count give the mean.
    std::vector<float> sums(channels + 1, 0.0f);
    for (int64_t c = 0; c < v.channels; ++c) {
        double sum = 0.0;
        for (int64_t n = 0; n < v.samples; ++n)
            for (int64_t i = 0; i < v.spatial; ++i) sum += in[v.element(n, c, i)];
        sums[static_cast<std::size_t>(c)] = static_cast<float>(sum);
    }
    sums.back() = static_cast<float>(v.samples * v.spatial);
    communicator_.allreduce_sum(sums.data(), sums.size());
    const double count = sums.back();
    for (std::size_t c = 0; c < channels; ++c) mean[c] = static_cast<float>(sums[c] / count);
    // Pass 2: squared deviations from the global mean give the (biased) variance.
    std::vector<float> squares(channels, 0.0f);
    for (int64_t c = 0; c < v.channels; ++c) {
        double sum = 0.0;
        for (int64_t n = 0; n < v.samples; ++n)
            for (int64_t i = 0; i < v.spatial; ++i) {
                const double d = static_cast<double>(in[v.element(n, c, i)]) - mean[c];
                sum += d * d;
            }
        squares[static_cast<std::size_t>(c)] = static_cast<float>(sum);
    }
    communicator_.allreduce_sum(squares.data(), squares.size());
    for (int64_t c = 0; c < v.channels; ++c) {
        const std::size_t k = static_cast<std::size_t>(c);
        const double variance = squares[k] / count;
        invstd[k] = static_cast<float>(1.0 / std::sqrt(variance + params.eps));
        for (int64_t n = 0; n < v.samples; ++n)
            for (int64_t i = 0; i < v.spatial; ++i) {
                const int64_t e = v.element(n, c, i);
                out[e] = ops::batchnorm_apply(in[e], mean[k], invstd[k], gamma[c], beta[c]);
            }
        // PyTorch's convention: the running variance is the unbiased one.
        const double m = params.momentum;
        const double unbiased = count > 1 ? squares[k] / (count - 1) : variance;
        running_mean[c] = static_cast<float>((1 - m) * running_mean[c] + m * mean[k]);
        running_var[c] = static_cast<float>((1 - m) * running_var[c] + m * unbiased);
    }
}

void BatchNormSync::backward(const Tensor& x, const Tensor& dy, const Tensor& gamma_tensor, const Tensor& save_mean,
                             const Tensor& save_invstd, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta,
                             ops::GradWrite input_write, ops::GradWrite param_write) {
    const ChannelView v = view_of(x, "backward");
    view_of(dy, "backward");
    const float* in = x.as<float>();
    const float* grad_out = dy.as<float>();
    const float* gamma = gamma_tensor.as<float>();
    const float* mean = save_mean.as<float>();
    const float* invstd = save_invstd.as<float>();
    const std::size_t channels = static_cast<std::size_t>(v.channels);
    // Local sums of dy and dy * xhat: this rank's parameter gradients, and (all-reduced,
    // with the sample count) the input gradient's terms.
    std::vector<float> sums(2 * channels + 1, 0.0f);
    for (int64_t c = 0; c < v.channels; ++c) {
        const std::size_t k = static_cast<std::size_t>(c);
        double sum_dy = 0.0, sum_dy_xhat = 0.0;
        for (int64_t n = 0; n < v.samples; ++n)
            for (int64_t i = 0; i < v.spatial; ++i) {
                const int64_t e = v.element(n, c, i);
                sum_dy += grad_out[e];
                sum_dy_xhat += grad_out[e] * (in[e] - mean[k]) * invstd[k];
            }
        write(dgamma.as<float>() + c, sum_dy_xhat, param_write);
        write(dbeta.as<float>() + c, sum_dy, param_write);
        sums[k] = static_cast<float>(sum_dy);
        sums[k + channels] = static_cast<float>(sum_dy_xhat);
    }
    sums.back() = static_cast<float>(v.samples * v.spatial);
    communicator_.allreduce_sum(sums.data(), sums.size());
    const double count = sums.back();
    float* grad_in = dx.as<float>();
    for (int64_t c = 0; c < v.channels; ++c) {
        const std::size_t k = static_cast<std::size_t>(c);
        const double sum_dy = sums[k], sum_dy_xhat = sums[k + channels];
        const double scale = gamma[c] * static_cast<double>(invstd[k]) / count;
        for (int64_t n = 0; n < v.samples; ++n)
            for (int64_t i = 0; i < v.spatial; ++i) {
                const int64_t e = v.element(n, c, i);
                const double xhat = (in[e] - mean[k]) * static_cast<double>(invstd[k]);
                write(grad_in + e, scale * (count * grad_out[e] - sum_dy - xhat * sum_dy_xhat), input_write);
            }
    }
}

SyncBatchNorm::SyncBatchNorm(std::string name, int64_t channels, Communicator& communicator, float momentum, float eps)
    : Layer(name), norm_(name, channels, momentum, eps), sync_(communicator) {}

nn::TensorShape SyncBatchNorm::output_shape(const nn::TensorShape& input) const {
    return norm_.output_shape(input);
}

void SyncBatchNorm::register_parameters(nn::ParameterStore& store) {
    norm_.register_parameters(store);
}

Tensor SyncBatchNorm::forward(nn::RunContext& ctx, const Tensor& x) {
    nn::BatchNormSynchronizer* previous = ctx.batchnorm_sync;
    ctx.batchnorm_sync = &sync_;
    try {
        Tensor y = norm_.forward(ctx, x);
        ctx.batchnorm_sync = previous;
        return y;
    } catch (...) {
        ctx.batchnorm_sync = previous;
        throw;
    }
}

Tensor SyncBatchNorm::backward(nn::RunContext& ctx, const Tensor& dy, bool need_input_grad) {
    nn::BatchNormSynchronizer* previous = ctx.batchnorm_sync;
    ctx.batchnorm_sync = &sync_;
    try {
        Tensor dx = norm_.backward(ctx, dy, need_input_grad);
        ctx.batchnorm_sync = previous;
        return dx;
    } catch (...) {
        ctx.batchnorm_sync = previous;
        throw;
    }
}

}  // namespace ember::distributed
