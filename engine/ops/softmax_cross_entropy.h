// softmax_cross_entropy.h: fused softmax + cross-entropy over the last dim, as
// nn.CrossEntropyLoss on logits (llm.c's fused classifier). One pass per row computes
// the max, the log-sum-exp, the per-sample loss and, if asked, dlogits, so the
// probabilities are never stored.
//   loss[b]      = logsumexp(logits[b]) - logits[b][target[b]]          (f32)
//   dlogits[b,v] = grad_scale (softmax(logits[b])[v] - [v == target[b]])
// grad_scale is d(total loss)/d(loss[b]): 1/B for a mean, times the loss scale under
// fp16 AMP. Losses stay on the device (no sync); reduce them when you need the number.
// logits/dlogits: f32, f16 or bf16 (f64 on CPU); targets: i32 in [0, V).
#pragma once

#include "engine/ops/common.h"

namespace ember::ops {

void softmax_cross_entropy_cpu(const Tensor& logits, const Tensor& targets, const Tensor& losses, const Tensor& dlogits,
                               float grad_scale);
void softmax_cross_entropy_cuda(CudaContext& ctx, const Tensor& logits, const Tensor& targets, const Tensor& losses,
                                const Tensor& dlogits, float grad_scale);

// Mean of the per-sample losses (host-side; copies from the device for cuda tensors).
double mean_loss(const Tensor& losses);

}  // namespace ember::ops
