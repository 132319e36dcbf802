// cuda_vs_cpu.h: one training forward/backward of the same model on the cpu reference
// and on the cuda backend (built by the caller: same seed, any layouts), compared —
// logits, every parameter gradient and the running statistics. For the gpu tests.
#pragma once

#include "engine/core/cuda_check.h"
#include "engine/cuda/context.h"
#include "engine/nn/model.h"
#include "engine/nn/models.h"
#include "tests/engine/nn/batches.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

namespace ember::nn::test {

// `name` built for `backend` with seed 3 (the same weights on every backend),
// activations in `activation`, in the channels-last layout when asked.
inline std::unique_ptr<Model> built(const std::string& name, Device backend, CudaContext* ctx,
                                    DType activation = DType::f32, bool channels_last = false) {
    auto model = make_model(name);
    BuildOptions build;
    build.backend = backend;
    build.cuda = ctx;
    build.activation_dtype = activation;
    build.seed = 3;
    build.channels_last = channels_last;
    model->build(build);
    return model;
}

inline void expect_cuda_matches_cpu(Model& cpu, Model& cuda, CudaContext& ctx, const DeviceBatch& batch,
                                    const std::string& name) {
    const int64_t samples = batch.host_x.shape[0];
    Tensor cpu_logits = cpu.forward(batch.host_x, true);
    LossOutput cpu_loss = cpu.loss(cpu_logits, batch.host_y, 1.0f / static_cast<float>(samples));
    cpu.backward(cpu_loss.dlogits, ops::GradWrite::store);
    Tensor cuda_logits = cuda.forward(batch.x, true);
    LossOutput cuda_loss = cuda.loss(cuda_logits, batch.y, 1.0f / static_cast<float>(samples));
    cuda.backward(cuda_loss.dlogits, ops::GradWrite::store);
    ctx.synchronize();
    const std::size_t logit_count = static_cast<std::size_t>(cpu_logits.numel());
    std::vector<float> device_logits(logit_count);
    EMBER_CUDA_CHECK(
        cudaMemcpy(device_logits.data(), cuda_logits.data, logit_count * sizeof(float), cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < logit_count; ++i)
        ASSERT_NEAR(device_logits[i], cpu_logits.as<float>()[i], 1e-3f) << name << " logit " << i;
    const std::size_t n = cpu.parameters().flat_length();
    std::vector<float> a = download(cpu.parameters().gradients(), n);
    std::vector<float> b = download(cuda.parameters().gradients(), n);
    // Every mismatch is counted per parameter segment (its layer's name), so a failure
    // says which layers differ and how much, not only the first element.
    std::string mismatches;
    for (const auto& segment : cpu.parameters().segments()) {
        std::size_t bad = 0, worst = segment.offset;
        float worst_error = 0;
        for (std::size_t i = segment.offset; i < segment.offset + segment.length; ++i) {
            const float error = std::abs(b[i] - a[i]);
            if (!(error <= 1e-3f * std::max(1.0f, std::abs(a[i])))) ++bad;
            if (!(error <= worst_error)) worst_error = error, worst = i;
        }
        if (bad > 0)
            mismatches += "  " + segment.name + ": " + std::to_string(bad) + " of " + std::to_string(segment.length) +
                          " elements, worst at " + std::to_string(worst) + ": cuda " + std::to_string(b[worst]) +
                          " cpu " + std::to_string(a[worst]) + "\n";
    }
    ASSERT_TRUE(mismatches.empty()) << name << " gradients differ beyond 1e-3 (relative above 1):\n" << mismatches;
    const std::size_t s = cpu.parameters().state_length();
    std::vector<float> ra = download(cpu.parameters().state_buffer(), s);
    std::vector<float> rb = download(cuda.parameters().state_buffer(), s);
    for (std::size_t i = 0; i < s; ++i)
        ASSERT_NEAR(rb[i], ra[i], 1e-3f * std::max(1.0f, std::abs(ra[i]))) << name << " running stat " << i;
}

}  // namespace ember::nn::test
