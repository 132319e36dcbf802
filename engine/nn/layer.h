// layer.h: ember::nn::Layer, a layer with an explicit forward and backward (the
// Caffe / llm.c shape; no autograd tape). forward() allocates its output from
// ctx.pool and keeps, as members, the views it needs for backward; backward() takes
// the gradient of that output and returns the gradient of the input (allocated from
// ctx.pool; undefined when need_input_grad is false), writing parameter gradients into
// the flat gradient buffer with ctx.parameter_write.
//
// In evaluation (ctx.training == false) a layer saves nothing for backward.
#pragma once

#include "engine/nn/run_context.h"

#include <memory>
#include <string>
#include <vector>

namespace ember::nn {

class Layer {
  public:
    explicit Layer(std::string name) : name_(std::move(name)) {}
    virtual ~Layer() = default;
    Layer(const Layer&) = delete;
    Layer& operator=(const Layer&) = delete;

    const std::string& name() const { return name_; }
    virtual const char* kind() const = 0;

    // Shape of the output for an input shape (throws std::invalid_argument naming the
    // layer when the input does not fit).
    virtual TensorShape output_shape(const TensorShape& input) const = 0;
    // Registers this layer's parameters and running state (once, before allocation).
    virtual void register_parameters(ParameterStore&) {}

    virtual Tensor forward(RunContext& ctx, const Tensor& x) = 0;
    virtual Tensor backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) = 0;

    // Activation checkpointing: the model keeps only this layer's input and output,
    // and runs its forward again inside backward.
    bool checkpointed = false;

  protected:
    std::string name_;
};

using LayerList = std::vector<std::unique_ptr<Layer>>;

// Throws std::invalid_argument("<layer>: <message>").
[[noreturn]] void layer_error(const Layer& layer, const std::string& message);

}  // namespace ember::nn
