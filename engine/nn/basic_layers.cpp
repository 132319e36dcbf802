// basic_layers.cpp: Linear, ReLU, GELU, Dropout, Flatten (see basic_layers.h).
#include "engine/nn/basic_layers.h"

#include "engine/ops/dispatch.h"

#include <cmath>

namespace ember::nn {

void layer_error(const Layer& layer, const std::string& message) {
    throw std::invalid_argument(layer.name() + " (" + layer.kind() + "): " + message);
}

namespace {
// The view a rank-2 op needs of a [rows, features] activation.
Tensor as_matrix(const Tensor& t, int64_t rows, int64_t cols) {
    return make_tensor(t.data, t.dtype, {rows, cols}, t.device);
}
}  // namespace

// ---- Linear -------------------------------------------------------------------------

Linear::Linear(std::string name, int64_t in_features, int64_t out_features, bool bias, bool gelu)
    : Layer(std::move(name)), in_(in_features), out_(out_features), has_bias_(bias || gelu), gelu_(gelu) {}

TensorShape Linear::output_shape(const TensorShape& input) const {
    if (input.rank != 2 || input.dims[1] != in_)
        layer_error(*this, "expects [batch, " + std::to_string(in_) + "], got " + input.describe());
    return make_shape({input.dims[0], out_});
}

void Linear::register_parameters(ParameterStore& store) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_));
    weight_ = store.add_parameter(name_ + ".weight", {out_, in_}, ParameterInit::uniform(bound));
    if (has_bias_) bias_ = store.add_parameter(name_ + ".bias", {out_}, ParameterInit::uniform(bound), true);
}

Tensor Linear::forward(RunContext& ctx, const Tensor& x) {
    TensorShape out_shape = output_shape(shape_of(x));
    Tensor y = ctx.allocate(out_shape);
    Tensor w = ctx.parameters->compute_parameter(weight_);
    Tensor b = has_bias_ ? ctx.parameters->compute_parameter(bias_) : Tensor{};
    if (!gelu_) {
        ops::linear_forward(ctx, x, w, b, y);
    } else {
        Tensor pre = ctx.allocate(out_shape);
        if (ctx.switches.fused_gelu) {
            ops::linear_forward(ctx, x, w, b, y, true, pre);
        } else {
            ops::linear_forward(ctx, x, w, b, pre);
            Tensor scratch = ctx.allocate(DType::f32, out_shape);  // the op's chain runs in f32
            ops::gelu_forward_unfused(ctx, pre, y, scratch);
        }
        pre_activation_ = ctx.training ? pre : Tensor{};
    }
    x_ = ctx.training ? x : Tensor{};
    return y;
}

Tensor Linear::backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) {
    if (!x_.defined()) layer_error(*this, "backward without a training forward");
    Tensor d_linear = dy;
    if (gelu_) {
        d_linear = ctx.allocate(shape_of(dy));
        ops::gelu_backward(ctx, pre_activation_, dy, d_linear, ops::GradWrite::store);
    }
    Tensor dx = need_input_grad ? ctx.allocate(shape_of(x_)) : Tensor{};
    Tensor w = ctx.parameters->compute_parameter(weight_);
    Tensor dw = ctx.parameters->gradient(weight_);
    Tensor db = has_bias_ ? ctx.parameters->gradient(bias_) : Tensor{};
    ops::linear_backward(ctx, x_, w, d_linear, dx, dw, db, ops::GradWrite::store, ctx.parameter_write);
    return dx;
}

// dx shaped like dy, written by `backward` (the activation's gradient op, from what its
// forward saved); none when the layer below needs no input gradient.
namespace {
template <class Backward>
Tensor activation_backward(RunContext& ctx, const Tensor& dy, bool need_input_grad, Backward backward) {
    if (!need_input_grad) return {};
    Tensor dx = ctx.allocate(dy.dtype, shape_of(dy), dy.layout);
    backward(dx);
    return dx;
}
}  // namespace

// ---- ReLU ---------------------------------------------------------------------------

Tensor ReLU::forward(RunContext& ctx, const Tensor& x) {
    Tensor y = ctx.allocate(x.dtype, shape_of(x), x.layout);
    ops::relu_forward(ctx, x, y);
    y_ = ctx.training ? y : Tensor{};
    return y;
}

