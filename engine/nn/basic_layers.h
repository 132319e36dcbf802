// basic_layers.h: Linear (optionally with GELU), ReLU, GELU, Dropout and Flatten.
#pragma once

#include "engine/nn/layer.h"

namespace ember::nn {

// y[M,N] = x[M,K] W[N,K]^T + b[N], PyTorch's nn.Linear init (kaiming uniform,
// bound 1/sqrt(K) for W and b). With gelu=true, y = gelu(linear(x)) - fused into the
// GEMM epilogue, or the unfused chain when ctx.switches.fused_gelu is off.
class Linear : public Layer {
  public:
    Linear(std::string name, int64_t in_features, int64_t out_features, bool bias = true, bool gelu = false);
    const char* kind() const override { return gelu_ ? "linear_gelu" : "linear"; }
    TensorShape output_shape(const TensorShape& input) const override;
    void register_parameters(ParameterStore& store) override;
    Tensor forward(RunContext& ctx, const Tensor& x) override;
    Tensor backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) override;

  private:
    int64_t in_, out_;
    bool has_bias_, gelu_;
    ParameterRef weight_, bias_;
    Tensor x_, pre_activation_;
};

class ReLU : public Layer {
  public:
    explicit ReLU(std::string name) : Layer(std::move(name)) {}
    const char* kind() const override { return "relu"; }
    TensorShape output_shape(const TensorShape& input) const override { return input; }
    Tensor forward(RunContext& ctx, const Tensor& x) override;
    Tensor backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) override;

  private:
    Tensor y_;
};

class GELU : public Layer {
  public:
    explicit GELU(std::string name) : Layer(std::move(name)) {}
    const char* kind() const override { return "gelu"; }
    TensorShape output_shape(const TensorShape& input) const override { return input; }
    Tensor forward(RunContext& ctx, const Tensor& x) override;
    Tensor backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) override;

  private:
    Tensor x_;
};

// Inverted dropout; identity in evaluation. Each instance draws from its own stream
// (stream_id) of the model's counter-based generator, advanced every step.
class Dropout : public Layer {
  public:
    Dropout(std::string name, float p, uint64_t stream_id);
    const char* kind() const override { return "dropout"; }
    TensorShape output_shape(const TensorShape& input) const override { return input; }
    Tensor forward(RunContext& ctx, const Tensor& x) override;
    Tensor backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) override;

  private:
    float p_;
    uint64_t stream_id_;
    Tensor mask_;
};

// (N,C,H,W) -> (N, C*H*W) in nn.Flatten's order: a view of an nchw input; a
// channels-last input is reordered to nchw first (and its gradient back).
class Flatten : public Layer {
  public:
    explicit Flatten(std::string name) : Layer(std::move(name)) {}
    const char* kind() const override { return "flatten"; }
    TensorShape output_shape(const TensorShape& input) const override;
    Tensor forward(RunContext& ctx, const Tensor& x) override;
    Tensor backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) override;

  private:
    TensorShape input_shape_;
    Layout input_layout_ = Layout::nchw;
};

}  // namespace ember::nn
