// conv_layers.h: Conv2d, BatchNorm (2-D and 1-D), MaxPool2d, GlobalAvgPool and the
// ResNet BasicBlock (a composite layer with its skip edge inside).
// Each follows the memory layout of its input (nchw, or channels-last nhwc when the
// model is built with BuildOptions::channels_last): outputs and input gradients are
// allocated in that layout; parameters keep one canonical order either way.
#pragma once

#include "engine/nn/basic_layers.h"
#include "engine/nn/layer.h"
#include "engine/ops/batchnorm.h"
#include "engine/ops/conv.h"
#include "engine/ops/pooling.h"

namespace ember::nn {

// nn.Conv2d with square kernels; kaiming-uniform init (bound 1/sqrt(C*R*S)).
// A conv that feeds BatchNorm is built without bias (the BN shift makes it redundant);
// the models keep that switchable so its cost can be measured.
class Conv2d : public Layer {
  public:
    Conv2d(std::string name, int64_t in_channels, int64_t out_channels, int kernel, int stride, int padding, bool bias);
    const char* kind() const override { return "conv2d"; }
    TensorShape output_shape(const TensorShape& input) const override;
    void register_parameters(ParameterStore& store) override;
    Tensor forward(RunContext& ctx, const Tensor& x) override;
    Tensor backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) override;

  private:
    // The filter in the order a conv over `layout` activations reads (KCRS or KRSC).
    Tensor filter_in_layout(RunContext& ctx, Layout layout);

    int64_t in_, out_;
    int kernel_;
    ops::Conv2dParams params_;
    bool has_bias_;
    ParameterRef weight_, bias_;
    Tensor x_, filter_;  // filter_: what forward used, for backward data
};

// nn.BatchNorm2d over (N,C,H,W), or BatchNorm1d over (N,C). gamma=1, beta=0,
// running_mean=0, running_var=1; statistics in fp32 whatever the activation dtype.
class BatchNorm : public Layer {
  public:
    BatchNorm(std::string name, int64_t channels, float momentum = 0.1f, float eps = 1e-5f);
    const char* kind() const override { return "batchnorm"; }
    TensorShape output_shape(const TensorShape& input) const override;
    void register_parameters(ParameterStore& store) override;
    Tensor forward(RunContext& ctx, const Tensor& x) override;
    Tensor backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) override;

  private:
    int64_t channels_;
    ops::BatchNormParams params_;
    ParameterRef gamma_, beta_, running_mean_, running_var_;
    Tensor x_, save_mean_, save_invstd_;
};

class MaxPool2d : public Layer {
  public:
    MaxPool2d(std::string name, int kernel, int stride);
    const char* kind() const override { return "maxpool2d"; }
    TensorShape output_shape(const TensorShape& input) const override;
    Tensor forward(RunContext& ctx, const Tensor& x) override;
    Tensor backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) override;

  private:
    ops::Pool2dParams params_;
    TensorShape input_shape_;
    Layout input_layout_ = Layout::nchw;
    Tensor argmax_;
};

// (N,C,H,W) -> (N,C): the mean over H and W.
class GlobalAvgPool : public Layer {
  public:
    explicit GlobalAvgPool(std::string name) : Layer(std::move(name)) {}
    const char* kind() const override { return "global_avg_pool"; }
    TensorShape output_shape(const TensorShape& input) const override;
    Tensor forward(RunContext& ctx, const Tensor& x) override;
    Tensor backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) override;

  private:
    TensorShape input_shape_;
    Layout input_layout_ = Layout::nchw;
};

// ResNet basic block: relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), where the
// shortcut is the identity or, when the stride or width changes, conv1x1 + BN.
class BasicBlock : public Layer {
  public:
    BasicBlock(std::string name, int64_t in_channels, int64_t out_channels, int stride, bool conv_bias);
    const char* kind() const override { return "basic_block"; }
    TensorShape output_shape(const TensorShape& input) const override;
    void register_parameters(ParameterStore& store) override;
    Tensor forward(RunContext& ctx, const Tensor& x) override;
    Tensor backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) override;

  private:
    Conv2d conv1_, conv2_;
    BatchNorm bn1_, bn2_;
    ReLU relu1_;
    std::unique_ptr<Conv2d> shortcut_conv_;  // null for the identity shortcut
    std::unique_ptr<BatchNorm> shortcut_bn_;
    Tensor out_;  // the block's output (after the final ReLU), for its backward
};

}  // namespace ember::nn
