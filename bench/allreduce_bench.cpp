// allreduce_bench.cpp: `ember bench allreduce`, the nccl-tests style sweep of
// all-reduce sizes. Run under the launcher (`mpirun -np 4 ember bench allreduce`):
// NCCL on device buffers when GPUs are present, MPI on host buffers otherwise.
//
// For each size (float elements, doubling from --min-bytes to --max-bytes): warm-up
// iterations, then timed ones between barriers; the time is the slowest rank's mean.
//   algbw = bytes / time
//   busbw = algbw * 2 (n - 1) / n   (what each link carries in a ring all-reduce, so
//                                    numbers compare across rank counts; nccl-tests' rule)
// Every size is checked once: rank r contributes r + 1, so each element must equal
// n (n + 1) / 2.
#include "bench/allreduce_bench.h"
#include "engine/core/cuda_check.h"
#include "engine/core/device.h"
#include "engine/distributed/context.h"

#include <cuda_runtime_api.h>
#include <fmt/core.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace ember::bench {

namespace {

using Clock = std::chrono::steady_clock;

std::size_t parse_bytes(const std::string& text) {
    std::size_t used = 0;
    const double value = std::stod(text, &used);
    std::string unit = text.substr(used);
    double scale = 1.0;
    if (unit == "K" || unit == "KiB" || unit == "k")
        scale = 1024.0;
    else if (unit == "M" || unit == "MiB")
        scale = 1024.0 * 1024.0;
    else if (unit == "G" || unit == "GiB")
        scale = 1024.0 * 1024.0 * 1024.0;
    else if (!unit.empty() && unit != "B")
        throw std::invalid_argument("bench allreduce: unknown size unit in '" + text + "'");
    return static_cast<std::size_t>(value * scale);
}

std::string human_bytes(std::size_t bytes) {
    if (bytes >= (1u << 30)) return fmt::format("{} GiB", bytes >> 30);
    if (bytes >= (1u << 20)) return fmt::format("{} MiB", bytes >> 20);
    if (bytes >= (1u << 10)) return fmt::format("{} KiB", bytes >> 10);
    return fmt::format("{} B", bytes);
}

}  // namespace

int run_allreduce_bench(const AllreduceBenchOptions& options) {
    const std::size_t min_bytes = std::max<std::size_t>(sizeof(float), parse_bytes(options.min_bytes_text));
    const std::size_t max_bytes = parse_bytes(options.max_bytes_text);
    bool use_nccl = options.engine == "nccl";
    if (options.engine == "auto") use_nccl = cuda_device_available();
    if (use_nccl && !cuda_device_available()) {
        fmt::print(stderr, "bench allreduce: no CUDA device here; use --engine mpi (or auto)\n");
        return 1;
    }
    distributed::Context context(use_nccl ? Device::cuda : Device::cpu, /*force_mpi=*/true);
    distributed::Communicator& comm = context.communicator();
    const int n = comm.world_size();
    const std::size_t max_count = max_bytes / sizeof(float);

    float* buffer = nullptr;
    std::vector<float> host(max_count);
    cudaStream_t stream = nullptr;
    if (use_nccl) {
        EMBER_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        EMBER_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&buffer), max_count * sizeof(float)));
    } else {
        buffer = host.data();
    }
    auto synchronize = [&] {
        if (use_nccl) EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
    };
    if (context.is_root())
        fmt::print("all-reduce over {} ({} ranks), {} timed iterations after {} warm-up\n", comm.engine_name(), n,
                   options.iterations, options.warmup);
    if (context.is_root())
        fmt::print("{:>10} {:>12} {:>12} {:>12} {:>12}  {}\n", "size", "elements", "time (us)", "algbw GB/s",
                   "busbw GB/s", "check");
    int failures = 0;
    for (std::size_t bytes = min_bytes; bytes <= max_bytes && bytes > 0; bytes *= 2) {
        const std::size_t count = bytes / sizeof(float);
        // Correctness once per size.
        std::fill(host.begin(), host.begin() + static_cast<std::ptrdiff_t>(count), static_cast<float>(comm.rank() + 1));
        if (use_nccl) EMBER_CUDA_CHECK(cudaMemcpy(buffer, host.data(), bytes, cudaMemcpyHostToDevice));
        comm.allreduce_sum(buffer, count, stream);
        synchronize();
        if (use_nccl) EMBER_CUDA_CHECK(cudaMemcpy(host.data(), buffer, bytes, cudaMemcpyDeviceToHost));
        const float expected = static_cast<float>(n * (n + 1) / 2);
        bool correct = true;
        for (std::size_t i = 0; i < count; ++i)
            if (host[i] != expected) {
                correct = false;
                break;
            }
        // Large sizes take fewer iterations so the sweep stays short.
        const int iterations =
            std::max(2, std::min(options.iterations, static_cast<int>((std::size_t{256} << 20) / bytes) + 2));
        for (int i = 0; i < options.warmup && i < iterations; ++i) comm.allreduce_sum(buffer, count, stream);
        synchronize();
        comm.barrier();
        const auto start = Clock::now();
        for (int i = 0; i < iterations; ++i) comm.allreduce_sum(buffer, count, stream);
        synchronize();
        double seconds = std::chrono::duration<double>(Clock::now() - start).count() / iterations;
        MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        int all_correct = correct ? 1 : 0;
        MPI_Allreduce(MPI_IN_PLACE, &all_correct, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        failures += all_correct ? 0 : 1;
        const double algbw = static_cast<double>(bytes) / seconds / 1e9;
        const double busbw = algbw * 2.0 * (n - 1) / n;
        if (context.is_root())
            fmt::print("{:>10} {:>12} {:>12.1f} {:>12.3f} {:>12.3f}  {}\n", human_bytes(bytes), count, seconds * 1e6,
                       algbw, busbw, all_correct ? "ok" : "WRONG SUM");
    }
    if (use_nccl) {
        EMBER_CUDA_CHECK(cudaFree(buffer));
        EMBER_CUDA_CHECK(cudaStreamDestroy(stream));
    }
    return failures == 0 ? 0 : 1;
}

}  // namespace ember::bench
