// optimizer_bench.cpp: time of one optimizer step for every elementwise optimizer on
// 1M and 11M parameters cut into segments of mixed sizes, on the cpu backend and,
// where a device is present, the fused and per-tensor CUDA backends (with their
// launch counts); then global-norm gradient clipping (cpu, and CUDA with a device). Usage: ember_optimizer_bench
// [--steps N] [--sizes 1000000,11000000]
#include "common/os.h"
#include "engine/core/cuda_check.h"
#include "engine/core/device.h"
#include "engine/optim/clip.h"
#include "engine/optim/optimizer.h"

#include <cuda_runtime_api.h>

#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace ember::optim;

namespace {

// Layer-like segments: a weight matrix of ~1/16 of the model then its bias.
std::vector<ParameterSegment> make_segments(std::size_t count) {
    std::vector<ParameterSegment> segments;
    const std::size_t weight = count / 16;
    std::size_t offset = 0;
    while (offset < count) {
        std::size_t w = std::min(weight, count - offset);
        segments.push_back({offset, w, 0, "weight" + std::to_string(segments.size())});
        offset += w;
        std::size_t b = std::min<std::size_t>(257, count - offset);
        if (b == 0) break;
        segments.push_back({offset, b, kSegmentNoWeightDecay, "bias" + std::to_string(segments.size())});
        offset += b;
    }
    return segments;
}

// CPU time of the calling thread: on a shared machine it counts only the time this
// thread ran, which wall time does not (memory-bandwidth contention still shows).
double thread_cpu_ms() {
    return ember::os::thread_cpu_seconds() * 1e3;
}

struct Timing {
    double wall_ms;
    double cpu_ms;
};

Timing time_steps(Optimizer& optimizer, float* params, const float* grads, int steps, bool device) {
    optimizer.step(params, grads);  // warm-up
    if (device) EMBER_CUDA_CHECK(cudaDeviceSynchronize());
    auto start = std::chrono::steady_clock::now();
    double cpu_start = thread_cpu_ms();
    for (int s = 0; s < steps; ++s) optimizer.step(params, grads);
    if (device) EMBER_CUDA_CHECK(cudaDeviceSynchronize());
    double cpu_end = thread_cpu_ms();
    auto end = std::chrono::steady_clock::now();
    return {std::chrono::duration<double, std::milli>(end - start).count() / steps, (cpu_end - cpu_start) / steps};
}

}  // namespace

int main(int argc, char** argv) {
    int steps = 10;
    std::vector<std::size_t> sizes = {1000000, 11000000};
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) {
            steps = std::atoi(argv[++i]);
        } else if (!std::strcmp(argv[i], "--sizes") && i + 1 < argc) {
            sizes.clear();
            std::stringstream list(argv[++i]);
            std::string item;
            while (std::getline(list, item, ',')) sizes.push_back(std::stoull(item));
        } else {
            std::fprintf(stderr, "usage: %s [--steps N] [--sizes N,N,...]\n", argv[0]);
            return 2;
        }
    }
    const bool have_device = ember::cuda_device_available();
    if (!have_device)
        std::printf("# no CUDA device (%s): cpu backend only\n", ember::cuda_runtime_status().reason.c_str());
    std::printf("%-10s %10s %-16s %10s %10s %9s %10s\n", "optimizer", "params", "backend", "ms/step", "cpu ms",
                "launches", "GB/s");

    for (std::size_t count : sizes) {
        std::vector<ParameterSegment> segments = make_segments(count);
        std::mt19937 rng(1);
        std::normal_distribution<float> dist(0.0f, 1.0f);
        std::vector<float> params(count), grads(count);
        for (auto& v : params) v = dist(rng);
        for (auto& v : grads) v = dist(rng) * 1e-3f;
        float* device_params = nullptr;
        float* device_grads = nullptr;
        if (have_device) {
            EMBER_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&device_params), count * 4));
            EMBER_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&device_grads), count * 4));
            EMBER_CUDA_CHECK(cudaMemcpy(device_params, params.data(), count * 4, cudaMemcpyHostToDevice));
            EMBER_CUDA_CHECK(cudaMemcpy(device_grads, grads.data(), count * 4, cudaMemcpyHostToDevice));
        }
        for (const std::string& name : optimizer_names()) {
            if (name == "lbfgs") continue;  // closure-driven, full batch: not a per-step kernel
            Hyperparameters hyperparameters;
            if (name == "sgd") hyperparameters["momentum"] = 0.9;
            std::vector<OptimizerBackend> backends = {OptimizerBackend::cpu};
            if (have_device) {
                backends.push_back(OptimizerBackend::cuda_fused);
                backends.push_back(OptimizerBackend::cuda_per_tensor);
            }
            for (OptimizerBackend backend : backends) {
                auto optimizer = make_optimizer(name, hyperparameters, segments, backend);
                const bool device = backend != OptimizerBackend::cpu;
                Timing timing = time_steps(*optimizer, device ? device_params : params.data(),
                                           device ? device_grads : grads.data(), steps, device);
                const double ms = timing.wall_ms;
                // Bytes touched: params read+write, grads read, each state buffer read+write.
                double bytes = (double)count * 4.0 * (3.0 + 2.0 * optimizer->state_buffer_count());
                std::printf("%-10s %10zu %-16s %10.3f %10.3f %9d %10.1f\n", name.c_str(), count,
                            optimizer_backend_name(backend), ms, timing.cpu_ms, optimizer->last_step_launches(),
                            bytes / (ms * 1e-3) / 1e9);
                std::fflush(stdout);
            }
        }
        {
            // Clipping below the norm scales every gradient: the full two-pass cost.
            std::vector<float> scratch = grads;
            clip_grad_norm_cpu(scratch.data(), count, 1e-3);
            auto start = std::chrono::steady_clock::now();
            double cpu_start = thread_cpu_ms();
            for (int s = 0; s < steps; ++s) clip_grad_norm_cpu(scratch.data(), count, 1e-3);
            double cpu_ms = (thread_cpu_ms() - cpu_start) / steps;
            double ms =
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / steps;
            std::printf("%-10s %10zu %-16s %10.3f %10.3f %9d %10.1f\n", "clip", count, "cpu", ms, cpu_ms, 0,
                        (double)count * 12.0 / (ms * 1e-3) / 1e9);
            if (have_device) {
                GradientClipper clipper(count);
                clipper.clip(device_grads, 1e-3f);
                EMBER_CUDA_CHECK(cudaDeviceSynchronize());
                start = std::chrono::steady_clock::now();
                for (int s = 0; s < steps; ++s) clipper.clip(device_grads, 1e-3f);
                EMBER_CUDA_CHECK(cudaDeviceSynchronize());
                ms =
                    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / steps;
                std::printf("%-10s %10zu %-16s %10.3f %10s %9d %10.1f\n", "clip", count, "cuda", ms, "-",
                            clipper.launches_per_clip(), (double)count * 12.0 / (ms * 1e-3) / 1e9);
            }
        }
        if (have_device) {
            cudaFree(device_params);
            cudaFree(device_grads);
        }
    }
    return 0;
}
