// optimizer_comparison.cpp: trains three small classifiers on Fashion-MNIST with seven
// optimizers of engine/optim (cpu backend) and draws their training-loss curves:
//   softmax regression            784 -> 10
//   one sigmoid layer             784 -> 100 sigmoid -> 10
//   sigmoid-ReLU-sigmoid          784 -> 300 sigmoid -> 100 ReLU -> 50 sigmoid -> 10
// Every optimizer of a network starts from the same initial parameters and sees the same
// batches in the same order, so the curves differ only by the update rule.
//
//   sample_optimizer_comparison [--steps N] [--images N] [--batch N] [--seed N]
//       [--smoothing W] [--data-root DIR] [--csv FILE] [--svg FILE]
//       [--check-gradients] [--check]
//
// --check-gradients first compares the hand-written backward pass with central finite
// differences in double on every network and exits 1 on a mismatch. --check exits 1
// unless every curve ended (mean of its last tenth of steps) below its first loss.
#include "engine/data/fashion_mnist.h"
#include "engine/optim/optimizer.h"
#include "samples/arguments.h"
#include "samples/optimizer_comparison/loss_plot.h"
#include "samples/optimizer_comparison/network.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

using optimizer_comparison::Activation;
using optimizer_comparison::Network;

struct Settings {
    int steps = 500;
    int64_t images = 12800;  // the first N training images; 100 batches of 128
    int batch = 128;
    uint64_t seed = 1;
    double smoothing = 0.9;
    std::string data_root = ember::data::kFashionMnistDefaultRoot;
    std::string csv_path = "optimizer_comparison.csv";
    std::string svg_path = "optimizer_comparison.svg";
    bool check_gradients = false;
    bool check = false;
    bool break_backward = false;  // testing the gradient check itself: it must then fail
};

// One contender: an engine/optim optimizer with the hyper-parameters it runs with here.
struct OptimizerSetup {
    std::string optimizer;  // the make_optimizer name
    std::string label;      // legend and CSV
    ember::optim::Hyperparameters hyperparameters;
    std::string color;
};

// Learning rates chosen for these networks (see README.md); the rest are torch.optim's defaults.
std::vector<OptimizerSetup> optimizer_setups() {
    return {
        {"sgd", "SGD lr 0.1", {{"lr", 0.1}}, "#1f77b4"},
        {"sgd", "Momentum lr 0.02", {{"lr", 0.02}, {"momentum", 0.9}}, "#ff7f0e"},
        {"sgd", "Nesterov lr 0.02", {{"lr", 0.02}, {"momentum", 0.9}, {"nesterov", 1}}, "#2ca02c"},
        {"adagrad", "Adagrad lr 0.01", {{"lr", 0.01}}, "#d62728"},
        {"adadelta", "Adadelta lr 1", {{"lr", 1.0}, {"rho", 0.95}, {"eps", 1e-6}}, "#9467bd"},
        {"rmsprop", "RMSprop lr 0.001", {{"lr", 1e-3}}, "#8c564b"},
        {"adam", "Adam lr 0.001", {{"lr", 1e-3}}, "#e377c2"},
    };
}

std::vector<Network> comparison_networks() {
    constexpr int kInputs = 28 * 28;
    constexpr int kClasses = ember::data::kFashionMnistClasses;
    return {
        optimizer_comparison::make_network("softmax", "Softmax regression (784-10)", kInputs, {}, kClasses),
        optimizer_comparison::make_network("sigmoid100", "Sigmoid(100)", kInputs, {{100, Activation::sigmoid}},
                                           kClasses),
        optimizer_comparison::make_network(
            "sigmoid300_relu100_sigmoid50", "Sigmoid(300)-ReLU(100)-Sigmoid(50)", kInputs,
            {{300, Activation::sigmoid}, {100, Activation::relu}, {50, Activation::sigmoid}}, kClasses),
    };
}

// One segment per weight matrix and per bias; biases take no weight decay.
std::vector<ember::optim::ParameterSegment> parameter_segments(const Network& network) {
    std::vector<ember::optim::ParameterSegment> segments;
    for (std::size_t l = 0; l < network.layers.size(); ++l) {
        const auto& layer = network.layers[l];
        std::string prefix = "layer" + std::to_string(l);
        segments.push_back({layer.weight_offset, std::size_t(layer.inputs) * layer.outputs, 0, prefix + ".weight"});
        segments.push_back(
            {layer.bias_offset, std::size_t(layer.outputs), ember::optim::kSegmentNoWeightDecay, prefix + ".bias"});
    }
    return segments;
}

