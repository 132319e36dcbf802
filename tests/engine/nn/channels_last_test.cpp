// channels_last_test.cpp: a model built channels-last (BuildOptions::channels_last,
// nhwc activations) against the same model in nchw on the CPU backend: logits,
// per-sample losses, every parameter gradient, the running statistics and the
// parameters after optimizer steps agree to float rounding; a checkpoint written in
// one layout resumes in the other with the same loss.
#include "engine/checkpoint/checkpoint.h"
#include "engine/nn/basic_layers.h"
#include "engine/nn/conv_layers.h"
#include "engine/nn/models.h"
#include "engine/nn/training_step.h"

#include "tests/engine/nn/batches.h"
#include "tests/support/temp_dir.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace ember::nn {
namespace {

using test::Batch;
using test::make_batch;

using test::small_models;

std::unique_ptr<Model> built(const std::string& name, bool channels_last, uint64_t seed = 5,
                             const ModelOptions& options = small_models()) {
    auto model = make_model(name, options);
    BuildOptions build;
    build.seed = seed;
    build.pool_chunk_bytes = 8u << 20;
    build.channels_last = channels_last;
    model->build(build);
    return model;
}

using test::download;

std::vector<float> host_values(const Tensor& t) {
    std::vector<float> out(static_cast<std::size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<std::size_t>(i)] = t.as<float>()[i];
    return out;
}

// Agreement to float rounding. The two layouts reach the same sums in different
// orders (the nchw BatchNorm sums planes in float lanes, the nhwc path in double), so
// a whole tensor must agree to 1e-5 relative in the L2 norm and every element to
// 1e-4 of its own size or of the tensor's largest (cancellation leaves tiny elements
// with only rounding noise). A layout bug (a misordered filter or flatten) moves
// elements by their whole size.
void expect_close(const std::vector<float>& expected, const std::vector<float>& actual, const std::string& what,
                  std::size_t begin = 0, std::size_t end = SIZE_MAX) {
    ASSERT_EQ(expected.size(), actual.size()) << what;
    end = std::min(end, expected.size());
    double largest = 0.0, difference_squares = 0.0, squares = 0.0;
    for (std::size_t i = begin; i < end; ++i) {
        largest = std::max(largest, double(std::abs(expected[i])));
        difference_squares += (double(actual[i]) - expected[i]) * (double(actual[i]) - expected[i]);
        squares += double(expected[i]) * expected[i];
    }
    EXPECT_LE(std::sqrt(difference_squares), 1e-5 * std::sqrt(squares) + 1e-12) << what << " (L2)";
    for (std::size_t i = begin; i < end; ++i) {
        const double tolerance = 1e-4 * std::max(double(std::abs(expected[i])), 1e-2 * largest) + 1e-12;
        ASSERT_NEAR(actual[i], expected[i], tolerance) << what << " [" << i - begin << "]";
    }
}

// Each parameter entry on its own scale, named in failures.
void expect_entries_close(const ParameterStore& store, const std::vector<float>& expected,
                          const std::vector<float>& actual, const std::string& what) {
    for (const ParameterEntry& e : store.parameters())
        expect_close(expected, actual, what + " " + e.name, e.offset, e.offset + e.length);
}

TEST(ChannelsLast, LossAndGradientsMatchNchw) {
    Batch batch = make_batch(8, 11);
    for (const std::string& name : model_names()) {
        auto nchw = built(name, false);
        auto nhwc = built(name, true);
        const std::size_t n = nchw->parameters().flat_length();
        ASSERT_EQ(download(nchw->parameters().master(), n), download(nhwc->parameters().master(), n)) << name;

        Tensor logits_nchw = nchw->forward(batch.x, true);
        LossOutput loss_nchw = nchw->loss(logits_nchw, batch.y, 1.0f / 8);
        nchw->backward(loss_nchw.dlogits, ops::GradWrite::store);
        Tensor logits_nhwc = nhwc->forward(batch.x, true);
        LossOutput loss_nhwc = nhwc->loss(logits_nhwc, batch.y, 1.0f / 8);
        nhwc->backward(loss_nhwc.dlogits, ops::GradWrite::store);

        expect_close(host_values(logits_nchw), host_values(logits_nhwc), name + " logits");
        expect_close(host_values(loss_nchw.losses), host_values(loss_nhwc.losses), name + " losses");
        expect_entries_close(nchw->parameters(), download(nchw->parameters().gradients(), n),
                             download(nhwc->parameters().gradients(), n), name + " gradient");
        const std::size_t s = nchw->parameters().state_length();
        if (s > 0)
            expect_close(download(nchw->parameters().state_buffer(), s), download(nhwc->parameters().state_buffer(), s),
                         name + " running statistics");
    }
}

// In f64 the two layouts differ only by summation order, far below any layout bug:
// every gradient (conv bias included) agrees to 1e-10 relative.
TEST(ChannelsLast, F64GradientsMatchNchwTightly) {
    std::vector<double> images(4 * 784);
    SplitMix64 rng(8);
    for (double& v : images) v = rng.uniform01();
    std::vector<int32_t> labels = {1, 7, 3, 0};
    Tensor x = make_tensor(images.data(), DType::f64, {4, 1, 28, 28});
    Tensor y = make_tensor(labels.data(), DType::i32, {4});
    ModelOptions options = small_models();
    options.conv_bias_before_bn = true;
    for (const std::string& name : model_names()) {
        std::vector<std::vector<double>> gradients;
        for (bool channels_last : {false, true}) {
            auto model = make_model(name, options);
            BuildOptions build;
            build.master_dtype = DType::f64;
            build.activation_dtype = DType::f64;
            build.seed = 12;
            build.channels_last = channels_last;
            model->build(build);
            LossOutput loss = model->loss(model->forward(x, true), y, 0.25f);
            model->backward(loss.dlogits, ops::GradWrite::store);
            const double* g = static_cast<const double*>(model->parameters().gradients().data());
            gradients.emplace_back(g, g + model->parameters().flat_length());
        }
        double largest = 0.0;
        for (double v : gradients[0]) largest = std::max(largest, std::abs(v));
        for (std::size_t i = 0; i < gradients[0].size(); ++i)
            ASSERT_NEAR(gradients[1][i], gradients[0][i], 1e-10 * largest) << name << " gradient " << i;
    }
}

// Records the memory layout of what passes through it (forward and backward).
class LayoutProbe : public Layer {
  public:
    LayoutProbe() : Layer("probe") {}
    const char* kind() const override { return "layout_probe"; }
    TensorShape output_shape(const TensorShape& input) const override { return input; }
    Tensor forward(RunContext&, const Tensor& x) override {
        forward_layout = x.layout;
        return x;
    }
    Tensor backward(RunContext&, const Tensor& dy, bool) override {
        backward_layout = dy.layout;
        return dy;
    }
    Layout forward_layout = Layout::nchw, backward_layout = Layout::nchw;
};

// The activations really are nhwc inside a channels-last model, in both directions,
// and nchw in the default model.
TEST(ChannelsLast, ActivationsBetweenLayersAreNhwc) {
    for (bool channels_last : {false, true}) {
        LayerList layers;
        layers.push_back(std::make_unique<Conv2d>("conv", 1, 4, 3, 1, 1, false));
        layers.push_back(std::make_unique<BatchNorm>("bn", 4));
        auto probe = std::make_unique<LayoutProbe>();
        LayoutProbe* seen = probe.get();
        layers.push_back(std::move(probe));
        layers.push_back(std::make_unique<MaxPool2d>("pool", 2, 2));
        layers.push_back(std::make_unique<Flatten>("flatten"));
        layers.push_back(std::make_unique<Linear>("fc", 4 * 14 * 14, 10));
        Model model("probed", std::move(layers), make_shape({1, 28, 28}));
        BuildOptions build;
        build.channels_last = channels_last;
        model.build(build);
        Batch batch = make_batch(2, 3);
        LossOutput loss = model.loss(model.forward(batch.x, true), batch.y, 0.5f);
        model.backward(loss.dlogits, ops::GradWrite::store);
        const Layout expected = channels_last ? Layout::nhwc : Layout::nchw;
        EXPECT_EQ(seen->forward_layout, expected) << channels_last;
        EXPECT_EQ(seen->backward_layout, expected) << channels_last;
    }
}

struct TrainingRun {
    std::unique_ptr<Model> model;
    std::unique_ptr<optim::Optimizer> optimizer;
    std::unique_ptr<Trainer> trainer;
};

TrainingRun make_run(const std::string& name, bool channels_last, uint64_t seed, int accumulation_steps = 1) {
    TrainingRun run;
    run.model = built(name, channels_last, seed);
    run.optimizer = optim::make_optimizer("sgd", {{"lr", 0.05}, {"momentum", 0.9}}, run.model->parameters().segments(),
                                          optim::OptimizerBackend::cpu);
    TrainerOptions options;
    options.accumulation_steps = accumulation_steps;
    run.trainer = std::make_unique<Trainer>(*run.model, *run.optimizer, options);
    return run;
}

TEST(ChannelsLast, OptimizerStepsMatchNchw) {
    // accumulation 2: the second micro-batch accumulates into the gradients (the
    // reordered filter gradient takes the accumulate path).
    for (int accumulation : {1, 2}) {
        for (const char* name : {"cnn", "resnet"}) {
            TrainingRun nchw = make_run(name, false, 7, accumulation);
            TrainingRun nhwc = make_run(name, true, 7, accumulation);
            for (int step = 0; step < 2; ++step) {
                Batch batch = make_batch(8, 40 + step);
                const double a = nchw.trainer->step(batch.x, batch.y).loss;
                const double b = nhwc.trainer->step(batch.x, batch.y).loss;
                EXPECT_NEAR(b, a, 1e-5 * std::abs(a)) << name << " step " << step;
            }
            const std::string what = std::string(name) + " accumulation " + std::to_string(accumulation);
            ParameterStore& store = nchw.model->parameters();
            const std::size_t n = store.flat_length();
            expect_entries_close(store, download(store.master(), n), download(nhwc.model->parameters().master(), n),
                                 what + " parameter");
        }
    }
}

TEST(ChannelsLast, CheckpointedResnetBlocksMatchNchw) {
    Batch batch = make_batch(4, 21);
    auto nchw = built("resnet", false);
    auto nhwc = built("resnet", true);
    nhwc->checkpoint_composite_layers(true);
    for (Model* model : {nchw.get(), nhwc.get()}) {
        LossOutput loss = model->loss(model->forward(batch.x, true), batch.y, 1.0f / 4);
        model->backward(loss.dlogits, ops::GradWrite::store);
    }
    const std::size_t n = nchw->parameters().flat_length();
    expect_entries_close(nchw->parameters(), download(nchw->parameters().gradients(), n),
                         download(nhwc->parameters().gradients(), n), "checkpointed resnet gradient");
}

class ChannelsLastCheckpoint : public ::testing::Test {
  protected:
    std::string path(const std::string& name) const { return directory_.path(name); }
    test_support::TempDir directory_{"ember_channels_last"};
};

// Parameters are stored in one canonical order, so a checkpoint does not record the
// layout it was trained in: it resumes in the other with the same loss and steps.
TEST_F(ChannelsLastCheckpoint, ResumesInTheOtherLayout) {
    Batch evaluation = make_batch(16, 90);
    for (const char* name : {"cnn", "resnet"}) {
        for (bool written_channels_last : {true, false}) {
            TrainingRun writer = make_run(name, written_channels_last, 1);
            for (int step = 0; step < 3; ++step) {
                Batch batch = make_batch(8, 60 + step);
                writer.trainer->step(batch.x, batch.y);
            }
            const std::string file = path(std::string(name) + (written_channels_last ? ".nhwc" : ".nchw"));
            checkpoint::save_checkpoint(file, *writer.model, *writer.optimizer, *writer.trainer);

            TrainingRun reader = make_run(name, !written_channels_last, 999);  // everything comes from the file
            checkpoint::load_checkpoint(file, *reader.model, *reader.optimizer, *reader.trainer);
            const std::string what = std::string(name) + (written_channels_last ? " nhwc->nchw" : " nchw->nhwc");
            const double written = writer.trainer->evaluate(evaluation.x, evaluation.y).loss;
            const double resumed = reader.trainer->evaluate(evaluation.x, evaluation.y).loss;
            EXPECT_NEAR(resumed, written, 1e-5 * std::abs(written)) << what << " evaluation loss";

            Batch next = make_batch(8, 70);
            const double writer_loss = writer.trainer->step(next.x, next.y).loss;
            const double reader_loss = reader.trainer->step(next.x, next.y).loss;
            EXPECT_NEAR(reader_loss, writer_loss, 1e-5 * std::abs(writer_loss)) << what << " next step";
            ParameterStore& store = writer.model->parameters();
            const std::size_t n = store.flat_length();
            expect_entries_close(store, download(store.master(), n), download(reader.model->parameters().master(), n),
                                 what + " parameter after a step");
        }
    }
}

}  // namespace
}  // namespace ember::nn
