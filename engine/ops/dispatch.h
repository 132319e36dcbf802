// dispatch.h: the one way an op is called — ops::<name>(context, args...) runs the CPU
// twin (ops::<name>_cpu, engine/cpu/) or the CUDA version (ops::<name>_cuda,
// engine/cuda/) with the same arguments, so a layer is written once for both
// backends. An OpContext says where: the device and, for cuda, the CudaContext
// (stream, library handles, autotune cache) the op is enqueued on. Layers pass their
// nn::RunContext, which is an OpContext.
#pragma once

#include "engine/ops/activation.h"
#include "engine/ops/attention.h"
#include "engine/ops/batchnorm.h"
#include "engine/ops/conv.h"
#include "engine/ops/dropout.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/embedding.h"
#include "engine/ops/gelu.h"
#include "engine/ops/gemm.h"
#include "engine/ops/layernorm.h"
#include "engine/ops/pooling.h"
#include "engine/ops/softmax_cross_entropy.h"

namespace ember::ops {

struct OpContext {
    Device backend = Device::cpu;
    CudaContext* cuda = nullptr;  // required when backend == Device::cuda

    bool on_cuda() const { return backend == Device::cuda; }
    CudaContext& cuda_context() const {
        require(cuda != nullptr, "OpContext", "the cuda backend needs a CudaContext");
        return *cuda;
    }
};

// Every wrapper below is this one expansion.
#define EMBER_DISPATCH(name, ...)                             \
    do {                                                      \
        if (context.on_cuda())                                \
            name##_cuda(context.cuda_context(), __VA_ARGS__); \
        else                                                  \
            name##_cpu(__VA_ARGS__);                          \
    } while (0)

inline void gemm(const OpContext& context, const Tensor& a, const Tensor& b, const Tensor& c,
                 const GemmArgs& args = {}) {
    EMBER_DISPATCH(gemm, a, b, c, args);
}
inline void linear_forward(const OpContext& context, const Tensor& x, const Tensor& weight, const Tensor& bias,
                           const Tensor& y, bool gelu = false, const Tensor& pre_activation = {}) {
    EMBER_DISPATCH(linear_forward, x, weight, bias, y, gelu, pre_activation);
}
inline void linear_backward(const OpContext& context, const Tensor& x, const Tensor& weight, const Tensor& dy,
                            const Tensor& dx, const Tensor& dweight, const Tensor& dbias, GradWrite input_write,
                            GradWrite param_write) {
    EMBER_DISPATCH(linear_backward, x, weight, dy, dx, dweight, dbias, input_write, param_write);
}

inline void conv2d_forward(const OpContext& context, const Tensor& x, const Tensor& weight, const Tensor& bias,
                           const Tensor& y, const Conv2dParams& params) {
    EMBER_DISPATCH(conv2d_forward, x, weight, bias, y, params);
}
inline void conv2d_backward_data(const OpContext& context, const Tensor& weight, const Tensor& dy, const Tensor& dx,
                                 const Conv2dParams& params, GradWrite write) {
    EMBER_DISPATCH(conv2d_backward_data, weight, dy, dx, params, write);
}
inline void conv2d_backward_filter(const OpContext& context, const Tensor& x, const Tensor& dy, const Tensor& dweight,
                                   const Conv2dParams& params, GradWrite write) {
    EMBER_DISPATCH(conv2d_backward_filter, x, dy, dweight, params, write);
}
inline void conv2d_backward_bias(const OpContext& context, const Tensor& dy, const Tensor& dbias, GradWrite write) {
    EMBER_DISPATCH(conv2d_backward_bias, dy, dbias, write);
}

inline void batchnorm_forward_train(const OpContext& context, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    const Tensor& y, const Tensor& running_mean, const Tensor& running_var,
                                    const Tensor& save_mean, const Tensor& save_invstd, const BatchNormParams& params) {
    EMBER_DISPATCH(batchnorm_forward_train, x, gamma, beta, y, running_mean, running_var, save_mean, save_invstd,
                   params);
}
inline void batchnorm_forward_eval(const OpContext& context, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                   const Tensor& running_mean, const Tensor& running_var, const Tensor& y,
                                   const BatchNormParams& params) {
    EMBER_DISPATCH(batchnorm_forward_eval, x, gamma, beta, running_mean, running_var, y, params);
}
inline void batchnorm_backward(const OpContext& context, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                               const Tensor& save_mean, const Tensor& save_invstd, const Tensor& dx,
                               const Tensor& dgamma, const Tensor& dbeta, GradWrite input_write,
                               GradWrite param_write) {
    EMBER_DISPATCH(batchnorm_backward, x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta, input_write,
                   param_write);
}

inline void relu_forward(const OpContext& context, const Tensor& x, const Tensor& y) {
    EMBER_DISPATCH(relu_forward, x, y);
}
inline void relu_backward(const OpContext& context, const Tensor& y, const Tensor& dy, const Tensor& dx,
                          GradWrite write) {
    EMBER_DISPATCH(relu_backward, y, dy, dx, write);
}
inline void gelu_forward(const OpContext& context, const Tensor& x, const Tensor& y) {
    EMBER_DISPATCH(gelu_forward, x, y);
}
inline void gelu_forward_unfused(const OpContext& context, const Tensor& x, const Tensor& y, const Tensor& scratch) {
    EMBER_DISPATCH(gelu_forward_unfused, x, y, scratch);
}
inline void gelu_backward(const OpContext& context, const Tensor& x, const Tensor& dy, const Tensor& dx,
                          GradWrite write) {
    EMBER_DISPATCH(gelu_backward, x, dy, dx, write);
}

inline void maxpool2d_forward(const OpContext& context, const Tensor& x, const Tensor& y, const Tensor& argmax,
                              const Pool2dParams& params) {
    EMBER_DISPATCH(maxpool2d_forward, x, y, argmax, params);
}
inline void maxpool2d_backward(const OpContext& context, const Tensor& dy, const Tensor& argmax, const Tensor& dx,
                               const Pool2dParams& params, GradWrite write) {
    EMBER_DISPATCH(maxpool2d_backward, dy, argmax, dx, params, write);
}
inline void avgpool2d_forward(const OpContext& context, const Tensor& x, const Tensor& y, const Pool2dParams& params) {
    EMBER_DISPATCH(avgpool2d_forward, x, y, params);
}
inline void avgpool2d_backward(const OpContext& context, const Tensor& dy, const Tensor& dx, const Pool2dParams& params,
                               GradWrite write) {
    EMBER_DISPATCH(avgpool2d_backward, dy, dx, params, write);
}

inline void dropout_forward(const OpContext& context, const Tensor& x, const Tensor& y, const Tensor& mask,
                            const DropoutParams& params) {
    EMBER_DISPATCH(dropout_forward, x, y, mask, params);
}
inline void dropout_backward(const OpContext& context, const Tensor& dy, const Tensor& mask, const Tensor& dx, float p,
                             GradWrite write) {
    EMBER_DISPATCH(dropout_backward, dy, mask, dx, p, write);
}

inline void softmax_cross_entropy(const OpContext& context, const Tensor& logits, const Tensor& targets,
                                  const Tensor& losses, const Tensor& dlogits, float grad_scale) {
    EMBER_DISPATCH(softmax_cross_entropy, logits, targets, losses, dlogits, grad_scale);
}

inline void layernorm_forward(const OpContext& context, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                              const Tensor& y, const Tensor& save_mean, const Tensor& save_rstd, float eps = 1e-5f) {
    EMBER_DISPATCH(layernorm_forward, x, gamma, beta, y, save_mean, save_rstd, eps);
}
inline void layernorm_backward(const OpContext& context, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                               const Tensor& save_mean, const Tensor& save_rstd, const Tensor& dx, const Tensor& dgamma,
                               const Tensor& dbeta, GradWrite input_write, GradWrite param_write) {
    EMBER_DISPATCH(layernorm_backward, x, dy, gamma, save_mean, save_rstd, dx, dgamma, dbeta, input_write, param_write);
}
inline void layernorm_forward_unfused(const OpContext& context, const Tensor& x, const Tensor& gamma,
                                      const Tensor& beta, const Tensor& y, const Tensor& save_mean,
                                      const Tensor& save_rstd, const Tensor& scratch, float eps = 1e-5f) {
    EMBER_DISPATCH(layernorm_forward_unfused, x, gamma, beta, y, save_mean, save_rstd, scratch, eps);
}
inline void layernorm_backward_unfused(const OpContext& context, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                       const Tensor& save_mean, const Tensor& save_rstd, const Tensor& dx,
                                       const Tensor& dgamma, const Tensor& dbeta, const Tensor& scratch,
                                       GradWrite input_write, GradWrite param_write) {
    EMBER_DISPATCH(layernorm_backward_unfused, x, dy, gamma, save_mean, save_rstd, dx, dgamma, dbeta, scratch,
                   input_write, param_write);
}

inline void embedding_forward(const OpContext& context, const Tensor& ids, const Tensor& table, const Tensor& out) {
    EMBER_DISPATCH(embedding_forward, ids, table, out);
}
inline void embedding_backward(const OpContext& context, const Tensor& ids, const Tensor& dout, const Tensor& dtable,
                               GradWrite write) {
    EMBER_DISPATCH(embedding_backward, ids, dout, dtable, write);
}

inline void add(const OpContext& context, const Tensor& a, const Tensor& b, const Tensor& out) {
    EMBER_DISPATCH(add, a, b, out);
}
inline void accumulate_grad(const OpContext& context, const Tensor& src, const Tensor& dst, GradWrite write) {
    EMBER_DISPATCH(accumulate_grad, src, dst, write);
}
inline void cast(const OpContext& context, const Tensor& src, const Tensor& dst) {
    EMBER_DISPATCH(cast, src, dst);
}
inline void convert_layout(const OpContext& context, const Tensor& src, const Tensor& dst) {
    EMBER_DISPATCH(convert_layout, src, dst);
}
inline void fill(const OpContext& context, const Tensor& t, float value) {
    EMBER_DISPATCH(fill, t, value);
}
inline void scale(const OpContext& context, const Tensor& t, float factor) {
    EMBER_DISPATCH(scale, t, factor);
}

inline void batched_gemm(const OpContext& context, const Tensor& a, const Tensor& b, const Tensor& c,
                         const BatchedGemmShape& shape) {
    EMBER_DISPATCH(batched_gemm, a, b, c, shape);
}
inline void move_heads(const OpContext& context, const Tensor& rows, const Tensor& heads, const HeadLayout& layout,
                       bool to_heads) {
    EMBER_DISPATCH(move_heads, rows, heads, layout, to_heads);
}
inline void softmax_rows(const OpContext& context, const Tensor& scores, const Tensor& probabilities) {
    EMBER_DISPATCH(softmax_rows, scores, probabilities);
}
inline void softmax_rows_backward(const OpContext& context, const Tensor& probabilities, const Tensor& dprobabilities,
                                  const Tensor& dscores, float scale) {
    EMBER_DISPATCH(softmax_rows_backward, probabilities, dprobabilities, dscores, scale);
}

#undef EMBER_DISPATCH

}  // namespace ember::ops
