// models.cpp: the four model builders behind make_model (models.h).
#include "engine/nn/models.h"

#include "engine/nn/basic_layers.h"
#include "engine/nn/conv_layers.h"
#include "engine/nn/transformer_layers.h"

#include <stdexcept>

namespace ember::nn {

namespace {

TensorShape sample_shape(const ModelOptions& o) {
    return make_shape({o.channels, o.image_size, o.image_size});
}

std::unique_ptr<Model> make_mlp(const ModelOptions& o) {
    LayerList layers;
    layers.push_back(std::make_unique<Flatten>("flatten"));
    int64_t in = o.channels * o.image_size * o.image_size;
    for (std::size_t i = 0; i < o.mlp_hidden.size(); ++i) {
        std::string index = std::to_string(i + 1);
        layers.push_back(std::make_unique<Linear>("fc" + index, in, o.mlp_hidden[i]));
        layers.push_back(std::make_unique<ReLU>("relu" + index));
        if (o.dropout > 0.0f) layers.push_back(std::make_unique<Dropout>("dropout" + index, o.dropout, i));
        in = o.mlp_hidden[i];
    }
    layers.push_back(std::make_unique<Linear>("fc" + std::to_string(o.mlp_hidden.size() + 1), in, o.classes));
    return std::make_unique<Model>("mlp", std::move(layers), sample_shape(o));
}

std::unique_ptr<Model> make_cnn(const ModelOptions& o) {
    LayerList layers;
    const bool bias = o.conv_bias_before_bn;
    layers.push_back(std::make_unique<Conv2d>("conv1", o.channels, o.cnn_channels1, 3, 1, 1, bias));
    layers.push_back(std::make_unique<BatchNorm>("bn1", o.cnn_channels1));
    layers.push_back(std::make_unique<ReLU>("relu1"));
    layers.push_back(std::make_unique<MaxPool2d>("pool1", 2, 2));
    layers.push_back(std::make_unique<Conv2d>("conv2", o.cnn_channels1, o.cnn_channels2, 3, 1, 1, bias));
    layers.push_back(std::make_unique<BatchNorm>("bn2", o.cnn_channels2));
    layers.push_back(std::make_unique<ReLU>("relu2"));
    layers.push_back(std::make_unique<MaxPool2d>("pool2", 2, 2));
    layers.push_back(std::make_unique<Flatten>("flatten"));
    const int64_t side = o.image_size / 4;
    layers.push_back(std::make_unique<Linear>("fc1", o.cnn_channels2 * side * side, o.cnn_hidden));
    layers.push_back(std::make_unique<ReLU>("relu3"));
    if (o.dropout > 0.0f) layers.push_back(std::make_unique<Dropout>("dropout", o.dropout, 0));
    layers.push_back(std::make_unique<Linear>("fc2", o.cnn_hidden, o.classes));
    return std::make_unique<Model>("cnn", std::move(layers), sample_shape(o));
}

std::unique_ptr<Model> make_resnet(const ModelOptions& o) {
    if (o.resnet_widths.empty() || o.resnet_blocks_per_stage < 1)
        throw std::invalid_argument("resnet: needs at least one stage and one block per stage");
    LayerList layers;
    const bool bias = o.conv_bias_before_bn;
    const int64_t stem = o.resnet_widths[0];
    layers.push_back(std::make_unique<Conv2d>("stem.conv", o.channels, stem, 3, 1, 1, bias));
    layers.push_back(std::make_unique<BatchNorm>("stem.bn", stem));
    layers.push_back(std::make_unique<ReLU>("stem.relu"));
    int64_t in = stem;
    for (std::size_t stage = 0; stage < o.resnet_widths.size(); ++stage) {
        for (int block = 0; block < o.resnet_blocks_per_stage; ++block) {
            int stride = (stage > 0 && block == 0) ? 2 : 1;
            std::string name = "stage" + std::to_string(stage + 1) + ".block" + std::to_string(block + 1);
            layers.push_back(std::make_unique<BasicBlock>(name, in, o.resnet_widths[stage], stride, bias));
            in = o.resnet_widths[stage];
        }
    }
    layers.push_back(std::make_unique<GlobalAvgPool>("pool"));
    layers.push_back(std::make_unique<Linear>("fc", in, o.classes));
    return std::make_unique<Model>("resnet", std::move(layers), sample_shape(o));
}

std::unique_ptr<Model> make_transformer(const ModelOptions& o) {
    LayerList layers;
    auto embed = std::make_unique<PatchEmbedding>("embed", o.channels, o.image_size, o.patch, o.transformer_dim);
    const int64_t tokens = embed->tokens();
    layers.push_back(std::move(embed));
    for (int i = 0; i < o.transformer_blocks; ++i)
        layers.push_back(std::make_unique<TransformerBlock>("block" + std::to_string(i + 1), o.transformer_dim,
                                                            o.transformer_heads, tokens, o.transformer_mlp_hidden));
    layers.push_back(std::make_unique<LayerNorm>("norm", o.transformer_dim));
    layers.push_back(std::make_unique<TokenMeanPool>("pool", tokens));
    layers.push_back(std::make_unique<Linear>("head", o.transformer_dim, o.classes));
    return std::make_unique<Model>("transformer", std::move(layers), sample_shape(o));
}

}  // namespace

const std::vector<std::string>& model_names() {
    static const std::vector<std::string> names = {"mlp", "cnn", "resnet", "transformer"};
    return names;
}

std::unique_ptr<Model> make_model(const std::string& name, const ModelOptions& options) {
    if (name == "mlp") return make_mlp(options);
    if (name == "cnn") return make_cnn(options);
    if (name == "resnet") return make_resnet(options);
    if (name == "transformer") return make_transformer(options);
    throw std::invalid_argument("unknown model '" + name + "' (expected mlp, cnn, resnet or transformer)");
}

}  // namespace ember::nn
