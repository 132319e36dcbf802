// training_test.cpp: the training mechanics on the CPU backend: parameter layout and
// counts, "set to none" vs memset + accumulate, gradient accumulation, activation
// checkpointing, evaluation, the loss scaler and AMP (f16/bf16 emulated on cpu).
#include "engine/amp/loss_scaler.h"
#include "engine/nn/models.h"
#include "engine/nn/training_step.h"
#include "engine/optim/update_rules.h"
#include "tests/engine/nn/test_util.h"

#include <cstring>

namespace ember::nn::test {
namespace {

struct Batch {
    std::vector<float> images;
    std::vector<int32_t> labels;
    Tensor x, y;
};

// A fixed batch of synthetic 28x28 images whose class shifts a bright square.
Batch make_batch(int64_t batch, uint64_t seed, int64_t image = 28) {
    Batch b;
    b.images.resize(static_cast<std::size_t>(batch * image * image));
    b.labels.resize(static_cast<std::size_t>(batch));
    SplitMix64 rng(seed);
    for (int64_t i = 0; i < batch; ++i) {
        int label = static_cast<int>(rng.next() % 10);
        b.labels[i] = label;
        for (int64_t p = 0; p < image * image; ++p) {
            int64_t row = p / image, col = p % image;
            bool lit = row / (image / 4) == label % 4 && col / (image / 4) == label / 4 + 1;
            b.images[i * image * image + p] = (lit ? 1.0f : 0.0f) + 0.1f * static_cast<float>(rng.uniform01());
        }
    }
    b.x = make_tensor(b.images.data(), DType::f32, {batch, 1, image, image});
    b.y = make_tensor(b.labels.data(), DType::i32, {batch});
    return b;
}

std::unique_ptr<Model> built(const std::string& name, ModelOptions options = {}, DType activation = DType::f32,
                             uint64_t seed = 1) {
    auto model = make_model(name, options);
    BuildOptions build;
    build.activation_dtype = activation;
    build.seed = seed;
    build.pool_chunk_bytes = 16u << 20;
    model->build(build);
    return model;
}

std::unique_ptr<optim::Optimizer> make_sgd(Model& model, double lr = 0.05, double momentum = 0.9) {
    return optim::make_optimizer("sgd", {{"lr", lr}, {"momentum", momentum}}, model.parameters().segments(),
                                 optim::OptimizerBackend::cpu);
}

std::vector<float> flat(const FlatBuffer& buffer, std::size_t count) {
    std::vector<float> out(count);
    buffer.download(out.data(), count * sizeof(float));
    return out;
}

ModelOptions small_resnet() {
    ModelOptions o;
    o.resnet_widths = {4, 8};
    o.resnet_blocks_per_stage = 1;
    o.image_size = 12;
    return o;
}

TEST(Parameters, MlpCountLayoutAndFlags) {
    auto model = built("mlp");
    const ParameterStore& store = model->parameters();
    EXPECT_EQ(store.parameter_count(), 535818u);  // 784*512+512 + 512*256+256 + 256*10+10
    for (const ParameterEntry& e : store.parameters()) {
        EXPECT_EQ(e.offset % 64, 0u) << e.name;
        const bool is_bias = e.name.find(".bias") != std::string::npos;
        EXPECT_EQ((e.flags & optim::kSegmentNoWeightDecay) != 0, is_bias) << e.name;
    }
    auto cnn = make_model("cnn");
    ModelOptions with_bias;
    with_bias.conv_bias_before_bn = true;
    auto cnn_bias = make_model("cnn", with_bias);
    // conv1 288 + bn1 64 + conv2 18432 + bn2 128 + fc1 401536 + fc2 1290; biases add 32 + 64.
    EXPECT_EQ(cnn->parameters().parameter_count(), 421738u);
    EXPECT_EQ(cnn_bias->parameters().parameter_count(), 421738u + 96u);
    EXPECT_NE(cnn->parameters().layout_hash(), cnn_bias->parameters().layout_hash());
}

TEST(Parameters, InitializationIsSeededAndKaimingBounded) {
    auto a = built("mlp", {}, DType::f32, 5), b = built("mlp", {}, DType::f32, 5), c = built("mlp", {}, DType::f32, 6);
    const std::size_t n = a->parameters().flat_length();
    std::vector<float> pa = flat(a->parameters().master(), n), pb = flat(b->parameters().master(), n),
                       pc = flat(c->parameters().master(), n);
    EXPECT_EQ(pa, pb);
    EXPECT_NE(pa, pc);
    const ParameterEntry& fc1 = a->parameters().parameters()[0];
    const float bound = 1.0f / std::sqrt(784.0f);
    float largest = 0.0f;
    for (std::size_t i = 0; i < fc1.length; ++i) largest = std::max(largest, std::abs(pa[fc1.offset + i]));
    EXPECT_LE(largest, bound);
    EXPECT_GT(largest, 0.95f * bound);
}

TEST(Models, FactoryRefusesUnknownNamesAndShapes) {
    EXPECT_THROW(make_model("vgg"), std::invalid_argument);
    for (const std::string& name : model_names()) EXPECT_NO_THROW(make_model(name)) << name;
    auto model = built("mlp");
    std::vector<float> wrong(2 * 10);
    try {
        model->forward(make_tensor(wrong.data(), DType::f32, {2, 10}), true);
        FAIL() << "a [2,10] input must be refused";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("mlp"), std::string::npos) << e.what();
    }
}

TEST(Models, SummaryReportsShapesAndParameterCounts) {
    for (const std::string& name : model_names()) {
        auto model = make_model(name);
        std::size_t sum = 0;
        for (const ParameterEntry& e : model->parameters().parameters()) sum += e.length;
        EXPECT_EQ(model->parameters().parameter_count(), sum) << name;
        std::string summary = model->summary(32);
        EXPECT_NE(summary.find("-> [32,10]"), std::string::npos) << summary;
        std::printf("%s: %zu parameters\n", name.c_str(), sum);
    }
}

TEST(Models, DefaultModelsTakeATrainingStepAndEvaluate) {
    Batch batch = make_batch(4, 13);
    for (const std::string& name : model_names()) {
        auto model = built(name);
        auto optimizer = optim::make_optimizer("adamw", {{"lr", 1e-3}}, model->parameters().segments(),
                                               optim::OptimizerBackend::cpu);
        Trainer trainer(*model, *optimizer, {});
        StepResult step = trainer.step(batch.x, batch.y);
        EXPECT_TRUE(std::isfinite(step.loss)) << name;
        EXPECT_NEAR(step.loss, std::log(10.0), 1.0) << name << ": a fresh model is close to uniform";
        EvaluationResult eval = trainer.evaluate(batch.x, batch.y);
        EXPECT_EQ(eval.samples, 4) << name;
    }
}

void train_steps(Model& model, optim::Optimizer& optimizer, TrainerOptions options, const Batch& batch, int steps) {
    Trainer trainer(model, optimizer, options);
    for (int i = 0; i < steps; ++i) trainer.step(batch.x, batch.y);
}

TEST(Training, SetToNoneMatchesMemsetAndAccumulate) {
    for (const char* name : {"mlp", "cnn"}) {
        Batch batch = make_batch(8, 3);
        auto a = built(name), b = built(name);
        auto oa = make_sgd(*a), ob = make_sgd(*b);
        TrainerOptions to_none, memset;
        memset.grads_set_to_none = false;
        train_steps(*a, *oa, to_none, batch, 3);
        train_steps(*b, *ob, memset, batch, 3);
        const std::size_t n = a->parameters().flat_length();
        EXPECT_EQ(flat(a->parameters().master(), n), flat(b->parameters().master(), n)) << name;
        EXPECT_EQ(flat(a->parameters().gradients(), n), flat(b->parameters().gradients(), n)) << name;
    }
}

TEST(Training, GradientAccumulationMatchesOneBatch) {
    Batch batch = make_batch(8, 4);
    ModelOptions dropout;
    dropout.dropout = 0.0f;
    auto a = built("mlp"), b = built("mlp");
    auto oa = make_sgd(*a), ob = make_sgd(*b);
    TrainerOptions one, four;
    four.accumulation_steps = 4;
    train_steps(*a, *oa, one, batch, 2);
    train_steps(*b, *ob, four, batch, 2);
    const std::size_t n = a->parameters().flat_length();
    std::vector<float> pa = flat(a->parameters().master(), n), pb = flat(b->parameters().master(), n);
    for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(pa[i], pb[i], 1e-6f) << "parameter " << i;
    TrainerOptions sparse_loss;
    sparse_loss.loss_read_interval = 2;
    Trainer sparse(*a, *oa, sparse_loss);
    EXPECT_FALSE(std::isnan(sparse.step(batch.x, batch.y).loss));
    EXPECT_TRUE(std::isnan(sparse.step(batch.x, batch.y).loss));
    EXPECT_FALSE(std::isnan(sparse.step(batch.x, batch.y).loss));
    Trainer odd(*a, *oa, four);
    Batch seven = make_batch(7, 4);
    EXPECT_THROW(odd.step(seven.x, seven.y), std::invalid_argument);
}

// switches.fused_layernorm = false: the unfused kernel chain (f32 intermediates) trains
// the transformer to the same losses and parameters as the fused op, within rounding.
TEST(Training, UnfusedLayerNormTrainsLikeFused) {
    ModelOptions options;
    options.transformer_blocks = 2;
    Batch batch = make_batch(8, 9, options.image_size);
    std::vector<double> losses[2];
    std::vector<float> parameters[2];
    for (int unfused = 0; unfused < 2; ++unfused) {
        auto model = make_model("transformer", options);
        BuildOptions build;
        build.seed = 1;
        build.pool_chunk_bytes = 16u << 20;
        build.switches.fused_layernorm = unfused == 0;
        model->build(build);
        auto optimizer = make_sgd(*model);
        Trainer trainer(*model, *optimizer, {});
        for (int step = 0; step < 6; ++step) losses[unfused].push_back(trainer.step(batch.x, batch.y).loss);
        parameters[unfused] = flat(model->parameters().master(), model->parameters().flat_length());
    }
    for (std::size_t step = 0; step < losses[0].size(); ++step)
        EXPECT_NEAR(losses[1][step], losses[0][step], 1e-4 * std::max(1.0, std::abs(losses[0][step])))
            << "step " << step;
    EXPECT_LT(losses[0].back(), losses[0].front());  // the comparison is over real training
    double difference = 0.0, norm = 0.0;
    for (std::size_t i = 0; i < parameters[0].size(); ++i) {
        difference += double(parameters[1][i] - parameters[0][i]) * (parameters[1][i] - parameters[0][i]);
        norm += double(parameters[0][i]) * parameters[0][i];
    }
    EXPECT_LT(std::sqrt(difference / norm), 1e-5);
    EXPECT_GT(difference, 0.0);  // the switch really changed the path (rounding differs)
}

TEST(Training, ActivationCheckpointingKeepsGradientsAndSavesMemory) {
    for (const char* name : {"resnet", "transformer"}) {
        ModelOptions options = small_resnet();
        if (std::string(name) == "transformer") options = ModelOptions{};
        options.transformer_blocks = 2;
        Batch batch = make_batch(8, 5, options.image_size);
        auto plain = built(name, options), checkpointed = built(name, options);
        checkpointed->checkpoint_composite_layers(true);
        for (Model* model : {plain.get(), checkpointed.get()}) {
            Tensor logits = model->forward(batch.x, true);
            LossOutput out = model->loss(logits, batch.y, 1.0f / 8);
            model->backward(out.dlogits, ops::GradWrite::store);
        }
        const std::size_t n = plain->parameters().flat_length();
        EXPECT_EQ(flat(plain->parameters().gradients(), n), flat(checkpointed->parameters().gradients(), n)) << name;
        EXPECT_EQ(flat(plain->parameters().state_buffer(), plain->parameters().state_length()),
                  flat(checkpointed->parameters().state_buffer(), plain->parameters().state_length()))
            << name << ": running statistics must move once per step";
        EXPECT_LT(checkpointed->activation_bytes(), plain->activation_bytes()) << name;
        std::printf("%s: activations %zu bytes, with checkpointing %zu (%zu in the recompute pool): saved %zu\n", name,
                    plain->activation_bytes(), checkpointed->activation_bytes(), checkpointed->recompute_bytes(),
                    plain->activation_bytes() - checkpointed->activation_bytes());
    }
}

TEST(Training, EvaluationStoresNoActivationsAndChangesNothing) {
    Batch batch = make_batch(16, 6);
    auto model = built("cnn");
    auto optimizer = make_sgd(*model);
    Trainer trainer(*model, *optimizer, {});
    trainer.step(batch.x, batch.y);
    model->reset_activation_peak();
    const std::size_t training_bytes = model->activation_bytes();
    // A fresh model for the peak: reset_activation_peak keeps the current use.
    auto fresh = built("cnn");
    const std::size_t n = model->parameters().flat_length(), s = model->parameters().state_length();
    std::vector<float> params = flat(model->parameters().master(), n);
    std::vector<float> stats = flat(model->parameters().state_buffer(), s);
    fresh->forward(batch.x, false);
    EvaluationResult result = trainer.evaluate(batch.x, batch.y);
    EXPECT_EQ(result.samples, 16);
    EXPECT_GE(result.correct, 0);
    EXPECT_TRUE(std::isfinite(result.loss));
    EXPECT_EQ(flat(model->parameters().master(), n), params);
    EXPECT_EQ(flat(model->parameters().state_buffer(), s), stats);
    auto trained = built("cnn");
    Tensor logits = trained->forward(batch.x, true);
    LossOutput out = trained->loss(logits, batch.y, 1.0f / 16);
    trained->backward(out.dlogits, ops::GradWrite::store);
    EXPECT_LT(fresh->activation_bytes(), trained->activation_bytes());
    (void)training_bytes;
    EXPECT_THROW(fresh->backward(out.dlogits, ops::GradWrite::store), std::logic_error);
}

TEST(LossScaler, Fp16OverflowSkipsTheStep) {
    Batch batch = make_batch(8, 7);
    auto model = built("mlp", {}, DType::f16);
    auto optimizer =
        optim::make_optimizer("adam", {{"lr", 1e-3}}, model->parameters().segments(), optim::OptimizerBackend::cpu);
    TrainerOptions options;
    options.autocast.precision = amp::Precision::fp16;
    Trainer trainer(*model, *optimizer, options);
    const std::size_t n = model->parameters().flat_length();
    // A huge input overflows fp16 activations: the gradients hold inf/NaN.
    Batch poisoned = batch;
    poisoned.images[5] = 1e30f;
    poisoned.x.data = poisoned.images.data();
    poisoned.y.data = poisoned.labels.data();
    std::vector<float> before = flat(model->parameters().master(), n);
    StepResult skipped = trainer.step(poisoned.x, poisoned.y);
    EXPECT_FALSE(skipped.applied);
    EXPECT_EQ(skipped.loss_scale, 65536.0);
    EXPECT_EQ(trainer.loss_scaler().scale(), 32768.0);
    EXPECT_EQ(trainer.loss_scaler().skipped_steps(), 1);
    EXPECT_EQ(optimizer->step_count(), 0);
    EXPECT_EQ(flat(model->parameters().master(), n), before);
    StepResult applied = trainer.step(batch.x, batch.y);
    EXPECT_TRUE(applied.applied);
    EXPECT_NE(flat(model->parameters().master(), n), before);
    EXPECT_EQ(trainer.loss_scaler().growth_tracker(), 1);
}

TEST(Amp, LowPrecisionTrainingOnCpuLowersTheLoss) {
    for (amp::Precision precision : {amp::Precision::fp16, amp::Precision::bf16}) {
        amp::AutocastPolicy policy{precision};
        Batch batch = make_batch(32, 8);
        auto model = built("mlp", {}, policy.compute_dtype());
        auto optimizer =
            optim::make_optimizer("adam", {{"lr", 1e-3}}, model->parameters().segments(), optim::OptimizerBackend::cpu);
        TrainerOptions options;
        options.autocast = policy;
        Trainer trainer(*model, *optimizer, options);
        double first = trainer.step(batch.x, batch.y).loss, last = first;
        for (int i = 0; i < 15; ++i) last = trainer.step(batch.x, batch.y).loss;
        EXPECT_LT(last, 0.5 * first) << amp::precision_name(precision);
        // The low-precision weight copy follows the fp32 masters.
        const ParameterStore& store = model->parameters();
        std::vector<float> master = flat(model->parameters().master(), store.flat_length());
        std::vector<uint16_t> low(store.flat_length());
        model->parameters().low_precision().download(low.data(), low.size() * 2);
        for (std::size_t i = 0; i < 1000; ++i) {
            float expected = round_to_dtype(master[i], policy.compute_dtype());
            float got = precision == amp::Precision::fp16 ? f16_bits_to_float(low[i]) : bf16_bits_to_float(low[i]);
            ASSERT_EQ(got, expected) << "element " << i;
        }
    }
    auto model = built("mlp", {}, DType::bf16);
    auto optimizer = make_sgd(*model);
    TrainerOptions mismatched;  // fp32 policy for a bf16 model
    EXPECT_THROW(Trainer(*model, *optimizer, mismatched), std::invalid_argument);
}

// Every model's layers accept f16/bf16 activations with fp32 masters (the cpu ops keep
// the same dtype rules as the CUDA ones), and their gradients track the fp32 run.
TEST(Amp, EveryModelRunsInLowPrecisionOnCpu) {
    ModelOptions options = small_resnet();
    options.image_size = 28;
    options.cnn_channels1 = 8;
    options.cnn_channels2 = 8;
    options.cnn_hidden = 16;
    options.transformer_dim = 16;
    options.transformer_heads = 2;
    options.transformer_mlp_hidden = 32;
    Batch batch = make_batch(8, 12);
    for (const std::string& name : model_names()) {
        auto reference = built(name, options);
        Tensor logits = reference->forward(batch.x, true);
        LossOutput out = reference->loss(logits, batch.y, 1.0f / 8);
        reference->backward(out.dlogits, ops::GradWrite::store);
        const std::size_t n = reference->parameters().flat_length();
        std::vector<float> expected = flat(reference->parameters().gradients(), n);
        double norm = 0.0;
        for (float g : expected) norm += double(g) * g;
        for (DType dtype : {DType::f16, DType::bf16}) {
            auto model = built(name, options, dtype);
            Tensor low_logits = model->forward(batch.x, true);
            EXPECT_EQ(low_logits.dtype, dtype) << name;
            LossOutput low = model->loss(low_logits, batch.y, 1.0f / 8);
            model->backward(low.dlogits, ops::GradWrite::store);
            std::vector<float> got = flat(model->parameters().gradients(), n);
            double error = 0.0;
            for (std::size_t i = 0; i < n; ++i)
                error += (double(got[i]) - expected[i]) * (double(got[i]) - expected[i]);
            // bf16 keeps 8 bits of mantissa, f16 11: the gradient agrees to a few percent.
            EXPECT_LT(std::sqrt(error), 0.1 * std::sqrt(norm)) << name << " " << dtype_name(dtype);
        }
    }
}

TEST(Training, CudaGraphIsRefusedOnCpu) {
    auto model = built("mlp");
    auto optimizer = make_sgd(*model);
    TrainerOptions options;
    options.cuda_graph = true;
    try {
        Trainer trainer(*model, *optimizer, options);
        FAIL() << "cuda_graph on a cpu model must be refused";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos);
    }
}

TEST(Training, DropoutIsIdentityInEvaluationAndFreshEachStep) {
    ModelOptions options;
    options.dropout = 0.5f;
    Batch batch = make_batch(4, 9);
    auto model = built("mlp", options);
    auto reference = built("mlp");
    const std::size_t classes = 10;
    Tensor eval = model->forward(batch.x, false);
    std::vector<float> with_dropout(eval.as<float>(), eval.as<float>() + 4 * classes);
    Tensor plain = reference->forward(batch.x, false);
    std::vector<float> without(plain.as<float>(), plain.as<float>() + 4 * classes);
    EXPECT_EQ(with_dropout, without);
    model->set_step_for_dropout(0);
    Tensor a = model->forward(batch.x, true);
    std::vector<float> step0(a.as<float>(), a.as<float>() + 4 * classes);
    model->set_step_for_dropout(1);
    Tensor b = model->forward(batch.x, true);
    std::vector<float> step1(b.as<float>(), b.as<float>() + 4 * classes);
    EXPECT_NE(step0, step1);
}

}  // namespace
}  // namespace ember::nn::test
