// conv_layers.cpp: Conv2d, BatchNorm, MaxPool2d, GlobalAvgPool, BasicBlock.
#include "engine/nn/conv_layers.h"

#include "engine/ops/dispatch.h"

#include <cmath>
#include <initializer_list>

namespace ember::nn {

// ---- Conv2d -------------------------------------------------------------------------

Conv2d::Conv2d(std::string name, int64_t in_channels, int64_t out_channels, int kernel, int stride, int padding,
               bool bias)
    : Layer(std::move(name)), in_(in_channels), out_(out_channels), kernel_(kernel), has_bias_(bias) {
    params_.stride_h = params_.stride_w = stride;
    params_.pad_h = params_.pad_w = padding;
}

TensorShape Conv2d::output_shape(const TensorShape& input) const {
    if (input.rank != 4 || input.dims[1] != in_)
        layer_error(*this, "expects [N, " + std::to_string(in_) + ", H, W], got " + input.describe());
    int64_t p = ops::conv_output_size(input.dims[2], kernel_, params_.stride_h, params_.pad_h, 1);
    int64_t q = ops::conv_output_size(input.dims[3], kernel_, params_.stride_w, params_.pad_w, 1);
    if (p <= 0 || q <= 0) layer_error(*this, "input " + input.describe() + " is smaller than the kernel");
    return make_shape({input.dims[0], out_, p, q});
}

void Conv2d::register_parameters(ParameterStore& store) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_ * kernel_ * kernel_));
    weight_ = store.add_parameter(name_ + ".weight", {out_, in_, kernel_, kernel_}, ParameterInit::uniform(bound));
    if (has_bias_) bias_ = store.add_parameter(name_ + ".bias", {out_}, ParameterInit::uniform(bound), true);
}

// The flat buffer keeps every filter KCRS (nn.Conv2d's order), whatever the model's
// layout, so checkpoints and optimizer state do not depend on it. A channels-last
// forward reorders the filter to KRSC (what nhwc cuDNN convolutions expect) at the
// layer boundary: one small kernel per conv, against a full activation tensor saved.
Tensor Conv2d::filter_in_layout(RunContext& ctx, Layout layout) {
    Tensor weight = ctx.parameters->compute_parameter(weight_);
    if (layout == Layout::nchw) return weight;
    Tensor reordered = ctx.allocate(weight.dtype, shape_of(weight), layout);
    ops::convert_layout(ctx, weight, reordered);
    return reordered;
}

Tensor Conv2d::forward(RunContext& ctx, const Tensor& x) {
    Tensor y = ctx.allocate(x.dtype, output_shape(shape_of(x)), x.layout);
    Tensor b = has_bias_ ? ctx.parameters->compute_parameter(bias_) : Tensor{};
    Tensor filter = filter_in_layout(ctx, x.layout);
    ops::conv2d_forward(ctx, x, filter, b, y, params_);
    x_ = ctx.training ? x : Tensor{};
    filter_ = ctx.training ? filter : Tensor{};
    return y;
}

