// cuda_basics: a plain CUDA program, the kind of job `ember record -- ./sample_cuda_basics`
// profiles; its only ember code is the launch macro (EMBER_LAUNCH(k, grid, block)(...) is
// k<<<grid, block>>>(...) under nvcc) that lets the kernel interpreter run it in the tests,
// and the samples' SAMPLE_CHECK (samples/common.h).
// It copies an array to the device from pageable and from pinned memory, runs SAXPY a
// few times, copies the result back and checks it. Without a GPU it says so and exits 0.
//
//   sample_cuda_basics [elements] [iterations]
#include "engine/core/launch.h"
#include "samples/common.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

__global__ void saxpy(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

int main(int argc, char** argv) {
    int n = argc > 1 ? std::atoi(argv[1]) : (1 << 20);
    int iterations = argc > 2 ? std::atoi(argv[2]) : 10;
    if (n <= 0 || iterations <= 0) {
        std::fprintf(stderr, "usage: %s [elements > 0] [iterations > 0]\n", argv[0]);
        return 2;
    }
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        std::printf("cuda_basics: no CUDA device; nothing to run\n");
        return 0;
    }
    size_t bytes = size_t(n) * sizeof(float);
    std::vector<float> x(n, 1.0f);  // pageable
    float* y_pinned = nullptr;
    SAMPLE_CHECK(cudaMallocHost(&y_pinned, bytes));
    for (int i = 0; i < n; ++i) y_pinned[i] = float(i % 100);

    float *dx = nullptr, *dy = nullptr;
    SAMPLE_CHECK(cudaMalloc(&dx, bytes));
    SAMPLE_CHECK(cudaMalloc(&dy, bytes));
    SAMPLE_CHECK(cudaMemcpy(dx, x.data(), bytes, cudaMemcpyHostToDevice));  // pageable HtoD
    SAMPLE_CHECK(cudaMemcpy(dy, y_pinned, bytes, cudaMemcpyHostToDevice));  // pinned HtoD
    for (int it = 0; it < iterations; ++it) {
        EMBER_LAUNCH(saxpy, (n + 255) / 256, 256)(n, 2.0f, dx, dy);
        SAMPLE_CHECK(cudaGetLastError());
    }
    SAMPLE_CHECK(cudaMemcpy(y_pinned, dy, bytes, cudaMemcpyDeviceToHost));  // pinned DtoH
    SAMPLE_CHECK(cudaDeviceSynchronize());

    int bad = 0;
    for (int i = 0; i < n; ++i)
        if (std::fabs(y_pinned[i] - (float(i % 100) + 2.0f * iterations)) > 1e-3f) ++bad;
    std::printf("cuda_basics: %d elements, %d saxpy launches, %s\n", n, iterations, bad ? "WRONG" : "ok");
    SAMPLE_CHECK(cudaFree(dx));
    SAMPLE_CHECK(cudaFree(dy));
    SAMPLE_CHECK(cudaFreeHost(y_pinned));
    return bad ? 1 : 0;
}
