// train_mlp_cpu.cpp: the smallest end-to-end use of the engine. Trains the MLP
// (784-512-256-10) on the CPU backend on the first few thousand Fashion-MNIST training
// images with every optimizer of engine/optim in turn, printing the loss as it falls.
// L-BFGS takes a small full batch (its line search needs a fixed objective).
//
//   train_mlp_cpu [--steps N] [--images N] [--batch N] [--data-root DIR] [--check]
//
// --check exits with status 1 unless every optimizer ended below its initial loss
// (the CTest test runs it that way with a short schedule).
#include "engine/data/fashion_mnist.h"
#include "engine/nn/models.h"
#include "engine/nn/training_step.h"
#include "engine/optim/optimizer.h"
#include "samples/arguments.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Settings {
    int steps = 200;
    int64_t images = 4096;
    int64_t batch = 64;
    int64_t lbfgs_batch = 256;
    std::string data_root = ember::data::kFashionMnistDefaultRoot;
    bool check = false;
};

// Learning rates that suit this model (the others are torch.optim's defaults).
ember::optim::Hyperparameters hyperparameters_for(const std::string& name) {
    if (name == "sgd") return {{"lr", 0.05}, {"momentum", 0.9}};
    if (name == "adagrad") return {{"lr", 0.01}};
    if (name == "adadelta") return {{"lr", 1.0}};
    if (name == "rmsprop") return {{"lr", 5e-4}};
    if (name == "adamax") return {{"lr", 2e-3}};
    if (name == "lamb") return {{"lr", 5e-3}};
    if (name == "lars") return {{"lr", 0.5}, {"momentum", 0.9}};
    if (name == "novograd") return {{"lr", 0.05}};
    if (name == "lbfgs") return {{"lr", 1.0}, {"max_iter", 10}, {"strong_wolfe", 1}};
    return {{"lr", 1e-3}};  // adam, adamw, nadam
}

int64_t parse_count(const char* flag, const char* text) {
    return sample_positive_integer("train_mlp_cpu", flag, text);
}

}  // namespace

int main(int argc, char** argv) {
    using namespace ember;
    Settings settings;
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        auto value = [&]() -> const char* {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "train_mlp_cpu: %s needs a value\n", arg.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (arg == "--steps")
            settings.steps = static_cast<int>(parse_count("--steps", value()));
        else if (arg == "--images")
            settings.images = parse_count("--images", value());
        else if (arg == "--batch")
            settings.batch = parse_count("--batch", value());
        else if (arg == "--data-root")
            settings.data_root = value();
        else if (arg == "--check")
            settings.check = true;
        else {
            std::fprintf(stderr,
                         "usage: train_mlp_cpu [--steps N] [--images N] [--batch N] [--data-root DIR] [--check]\n");
            return 2;
        }
    }

    std::string missing = data::fashion_mnist_missing(settings.data_root, data::Split::train);
    if (!missing.empty()) {
        std::fprintf(stderr, "train_mlp_cpu: %s\n", missing.c_str());
        return 77;  // CTest's "skipped" code (SKIP_RETURN_CODE)
    }
    data::InMemoryDataset dataset = data::load_fashion_mnist(settings.data_root, data::Split::train);
    const int64_t count = std::min<int64_t>(settings.images, dataset.size());
    const int64_t pixels = dataset.shape().pixels();
    // Normalized like torchvision's Normalize(mean, std) over the training set.
    std::vector<float> images(static_cast<std::size_t>(count * pixels));
    for (int64_t i = 0; i < count * pixels; ++i)
        images[i] = (dataset.pixels()[i] / 255.0f - data::kFashionMnistMean) / data::kFashionMnistStd;
    std::vector<int32_t> labels(dataset.labels().begin(), dataset.labels().begin() + count);
    std::printf("Fashion-MNIST: %lld training images from %s, batch %lld, %d steps per optimizer\n",
                static_cast<long long>(count), settings.data_root.c_str(), static_cast<long long>(settings.batch),
                settings.steps);

    int failures = 0;
    for (const std::string& name : optim::optimizer_names()) {
        auto model = nn::make_model("mlp");
        nn::BuildOptions build;
        build.seed = 42;
        model->build(build);
        auto optimizer = optim::make_optimizer(name, hyperparameters_for(name), model->parameters().segments(),
                                               optim::OptimizerBackend::cpu);
        nn::Trainer trainer(*model, *optimizer, {});
        const bool lbfgs = name == "lbfgs";
        const int64_t batch = lbfgs ? std::min(settings.lbfgs_batch, count) : std::min(settings.batch, count);
        const int steps = lbfgs ? std::max(3, settings.steps / 20) : settings.steps;
        double first = 0.0, last = 0.0, window = 0.0;
        int in_window = 0;
        std::printf("%-9s", name.c_str());
        const auto started = std::chrono::steady_clock::now();
        for (int step = 0; step < steps; ++step) {
            // Consecutive batches, wrapping around the loaded images (L-BFGS: the same one).
            const int64_t start = lbfgs ? 0 : (step * batch) % (count - batch + 1);
            Tensor x = make_tensor(images.data() + start * pixels, DType::f32,
                                   {batch, 1, dataset.shape().height, dataset.shape().width});
            Tensor y = make_tensor(labels.data() + start, DType::i32, {batch});
            double loss = trainer.step(x, y).loss;
            if (step == 0) first = loss;
            window += loss;
            ++in_window;
            if ((step + 1) % std::max(1, steps / 5) == 0 || step + 1 == steps) {
                last = window / in_window;  // averaged: single batches are noisy
                std::printf("  %7.4f", last);
                window = 0.0;
                in_window = 0;
            }
        }
        const bool fell = last < first;
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        std::printf("   (first %.4f -> last %.4f, %.1f ms/step)%s\n", first, last, 1e3 * seconds / steps,
                    fell ? "" : "  NOT FALLING");
        failures += fell ? 0 : 1;
    }
    if (settings.check && failures > 0) {
        std::fprintf(stderr, "train_mlp_cpu: the loss did not fall for %d optimizer(s)\n", failures);
        return 1;
    }
    return 0;
}
