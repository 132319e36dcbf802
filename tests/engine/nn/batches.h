// nn_batches.h: the seeded synthetic batch the nn tests train on — Fashion-MNIST's
// shape (1x28x28 images, 10 classes), pixels uniform in [0, 1), random labels — on the
// host, and with device copies for the gpu tests; a flat buffer's values on the host;
// and the small model sizes the layout and parity tests build.
#pragma once

#include "engine/core/tensor.h"
#include "engine/nn/flat_buffer.h"
#include "engine/nn/models.h"
#include "engine/nn/parameters.h"

#include <cstdint>
#include <vector>

namespace ember::nn::test {

struct Batch {
    std::vector<float> images;
    std::vector<int32_t> labels;
    Tensor x, y;  // views of images and labels
};

inline Batch make_batch(int64_t batch, uint64_t seed) {
    Batch b;
    b.images.resize(static_cast<std::size_t>(batch * 784));
    b.labels.resize(static_cast<std::size_t>(batch));
    SplitMix64 rng(seed);
    for (float& v : b.images) v = static_cast<float>(rng.uniform01());
    for (int32_t& l : b.labels) l = static_cast<int32_t>(rng.next() % 10);
    b.x = make_tensor(b.images.data(), DType::f32, {batch, 1, 28, 28});
    b.y = make_tensor(b.labels.data(), DType::i32, {batch});
    return b;
}

// The same batch with device copies: host_x/host_y on the host, x/y on the GPU.
struct DeviceBatch {
    std::vector<float> images;
    std::vector<int32_t> labels;
    FlatBuffer device_images, device_labels;
    Tensor host_x, host_y, x, y;
};

inline DeviceBatch make_device_batch(int64_t batch, uint64_t seed) {
    Batch host = make_batch(batch, seed);
    DeviceBatch b;
    b.images = std::move(host.images);
    b.labels = std::move(host.labels);
    b.host_x = make_tensor(b.images.data(), DType::f32, {batch, 1, 28, 28});
    b.host_y = make_tensor(b.labels.data(), DType::i32, {batch});
    b.device_images = FlatBuffer(Device::cuda, b.images.size() * 4, "test images");
    b.device_labels = FlatBuffer(Device::cuda, b.labels.size() * 4, "test labels");
    b.device_images.upload(b.images.data(), b.images.size() * 4);
    b.device_labels.upload(b.labels.data(), b.labels.size() * 4);
    b.x = make_tensor(b.device_images.data(), DType::f32, {batch, 1, 28, 28}, Device::cuda);
    b.y = make_tensor(b.device_labels.data(), DType::i32, {batch}, Device::cuda);
    return b;
}

// The first `count` floats of a flat buffer (host or device), on the host.
inline std::vector<float> download(const FlatBuffer& buffer, std::size_t count) {
    std::vector<float> out(count);
    buffer.download(out.data(), count * sizeof(float));
    return out;
}

// Small widths keep a CPU step short; every layer kind of each model is still there.
// The ResNet's stage transitions are 1x1 stride-2 shortcuts with 4 -> 8 and 8 -> 12
// channels: fewer than oneDNN's vector blocks on AVX2 (8) and AVX-512 (16), the shapes
// where oneDNN needs ember's care (engine/cpu/onednn_conv.cpp).
inline ModelOptions small_models() {
    ModelOptions o;
    o.mlp_hidden = {32};
    o.cnn_channels1 = 6;
    o.cnn_channels2 = 8;
    o.cnn_hidden = 16;
    o.resnet_widths = {4, 8, 12};
    o.resnet_blocks_per_stage = 1;
    o.transformer_dim = 16;
    o.transformer_heads = 2;
    o.transformer_mlp_hidden = 32;
    return o;
}

}  // namespace ember::nn::test
