// training_step.h: one training step of a Model with an engine/optim optimizer - forward,
// loss, backward over one or more micro-batches (gradient accumulation), the fp16
// overflow check and loss-scale update, optional global-norm clipping, the optimizer
// update - and forward-only evaluation.
//
// Switches, each measurable:
//   grads_set_to_none   first backward write stores instead of accumulating (no
//                       memset of the gradient buffer); off: memset + accumulate
//   cuda_graph          cuda only: the whole step (forward, backward, optimizer) is
//                       captured once after a warm-up step and replayed. Kernel
//                       arguments are baked in, so a change of learning rate, loss
//                       scale, dropout offset or the optimizer's per-step scalars
//                       (Adam's bias corrections) triggers a re-capture that updates
//                       the graph in place; graphs pay off for constant-argument steps.
// NVTX ranges: forward, backward (from Model), optimizer (category compute).
#pragma once

#include "engine/amp/autocast.h"
#include "engine/amp/loss_scaler.h"
#include "engine/nn/cuda_graph.h"
#include "engine/nn/gradient_sync.h"
#include "engine/nn/model.h"
#include "engine/optim/optimizer.h"

#include <memory>
#include <vector>

namespace ember::optim {
class GradientClipper;
}

namespace ember::nn {

struct TrainerOptions {
    amp::AutocastPolicy autocast;  // must agree with the model's activation dtype
    amp::LossScalerOptions loss_scaler;
    int accumulation_steps = 1;  // micro-batches per optimizer step
    bool grads_set_to_none = true;
    bool cuda_graph = false;
    double clip_grad_norm = 0.0;  // 0: off
    // Reading the loss synchronizes host and device; a launch-bound cuda loop reads it
    // every n-th step only (StepResult::loss is NaN on the others).
    int loss_read_interval = 1;
    // Data parallel training (engine/dist): gradients are synchronized through this
    // during backward (not owned; null = single process).
    GradientSynchronizer* gradient_sync = nullptr;
};

struct StepResult {
    double loss = 0.0;        // mean over the step's samples (NaN when not read this step)
    bool applied = true;      // false when an fp16 overflow skipped the update
    double loss_scale = 1.0;  // the scale this step used
};

struct EvaluationResult {
    double loss = 0.0;
    int64_t correct = 0;
    int64_t samples = 0;
    double accuracy() const { return samples ? static_cast<double>(correct) / samples : 0.0; }
};

class Trainer {
  public:
    Trainer(Model& model, optim::Optimizer& optimizer, const TrainerOptions& options);
    ~Trainer();

    // images [B, C, H, W] (f32), labels [B] (i32), both on the model's device.
    // B must divide by accumulation_steps.
    StepResult step(const Tensor& images, const Tensor& labels);
    // Forward only (no activations kept for backward): mean loss and correct count.
    EvaluationResult evaluate(const Tensor& images, const Tensor& labels);

    int64_t steps() const { return steps_; }
    void set_steps(int64_t steps) { steps_ = steps; }  // checkpoint restore
    amp::DynamicLossScaler& loss_scaler() { return loss_scaler_; }
    const CudaGraph& graph() const { return graph_; }
    const TrainerOptions& options() const { return options_; }
    int64_t optimizer_steps_skipped() const { return loss_scaler_.skipped_steps(); }

  private:
    // Everything the step enqueues; host work depends only on captured-state inputs.
    void enqueue_step(const Tensor& images, const Tensor& labels, double loss_scale);
    void run_micro_batches(const Tensor& images, const Tensor& labels, double loss_scale, bool first_writes_store);
    double read_mean_loss(int64_t samples);
    std::vector<uint8_t> graph_key(double loss_scale) const;

    Model& model_;
    optim::Optimizer& optimizer_;
    TrainerOptions options_;
    amp::DynamicLossScaler loss_scaler_;
    std::unique_ptr<amp::DeviceOverflowCheck> overflow_check_;
    std::unique_ptr<optim::GradientClipper> clipper_;
    FlatBuffer step_losses_;  // per-sample losses of the current step (static: graph-safe)
    int64_t step_losses_capacity_ = 0;
    FlatBuffer graph_images_, graph_labels_;  // static inputs of the captured step
    CudaGraph graph_;
    std::vector<uint8_t> captured_key_;
    bool cpu_overflow_ = false;
    int64_t steps_ = 0;
};

}  // namespace ember::nn