Tensor Conv2d::backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) {
    if (!x_.defined()) layer_error(*this, "backward without a training forward");
    if (dy.layout != x_.layout) layer_error(*this, "gradient layout differs from the input's");
    Tensor dw = ctx.parameters->gradient(weight_);
    if (x_.layout == Layout::nhwc) {
        // cuDNN writes the KRSC filter gradient in the activation dtype; the reorder to
        // the canonical KCRS also widens it to the gradient buffer's dtype.
        Tensor krsc = ctx.allocate(x_.dtype, shape_of(dw), Layout::nhwc);
        ops::conv2d_backward_filter(ctx, x_, dy, krsc, params_, ops::GradWrite::store);
        if (ctx.parameter_write == ops::GradWrite::store) {
            ops::convert_layout(ctx, krsc, dw);
        } else {
            Tensor kcrs = ctx.allocate(dw.dtype, shape_of(dw));
            ops::convert_layout(ctx, krsc, kcrs);
            ops::accumulate_grad(ctx, kcrs, dw, ops::GradWrite::accumulate);
        }
    } else if (dw.dtype == x_.dtype) {
        ops::conv2d_backward_filter(ctx, x_, dy, dw, params_, ctx.parameter_write);
    } else {
        // AMP: cuDNN computes the filter gradient in the activation dtype; it is then
        // widened into the fp32 gradient buffer (same on cpu, so both round alike).
        Tensor low = ctx.allocate(x_.dtype, shape_of(dw));
        ops::conv2d_backward_filter(ctx, x_, dy, low, params_, ops::GradWrite::store);
        ops::accumulate_grad(ctx, low, dw, ctx.parameter_write);
    }
    if (has_bias_) ops::conv2d_backward_bias(ctx, dy, ctx.parameters->gradient(bias_), ctx.parameter_write);
    if (!need_input_grad) return {};
    Tensor dx = ctx.allocate(dy.dtype, shape_of(x_), x_.layout);
    ops::conv2d_backward_data(ctx, filter_, dy, dx, params_, ops::GradWrite::store);
    return dx;
}

// ---- BatchNorm ----------------------------------------------------------------------

BatchNorm::BatchNorm(std::string name, int64_t channels, float momentum, float eps)
    : Layer(std::move(name)), channels_(channels) {
    params_.momentum = momentum;
    params_.eps = eps;
}

TensorShape BatchNorm::output_shape(const TensorShape& input) const {
    if ((input.rank != 2 && input.rank != 4) || input.dims[1] != channels_)
        layer_error(*this, "expects [N, " + std::to_string(channels_) + "(, H, W)], got " + input.describe());
    return input;
}

void BatchNorm::register_parameters(ParameterStore& store) {
    gamma_ = store.add_parameter(name_ + ".weight", {channels_}, ParameterInit::constant(1.0), true);
    beta_ = store.add_parameter(name_ + ".bias", {channels_}, ParameterInit::constant(0.0), true);
    running_mean_ = store.add_state(name_ + ".running_mean", {channels_}, ParameterInit::constant(0.0));
    running_var_ = store.add_state(name_ + ".running_var", {channels_}, ParameterInit::constant(1.0));
}

Tensor BatchNorm::forward(RunContext& ctx, const Tensor& x) {
    output_shape(shape_of(x));
    Tensor y = ctx.allocate(x.dtype, shape_of(x), x.layout);
    ParameterStore& store = *ctx.parameters;
    Tensor gamma = store.parameter(gamma_), beta = store.parameter(beta_);
    Tensor running_mean = store.state(running_mean_), running_var = store.state(running_var_);
    if (!ctx.training) {
        ops::batchnorm_forward_eval(ctx, x, gamma, beta, running_mean, running_var, y, params_);
        x_ = Tensor{};
        return y;
    }
    if (ctx.recomputing) {
        // The first forward already updated the running statistics; the recomputation
        // updates throw-away copies so they move exactly once per step.
        Tensor mean_copy = ctx.allocate(running_mean.dtype, shape_of(running_mean));
        Tensor var_copy = ctx.allocate(running_var.dtype, shape_of(running_var));
        ops::accumulate_grad(ctx, running_mean, mean_copy, ops::GradWrite::store);
        ops::accumulate_grad(ctx, running_var, var_copy, ops::GradWrite::store);
        running_mean = mean_copy;
        running_var = var_copy;
    }
    save_mean_ = ctx.allocate(store.master_dtype(), make_shape({channels_}));
    save_invstd_ = ctx.allocate(store.master_dtype(), make_shape({channels_}));
    if (ctx.batchnorm_sync)
        ctx.batchnorm_sync->forward_train(x, gamma, beta, y, running_mean, running_var, save_mean_, save_invstd_,
                                          params_);
    else
        ops::batchnorm_forward_train(ctx, x, gamma, beta, y, running_mean, running_var, save_mean_, save_invstd_,
                                     params_);
    x_ = x;
    return y;
}

