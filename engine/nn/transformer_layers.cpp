// transformer_layers.cpp: PatchEmbedding, LayerNorm, SelfAttention, TransformerBlock,
// TokenMeanPool (see transformer_layers.h).
#include "engine/nn/transformer_layers.h"

#include "engine/ops/dispatch.h"

#include <cmath>
#include <initializer_list>
#include <vector>

namespace ember::nn {

namespace {
Tensor in_dtype(RunContext& ctx, const Tensor& t, DType dtype) {
    if (t.dtype == dtype) return t;
    Tensor out = ctx.allocate(dtype, shape_of(t));
    ops::cast(ctx, t, out);
    return out;
}
}  // namespace

// ---- PatchEmbedding -----------------------------------------------------------------

PatchEmbedding::PatchEmbedding(std::string name, int64_t channels, int64_t image_size, int patch, int64_t dim)
    : Layer(name),
      conv_(name + ".proj", channels, dim, patch, patch, 0, true),
      dim_(dim),
      grid_(image_size / patch),
      tokens_(grid_ * grid_) {
    if (image_size % patch != 0) layer_error(*this, "image size must be a multiple of the patch size");
}

TensorShape PatchEmbedding::output_shape(const TensorShape& input) const {
    TensorShape conv = conv_.output_shape(input);
    if (conv.dims[2] != grid_ || conv.dims[3] != grid_)
        layer_error(*this, "expects " + std::to_string(grid_) + "x" + std::to_string(grid_) + " patches, got " +
                               input.describe());
    return make_shape({input.dims[0] * tokens_, dim_});
}

void PatchEmbedding::register_parameters(ParameterStore& store) {
    conv_.register_parameters(store);
    // ViT initializes the position table with a small spread (std 0.02).
    position_ =
        store.add_parameter(name_ + ".position", {tokens_, dim_}, ParameterInit::uniform(0.02 * std::sqrt(3.0)), true);
}

Tensor PatchEmbedding::position_ids(RunContext& ctx, int64_t batch) {
    if (ids_batch_ != batch) {
        std::vector<int32_t> ids(static_cast<std::size_t>(batch * tokens_));
        for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i % tokens_);
        ids_ = FlatBuffer(ctx.backend, ids.size() * sizeof(int32_t), name_ + " position ids");
        ids_.upload(ids.data(), ids.size() * sizeof(int32_t));
        ids_batch_ = batch;
        ids_view_ = make_tensor(ids_.data(), DType::i32, {batch * tokens_}, ctx.backend);
    }
    return ids_view_;
}

Tensor PatchEmbedding::forward(RunContext& ctx, const Tensor& x) {
    TensorShape out_shape = output_shape(shape_of(x));
    const int64_t batch = x.shape[0];
    Tensor conv = conv_.forward(ctx, x);
    conv_layout_ = conv.layout;
    // Token-major rows are the conv output in channels-last order: a channels-last
    // model gets them for free, an nchw one pays a reorder.
    Tensor channels_last = conv;
    if (conv.layout != Layout::nhwc) {
        channels_last = ctx.allocate(conv.dtype, shape_of(conv), Layout::nhwc);
        ops::convert_layout(ctx, conv, channels_last);
    }
    Tensor token_rows = make_tensor(channels_last.data, conv.dtype, {out_shape.dims[0], dim_}, conv.device);
    Tensor positions = ctx.allocate(conv.dtype, out_shape);
    ops::embedding_forward(ctx, position_ids(ctx, batch), ctx.parameters->compute_parameter(position_), positions);
    Tensor y = ctx.allocate(conv.dtype, out_shape);
    ops::add(ctx, token_rows, positions, y);
    return y;
}

Tensor PatchEmbedding::backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) {
    const int64_t batch = dy.shape[0] / tokens_;
    ops::embedding_backward(ctx, position_ids(ctx, batch), dy, ctx.parameters->gradient(position_),
                            ctx.parameter_write);
    Tensor d_channels_last = make_tensor(dy.data, dy.dtype, {batch, dim_, grid_, grid_}, dy.device, Layout::nhwc);
    Tensor d_conv = d_channels_last;
    if (conv_layout_ != Layout::nhwc) {
        d_conv = ctx.allocate(dy.dtype, make_shape({batch, dim_, grid_, grid_}), conv_layout_);
        ops::convert_layout(ctx, d_channels_last, d_conv);
    }
    return conv_.backward(ctx, d_conv, need_input_grad);
}

