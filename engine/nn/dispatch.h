// dispatch.h: the ops a layer calls, routed to the model's backend. Each function
// calls ops::<name>_cpu or ops::<name>_cuda(*ctx.cuda, ...) with the same arguments,
// so a layer is written once for both backends.
#pragma once

#include "engine/nn/run_context.h"
#include "engine/ops/activation.h"
#include "engine/ops/batchnorm.h"
#include "engine/ops/conv.h"
#include "engine/ops/dropout.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/embedding.h"
#include "engine/ops/gemm.h"
#include "engine/ops/layernorm.h"
#include "engine/ops/pooling.h"
#include "engine/ops/softmax_cross_entropy.h"

namespace ember::nn::run {

using ops::GradWrite;

inline void gemm(RunContext& c, const Tensor& a, const Tensor& b, const Tensor& out, const ops::GemmArgs& args) {
    if (c.on_cuda()) ops::gemm_cuda(*c.cuda, a, b, out, args);
    else ops::gemm_cpu(a, b, out, args);
}
inline void linear_forward(RunContext& c, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y,
                           bool gelu = false, const Tensor& pre = {}) {
    if (c.on_cuda()) ops::linear_forward_cuda(*c.cuda, x, w, b, y, gelu, pre);
    else ops::linear_forward_cpu(x, w, b, y, gelu, pre);
}
inline void linear_backward(RunContext& c, const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor& dx,
                            const Tensor& dw, const Tensor& db, GradWrite input_write, GradWrite param_write) {
    if (c.on_cuda()) ops::linear_backward_cuda(*c.cuda, x, w, dy, dx, dw, db, input_write, param_write);
    else ops::linear_backward_cpu(x, w, dy, dx, dw, db, input_write, param_write);
}
inline void conv_forward(RunContext& c, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y,
                         const ops::Conv2dParams& p) {
    if (c.on_cuda()) ops::conv2d_forward_cuda(*c.cuda, x, w, b, y, p);
    else ops::conv2d_forward_cpu(x, w, b, y, p);
}
inline void conv_backward_data(RunContext& c, const Tensor& w, const Tensor& dy, const Tensor& dx,
                               const ops::Conv2dParams& p, GradWrite write) {
    if (c.on_cuda()) ops::conv2d_backward_data_cuda(*c.cuda, w, dy, dx, p, write);
    else ops::conv2d_backward_data_cpu(w, dy, dx, p, write);
}
inline void conv_backward_filter(RunContext& c, const Tensor& x, const Tensor& dy, const Tensor& dw,
                                 const ops::Conv2dParams& p, GradWrite write) {
    if (c.on_cuda()) ops::conv2d_backward_filter_cuda(*c.cuda, x, dy, dw, p, write);
    else ops::conv2d_backward_filter_cpu(x, dy, dw, p, write);
}
inline void conv_backward_bias(RunContext& c, const Tensor& dy, const Tensor& db, GradWrite write) {
    if (c.on_cuda()) ops::conv2d_backward_bias_cuda(*c.cuda, dy, db, write);
    else ops::conv2d_backward_bias_cpu(dy, db, write);
}
inline void batchnorm_train(RunContext& c, const Tensor& x, const Tensor& g, const Tensor& b, const Tensor& y,
                            const Tensor& rm, const Tensor& rv, const Tensor& sm, const Tensor& si,
                            const ops::BatchNormParams& p) {
    if (c.on_cuda()) ops::batchnorm_forward_train_cuda(*c.cuda, x, g, b, y, rm, rv, sm, si, p);
    else ops::batchnorm_forward_train_cpu(x, g, b, y, rm, rv, sm, si, p);
}
inline void batchnorm_eval(RunContext& c, const Tensor& x, const Tensor& g, const Tensor& b, const Tensor& rm,
                           const Tensor& rv, const Tensor& y, const ops::BatchNormParams& p) {
    if (c.on_cuda()) ops::batchnorm_forward_eval_cuda(*c.cuda, x, g, b, rm, rv, y, p);
    else ops::batchnorm_forward_eval_cpu(x, g, b, rm, rv, y, p);
}
inline void batchnorm_backward(RunContext& c, const Tensor& x, const Tensor& dy, const Tensor& g, const Tensor& sm,
                               const Tensor& si, const Tensor& dx, const Tensor& dg, const Tensor& db,
                               GradWrite input_write, GradWrite param_write) {
    if (c.on_cuda()) ops::batchnorm_backward_cuda(*c.cuda, x, dy, g, sm, si, dx, dg, db, input_write, param_write);
    else ops::batchnorm_backward_cpu(x, dy, g, sm, si, dx, dg, db, input_write, param_write);
}
inline void relu_forward(RunContext& c, const Tensor& x, const Tensor& y) {
    if (c.on_cuda()) ops::relu_forward_cuda(*c.cuda, x, y);
    else ops::relu_forward_cpu(x, y);
}
inline void relu_backward(RunContext& c, const Tensor& y, const Tensor& dy, const Tensor& dx, GradWrite write) {
    if (c.on_cuda()) ops::relu_backward_cuda(*c.cuda, y, dy, dx, write);
    else ops::relu_backward_cpu(y, dy, dx, write);
}
inline void gelu_forward(RunContext& c, const Tensor& x, const Tensor& y) {
    if (c.on_cuda()) ops::gelu_forward_cuda(*c.cuda, x, y);
    else ops::gelu_forward_cpu(x, y);
}
inline void gelu_forward_unfused(RunContext& c, const Tensor& x, const Tensor& y, const Tensor& scratch) {
    if (c.on_cuda()) ops::gelu_forward_unfused_cuda(*c.cuda, x, y, scratch);
    else ops::gelu_forward_unfused_cpu(x, y, scratch);
}
inline void gelu_backward(RunContext& c, const Tensor& x, const Tensor& dy, const Tensor& dx, GradWrite write) {
    if (c.on_cuda()) ops::gelu_backward_cuda(*c.cuda, x, dy, dx, write);
    else ops::gelu_backward_cpu(x, dy, dx, write);
}
inline void dropout_forward(RunContext& c, const Tensor& x, const Tensor& y, const Tensor& mask,
                            const ops::DropoutParams& p) {
    if (c.on_cuda()) ops::dropout_forward_cuda(*c.cuda, x, y, mask, p);
    else ops::dropout_forward_cpu(x, y, mask, p);
}
inline void dropout_backward(RunContext& c, const Tensor& dy, const Tensor& mask, const Tensor& dx, float p,
                             GradWrite write) {
    if (c.on_cuda()) ops::dropout_backward_cuda(*c.cuda, dy, mask, dx, p, write);
    else ops::dropout_backward_cpu(dy, mask, dx, p, write);
}
inline void maxpool_forward(RunContext& c, const Tensor& x, const Tensor& y, const Tensor& argmax,
                            const ops::Pool2dParams& p) {
    if (c.on_cuda()) ops::maxpool2d_forward_cuda(*c.cuda, x, y, argmax, p);
    else ops::maxpool2d_forward_cpu(x, y, argmax, p);
}
inline void maxpool_backward(RunContext& c, const Tensor& dy, const Tensor& argmax, const Tensor& dx,
                             const ops::Pool2dParams& p, GradWrite write) {
    if (c.on_cuda()) ops::maxpool2d_backward_cuda(*c.cuda, dy, argmax, dx, p, write);
    else ops::maxpool2d_backward_cpu(dy, argmax, dx, p, write);
}
inline void avgpool_forward(RunContext& c, const Tensor& x, const Tensor& y, const ops::Pool2dParams& p) {
    if (c.on_cuda()) ops::avgpool2d_forward_cuda(*c.cuda, x, y, p);
    else ops::avgpool2d_forward_cpu(x, y, p);
}
inline void avgpool_backward(RunContext& c, const Tensor& dy, const Tensor& dx, const ops::Pool2dParams& p,
                             GradWrite write) {
    if (c.on_cuda()) ops::avgpool2d_backward_cuda(*c.cuda, dy, dx, p, write);
    else ops::avgpool2d_backward_cpu(dy, dx, p, write);
}
inline void layernorm_forward(RunContext& c, const Tensor& x, const Tensor& g, const Tensor& b, const Tensor& y,
                              const Tensor& mean, const Tensor& rstd, float eps) {
    if (c.on_cuda()) ops::layernorm_forward_cuda(*c.cuda, x, g, b, y, mean, rstd, eps);
    else ops::layernorm_forward_cpu(x, g, b, y, mean, rstd, eps);
}
inline void layernorm_backward(RunContext& c, const Tensor& x, const Tensor& dy, const Tensor& g,
                               const Tensor& mean, const Tensor& rstd, const Tensor& dx, const Tensor& dg,
                               const Tensor& db, GradWrite input_write, GradWrite param_write) {
    if (c.on_cuda())
        ops::layernorm_backward_cuda(*c.cuda, x, dy, g, mean, rstd, dx, dg, db, input_write, param_write);
    else ops::layernorm_backward_cpu(x, dy, g, mean, rstd, dx, dg, db, input_write, param_write);
}
inline void layernorm_forward_unfused(RunContext& c, const Tensor& x, const Tensor& g, const Tensor& b,
                                      const Tensor& y, const Tensor& mean, const Tensor& rstd,
                                      const Tensor& scratch, float eps) {
    if (c.on_cuda()) ops::layernorm_forward_unfused_cuda(*c.cuda, x, g, b, y, mean, rstd, scratch, eps);
    else ops::layernorm_forward_unfused_cpu(x, g, b, y, mean, rstd, scratch, eps);
}
inline void layernorm_backward_unfused(RunContext& c, const Tensor& x, const Tensor& dy, const Tensor& g,
                                       const Tensor& mean, const Tensor& rstd, const Tensor& dx, const Tensor& dg,
                                       const Tensor& db, const Tensor& scratch, GradWrite input_write,
                                       GradWrite param_write) {
    if (c.on_cuda())
        ops::layernorm_backward_unfused_cuda(*c.cuda, x, dy, g, mean, rstd, dx, dg, db, scratch, input_write,
                                             param_write);
    else ops::layernorm_backward_unfused_cpu(x, dy, g, mean, rstd, dx, dg, db, scratch, input_write, param_write);
}
inline void embedding_forward(RunContext& c, const Tensor& ids, const Tensor& table, const Tensor& out) {
    if (c.on_cuda()) ops::embedding_forward_cuda(*c.cuda, ids, table, out);
    else ops::embedding_forward_cpu(ids, table, out);
}
inline void embedding_backward(RunContext& c, const Tensor& ids, const Tensor& dout, const Tensor& dtable,
                               GradWrite write) {
    if (c.on_cuda()) ops::embedding_backward_cuda(*c.cuda, ids, dout, dtable, write);
    else ops::embedding_backward_cpu(ids, dout, dtable, write);
}
inline void add(RunContext& c, const Tensor& a, const Tensor& b, const Tensor& out) {
    if (c.on_cuda()) ops::add_cuda(*c.cuda, a, b, out);
    else ops::add_cpu(a, b, out);
}
inline void accumulate_grad(RunContext& c, const Tensor& src, const Tensor& dst, GradWrite write) {
    if (c.on_cuda()) ops::accumulate_grad_cuda(*c.cuda, src, dst, write);
    else ops::accumulate_grad_cpu(src, dst, write);
}
inline void cast(RunContext& c, const Tensor& src, const Tensor& dst) {
    if (c.on_cuda()) ops::cast_cuda(*c.cuda, src, dst);
    else ops::cast_cpu(src, dst);
}
inline void convert_layout(RunContext& c, const Tensor& src, const Tensor& dst) {
    if (c.on_cuda()) ops::convert_layout_cuda(*c.cuda, src, dst);
    else ops::convert_layout_cpu(src, dst);
}
inline void fill(RunContext& c, const Tensor& t, float value) {
    if (c.on_cuda()) ops::fill_cuda(*c.cuda, t, value);
    else ops::fill_cpu(t, value);
}
inline void scale(RunContext& c, const Tensor& t, float factor) {
    if (c.on_cuda()) ops::scale_cuda(*c.cuda, t, factor);
    else ops::scale_cpu(t, factor);
}
inline void softmax_cross_entropy(RunContext& c, const Tensor& logits, const Tensor& targets, const Tensor& losses,
                                  const Tensor& dlogits, float grad_scale) {
    if (c.on_cuda()) ops::softmax_cross_entropy_cuda(*c.cuda, logits, targets, losses, dlogits, grad_scale);
    else ops::softmax_cross_entropy_cpu(logits, targets, losses, dlogits, grad_scale);
}

}  // namespace ember::nn::run
