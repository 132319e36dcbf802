#include "engine/core/device.h"

#include "engine/core/cuda_check.h"

#include <cuda_runtime_api.h>

#include <string>

namespace ember {

std::string failed_call(const char* expr, const char* file, int line) {
    return std::string(expr) + " failed at " + file + ":" + std::to_string(line);
}

void throw_cuda_error(cudaError_t code, const char* expr, const char* file, int line) {
    throw CudaError(
        code, failed_call(expr, file, line) + ": " + cudaGetErrorName(code) + " (" + cudaGetErrorString(code) + ")");
}

std::string cuda_version_string(int version) {
    if (version <= 0) return "none";
    return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

CudaRuntimeStatus cuda_runtime_status() {
    CudaRuntimeStatus s;
    cudaRuntimeGetVersion(&s.runtime_version);
    if (cudaDriverGetVersion(&s.driver_version) != cudaSuccess) s.driver_version = 0;
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        s.device_count = 0;
        if (s.driver_version == 0)
            s.reason = "no NVIDIA driver is installed (libcuda.so.1 not found)";
        else
            s.reason = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
        cudaGetLastError();  // clear the sticky-free error so later calls start clean
    } else {
        s.device_count = count;
        if (count == 0) s.reason = "the driver reports no CUDA device";
    }
    return s;
}

std::vector<DeviceInfo> cuda_devices() {
    std::vector<DeviceInfo> devices;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();
        return devices;
    }
    for (int i = 0; i < count; ++i) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
        DeviceInfo d;
        d.index = i;
        d.name = prop.name;
        d.compute_major = prop.major;
        d.compute_minor = prop.minor;
        d.total_memory_bytes = prop.totalGlobalMem;
        d.sm_count = prop.multiProcessorCount;
        d.memory_bus_width_bits = prop.memoryBusWidth;
        cudaDeviceGetAttribute(&d.memory_clock_khz, cudaDevAttrMemoryClockRate, i);
        devices.push_back(d);
    }
    return devices;
}

bool cuda_device_available() {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return count > 0;
}

}  // namespace ember