Tensor BatchNorm::backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) {
    if (!x_.defined()) layer_error(*this, "backward without a training forward");
    ParameterStore& store = *ctx.parameters;
    // The op always produces dx; without a consumer it lands in a scratch tensor.
    Tensor dx = ctx.allocate(dy.dtype, shape_of(x_), x_.layout);
    if (ctx.batchnorm_sync)
        ctx.batchnorm_sync->backward(x_, dy, store.parameter(gamma_), save_mean_, save_invstd_, dx,
                                     store.gradient(gamma_), store.gradient(beta_), ops::GradWrite::store,
                                     ctx.parameter_write);
    else
        ops::batchnorm_backward(ctx, x_, dy, store.parameter(gamma_), save_mean_, save_invstd_, dx,
                                store.gradient(gamma_), store.gradient(beta_), ops::GradWrite::store,
                                ctx.parameter_write);
    return need_input_grad ? dx : Tensor{};
}

// ---- MaxPool2d ----------------------------------------------------------------------

MaxPool2d::MaxPool2d(std::string name, int kernel, int stride) : Layer(std::move(name)) {
    params_.kernel_h = params_.kernel_w = kernel;
    params_.stride_h = params_.stride_w = stride;
}

TensorShape MaxPool2d::output_shape(const TensorShape& input) const {
    if (input.rank != 4) layer_error(*this, "expects [N, C, H, W], got " + input.describe());
    int64_t p = (input.dims[2] - params_.kernel_h) / params_.stride_h + 1;
    int64_t q = (input.dims[3] - params_.kernel_w) / params_.stride_w + 1;
    if (p <= 0 || q <= 0) layer_error(*this, "input " + input.describe() + " is smaller than the window");
    return make_shape({input.dims[0], input.dims[1], p, q});
}

Tensor MaxPool2d::forward(RunContext& ctx, const Tensor& x) {
    input_shape_ = shape_of(x);
    input_layout_ = x.layout;
    TensorShape out = output_shape(input_shape_);
    Tensor y = ctx.allocate(x.dtype, out, x.layout);
    Tensor argmax = ctx.allocate(DType::i32, out, x.layout);  // indexed like y
    ops::maxpool2d_forward(ctx, x, y, argmax, params_);
    argmax_ = ctx.training ? argmax : Tensor{};
    return y;
}

Tensor MaxPool2d::backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) {
    if (!need_input_grad) return {};
    if (dy.layout != input_layout_) layer_error(*this, "gradient layout differs from the input's");
    Tensor dx = ctx.allocate(dy.dtype, input_shape_, input_layout_);
    ops::maxpool2d_backward(ctx, dy, argmax_, dx, params_, ops::GradWrite::store);
    return dx;
}

// ---- GlobalAvgPool ------------------------------------------------------------------

TensorShape GlobalAvgPool::output_shape(const TensorShape& input) const {
    if (input.rank != 4) layer_error(*this, "expects [N, C, H, W], got " + input.describe());
    return make_shape({input.dims[0], input.dims[1]});
}

namespace {
ops::Pool2dParams whole_plane(const TensorShape& input) {
    ops::Pool2dParams p;
    p.kernel_h = p.stride_h = static_cast<int>(input.dims[2]);
    p.kernel_w = p.stride_w = static_cast<int>(input.dims[3]);
    return p;
}
}  // namespace

Tensor GlobalAvgPool::forward(RunContext& ctx, const Tensor& x) {
    input_shape_ = shape_of(x);
    input_layout_ = x.layout;
    TensorShape out = output_shape(input_shape_);
    // [N, C, 1, 1] sits in memory as [N, C] in either layout, so the view below holds.
    Tensor y = ctx.allocate(x.dtype, make_shape({out.dims[0], out.dims[1], 1, 1}), x.layout);
    ops::avgpool2d_forward(ctx, x, y, whole_plane(input_shape_));
    return make_tensor(y.data, y.dtype, {out.dims[0], out.dims[1]}, y.device);
}

