// nn_gpu_test.cpp: the cuda backend against the cpu reference for every model
// (forward logits, the flat gradient, running statistics), CUDA Graph replay against eager steps, and
// fp16 training with the device overflow check. Needs a GPU (label `gpu`).
#include "engine/core/cuda_check.h"
#include "engine/core/stream.h"
#include "engine/cuda/context.h"
#include "engine/nn/models.h"
#include "engine/nn/training_step.h"
#include "tests/engine/nn/cuda_vs_cpu.h"
#include "tests/engine/nn/batches.h"
#include "tests/support/gpu.h"

#include <cuda_runtime_api.h>

#include <cmath>

namespace ember::nn {
namespace {

using test::built;

using test::download;

TEST(NnGpu, CudaMatchesCpuForEveryModel) {
    EMBER_REQUIRE_GPU();
    CudaContext ctx;
    test::DeviceBatch batch = test::make_device_batch(8, 1);
    for (const std::string& name : model_names()) {
        auto cpu = built(name, Device::cpu, nullptr);
        auto cuda = built(name, Device::cuda, &ctx);
        ASSERT_NO_FATAL_FAILURE(test::expect_cuda_matches_cpu(*cpu, *cuda, ctx, batch, name));
    }
}

TEST(NnGpu, GraphReplayMatchesEager) {
    EMBER_REQUIRE_GPU();
    for (const char* name : {"mlp", "cnn"}) {
        Stream eager_stream, graph_stream;  // the legacy default stream cannot be captured
        CudaContextOptions eager_options_ctx, graph_options_ctx;
        eager_options_ctx.stream = eager_stream.get();
        graph_options_ctx.stream = graph_stream.get();
        // Bit-equal parameters need the same bits from every kernel: cuDNN's heuristics may
        // pick a backward-filter algorithm that adds with atomics (on an H200 the cnn's
        // weights then differed in the last bit between the two contexts).
        eager_options_ctx.deterministic = graph_options_ctx.deterministic = true;
        CudaContext eager_ctx(eager_options_ctx), graph_ctx(graph_options_ctx);
        auto eager = built(name, Device::cuda, &eager_ctx);
        auto graphed = built(name, Device::cuda, &graph_ctx);
        auto make = [](Model& m) {
            return optim::make_optimizer("sgd", {{"lr", 0.05}, {"momentum", 0.9}}, m.parameters().segments(),
                                         optim::OptimizerBackend::cuda_fused);
        };
        auto eager_opt = make(*eager), graph_opt = make(*graphed);
        TrainerOptions eager_options, graph_options;
        graph_options.cuda_graph = true;
        Trainer eager_trainer(*eager, *eager_opt, eager_options);
        Trainer graph_trainer(*graphed, *graph_opt, graph_options);
        for (int step = 0; step < 6; ++step) {
            test::DeviceBatch batch = test::make_device_batch(16, 10 + step);
            double a = eager_trainer.step(batch.x, batch.y).loss;
            double b = graph_trainer.step(batch.x, batch.y).loss;
            EXPECT_NEAR(a, b, 1e-6) << name << " step " << step;
        }
        EXPECT_GE(graph_trainer.graph().replays(), 5);
        EXPECT_LE(graph_trainer.graph().captures(), 2);  // momentum's first step differs, then replay only
        const std::size_t n = eager->parameters().flat_length();
        EXPECT_EQ(download(eager->parameters().master(), n), download(graphed->parameters().master(), n)) << name;
    }
}

TEST(NnGpu, Fp16TrainingWithDeviceOverflowCheck) {
    EMBER_REQUIRE_GPU();
    CudaContext ctx;
    auto model = built("cnn", Device::cuda, &ctx, DType::f16);
    auto optimizer = optim::make_optimizer("adam", {{"lr", 1e-3}}, model->parameters().segments(),
                                           optim::OptimizerBackend::cuda_fused);
    TrainerOptions options;
    options.autocast.precision = amp::Precision::fp16;
    Trainer trainer(*model, *optimizer, options);
    test::DeviceBatch batch = test::make_device_batch(32, 4);
    double first = trainer.step(batch.x, batch.y).loss, last = first;
    for (int i = 0; i < 20; ++i) last = trainer.step(batch.x, batch.y).loss;
    EXPECT_LT(last, first);
    batch.images[0] = 1e30f;
    batch.device_images.upload(batch.images.data(), batch.images.size() * 4);
    const int64_t steps_before = optimizer->step_count();
    StepResult skipped = trainer.step(batch.x, batch.y);
    EXPECT_FALSE(skipped.applied);
    EXPECT_EQ(optimizer->step_count(), steps_before);
    EXPECT_EQ(trainer.loss_scaler().scale(), skipped.loss_scale / 2);
}

TEST(NnGpu, Bf16AndCheckpointedBlocksTrainOnCuda) {
    EMBER_REQUIRE_GPU();
    CudaContext ctx;
    for (const char* name : {"resnet", "transformer"}) {
        auto model = built(name, Device::cuda, &ctx, DType::bf16);
        model->checkpoint_composite_layers(true);
        auto optimizer = optim::make_optimizer("adamw", {{"lr", 1e-3}}, model->parameters().segments(),
                                               optim::OptimizerBackend::cuda_fused);
        TrainerOptions options;
        options.autocast.precision = amp::Precision::bf16;
        options.accumulation_steps = 2;
        Trainer trainer(*model, *optimizer, options);
        test::DeviceBatch batch = test::make_device_batch(32, 6);
        double first = trainer.step(batch.x, batch.y).loss, last = first;
        for (int i = 0; i < 25; ++i) last = trainer.step(batch.x, batch.y).loss;
        EXPECT_LT(last, first) << name;
        EXPECT_GT(model->recompute_bytes(), 0u) << name;
    }
}

}  // namespace
}  // namespace ember::nn