// Pixels scaled to [0, 1] and standardised with the training set's mean and deviation.
std::vector<float> normalized_images(const ember::data::InMemoryDataset& dataset, int64_t count) {
    const int64_t pixels = dataset.shape().pixels();
    std::vector<float> images(std::size_t(count * pixels));
    for (int64_t i = 0; i < count * pixels; ++i)
        images[std::size_t(i)] =
            (dataset.pixels()[i] / 255.0f - ember::data::kFashionMnistMean) / ember::data::kFashionMnistStd;
    return images;
}

// The image index of every batch slot of every step: one reshuffle per pass over the
// subset, fixed by the seed, shared by all runs.
std::vector<int32_t> batch_order(int64_t images, int steps, int batch, uint64_t seed) {
    std::mt19937_64 generator(seed ^ 0x9e3779b97f4a7c15ull);
    std::vector<int32_t> permutation(static_cast<std::size_t>(images));
    std::iota(permutation.begin(), permutation.end(), 0);
    std::vector<int32_t> order;
    order.reserve(std::size_t(steps) * batch);
    std::size_t position = permutation.size();
    while (order.size() < std::size_t(steps) * batch) {
        if (position == permutation.size()) {
            std::shuffle(permutation.begin(), permutation.end(), generator);
            position = 0;
        }
        order.push_back(permutation[position++]);
    }
    return order;
}

// Central differences in double on a random sample of every segment (all of a segment
// when it is small), against the analytic gradient of the same double code.
bool check_gradients(const Network& network, const std::vector<float>& images, const std::vector<int32_t>& labels,
                     int64_t pixels, uint64_t seed, bool break_backward) {
    constexpr int kBatch = 16;
    constexpr std::size_t kSamplesPerSegment = 60;
    constexpr double kStep = 1e-5;
    constexpr double kAbsoluteTolerance = 1e-8;
    constexpr double kRelativeTolerance = 1e-5;

    std::vector<float> initial = optimizer_comparison::initialize_parameters(network, seed);
    std::vector<double> parameters(initial.begin(), initial.end());
    // Non-zero biases so that their gradients and the activations' curvature both matter.
    std::mt19937_64 generator(seed + 7);
    std::uniform_real_distribution<double> small(-0.3, 0.3);
    for (const auto& layer : network.layers)
        for (int j = 0; j < layer.outputs; ++j) parameters[layer.bias_offset + j] = small(generator);

    std::vector<double> inputs(std::size_t(kBatch * pixels));
    for (std::size_t i = 0; i < inputs.size(); ++i) inputs[i] = images[i];
    std::vector<int32_t> batch_labels(labels.begin(), labels.begin() + kBatch);

    optimizer_comparison::Workspace<double> workspace;
    std::vector<double> analytic(network.parameter_count);
    optimizer_comparison::loss_and_gradients(network, parameters.data(), inputs.data(), batch_labels.data(), kBatch,
                                             analytic.data(), workspace);
    if (break_backward) {
        const auto& first = network.layers.front();
        for (int j = 0; j < first.outputs; ++j) analytic[first.bias_offset + j] *= 1.01;
    }

    double worst_relative = 0.0;
    std::string worst_where;
    int failures = 0;
    for (const auto& segment : parameter_segments(network)) {
        std::vector<std::size_t> indices(segment.length);
        std::iota(indices.begin(), indices.end(), segment.offset);
        std::shuffle(indices.begin(), indices.end(), generator);
        if (indices.size() > kSamplesPerSegment) indices.resize(kSamplesPerSegment);
        for (std::size_t index : indices) {
            double saved = parameters[index];
            parameters[index] = saved + kStep;
            double loss_plus = optimizer_comparison::loss_and_gradients<double>(
                network, parameters.data(), inputs.data(), batch_labels.data(), kBatch, nullptr, workspace);
            parameters[index] = saved - kStep;
            double loss_minus = optimizer_comparison::loss_and_gradients<double>(
                network, parameters.data(), inputs.data(), batch_labels.data(), kBatch, nullptr, workspace);
            parameters[index] = saved;
            double numeric = (loss_plus - loss_minus) / (2 * kStep);
            double difference = std::abs(numeric - analytic[index]);
            double scale = std::abs(numeric) + std::abs(analytic[index]);
            double relative = difference / std::max(scale, 1e-12);
            if (difference > kAbsoluteTolerance + kRelativeTolerance * scale) {
                if (failures < 5)
                    std::fprintf(stderr, "  %s: %s[%zu] analytic %.9g, finite difference %.9g\n", network.name.c_str(),
                                 segment.name.c_str(), index - segment.offset, analytic[index], numeric);
                ++failures;
            }
            if (scale > 1e-6 && relative > worst_relative) {
                worst_relative = relative;
                worst_where = segment.name + "[" + std::to_string(index - segment.offset) + "]";
            }
        }
    }
    std::printf("gradient check %-30s %s  worst relative error %.2e (%s)\n", network.name.c_str(),
                failures ? "FAILED" : "ok    ", worst_relative, worst_where.c_str());
    return failures == 0;
}

