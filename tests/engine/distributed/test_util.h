// dist_test_util.h: helpers shared by the engine/dist tests: a seeded synthetic batch
// (the union batch every rank can rebuild), small built models, flat buffer copies.
#pragma once

#include "engine/nn/model.h"
#include "engine/nn/models.h"
#include "engine/nn/parameters.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace ember::distributed::test {

struct Batch {
    std::vector<float> images;
    std::vector<int32_t> labels;
    int64_t size = 0;
    Tensor images_tensor(int64_t first, int64_t count) {
        return make_tensor(images.data() + first * 28 * 28, DType::f32, {count, 1, 28, 28});
    }
    Tensor labels_tensor(int64_t first, int64_t count) {
        return make_tensor(labels.data() + first, DType::i32, {count});
    }
};

inline Batch make_union_batch(int64_t size, uint64_t seed) {
    Batch batch;
    batch.size = size;
    batch.images.resize(static_cast<std::size_t>(size * 28 * 28));
    batch.labels.resize(static_cast<std::size_t>(size));
    nn::SplitMix64 rng(seed);
    for (float& value : batch.images) value = static_cast<float>(rng.uniform01());
    for (int32_t& label : batch.labels) label = static_cast<int32_t>(rng.next() % 10);
    return batch;
}

inline std::unique_ptr<nn::Model> built_model(const std::string& name, uint64_t seed = 3) {
    nn::ModelOptions options;
    options.mlp_hidden = {64, 32};
    options.cnn_channels1 = 4;
    options.cnn_channels2 = 8;
    options.cnn_hidden = 16;
    auto model = nn::make_model(name, options);
    nn::BuildOptions build;
    build.seed = seed;
    build.pool_chunk_bytes = 8u << 20;
    model->build(build);
    return model;
}

inline std::vector<float> copy_of(nn::FlatBuffer& buffer, std::size_t count) {
    std::vector<float> out(count);
    std::memcpy(out.data(), buffer.data(), count * sizeof(float));
    return out;
}

}  // namespace ember::distributed::test