// ---- LayerNorm ----------------------------------------------------------------------

LayerNorm::LayerNorm(std::string name, int64_t dim, float eps) : Layer(std::move(name)), dim_(dim), eps_(eps) {}

TensorShape LayerNorm::output_shape(const TensorShape& input) const {
    if (input.rank != 2 || input.dims[1] != dim_)
        layer_error(*this, "expects [rows, " + std::to_string(dim_) + "], got " + input.describe());
    return input;
}

void LayerNorm::register_parameters(ParameterStore& store) {
    gamma_ = store.add_parameter(name_ + ".weight", {dim_}, ParameterInit::constant(1.0), true);
    beta_ = store.add_parameter(name_ + ".bias", {dim_}, ParameterInit::constant(0.0), true);
}

Tensor LayerNorm::forward(RunContext& ctx, const Tensor& x) {
    output_shape(shape_of(x));
    Tensor y = ctx.allocate(x.dtype, shape_of(x));
    DType stats = ctx.parameters->master_dtype();
    const int64_t rows = x.shape[0];
    Tensor mean = ctx.allocate(stats, make_shape({rows}));
    Tensor rstd = ctx.allocate(stats, make_shape({rows}));
    Tensor gamma = ctx.parameters->parameter(gamma_), beta = ctx.parameters->parameter(beta_);
    if (ctx.switches.fused_layernorm) {
        ops::layernorm_forward(ctx, x, gamma, beta, y, mean, rstd, eps_);
    } else {
        Tensor scratch = ctx.allocate(full_precision_dtype(x.dtype),
                                      make_shape({ops::layernorm_forward_unfused_scratch(rows, dim_)}));
        ops::layernorm_forward_unfused(ctx, x, gamma, beta, y, mean, rstd, scratch, eps_);
    }
    if (ctx.training) {
        x_ = x;
        mean_ = mean;
        rstd_ = rstd;
    } else {
        x_ = Tensor{};
    }
    return y;
}

Tensor LayerNorm::backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) {
    if (!x_.defined()) layer_error(*this, "backward without a training forward");
    Tensor dx = ctx.allocate(dy.dtype, shape_of(x_));
    Tensor gamma = ctx.parameters->parameter(gamma_);
    Tensor dgamma = ctx.parameters->gradient(gamma_), dbeta = ctx.parameters->gradient(beta_);
    if (ctx.switches.fused_layernorm) {
        ops::layernorm_backward(ctx, x_, dy, gamma, mean_, rstd_, dx, dgamma, dbeta, ops::GradWrite::store,
                                ctx.parameter_write);
    } else {
        Tensor scratch = ctx.allocate(full_precision_dtype(x_.dtype),
                                      make_shape({ops::layernorm_backward_unfused_scratch(x_.shape[0], dim_)}));
        ops::layernorm_backward_unfused(ctx, x_, dy, gamma, mean_, rstd_, dx, dgamma, dbeta, scratch,
                                        ops::GradWrite::store, ctx.parameter_write);
    }
    return need_input_grad ? dx : Tensor{};
}

// ---- SelfAttention ------------------------------------------------------------------

SelfAttention::SelfAttention(std::string name, int64_t dim, int64_t heads, int64_t tokens)
    : Layer(name),
      dim_(dim),
      heads_(heads),
      tokens_(tokens),
      head_dim_(heads > 0 ? dim / heads : 0),
      qkv_(name + ".qkv", dim, 3 * dim),
      proj_(name + ".proj", dim, dim) {
    if (heads <= 0 || dim % heads != 0) layer_error(*this, "dim must be a multiple of the head count");
}

TensorShape SelfAttention::output_shape(const TensorShape& input) const {
    if (input.rank != 2 || input.dims[1] != dim_ || input.dims[0] % tokens_ != 0)
        layer_error(*this, "expects [batch*" + std::to_string(tokens_) + ", " + std::to_string(dim_) + "], got " +
                               input.describe());
    return input;
}

