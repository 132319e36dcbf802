// network.h: the fully connected classifiers of the optimizer comparison, written out by
// hand over one flat parameter buffer: per layer a weight matrix [inputs x outputs]
// (row-major) followed by its bias, then a softmax cross-entropy loss on 10 classes.
// Hidden layers are logistic sigmoid or ReLU (engine/nn has no sigmoid layer, so it
// lives here). Forward and backward are templated on the scalar type only so that the
// gradient check can run the very same code in double; training runs it in float.
#pragma once

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace optimizer_comparison {

enum class Activation { sigmoid, relu, none };  // none: the output layer (logits)

struct Layer {
    int inputs = 0;
    int outputs = 0;
    Activation activation = Activation::none;
    std::size_t weight_offset = 0;  // into the flat parameter buffer
    std::size_t bias_offset = 0;
};

struct Network {
    std::string name;   // "softmax", "sigmoid100", ...
    std::string title;  // for the plot
    std::vector<Layer> layers;
    std::size_t parameter_count = 0;
};

// hidden: the hidden layer widths and activations, input to output; the output layer
// (10 logits) is appended.
inline Network make_network(std::string name, std::string title, int inputs,
                            const std::vector<std::pair<int, Activation>>& hidden, int classes) {
    Network network{std::move(name), std::move(title), {}, 0};
    int width = inputs;
    auto add = [&](int outputs, Activation activation) {
        Layer layer{width, outputs, activation, network.parameter_count, 0};
        layer.bias_offset = layer.weight_offset + std::size_t(width) * outputs;
        network.parameter_count = layer.bias_offset + outputs;
        network.layers.push_back(layer);
        width = outputs;
    };
    for (const auto& [outputs, activation] : hidden) add(outputs, activation);
    add(classes, Activation::none);
    return network;
}

// Glorot-uniform weights for sigmoid and output layers, He-uniform for a layer feeding a
// ReLU; zero biases. The same seed gives every optimizer the same starting point.
// Softmax regression (no hidden layer) starts from zero, as is usual for that convex
// problem: there is no symmetry to break, and every class starts at probability 1/10.
inline std::vector<float> initialize_parameters(const Network& network, uint64_t seed) {
    std::vector<float> parameters(network.parameter_count, 0.0f);
    if (network.layers.size() == 1) return parameters;
    std::mt19937_64 generator(seed);
    for (const Layer& layer : network.layers) {
        double limit = layer.activation == Activation::relu ? std::sqrt(6.0 / layer.inputs)
                                                            : std::sqrt(6.0 / (layer.inputs + layer.outputs));
        std::uniform_real_distribution<double> uniform(-limit, limit);
        std::size_t count = std::size_t(layer.inputs) * layer.outputs;
        for (std::size_t i = 0; i < count; ++i) parameters[layer.weight_offset + i] = float(uniform(generator));
    }
    return parameters;
}

// C = A(rows x inner) * B(inner x columns) with optional transposes, row-major, C = beta*C + AB.
inline void matrix_multiply(bool transpose_a, bool transpose_b, int rows, int columns, int inner, const float* a,
                            const float* b, float beta, float* c) {
    cblas_sgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans, rows,
                columns, inner, 1.0f, a, transpose_a ? rows : inner, b, transpose_b ? inner : columns, beta, c,
                columns);
}
inline void matrix_multiply(bool transpose_a, bool transpose_b, int rows, int columns, int inner, const double* a,
                            const double* b, double beta, double* c) {
    cblas_dgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans, rows,
                columns, inner, 1.0, a, transpose_a ? rows : inner, b, transpose_b ? inner : columns, beta, c, columns);
}

// Activations of one batch, kept from forward for backward; reused between steps.
template <typename Scalar>
struct Workspace {
    std::vector<std::vector<Scalar>> outputs;  // per layer: batch x outputs (post-activation)
    std::vector<Scalar> gradient;              // d loss / d layer output, current layer
    std::vector<Scalar> previous_gradient;     // d loss / d layer input
};

