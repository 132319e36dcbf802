// sync_batchnorm_mpi_test.cpp: runs under `mpirun -np N`. SyncBatchNorm on each rank's
// slice equals nn::BatchNorm on the union batch: outputs, running statistics, and
// (summed over ranks) the gradients of the BatchNorm and of the layer before it, whose
// gradient depends on the input gradient SyncBatchNorm produced.
#include "engine/distributed/communicator.h"
#include "engine/distributed/sync_batchnorm.h"
#include "engine/nn/basic_layers.h"
#include "engine/nn/conv_layers.h"
#include "engine/nn/model.h"
#include "engine/nn/models.h"
#include "tests/engine/distributed/test_util.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ember::distributed {
namespace {

Communicator& world() {
    static std::unique_ptr<Communicator> communicator = make_mpi_communicator();
    return *communicator;
}

std::unique_ptr<nn::Model> linear_then_norm(Communicator* communicator) {
    nn::LayerList layers;
    layers.push_back(std::make_unique<nn::Linear>("fc", 8, 6));
    if (communicator)
        layers.push_back(std::make_unique<SyncBatchNorm>("bn", 6, *communicator));
    else
        layers.push_back(std::make_unique<nn::BatchNorm>("bn", 6));
    auto model = std::make_unique<nn::Model>("fc_bn", std::move(layers), nn::make_shape({8}));
    nn::BuildOptions build;
    build.seed = 5;
    build.pool_chunk_bytes = 1u << 20;
    model->build(build);
    return model;
}

std::vector<float> seeded(std::size_t n, uint64_t seed) {
    nn::SplitMix64 rng(seed);
    std::vector<float> values(n);
    for (float& v : values) v = static_cast<float>(4.0 * rng.uniform01() - 1.0);
    return values;
}

void expect_near_all(const float* actual, const float* expected, std::size_t n, double tolerance, const char* what) {
    for (std::size_t i = 0; i < n; ++i)
        ASSERT_NEAR(actual[i], expected[i], tolerance * (1.0 + std::fabs(expected[i]))) << what << " element " << i;
}

TEST(SyncBatchNorm, EqualsBatchNormOnTheUnionBatch) {
    Communicator& comm = world();
    const int64_t local = 5, total = local * comm.world_size(), first = local * comm.rank();
    std::vector<float> inputs = seeded(static_cast<std::size_t>(total * 8), 21);
    std::vector<float> output_gradients = seeded(static_cast<std::size_t>(total * 6), 22);

    auto reference = linear_then_norm(nullptr);
    Tensor expected_y = reference->forward(make_tensor(inputs.data(), DType::f32, {total, 8}), true);
    reference->backward(make_tensor(output_gradients.data(), DType::f32, {total, 6}), ops::GradWrite::store);

    auto synced = linear_then_norm(&comm);
    Tensor y = synced->forward(make_tensor(inputs.data() + first * 8, DType::f32, {local, 8}), true);
    synced->backward(make_tensor(output_gradients.data() + first * 6, DType::f32, {local, 6}), ops::GradWrite::store);

    expect_near_all(y.as<float>(), expected_y.as<float>() + first * 6, static_cast<std::size_t>(local * 6), 1e-5,
                    "output");
    const std::size_t states = reference->parameters().state_length();
    expect_near_all(
        synced->parameters().state_buffer().data() ? static_cast<float*>(synced->parameters().state_buffer().data())
                                                   : nullptr,
        static_cast<float*>(reference->parameters().state_buffer().data()), states, 1e-5, "running statistics");
    // Each rank's parameter gradients are its share: their sum is the union's gradient.
    const std::size_t n = synced->parameters().flat_length();
    std::vector<float> gradients = test::copy_of(synced->parameters().gradients(), n);
    comm.allreduce_sum(gradients.data(), n);
    expect_near_all(gradients.data(), static_cast<float*>(reference->parameters().gradients().data()), n, 1e-4,
                    "parameter gradients");
}

// The whole-model switch (RunContext::batchnorm_sync, what `ember train --set
// distributed.sync_batchnorm=true` sets): a CNN's BatchNorms — and a ResNet's, inside
// its residual blocks — on each rank's slice, in either memory layout, give the union
// batch's gradients.
void expect_model_equals_union_batch(const std::string& name, bool channels_last) {
    Communicator& comm = world();
    const int64_t local = 3, total = local * comm.world_size(), first = local * comm.rank();
    test::Batch batch = test::make_union_batch(total, 31);
    auto build = [&](uint64_t seed) {
        nn::ModelOptions options;
        options.cnn_channels1 = 4;
        options.cnn_channels2 = 8;
        options.cnn_hidden = 16;
        options.resnet_widths = {4, 8, 8};
        options.resnet_blocks_per_stage = 1;
        auto model = nn::make_model(name, options);
        nn::BuildOptions build_options;
        build_options.seed = seed;
        build_options.pool_chunk_bytes = 16u << 20;
        build_options.channels_last = channels_last;
        model->build(build_options);
        return model;
    };
    auto reference = build(9);
    nn::LossOutput expected =
        reference->loss(reference->forward(batch.images_tensor(0, total), true), batch.labels_tensor(0, total), 1.0f);
    reference->backward(expected.dlogits, ops::GradWrite::store);

    auto synced = build(9);
    BatchNormSync sync(comm);
    synced->context().batchnorm_sync = &sync;
    // The gradient of the summed loss: the ranks' shares add up to the union's.
    nn::LossOutput mine =
        synced->loss(synced->forward(batch.images_tensor(first, local), true), batch.labels_tensor(first, local), 1.0f);
    synced->backward(mine.dlogits, ops::GradWrite::store);

    const std::size_t n = synced->parameters().flat_length();
    std::vector<float> gradients = test::copy_of(synced->parameters().gradients(), n);
    comm.allreduce_sum(gradients.data(), n);
    expect_near_all(gradients.data(), static_cast<float*>(reference->parameters().gradients().data()), n, 2e-4,
                    (name + (channels_last ? " nhwc" : " nchw") + " parameter gradients").c_str());
    const std::size_t states = reference->parameters().state_length();
    expect_near_all(static_cast<float*>(synced->parameters().state_buffer().data()),
                    static_cast<float*>(reference->parameters().state_buffer().data()), states, 1e-5,
                    "running statistics");
}

TEST(SyncBatchNorm, WholeCnnEqualsTheUnionBatch) {
    expect_model_equals_union_batch("cnn", false);
    expect_model_equals_union_batch("cnn", true);
}

TEST(SyncBatchNorm, ResNetBlocksSynchronizeToo) {
    expect_model_equals_union_batch("resnet", false);
}

}  // namespace
}  // namespace ember::distributed