void SelfAttention::register_parameters(ParameterStore& store) {
    qkv_.register_parameters(store);
    proj_.register_parameters(store);
}

Tensor SelfAttention::forward(RunContext& ctx, const Tensor& x) {
    output_shape(shape_of(x));
    const int64_t batch = x.shape[0] / tokens_, stack = batch * heads_, T = tokens_, dh = head_dim_;
    const DType act = x.dtype, sd = full_precision_dtype(act);  // scores and probabilities
    Tensor qkv = qkv_.forward(ctx, x);
    TensorShape head_shape = make_shape({stack, T, dh});
    Tensor q = ctx.allocate(act, head_shape), k = ctx.allocate(act, head_shape), v = ctx.allocate(act, head_shape);
    ops::HeadLayout layout{batch, T, heads_, dh, 3, 0};
    for (int part = 0; part < 3; ++part) {
        layout.part = part;
        ops::move_heads(ctx, qkv, part == 0 ? q : part == 1 ? k : v, layout, true);
    }
    Tensor scores = ctx.allocate(sd, make_shape({stack, T, T}));
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dh)));
    ops::batched_gemm(ctx, q, k, scores, {stack, T, T, dh, false, true, scale});  // Q K^T / sqrt(dh)
    Tensor probabilities = ctx.allocate(sd, make_shape({stack * T, T}));
    ops::softmax_rows(ctx, make_tensor(scores.data, sd, {stack * T, T}, scores.device), probabilities);
    Tensor probabilities_compute = in_dtype(ctx, probabilities, act);
    Tensor heads_out = ctx.allocate(act, head_shape);
    ops::batched_gemm(ctx, probabilities_compute, v, heads_out, {stack, T, dh, T});  // P V
    Tensor merged = ctx.allocate(act, shape_of(x));
    ops::move_heads(ctx, merged, heads_out, ops::HeadLayout{batch, T, heads_, dh, 1, 0}, false);
    if (ctx.training) {
        q_ = q;
        k_ = k;
        v_ = v;
        probabilities_ = probabilities;
        probabilities_compute_ = probabilities_compute;
        batch_ = batch;
    }
    return proj_.forward(ctx, merged);
}

Tensor SelfAttention::backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) {
    const int64_t batch = batch_, stack = batch * heads_, T = tokens_, dh = head_dim_;
    const DType act = dy.dtype, sd = full_precision_dtype(act);  // scores and probabilities
    Tensor d_merged = proj_.backward(ctx, dy, true);
    TensorShape head_shape = make_shape({stack, T, dh});
    Tensor d_out = ctx.allocate(act, head_shape);
    ops::move_heads(ctx, d_merged, d_out, ops::HeadLayout{batch, T, heads_, dh, 1, 0}, true);
    Tensor d_probabilities = ctx.allocate(sd, make_shape({stack * T, T}));
    Tensor dv = ctx.allocate(act, head_shape);
    ops::batched_gemm(ctx, d_out, v_, d_probabilities, {stack, T, T, dh, false, true});         // dP = dO V^T
    ops::batched_gemm(ctx, probabilities_compute_, d_out, dv, {stack, T, dh, T, true, false});  // dV = P^T dO
    Tensor d_scores = ctx.allocate(sd, make_shape({stack * T, T}));
    ops::softmax_rows_backward(ctx, probabilities_, d_probabilities, d_scores,
                               static_cast<float>(1.0 / std::sqrt(static_cast<double>(dh))));
    Tensor d_scores_compute = in_dtype(ctx, d_scores, act);
    Tensor dq = ctx.allocate(act, head_shape), dk = ctx.allocate(act, head_shape);
    ops::batched_gemm(ctx, d_scores_compute, k_, dq, {stack, T, dh, T});               // dQ = dS K
    ops::batched_gemm(ctx, d_scores_compute, q_, dk, {stack, T, dh, T, true, false});  // dK = dS^T Q
    Tensor d_qkv = ctx.allocate(act, make_shape({batch * T, 3 * dim_}));
    ops::HeadLayout layout{batch, T, heads_, dh, 3, 0};
    for (int part = 0; part < 3; ++part) {
        layout.part = part;
        ops::move_heads(ctx, d_qkv, part == 0 ? dq : part == 1 ? dk : dv, layout, false);
    }
    return qkv_.backward(ctx, d_qkv, need_input_grad);
}