// Mean cross-entropy over the batch; when `gradients` is non-null also writes d loss /
// d parameters there (overwriting it). inputs: batch x layers[0].inputs.
template <typename Scalar>
double loss_and_gradients(const Network& network, const Scalar* parameters, const Scalar* inputs, const int32_t* labels,
                          int batch, Scalar* gradients, Workspace<Scalar>& workspace) {
    const std::size_t layer_count = network.layers.size();
    workspace.outputs.resize(layer_count);

    // Forward: z = x W + b, then the activation in place.
    const Scalar* layer_input = inputs;
    for (std::size_t l = 0; l < layer_count; ++l) {
        const Layer& layer = network.layers[l];
        std::vector<Scalar>& output = workspace.outputs[l];
        output.resize(std::size_t(batch) * layer.outputs);
        for (int row = 0; row < batch; ++row)
            for (int j = 0; j < layer.outputs; ++j)
                output[std::size_t(row) * layer.outputs + j] = parameters[layer.bias_offset + j];
        matrix_multiply(false, false, batch, layer.outputs, layer.inputs, layer_input, parameters + layer.weight_offset,
                        Scalar(1), output.data());
        if (layer.activation == Activation::sigmoid) {
            for (Scalar& value : output) value = Scalar(1) / (Scalar(1) + std::exp(-value));
        } else if (layer.activation == Activation::relu) {
            for (Scalar& value : output) value = value > Scalar(0) ? value : Scalar(0);
        }
        layer_input = output.data();
    }

    // Softmax cross-entropy on the logits; its gradient is (softmax - one_hot) / batch.
    const Layer& last = network.layers.back();
    const int classes = last.outputs;
    std::vector<Scalar>& logits = workspace.outputs.back();
    workspace.gradient.assign(logits.size(), Scalar(0));
    double total_loss = 0.0;
    for (int row = 0; row < batch; ++row) {
        const Scalar* row_logits = logits.data() + std::size_t(row) * classes;
        Scalar largest = row_logits[0];
        for (int k = 1; k < classes; ++k) largest = std::max(largest, row_logits[k]);
        Scalar sum = 0;
        for (int k = 0; k < classes; ++k) sum += std::exp(row_logits[k] - largest);
        Scalar log_sum = largest + std::log(sum);
        total_loss += double(log_sum - row_logits[labels[row]]);
        Scalar* row_gradient = workspace.gradient.data() + std::size_t(row) * classes;
        for (int k = 0; k < classes; ++k)
            row_gradient[k] =
                (std::exp(row_logits[k] - log_sum) - (k == labels[row] ? Scalar(1) : Scalar(0))) / Scalar(batch);
    }
    if (!gradients) return total_loss / batch;

    // Backward, last layer first. workspace.gradient holds d loss / d z of layer l.
    for (std::size_t l = layer_count; l-- > 0;) {
        const Layer& layer = network.layers[l];
        const Scalar* layer_input_values = l == 0 ? inputs : workspace.outputs[l - 1].data();
        // dW = x^T dz, db = column sums of dz.
        matrix_multiply(true, false, layer.inputs, layer.outputs, batch, layer_input_values, workspace.gradient.data(),
                        Scalar(0), gradients + layer.weight_offset);
        for (int j = 0; j < layer.outputs; ++j) gradients[layer.bias_offset + j] = 0;
        for (int row = 0; row < batch; ++row)
            for (int j = 0; j < layer.outputs; ++j)
                gradients[layer.bias_offset + j] += workspace.gradient[std::size_t(row) * layer.outputs + j];
        if (l == 0) break;  // no gradient needed for the images
        // dx = dz W^T, then through the previous layer's activation (its output is x).
        workspace.previous_gradient.resize(std::size_t(batch) * layer.inputs);
        matrix_multiply(false, true, batch, layer.inputs, layer.outputs, workspace.gradient.data(),
                        parameters + layer.weight_offset, Scalar(0), workspace.previous_gradient.data());
        const Activation previous_activation = network.layers[l - 1].activation;
        const std::vector<Scalar>& previous_output = workspace.outputs[l - 1];
        for (std::size_t i = 0; i < previous_output.size(); ++i) {
            Scalar y = previous_output[i];
            if (previous_activation == Activation::sigmoid)
                workspace.previous_gradient[i] *= y * (Scalar(1) - y);
            else if (previous_activation == Activation::relu)
                workspace.previous_gradient[i] = y > Scalar(0) ? workspace.previous_gradient[i] : Scalar(0);
        }
        workspace.gradient.swap(workspace.previous_gradient);
    }
    return total_loss / batch;
}

}  // namespace optimizer_comparison
