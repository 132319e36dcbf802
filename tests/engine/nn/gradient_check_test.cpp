// gradient_check_test.cpp: every layer's and every model's backward against central
// finite differences, in f64 on the CPU backend (step 1e-6, tolerance 1e-6 relative).
#include "engine/nn/basic_layers.h"
#include "engine/nn/conv_layers.h"
#include "engine/nn/models.h"
#include "engine/nn/transformer_layers.h"
#include "tests/engine/nn/test_util.h"

namespace ember::nn::test {
namespace {

void check_layer(std::unique_ptr<Layer> layer, std::initializer_list<int64_t> input_shape, uint64_t seed = 3) {
    LayerHarness harness(std::move(layer));
    int64_t n = 1;
    for (int64_t d : input_shape) n *= d;
    std::vector<double> input = random_values(static_cast<std::size_t>(n), seed);
    Tensor x = host_tensor(input, input_shape);
    harness.check(input, x);
}

TEST(GradientCheck, Linear) {
    check_layer(std::make_unique<Linear>("fc", 5, 4), {3, 5});
}
TEST(GradientCheck, LinearWithoutBias) {
    check_layer(std::make_unique<Linear>("fc", 5, 4, false), {3, 5});
}
TEST(GradientCheck, LinearGeluFused) {
    check_layer(std::make_unique<Linear>("fc", 5, 4, true, true), {3, 5});
}

// The unfused chain keeps its intermediate in f32 (as an eager framework would), so it
// is compared with the fused form rather than differentiated; backward is shared.
TEST(GradientCheck, LinearGeluUnfusedMatchesFused) {
    LayerHarness harness(std::make_unique<Linear>("fc", 5, 4, true, true));
    std::vector<double> input = random_values(15, 4);
    Tensor x = host_tensor(input, {3, 5});
    const double fused = harness.objective(x);
    harness.context().switches.fused_gelu = false;
    const double unfused = harness.objective(x);
    EXPECT_NEAR(unfused, fused, 1e-5 * std::max(1.0, std::abs(fused)));
    EXPECT_NE(unfused, fused);  // the two paths really differ in rounding
}

TEST(GradientCheck, ReLU) {
    check_layer(std::make_unique<ReLU>("relu"), {4, 6});
}
TEST(GradientCheck, GELU) {
    check_layer(std::make_unique<GELU>("gelu"), {4, 6});
}
TEST(GradientCheck, Dropout) {
    check_layer(std::make_unique<Dropout>("drop", 0.4f, 0), {4, 6});
}
TEST(GradientCheck, Flatten) {
    check_layer(std::make_unique<Flatten>("flatten"), {2, 2, 3, 3});
}

TEST(GradientCheck, Conv2dWithBias) {
    check_layer(std::make_unique<Conv2d>("conv", 2, 3, 3, 1, 1, true), {2, 2, 5, 5});
}
TEST(GradientCheck, Conv2dStridedWithoutBias) {
    check_layer(std::make_unique<Conv2d>("conv", 2, 3, 3, 2, 1, false), {2, 2, 6, 6});
}
TEST(GradientCheck, BatchNorm2d) {
    check_layer(std::make_unique<BatchNorm>("bn", 3), {4, 3, 3, 3});
}
TEST(GradientCheck, BatchNorm1d) {
    check_layer(std::make_unique<BatchNorm>("bn", 5), {6, 5});
}
TEST(GradientCheck, MaxPool2d) {
    check_layer(std::make_unique<MaxPool2d>("pool", 2, 2), {2, 2, 4, 6});
}
TEST(GradientCheck, GlobalAvgPool) {
    check_layer(std::make_unique<GlobalAvgPool>("pool"), {2, 3, 3, 4});
}

TEST(GradientCheck, BasicBlockIdentityShortcut) {
    check_layer(std::make_unique<BasicBlock>("block", 3, 3, 1, false), {4, 3, 4, 4});
}
TEST(GradientCheck, BasicBlockProjectionShortcut) {
    check_layer(std::make_unique<BasicBlock>("block", 2, 4, 2, true), {4, 2, 6, 6});
}

TEST(GradientCheck, PatchEmbedding) {
    check_layer(std::make_unique<PatchEmbedding>("embed", 1, 8, 4, 6), {2, 1, 8, 8});
}
TEST(GradientCheck, LayerNorm) {
    check_layer(std::make_unique<LayerNorm>("ln", 6), {5, 6});
}
// The unfused chain keeps f64 intermediates for f64 activations, so finite differences
// check it as they check the fused op.
TEST(GradientCheck, LayerNormUnfused) {
    LayerHarness harness(std::make_unique<LayerNorm>("ln", 6));
    harness.context().switches.fused_layernorm = false;
    std::vector<double> input = random_values(30, 3);
    Tensor x = host_tensor(input, {5, 6});
    harness.check(input, x);
}
TEST(GradientCheck, SelfAttentionOneHead) {
    check_layer(std::make_unique<SelfAttention>("attention", 6, 1, 4), {8, 6});
}
TEST(GradientCheck, SelfAttentionTwoHeads) {
    check_layer(std::make_unique<SelfAttention>("attention", 8, 2, 4), {8, 8});
}
TEST(GradientCheck, TransformerBlock) {
    check_layer(std::make_unique<TransformerBlock>("block", 8, 2, 4, 12), {8, 8});
}
TEST(GradientCheck, TokenMeanPool) {
    check_layer(std::make_unique<TokenMeanPool>("pool", 4), {8, 5});
}

// ---- the loss and whole models: perturb parameters, compare the flat gradient --------

struct ModelCase {
    const char* name;
    ModelOptions options;
    int64_t batch;
};

ModelOptions tiny(const std::string& model) {
    ModelOptions o;
    o.image_size = 8;
    o.classes = 5;
    if (model == "mlp") o.mlp_hidden = {6, 5};
    o.cnn_channels1 = 2;
    o.cnn_channels2 = 3;
    o.cnn_hidden = 6;
    o.resnet_widths = {3, 4};
    o.resnet_blocks_per_stage = 1;
    o.patch = 4;
    o.transformer_dim = 8;
    o.transformer_heads = 2;
    o.transformer_mlp_hidden = 12;
    return o;
}

void check_model(const std::string& name, ModelOptions options, bool checkpoint_blocks = false) {
    auto model = make_model(name, options);
    BuildOptions build;
    build.master_dtype = DType::f64;
    build.activation_dtype = DType::f64;
    build.seed = 11;
    build.pool_chunk_bytes = 1u << 22;
    model->build(build);
    model->checkpoint_composite_layers(checkpoint_blocks);
    ParameterStore& store = model->parameters();
    double* params = static_cast<double*>(store.master().data());
    std::vector<double> noise = random_values(store.flat_length(), 5, 0.2);
    for (std::size_t i = 0; i < store.flat_length(); ++i) params[i] += noise[i];

    const int64_t batch = 4;
    std::vector<double> images = random_values(static_cast<std::size_t>(batch * 64), 17);
    std::vector<int32_t> labels = {0, 3, 1, 4};
    Tensor x = make_tensor(images.data(), DType::f64, {batch, 1, 8, 8});
    Tensor y = make_tensor(labels.data(), DType::i32, {batch});
    auto mean_loss = [&] {
        Tensor logits = model->forward(x, true);
        LossOutput out = model->loss(logits, y, 1.0f, false);
        double sum = 0.0;
        for (int64_t b = 0; b < batch; ++b) sum += out.losses.as<double>()[b];
        return sum / batch;
    };
    Tensor logits = model->forward(x, true);
    LossOutput out = model->loss(logits, y, 1.0f / batch);
    model->backward(out.dlogits, ops::GradWrite::store);
    std::vector<double> analytic(static_cast<double*>(store.gradients().data()),
                                 static_cast<double*>(store.gradients().data()) + store.flat_length());
    // Every parameter of the small models; a stride over the larger ones keeps CI quick.
    const std::size_t count = store.parameter_count();
    const std::size_t stride = count > 600 ? count / 600 + 1 : 1;
    std::size_t checked = 0;
    for (const ParameterEntry& e : store.parameters()) {
        for (std::size_t i = 0; i < e.length; i += (e.length > 16 ? stride : 1)) {
            expect_close(analytic[e.offset + i], central_difference(params[e.offset + i], mean_loss),
                         name + " " + e.name + "[" + std::to_string(i) + "]");
            ++checked;
        }
    }
    EXPECT_GT(checked, 20u);
}

TEST(GradientCheck, MlpModel) {
    check_model("mlp", tiny("mlp"));
}
TEST(GradientCheck, CnnModel) {
    check_model("cnn", tiny("cnn"));
}
TEST(GradientCheck, CnnModelWithConvBias) {
    ModelOptions o = tiny("cnn");
    o.conv_bias_before_bn = true;
    check_model("cnn", o);
}
TEST(GradientCheck, ResnetModel) {
    check_model("resnet", tiny("resnet"));
}
TEST(GradientCheck, ResnetModelWithActivationCheckpointing) {
    check_model("resnet", tiny("resnet"), true);
}
TEST(GradientCheck, TransformerModel) {
    check_model("transformer", tiny("transformer"));
}
TEST(GradientCheck, TransformerModelWithActivationCheckpointing) {
    check_model("transformer", tiny("transformer"), true);
}

}  // namespace
}  // namespace ember::nn::test