Tensor GlobalAvgPool::backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) {
    if (!need_input_grad) return {};
    Tensor dy4 = make_tensor(dy.data, dy.dtype, {dy.shape[0], dy.shape[1], 1, 1}, dy.device, input_layout_);
    Tensor dx = ctx.allocate(dy.dtype, input_shape_, input_layout_);
    ops::avgpool2d_backward(ctx, dy4, dx, whole_plane(input_shape_), ops::GradWrite::store);
    return dx;
}

// ---- BasicBlock ---------------------------------------------------------------------

BasicBlock::BasicBlock(std::string name, int64_t in_channels, int64_t out_channels, int stride, bool conv_bias)
    : Layer(name),
      conv1_(name + ".conv1", in_channels, out_channels, 3, stride, 1, conv_bias),
      conv2_(name + ".conv2", out_channels, out_channels, 3, 1, 1, conv_bias),
      bn1_(name + ".bn1", out_channels),
      bn2_(name + ".bn2", out_channels),
      relu1_(name + ".relu1") {
    if (stride != 1 || in_channels != out_channels) {
        shortcut_conv_ =
            std::make_unique<Conv2d>(name + ".shortcut.conv", in_channels, out_channels, 1, stride, 0, conv_bias);
        shortcut_bn_ = std::make_unique<BatchNorm>(name + ".shortcut.bn", out_channels);
    }
}

TensorShape BasicBlock::output_shape(const TensorShape& input) const {
    return conv2_.output_shape(conv1_.output_shape(input));
}

void BasicBlock::register_parameters(ParameterStore& store) {
    for (Layer* layer : std::initializer_list<Layer*>{&conv1_, &bn1_, &conv2_, &bn2_})
        layer->register_parameters(store);
    if (shortcut_conv_) {
        shortcut_conv_->register_parameters(store);
        shortcut_bn_->register_parameters(store);
    }
}

Tensor BasicBlock::forward(RunContext& ctx, const Tensor& x) {
    Tensor h = relu1_.forward(ctx, bn1_.forward(ctx, conv1_.forward(ctx, x)));
    Tensor main = bn2_.forward(ctx, conv2_.forward(ctx, h));
    Tensor shortcut = x;
    if (shortcut_conv_) shortcut = shortcut_bn_->forward(ctx, shortcut_conv_->forward(ctx, x));
    Tensor sum = ctx.allocate(main.dtype, shape_of(main), main.layout);
    ops::add(ctx, main, shortcut, sum);
    Tensor out = ctx.allocate(main.dtype, shape_of(main), main.layout);
    ops::relu_forward(ctx, sum, out);
    out_ = ctx.training ? out : Tensor{};
    return out;
}

Tensor BasicBlock::backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) {
    Tensor d_sum = ctx.allocate(dy.dtype, shape_of(dy), dy.layout);
    ops::relu_backward(ctx, out_, dy, d_sum, ops::GradWrite::store);
    Tensor d_h = bn2_.backward(ctx, d_sum, true);
    d_h = conv2_.backward(ctx, d_h, true);
    d_h = relu1_.backward(ctx, d_h, true);
    d_h = bn1_.backward(ctx, d_h, true);
    Tensor dx = conv1_.backward(ctx, d_h, need_input_grad);
    if (shortcut_conv_) {
        Tensor d_short = shortcut_bn_->backward(ctx, d_sum, true);
        d_short = shortcut_conv_->backward(ctx, d_short, need_input_grad);
        if (need_input_grad) ops::accumulate_grad(ctx, d_short, dx, ops::GradWrite::accumulate);
    } else if (need_input_grad) {
        ops::accumulate_grad(ctx, d_sum, dx, ops::GradWrite::accumulate);
    }
    return dx;
}

}  // namespace ember::nn