Tensor ReLU::backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) {
    return activation_backward(ctx, dy, need_input_grad,
                               [&](const Tensor& dx) { ops::relu_backward(ctx, y_, dy, dx, ops::GradWrite::store); });
}

// ---- GELU ---------------------------------------------------------------------------

Tensor GELU::forward(RunContext& ctx, const Tensor& x) {
    Tensor y = ctx.allocate(x.dtype, shape_of(x), x.layout);
    if (ctx.switches.fused_gelu) {
        ops::gelu_forward(ctx, x, y);
    } else {
        Tensor scratch = ctx.allocate(DType::f32, shape_of(x));  // the op's chain runs in f32
        ops::gelu_forward_unfused(ctx, x, y, scratch);
    }
    x_ = ctx.training ? x : Tensor{};
    return y;
}

Tensor GELU::backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) {
    return activation_backward(ctx, dy, need_input_grad,
                               [&](const Tensor& dx) { ops::gelu_backward(ctx, x_, dy, dx, ops::GradWrite::store); });
}

// ---- Dropout ------------------------------------------------------------------------

Dropout::Dropout(std::string name, float p, uint64_t stream_id) : Layer(std::move(name)), p_(p), stream_id_(stream_id) {
    if (!(p >= 0.0f && p < 1.0f)) layer_error(*this, "p must be in [0, 1), got " + std::to_string(p));
}

Tensor Dropout::forward(RunContext& ctx, const Tensor& x) {
    if (!ctx.training || p_ == 0.0f) {
        mask_ = Tensor{};
        return x;
    }
    Tensor y = ctx.allocate(x.dtype, shape_of(x), x.layout);
    mask_ = ctx.allocate(DType::u8, shape_of(x), x.layout);
    ops::DropoutParams params;
    params.p = p_;
    // Every (layer, step) pair gets its own counter range: the stream id picks the
    // seed, the step picks the offset, so a recomputed forward draws the same mask.
    params.seed = ctx.dropout_seed ^ (0x9e3779b97f4a7c15ull * (stream_id_ + 1));
    params.offset = ctx.dropout_offset * static_cast<uint64_t>(x.numel());
    ops::dropout_forward(ctx, x, y, mask_, params);
    return y;
}

Tensor Dropout::backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) {
    if (!need_input_grad) return {};
    if (!mask_.defined()) return dy;  // p == 0: identity
    Tensor dx = ctx.allocate(dy.dtype, shape_of(dy), dy.layout);
    ops::dropout_backward(ctx, dy, mask_, dx, p_, ops::GradWrite::store);
    return dx;
}

// ---- Flatten ------------------------------------------------------------------------

TensorShape Flatten::output_shape(const TensorShape& input) const {
    if (input.rank < 2) layer_error(*this, "expects at least 2 dimensions, got " + input.describe());
    int64_t features = 1;
    for (int i = 1; i < input.rank; ++i) features *= input.dims[i];
    return make_shape({input.dims[0], features});
}

// A channels-last input is reordered to nchw first, so the features reach the next
// Linear in nn.Flatten's (c, h, w) order and its weights mean the same in both layouts.
Tensor Flatten::forward(RunContext& ctx, const Tensor& x) {
    input_shape_ = shape_of(x);
    input_layout_ = x.layout;
    TensorShape out = output_shape(input_shape_);
    if (x.rank == 4 && x.layout == Layout::nhwc) {
        Tensor nchw = ctx.allocate(x.dtype, input_shape_, Layout::nchw);
        ops::convert_layout(ctx, x, nchw);
        return as_matrix(nchw, out.dims[0], out.dims[1]);
    }
    return as_matrix(x, out.dims[0], out.dims[1]);
}

Tensor Flatten::backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) {
    if (!need_input_grad) return {};
    Tensor view = make_tensor(dy.data, dy.dtype, input_shape_.rank, input_shape_.dims, dy.device);
    if (input_shape_.rank != 4 || input_layout_ != Layout::nhwc) return view;
    Tensor dx = ctx.allocate(dy.dtype, input_shape_, Layout::nhwc);
    ops::convert_layout(ctx, view, dx);
    return dx;
}

}  // namespace ember::nn