struct RunResult {
    std::vector<double> losses;  // per step
    double seconds = 0.0;
};

RunResult train(const Network& network, const OptimizerSetup& setup, const std::vector<float>& initial,
                const std::vector<float>& images, const std::vector<int32_t>& labels, int64_t pixels,
                const std::vector<int32_t>& order, const Settings& settings) {
    auto optimizer = ember::optim::make_optimizer(setup.optimizer, setup.hyperparameters, parameter_segments(network),
                                                  ember::optim::OptimizerBackend::cpu);
    std::vector<float> parameters = initial;
    std::vector<float> gradients(parameters.size());
    std::vector<float> batch_images(std::size_t(settings.batch) * pixels);
    std::vector<int32_t> batch_labels(std::size_t(settings.batch));
    optimizer_comparison::Workspace<float> workspace;

    RunResult result;
    result.losses.reserve(std::size_t(settings.steps));
    auto start = std::chrono::steady_clock::now();
    for (int step = 0; step < settings.steps; ++step) {
        for (int slot = 0; slot < settings.batch; ++slot) {
            int32_t image = order[std::size_t(step) * settings.batch + slot];
            std::memcpy(batch_images.data() + std::size_t(slot) * pixels, images.data() + std::size_t(image) * pixels,
                        sizeof(float) * pixels);
            batch_labels[slot] = labels[image];
        }
        double loss =
            optimizer_comparison::loss_and_gradients(network, parameters.data(), batch_images.data(),
                                                     batch_labels.data(), settings.batch, gradients.data(), workspace);
        result.losses.push_back(loss);
        optimizer->step(parameters.data(), gradients.data());
    }
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
}

long long parse_integer(const char* flag, const char* text) {
    return sample_positive_integer("optimizer_comparison", flag, text);
}

Settings parse_settings(int argc, char** argv) {
    Settings settings;
    for (int i = 1; i < argc; ++i) {
        auto is = [&](const char* flag) { return std::strcmp(argv[i], flag) == 0; };
        auto value = [&]() -> const char* {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "optimizer_comparison: %s needs a value\n", argv[i]);
                std::exit(2);
            }
            return argv[++i];
        };
        if (is("--steps"))
            settings.steps = int(parse_integer("--steps", value()));
        else if (is("--images"))
            settings.images = parse_integer("--images", value());
        else if (is("--batch"))
            settings.batch = int(parse_integer("--batch", value()));
        else if (is("--seed"))
            settings.seed = uint64_t(parse_integer("--seed", value()));
        else if (is("--smoothing")) {
            const char* text = value();
            char* end = nullptr;
            settings.smoothing = std::strtod(text, &end);
            if (!end || *end != '\0' || settings.smoothing < 0.0 || settings.smoothing >= 1.0) {
                std::fprintf(stderr, "optimizer_comparison: --smoothing needs a number in [0, 1), got '%s'\n", text);
                std::exit(2);
            }
        } else if (is("--data-root"))
            settings.data_root = value();
        else if (is("--csv"))
            settings.csv_path = value();
        else if (is("--svg"))
            settings.svg_path = value();
        else if (is("--check-gradients"))
            settings.check_gradients = true;
        else if (is("--check"))
            settings.check = true;
        else if (is("--break-backward"))
            settings.break_backward = true;
        else {
            std::fprintf(stderr,
                         "usage: %s [--steps N] [--images N] [--batch N] [--seed N] [--smoothing W]\n"
                         "          [--data-root DIR] [--csv FILE] [--svg FILE] [--check-gradients] [--check]\n",
                         argv[0]);
            std::exit(2);
        }
    }
    return settings;
}

