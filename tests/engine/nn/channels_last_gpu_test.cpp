// channels_last_gpu_test.cpp: the cuda backend's channels-last path (cuDNN nhwc
// convolutions with KRSC filters, nhwc BatchNorm/pooling kernels) against the cpu
// reference in nchw for every model, and a few SGD steps channels-last against nchw
// on the device, fp32 and bf16. Needs a GPU (label `gpu`).
#include "engine/core/cuda_check.h"
#include "engine/cuda/context.h"
#include "engine/nn/models.h"
#include "engine/nn/training_step.h"
#include "tests/engine/nn/cuda_vs_cpu.h"
#include "tests/engine/nn/batches.h"
#include "tests/support/gpu.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>

namespace ember::nn {
namespace {

using test::built;

TEST(ChannelsLastGpu, CudaNhwcMatchesCpuNchwForEveryModel) {
    EMBER_REQUIRE_GPU();
    CudaContext ctx;  // TF32 off by default: fp32 math, comparable with the cpu
    test::DeviceBatch batch = test::make_device_batch(8, 1);
    for (const std::string& name : model_names()) {
        auto cpu = built(name, Device::cpu, nullptr);
        auto cuda = built(name, Device::cuda, &ctx, DType::f32, true);
        ASSERT_NO_FATAL_FAILURE(test::expect_cuda_matches_cpu(*cpu, *cuda, ctx, batch, name));
    }
}

// SGD steps channels-last against nchw on the device: fp32 agrees closely, bf16 to
// bf16 rounding (the two layouts pick different cuDNN algorithms).
TEST(ChannelsLastGpu, StepsOnCudaMatchNchw) {
    EMBER_REQUIRE_GPU();
    for (DType dtype : {DType::f32, DType::bf16}) {
        for (const char* name : {"cnn", "resnet"}) {
            CudaContext ctx;
            auto nchw = built(name, Device::cuda, &ctx, dtype, false);
            auto nhwc = built(name, Device::cuda, &ctx, dtype, true);
            auto make = [](Model& m) {
                return optim::make_optimizer("sgd", {{"lr", 0.05}, {"momentum", 0.9}}, m.parameters().segments(),
                                             optim::OptimizerBackend::cuda_fused);
            };
            auto nchw_opt = make(*nchw), nhwc_opt = make(*nhwc);
            TrainerOptions trainer_options;
            if (dtype == DType::bf16) trainer_options.autocast.precision = amp::Precision::bf16;
            Trainer nchw_trainer(*nchw, *nchw_opt, trainer_options);
            Trainer nhwc_trainer(*nhwc, *nhwc_opt, trainer_options);
            const double tolerance = dtype == DType::f32 ? 1e-4 : 3e-2;
            double last = 0;
            for (int step = 0; step < 5; ++step) {
                test::DeviceBatch batch = test::make_device_batch(32, 10 + step);
                double a = nchw_trainer.step(batch.x, batch.y).loss;
                double b = nhwc_trainer.step(batch.x, batch.y).loss;
                EXPECT_NEAR(b, a, tolerance * std::abs(a)) << name << " " << dtype_name(dtype) << " step " << step;
                last = b;
            }
            EXPECT_TRUE(std::isfinite(last)) << name;
        }
    }
}

}  // namespace
}  // namespace ember::nn
