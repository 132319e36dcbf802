// transformer_layers.h: the pieces of the tiny vision transformer: patch embedding
// (a stride-p convolution, as ViT does, plus a learned position table), LayerNorm,
// multi-head self-attention written with GEMMs and a row softmax, the pre-norm
// transformer block (two residual joins) and the mean over tokens.
// Token activations are [B*T, D] row matrices.
#pragma once

#include "engine/nn/basic_layers.h"
#include "engine/nn/conv_layers.h"
#include "engine/nn/flat_buffer.h"
#include "engine/nn/layer.h"

namespace ember::nn {

// [B,1,H,W] -> [B*T, D] with T = (H/p)(W/p): conv p x p stride p, channels-last
// reorder (token-major), plus position embedding rows.
class PatchEmbedding : public Layer {
  public:
    PatchEmbedding(std::string name, int64_t channels, int64_t image_size, int patch, int64_t dim);
    const char* kind() const override { return "patch_embedding"; }
    TensorShape output_shape(const TensorShape& input) const override;
    void register_parameters(ParameterStore& store) override;
    Tensor forward(RunContext& ctx, const Tensor& x) override;
    Tensor backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) override;
    int64_t tokens() const { return tokens_; }

  private:
    Tensor position_ids(RunContext& ctx, int64_t batch);
    Conv2d conv_;
    Layout conv_layout_ = Layout::nchw;  // of the last forward's conv output
    int64_t dim_, grid_, tokens_;
    ParameterRef position_;
    FlatBuffer ids_;  // i32 [batch*T] = token index; built once per batch size (static for graphs)
    int64_t ids_batch_ = 0;
    Tensor ids_view_;
};

// nn.LayerNorm over the last dim of [rows, D]: the fused op, or the unfused kernel
// chain (engine/ops/layernorm.h) when ctx.switches.fused_layernorm is off.
class LayerNorm : public Layer {
  public:
    LayerNorm(std::string name, int64_t dim, float eps = 1e-5f);
    const char* kind() const override { return "layernorm"; }
    TensorShape output_shape(const TensorShape& input) const override;
    void register_parameters(ParameterStore& store) override;
    Tensor forward(RunContext& ctx, const Tensor& x) override;
    Tensor backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) override;

  private:
    int64_t dim_;
    float eps_;
    ParameterRef gamma_, beta_;
    Tensor x_, mean_, rstd_;
};

// Multi-head self-attention over T tokens: qkv = x Wqkv^T + b; per head
// P = softmax(Q K^T / sqrt(dh)), O = P V; out = concat(O) Wo^T + bo.
class SelfAttention : public Layer {
  public:
    SelfAttention(std::string name, int64_t dim, int64_t heads, int64_t tokens);
    const char* kind() const override { return "self_attention"; }
    TensorShape output_shape(const TensorShape& input) const override;
    void register_parameters(ParameterStore& store) override;
    Tensor forward(RunContext& ctx, const Tensor& x) override;
    Tensor backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) override;

  private:
    int64_t dim_, heads_, tokens_, head_dim_;
    Linear qkv_, proj_;
    Tensor q_, k_, v_, probabilities_, probabilities_compute_;
    int64_t batch_ = 0;
};

// Pre-norm block: h = x + attn(ln1(x)); out = h + fc2(gelu(fc1(ln2(h)))).
class TransformerBlock : public Layer {
  public:
    TransformerBlock(std::string name, int64_t dim, int64_t heads, int64_t tokens, int64_t mlp_hidden);
    const char* kind() const override { return "transformer_block"; }
    TensorShape output_shape(const TensorShape& input) const override;
    void register_parameters(ParameterStore& store) override;
    Tensor forward(RunContext& ctx, const Tensor& x) override;
    Tensor backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) override;

  private:
    LayerNorm ln1_, ln2_;
    SelfAttention attention_;
    Linear fc1_, fc2_;  // fc1 carries the GELU
};

// [B*T, D] -> [B, D]: the mean over each sample's T tokens.
class TokenMeanPool : public Layer {
  public:
    TokenMeanPool(std::string name, int64_t tokens) : Layer(std::move(name)), tokens_(tokens) {}
    const char* kind() const override { return "token_mean_pool"; }
    TensorShape output_shape(const TensorShape& input) const override;
    Tensor forward(RunContext& ctx, const Tensor& x) override;
    Tensor backward(RunContext& ctx, const Tensor& dy, bool need_input_grad) override;

  private:
    int64_t tokens_;
    TensorShape input_shape_;
};

}  // namespace ember::nn