bool write_file(const std::string& path, const std::string& text) {
    FILE* file = std::fopen(path.c_str(), "wb");
    if (!file) {
        std::fprintf(stderr, "optimizer_comparison: cannot open %s for writing: %s\n", path.c_str(),
                     std::strerror(errno));
        return false;
    }
    bool ok = std::fwrite(text.data(), 1, text.size(), file) == text.size();
    ok = std::fclose(file) == 0 && ok;
    if (!ok) std::fprintf(stderr, "optimizer_comparison: writing %s failed: %s\n", path.c_str(), std::strerror(errno));
    return ok;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace ember;
    const Settings settings = parse_settings(argc, argv);

    std::string missing = data::fashion_mnist_missing(settings.data_root, data::Split::train);
    if (!missing.empty()) {
        std::fprintf(stderr, "optimizer_comparison: Fashion-MNIST not found: %s\n", missing.c_str());
        return 1;
    }
    std::vector<float> images;
    std::vector<int32_t> labels;
    int64_t pixels = 0;
    int64_t image_count = 0;
    try {
        data::InMemoryDataset dataset = data::load_fashion_mnist(settings.data_root, data::Split::train);
        image_count = std::min<int64_t>(settings.images, dataset.size());
        pixels = dataset.shape().pixels();
        images = normalized_images(dataset, image_count);
        labels.assign(dataset.labels().begin(), dataset.labels().begin() + image_count);
    } catch (const std::exception& error) {
        std::fprintf(stderr, "optimizer_comparison: %s\n", error.what());
        return 1;
    }
    if (image_count < settings.batch) {
        std::fprintf(stderr, "optimizer_comparison: --images %lld is smaller than one batch (%d)\n",
                     (long long)image_count, settings.batch);
        return 2;
    }

    const std::vector<Network> networks = comparison_networks();
    if (settings.check_gradients) {
        bool all_ok = true;
        for (const Network& network : networks)
            all_ok = check_gradients(network, images, labels, pixels, settings.seed, settings.break_backward) && all_ok;
        if (!all_ok) {
            std::fprintf(stderr, "optimizer_comparison: the backward pass disagrees with finite differences\n");
            return 1;
        }
    }

    const std::vector<OptimizerSetup> setups = optimizer_setups();
    const std::vector<int32_t> order = batch_order(image_count, settings.steps, settings.batch, settings.seed);
    std::printf("%d steps of %d images from the first %lld Fashion-MNIST training images (%.1f passes)\n",
                settings.steps, settings.batch, (long long)image_count,
                double(settings.steps) * settings.batch / double(image_count));

    std::string csv = "network,optimizer,step,loss,smoothed_loss\n";
    std::vector<optimizer_comparison::LossPanel> panels;
    bool all_decreased = true;
    double total_seconds = 0.0;
    for (const Network& network : networks) {
        std::printf("\n%s: %zu parameters\n", network.title.c_str(), network.parameter_count);
        std::printf("  %-18s %10s %14s %8s\n", "optimizer", "first loss", "final (smooth)", "seconds");
        const std::vector<float> initial = optimizer_comparison::initialize_parameters(network, settings.seed);
        optimizer_comparison::LossPanel panel{network.title, {}};
        for (const OptimizerSetup& setup : setups) {
            RunResult run;
            try {
                run = train(network, setup, initial, images, labels, pixels, order, settings);
            } catch (const std::exception& error) {
                std::fprintf(stderr, "optimizer_comparison: %s on %s: %s\n", setup.label.c_str(), network.name.c_str(),
                             error.what());
                return 1;
            }
            total_seconds += run.seconds;
            std::vector<double> smoothed = optimizer_comparison::smooth_curve(run.losses, settings.smoothing);
            for (std::size_t step = 0; step < run.losses.size(); ++step) {
                char row[256];
                std::snprintf(row, sizeof row, "%s,%s,%zu,%.6f,%.6f\n", network.name.c_str(), setup.label.c_str(),
                              step + 1, run.losses[step], smoothed[step]);
                csv += row;
            }
            // "Ended": the mean raw loss over the last tenth of the steps.
            std::size_t tail = std::max<std::size_t>(1, run.losses.size() / 10);
            double ending = std::accumulate(run.losses.end() - long(tail), run.losses.end(), 0.0) / double(tail);
            bool decreased = std::isfinite(ending) && ending < run.losses.front();
            all_decreased = all_decreased && decreased;
            std::printf("  %-18s %10.4f %14.4f %8.2f%s\n", setup.label.c_str(), run.losses.front(), smoothed.back(),
                        run.seconds, decreased ? "" : "  (did not decrease)");
            panel.curves.push_back({setup.label, setup.color, std::move(smoothed)});
        }
        panels.push_back(std::move(panel));
    }
    std::printf("\ntraining time %.1f s\n", total_seconds);

    char subtitle[256];
    std::snprintf(subtitle, sizeof subtitle,
                  "Fashion-MNIST, first %lld training images, batch %d, %d steps, same initialization and batch order; "
                  "EMA-smoothed (%.2f)",
                  (long long)image_count, settings.batch, settings.steps, settings.smoothing);
    std::string svg = optimizer_comparison::render_loss_plot_svg(panels, "Training loss by optimizer", subtitle,
                                                                 "training loss (cross-entropy)");
    if (!write_file(settings.csv_path, csv) || !write_file(settings.svg_path, svg)) return 1;
    std::printf("wrote %s and %s\n", settings.csv_path.c_str(), settings.svg_path.c_str());

    if (settings.check && !all_decreased) {
        std::fprintf(stderr, "optimizer_comparison: some loss curve did not end below its start\n");
        return 1;
    }
    return 0;
}
