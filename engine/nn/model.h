// model.h: ember::nn::Model, an ordered list of layers (residual blocks are composite
// layers holding their skip edge) with its parameter store, activation pools and the
// loss (fused softmax cross-entropy over the logits).
//
//   Model model = ...;                       // from make_model() (models.h)
//   model.build({Device::cpu});             // lay out + initialize the flat buffers
//   Tensor logits = model.forward(images, /*training=*/true);
//   LossOutput loss = model.loss(logits, labels, grad_scale);
//   model.backward(loss.dlogits);            // gradients land in parameters().gradients()
//
// Activation checkpointing: layers marked `checkpointed` keep only their input and
// output; their insides run in a separate recompute pool, once in forward and again
// inside backward (BatchNorm running statistics move only once). activation_bytes()
// reports the peak of both pools, so the saving can be read off.
#pragma once

#include "engine/nn/layer.h"
#include "engine/nn/parameters.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ember::nn {

struct BuildOptions {
    Device backend = Device::cpu;
    CudaContext* cuda = nullptr;          // required for Device::cuda (owned by the caller)
    DType master_dtype = DType::f32;      // f64: gradient checks on cpu
    DType activation_dtype = DType::f32;  // f16/bf16 under AMP (amp::AutocastPolicy), f64 in checks
    uint64_t seed = 0;                    // parameter init and dropout
    std::size_t pool_chunk_bytes = 64u << 20;
    LayerSwitches switches;
    // Channels-last (PyTorch's memory_format=torch.channels_last): 4-D activations are
    // nhwc. forward() reorders a 4-D input once at the entry; every conv, BatchNorm,
    // pool, activation and residual join keeps nhwc; Flatten reorders back before the
    // classifier. Parameters stay in one canonical order (conv filters KCRS, reordered
    // to KRSC per step inside Conv2d), so results, gradients and checkpoints do not
    // depend on the layout.
    bool channels_last = false;
};

struct LossOutput {
    Tensor losses;   // f32 [B] per-sample loss, on the model's device
    Tensor dlogits;  // gradient of (grad_scale * sum of losses) w.r.t. the logits
};

class Model {
  public:
    Model(std::string name, LayerList layers, TensorShape sample_shape);
    ~Model();

    const std::string& name() const { return name_; }
    void build(const BuildOptions& options);
    bool built() const { return built_; }

    // Runs every layer. input: [B, ...] of the sample shape, any float dtype (cast to
    // the activation dtype), a 4-D input in either layout (reordered to the model's,
    // see BuildOptions::channels_last). training=false is evaluation: nothing is kept for backward.
    // The pools are reset first: tensors from the previous call become invalid.
    Tensor forward(const Tensor& input, bool training);
    // Per-sample losses and (when want_gradient) dlogits = grad_scale * dloss/dlogits.
    LossOutput loss(const Tensor& logits, const Tensor& labels, float grad_scale, bool want_gradient = true);
    // Back through every layer; parameter gradients written with `parameter_write`.
    void backward(const Tensor& dlogits, ops::GradWrite parameter_write);

    ParameterStore& parameters() { return parameters_; }
    const ParameterStore& parameters() const { return parameters_; }
    LayerList& layers() { return layers_; }
    RunContext& context() { return context_; }
    Device backend() const { return context_.backend; }
    const BuildOptions& build_options() const { return options_; }
    TensorShape sample_shape() const { return sample_shape_; }

    // Distributed data parallel hook (engine/dist): backward calls it right after layer
    // i's backward, when the gradients of every parameter entry from
    // layer_parameter_begin(i) on are final (layers run in reverse), so a gradient
    // bucket's all-reduce can start while earlier layers are still differentiating.
    using GradientsReadyCallback = std::function<void(std::size_t layer_index)>;
    void set_gradients_ready_callback(GradientsReadyCallback callback) { gradients_ready_ = std::move(callback); }
    // Index of layer i's first entry in parameters().parameters() (entries are
    // registered in layer order; a layer without parameters has begin == next begin).
    std::size_t layer_parameter_begin(std::size_t layer_index) const { return layer_parameter_begin_.at(layer_index); }

    // Marks layers for activation checkpointing by index (composite blocks are the
    // useful ones: ResNet stages, transformer blocks).
    void set_checkpointed(const std::vector<int>& layer_indices);
    // Checkpoints every composite layer (basic_block, transformer_block).
    void checkpoint_composite_layers(bool enabled);

    std::size_t activation_bytes() const;  // peak of both pools since build / reset_activation_peak
    std::size_t recompute_bytes() const;   // the recompute pool's share
    void reset_activation_peak();

    void set_step_for_dropout(uint64_t offset) { context_.dropout_offset = offset; }
    // The seed dropout draws from (a checkpoint restores the saved run's seed).
    void set_seed(uint64_t seed);

    // One line per layer: name, kind, output shape; then the parameter count.
    std::string summary(int64_t batch) const;

  private:
    std::string name_;
    LayerList layers_;
    TensorShape sample_shape_;
    BuildOptions options_;
    bool built_ = false;
    ParameterStore parameters_;
    std::unique_ptr<ActivationPool> pool_, recompute_pool_;
    RunContext context_;
    std::vector<Tensor> layer_inputs_;  // input of each layer in the last training forward
    bool last_forward_training_ = false;
    GradientsReadyCallback gradients_ready_;
    std::vector<std::size_t> layer_parameter_begin_;
};

}  // namespace ember::nn