// ---- TransformerBlock ---------------------------------------------------------------

TransformerBlock::TransformerBlock(std::string name, int64_t dim, int64_t heads, int64_t tokens, int64_t mlp_hidden)
    : Layer(name),
      ln1_(name + ".ln1", dim),
      ln2_(name + ".ln2", dim),
      attention_(name + ".attention", dim, heads, tokens),
      fc1_(name + ".fc1", dim, mlp_hidden, true, true),
      fc2_(name + ".fc2", mlp_hidden, dim) {}

TensorShape TransformerBlock::output_shape(const TensorShape& input) const {
    return attention_.output_shape(ln1_.output_shape(input));
}

void TransformerBlock::register_parameters(ParameterStore& store) {
    for (Layer* layer : std::initializer_list<Layer*>{&ln1_, &attention_, &ln2_, &fc1_, &fc2_})
        layer->register_parameters(store);
}

Tensor TransformerBlock::forward(RunContext& ctx, const Tensor& x) {
    Tensor attended = attention_.forward(ctx, ln1_.forward(ctx, x));
    Tensor residual = ctx.allocate(x.dtype, shape_of(x));
    ops::add(ctx, x, attended, residual);
    Tensor mlp = fc2_.forward(ctx, fc1_.forward(ctx, ln2_.forward(ctx, residual)));
    Tensor out = ctx.allocate(x.dtype, shape_of(x));
    ops::add(ctx, residual, mlp, out);
    return out;
}

Tensor TransformerBlock::backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) {
    // The gradient of each residual join flows unchanged into both of its inputs.
    Tensor d_residual = ln2_.backward(ctx, fc1_.backward(ctx, fc2_.backward(ctx, dy, true), true), true);
    ops::accumulate_grad(ctx, dy, d_residual, ops::GradWrite::accumulate);
    Tensor dx = ln1_.backward(ctx, attention_.backward(ctx, d_residual, true), true);
    if (!need_input_grad) return {};
    ops::accumulate_grad(ctx, d_residual, dx, ops::GradWrite::accumulate);
    return dx;
}

// ---- TokenMeanPool ------------------------------------------------------------------

TensorShape TokenMeanPool::output_shape(const TensorShape& input) const {
    if (input.rank != 2 || input.dims[0] % tokens_ != 0)
        layer_error(*this, "expects [batch*" + std::to_string(tokens_) + ", D], got " + input.describe());
    return make_shape({input.dims[0] / tokens_, input.dims[1]});
}

namespace {
ops::Pool2dParams token_window(int64_t tokens) {
    ops::Pool2dParams p;
    p.kernel_h = p.stride_h = static_cast<int>(tokens);
    p.kernel_w = p.stride_w = 1;
    return p;
}
}  // namespace

Tensor TokenMeanPool::forward(RunContext& ctx, const Tensor& x) {
    input_shape_ = shape_of(x);
    TensorShape out = output_shape(input_shape_);
    const int64_t batch = out.dims[0], dim = out.dims[1];
    Tensor x4 = make_tensor(x.data, x.dtype, {batch, 1, tokens_, dim}, x.device);
    Tensor y = ctx.allocate(x.dtype, make_shape({batch, 1, 1, dim}));
    ops::avgpool2d_forward(ctx, x4, y, token_window(tokens_));
    return make_tensor(y.data, y.dtype, {batch, dim}, y.device);
}

Tensor TokenMeanPool::backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) {
    if (!need_input_grad) return {};
    const int64_t batch = dy.shape[0], dim = dy.shape[1];
    Tensor dy4 = make_tensor(dy.data, dy.dtype, {batch, 1, 1, dim}, dy.device);
    Tensor dx = ctx.allocate(dy.dtype, input_shape_);
    Tensor dx4 = make_tensor(dx.data, dx.dtype, {batch, 1, tokens_, dim}, dx.device);
    ops::avgpool2d_backward(ctx, dy4, dx4, token_window(tokens_), ops::GradWrite::store);
    return dx;
}

}  // namespace ember::nn
