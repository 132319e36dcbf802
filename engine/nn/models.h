// models.h: the model factory. Fashion-MNIST shaped defaults (1x28x28, 10 classes):
//   mlp          784-512-256-10, ReLU, optional dropout
//   cnn          conv3x3 32-BN-ReLU-maxpool, conv3x3 64-BN-ReLU-maxpool, FC 128, FC 10
//   resnet       stem conv3x3 16-BN-ReLU, 3 stages of basic blocks (16/32/64 channels,
//                stride 1/2/2), global average pool, FC 10
//   transformer  7x7 patches -> embedding (+ positions) -> pre-norm blocks (multi-head
//                attention, MLP with GELU) -> LayerNorm -> mean over tokens -> FC 10
// Convs feeding BatchNorm carry no bias unless conv_bias_before_bn is set (the switch
// exists so its cost can be measured). Initialization follows PyTorch's defaults
// (kaiming uniform), seeded by BuildOptions::seed.
#pragma once

#include "engine/nn/model.h"

#include <memory>
#include <string>
#include <vector>

namespace ember::nn {

struct ModelOptions {
    int64_t channels = 1;
    int64_t image_size = 28;
    int64_t classes = 10;
    // mlp
    std::vector<int64_t> mlp_hidden = {512, 256};
    float dropout = 0.0f;
    // cnn
    int64_t cnn_channels1 = 32, cnn_channels2 = 64, cnn_hidden = 128;
    bool conv_bias_before_bn = false;
    // resnet
    std::vector<int64_t> resnet_widths = {16, 32, 64};
    int resnet_blocks_per_stage = 2;
    // transformer
    int patch = 7;
    int64_t transformer_dim = 64, transformer_heads = 4, transformer_mlp_hidden = 128;
    int transformer_blocks = 1;
};

// Throws std::invalid_argument naming the model for an unknown name.
std::unique_ptr<Model> make_model(const std::string& name, const ModelOptions& options = {});
const std::vector<std::string>& model_names();  // "mlp", "cnn", "resnet", "transformer"

}  // namespace ember::nn
