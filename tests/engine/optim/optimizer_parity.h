// optimizer_parity.h: the CUDA optimizer paths against the cpu reference, as functions
// of the parameter layout, shared by optimizer_gpu_test.cpp (label `gpu`, on a device)
// and the kernel interpreter's optim tests (tests/engine/cuda_interpreter/), which run
// them on the CPU, with many small segments as well.
#pragma once

#include "engine/core/cuda_check.h"
#include "engine/optim/clip.h"
#include "engine/optim/optimizer.h"
#include "engine/optim/optimizer_cuda.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <random>
#include <string>
#include <vector>

namespace ember::optim::test {

struct DeviceBuffer {
    void* ptr = nullptr;
    explicit DeviceBuffer(std::size_t bytes) { EMBER_CUDA_CHECK(cudaMalloc(&ptr, bytes)); }
    ~DeviceBuffer() { cudaFree(ptr); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    float* f() { return static_cast<float*>(ptr); }
};

// Odd lengths, one spanning several chunks, biases flagged no-weight-decay.
inline std::vector<ParameterSegment> odd_segments() {
    std::vector<ParameterSegment> segments;
    const std::size_t lengths[] = {1, 37, kOptimizerChunkElements * 2 + 5, 1001, 3, 40000};
    std::size_t offset = 0;
    for (std::size_t k = 0; k < 6; ++k) {
        segments.push_back({offset, lengths[k], k % 2 ? kSegmentNoWeightDecay : 0u, std::to_string(k)});
        offset += lengths[k];
    }
    return segments;
}

inline std::vector<float> download(const float* device, std::size_t n) {
    std::vector<float> host(n);
    EMBER_CUDA_CHECK(cudaMemcpy(host.data(), device, n * 4, cudaMemcpyDeviceToHost));
    return host;
}

inline void expect_close(const std::vector<float>& gpu, const std::vector<float>& cpu, const char* what,
                         float tolerance = 1e-5f) {
    ASSERT_EQ(gpu.size(), cpu.size());
    int reported = 0;
    for (std::size_t i = 0; i < gpu.size() && reported < 5; ++i)
        if (!(std::fabs(gpu[i] - cpu[i]) <= tolerance * std::max(1.0f, std::fabs(cpu[i])))) {
            ADD_FAILURE() << what << "[" << i << "]: gpu " << gpu[i] << " cpu " << cpu[i];
            ++reported;
        }
}

struct Case {
    const char* name;
    Hyperparameters hyperparameters;
    int fused_launches;  // per step
    // Relative tolerance of the state buffers. Centered RMSprop divides by
    // sqrt(v - g_avg^2), which cancels when the gradients barely vary: its momentum
    // buffer carries that amplified rounding (1.0e-5 relative between an H200's FMAs
    // and the CPU's separate multiply-adds, in one element after three steps).
    float state_tolerance = 1e-5f;
};

// gtest prints the parameter in test listings: the name is enough.
inline void PrintTo(const Case& c, std::ostream* os) {
    *os << c.name;
}

// Every elementwise optimizer, with the settings that exercise the most of its rule.
inline std::vector<Case> every_optimizer() {
    return {Case{"sgd", {{"lr", 0.1}, {"momentum", 0.9}, {"nesterov", 1}, {"weight_decay", 0.01}}, 1},
            Case{"adagrad",
                 {{"lr", 0.1}, {"lr_decay", 0.01}, {"initial_accumulator_value", 0.1}, {"weight_decay", 0.01}},
                 1},
            Case{"adadelta", {{"lr", 1.0}, {"weight_decay", 0.01}}, 1},
            Case{"rmsprop", {{"lr", 0.01}, {"centered", 1}, {"momentum", 0.5}, {"weight_decay", 0.01}}, 1, 1e-4f},
            Case{"adam", {{"lr", 0.01}, {"amsgrad", 1}, {"weight_decay", 0.01}}, 1},
            Case{"adamw", {{"lr", 0.01}}, 1},
            Case{"nadam", {{"lr", 0.01}, {"weight_decay", 0.01}}, 1},
            Case{"adamax", {{"lr", 0.01}, {"weight_decay", 0.01}}, 1},
            Case{"lamb", {{"lr", 0.01}, {"max_grad_norm", 1.0}}, 3},
            Case{"lars", {{"lr", 0.1}, {"weight_decay", 1e-4}}, 2},
            Case{"novograd", {{"lr", 0.01}, {"weight_decay", 0.01}}, 2}};
}

// Three steps of `c` on the device, fused and per tensor, against three cpu steps:
// parameters, state buffers, the exported state and the launch count.
inline void check_fused_and_per_tensor_match_cpu(const Case& c, const std::vector<ParameterSegment>& segments) {
    const std::size_t n = segments.back().offset + segments.back().length;
    std::mt19937 rng(11);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> params0(n);
    for (auto& v : params0) v = dist(rng);
    std::vector<std::vector<float>> grads(3, std::vector<float>(n));
    for (auto& step : grads)
        for (auto& v : step) v = 0.1f * dist(rng);

    auto cpu = make_optimizer(c.name, c.hyperparameters, segments, OptimizerBackend::cpu);
    std::vector<float> cpu_params = params0;
    for (auto& g : grads) cpu->step(cpu_params.data(), g.data());

    for (OptimizerBackend backend : {OptimizerBackend::cuda_fused, OptimizerBackend::cuda_per_tensor}) {
        SCOPED_TRACE(optimizer_backend_name(backend));
        auto gpu = make_optimizer(c.name, c.hyperparameters, segments, backend);
        DeviceBuffer params(n * 4), grad(n * 4);
        EMBER_CUDA_CHECK(cudaMemcpy(params.ptr, params0.data(), n * 4, cudaMemcpyHostToDevice));
        for (auto& g : grads) {
            EMBER_CUDA_CHECK(cudaMemcpy(grad.ptr, g.data(), n * 4, cudaMemcpyHostToDevice));
            gpu->step(params.f(), grad.f());
        }
        EMBER_CUDA_CHECK(cudaDeviceSynchronize());
        expect_close(download(params.f(), n), cpu_params, "params");
        for (int b = 0; b < cpu->state_buffer_count(); ++b) {
            if (c.name == std::string("lamb") && b == 2) continue;  // scratch update, compared via params
            std::vector<float> cpu_state(cpu->state_buffer(b), cpu->state_buffer(b) + n);
            expect_close(download(gpu->state_buffer(b), n), cpu_state, "state", c.state_tolerance);
        }
        // Checkpoint round trip through the host: the state downloads as the cpu's.
        OptimizerState exported = gpu->export_state();
        OptimizerState cpu_exported = cpu->export_state();
        EXPECT_EQ(exported.step_count, 3);
        ASSERT_EQ(exported.segment_norms.size(), cpu_exported.segment_norms.size());
        expect_close(exported.segment_norms, cpu_exported.segment_norms, "segment norms");
        gpu->import_state(exported);
        const int expected =
            backend == OptimizerBackend::cuda_fused ? c.fused_launches : c.fused_launches * (int)segments.size();
        EXPECT_EQ(gpu->last_step_launches(), expected);
    }
}

// Gradient clipping in two shards of a normal vector of `n` (halves, odd when n is):
// the all-reduce of the sums of squares is stood in for by adding the other shard's on
// the device; both halves together equal the whole vector clipped on the cpu.
inline void check_sharded_clip_matches_cpu(std::size_t n) {
    const std::size_t half = n / 2;
    std::mt19937 rng(6);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> g(n);
    for (auto& v : g) v = dist(rng);
    double first_squares = 0.0, second_squares = 0.0;
    for (std::size_t i = 0; i < n; ++i) (i < half ? first_squares : second_squares) += (double)g[i] * g[i];
    DeviceBuffer device(n * 4);
    EMBER_CUDA_CHECK(cudaMemcpy(device.ptr, g.data(), n * 4, cudaMemcpyHostToDevice));
    GradientClipper clipper(n);
    auto add_other = [](double other) {
        return [other](float* device_sum, std::size_t count) {
            ASSERT_EQ(count, 1u);
            float mine = 0.0f;
            EMBER_CUDA_CHECK(cudaMemcpy(&mine, device_sum, sizeof(float), cudaMemcpyDeviceToHost));
            const float total = mine + static_cast<float>(other);
            EMBER_CUDA_CHECK(cudaMemcpy(device_sum, &total, sizeof(float), cudaMemcpyHostToDevice));
        };
    };
    clipper.clip_sharded(device.f(), half, 5.0f, nullptr, add_other(second_squares));
    clipper.clip_sharded(device.f() + half, n - half, 5.0f, nullptr, add_other(first_squares));
    const double cpu_norm = clip_grad_norm_cpu(g.data(), n, 5.0);
    EXPECT_NEAR(clipper.read_total_norm(), cpu_norm, 1e-5 * cpu_norm);
    expect_close(download(device.f(), n), g, "clipped in two shards");
}

}  // namespace ember::optim::test
