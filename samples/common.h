// common.h: what every sample shares: a CUDA check that names the failed call, a
// device check that says plainly when there is no GPU, and an event timer.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

// Exits 1 naming the file, line and call unless `expr` returns `ok`; `describe` turns
// the status into the library's message (cudaGetErrorString, cudnnGetErrorString, ...).
#define SAMPLE_CHECK_STATUS(expr, ok, describe)                                                                  \
    do {                                                                                                         \
        const auto sample_status_ = (expr);                                                                      \
        if (sample_status_ != (ok)) {                                                                            \
            std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr, describe(sample_status_)); \
            std::exit(1);                                                                                        \
        }                                                                                                        \
    } while (0)

#define SAMPLE_CHECK(expr) SAMPLE_CHECK_STATUS(expr, cudaSuccess, cudaGetErrorString)

// True when a CUDA device is usable; otherwise prints why and the caller exits 0.
inline bool sample_has_device(const char* sample) {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        std::printf("%s: no CUDA device (%s); nothing to measure\n", sample,
                    err != cudaSuccess ? cudaGetErrorString(err) : "device count is 0");
        return false;
    }
    return true;
}

// Median-free simple timer: total milliseconds of `repeats` runs of `work` between
// two events on the default stream, after `warmup` untimed runs.
template <typename Work>
float sample_time_ms(int warmup, int repeats, Work work) {
    for (int i = 0; i < warmup; ++i) work();
    cudaEvent_t start, stop;
    SAMPLE_CHECK(cudaEventCreate(&start));
    SAMPLE_CHECK(cudaEventCreate(&stop));
    SAMPLE_CHECK(cudaEventRecord(start));
    for (int i = 0; i < repeats; ++i) work();
    SAMPLE_CHECK(cudaEventRecord(stop));
    SAMPLE_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    SAMPLE_CHECK(cudaEventElapsedTime(&ms, start, stop));
    SAMPLE_CHECK(cudaEventDestroy(start));
    SAMPLE_CHECK(cudaEventDestroy(stop));
    return ms / repeats;
}
