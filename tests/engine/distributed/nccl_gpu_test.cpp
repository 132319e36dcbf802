// nccl_gpu_test.cpp: the NCCL communicator on one GPU (a single rank: NCCL cannot
// place two ranks on one device, so multi-rank behaviour is covered by the MPI tests).
// Runs under `mpirun -np 1` (label gpu; skipped without a device):
//   - the unique id bootstrap over MPI and every collective on device buffers
//   - DDP on the cuda backend with a world of one leaves the gradients unchanged
//     (the all-reduce of one rank is the identity; buckets, streams and events all run)
#include "engine/cuda/context.h"
#include "engine/distributed/communicator.h"
#include "engine/distributed/data_parallel.h"
#include "tests/engine/distributed/test_util.h"
#include "tests/support/gpu.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

namespace ember::distributed {
namespace {

TEST(NcclCommunicator, SingleRankCollectivesOnDevice) {
    EMBER_REQUIRE_GPU();
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    std::unique_ptr<Communicator> comm = make_nccl_communicator();
    ASSERT_EQ(comm->world_size(), 1);
    EXPECT_STREQ(comm->engine_name(), "nccl");
    cudaStream_t stream;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    const std::size_t count = 1 << 20;
    std::vector<float> host(count);
    for (std::size_t i = 0; i < count; ++i) host[i] = static_cast<float>(i % 1000) * 0.5f;
    float *data = nullptr, *other = nullptr;
    ASSERT_EQ(cudaMalloc(&data, count * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&other, count * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(data, host.data(), count * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    comm->allreduce_sum(data, count, stream);
    comm->reduce_scatter_sum(data, other, count, stream);
    comm->all_gather(other, data, count, stream);
    comm->broadcast(data, count * sizeof(float), 0, stream);
    comm->barrier();
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    std::vector<float> back(count);
    ASSERT_EQ(cudaMemcpy(back.data(), data, count * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(back, host);
    cudaFree(data);
    cudaFree(other);
    cudaStreamDestroy(stream);
}

TEST(NcclCommunicator, DataParallelOfOneRankKeepsGradients) {
    EMBER_REQUIRE_GPU();
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    std::unique_ptr<Communicator> comm = make_nccl_communicator();
    cudaStream_t stream;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    CudaContextOptions context_options;
    context_options.stream = stream;
    CudaContext cuda(context_options);
    auto build = [&] {
        nn::ModelOptions options;
        options.mlp_hidden = {64, 32};
        auto model = nn::make_model("mlp", options);
        nn::BuildOptions build_options;
        build_options.backend = Device::cuda;
        build_options.cuda = &cuda;
        build_options.seed = 3;
        model->build(build_options);
        return model;
    };
    test::Batch batch = test::make_union_batch(16, 4);
    float* images = nullptr;
    int32_t* labels = nullptr;
    ASSERT_EQ(cudaMalloc(&images, batch.images.size() * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&labels, batch.labels.size() * sizeof(int32_t)), cudaSuccess);
    cudaMemcpy(images, batch.images.data(), batch.images.size() * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(labels, batch.labels.data(), batch.labels.size() * sizeof(int32_t), cudaMemcpyHostToDevice);
    Tensor x = make_tensor(images, DType::f32, {16, 1, 28, 28}, Device::cuda);
    Tensor y = make_tensor(labels, DType::i32, {16}, Device::cuda);
    auto gradients_of = [&](nn::Model& model, DataParallel* ddp) {
        if (ddp) model.set_gradients_ready_callback([ddp](std::size_t layer) { ddp->layer_gradients_ready(layer); });
        Tensor logits = model.forward(x, true);
        nn::LossOutput out = model.loss(logits, y, 1.0f / 16);
        if (ddp) ddp->begin_backward(true);
        model.backward(out.dlogits, ops::GradWrite::store);
        if (ddp) ddp->finish_gradients();
        EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
        std::vector<float> host(model.parameters().flat_length());
        model.parameters().gradients().download(host.data(), host.size() * sizeof(float));
        return host;
    };
    auto plain = build();
    std::vector<float> expected = gradients_of(*plain, nullptr);
    auto synced = build();
    DataParallelOptions options;
    options.first_bucket_bytes = 1u << 10;
    options.bucket_bytes = 4u << 10;
    DataParallel ddp(*synced, *comm, options);
    std::vector<float> actual = gradients_of(*synced, &ddp);
    EXPECT_EQ(actual, expected);
    cudaFree(images);
    cudaFree(labels);
}

}  // namespace
}  // namespace ember::distributed
