// device.h: what the CUDA runtime can see, asked without ever failing. A machine
// with no driver or no GPU is a normal answer (device_count 0 plus the reason),
// not an error: callers fall back to the CPU backend.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ember {

struct CudaRuntimeStatus {
    int runtime_version = 0;  // e.g. 13000 for CUDA 13.0
    int driver_version = 0;   // 0 when no driver is installed
    int device_count = 0;
    std::string reason;  // why device_count is 0, empty otherwise
};

struct DeviceInfo {
    int index = 0;
    std::string name;
    int compute_major = 0;
    int compute_minor = 0;
    std::size_t total_memory_bytes = 0;
    int sm_count = 0;
    int memory_bus_width_bits = 0;
    int memory_clock_khz = 0;
    // Peak DRAM bandwidth from clock and bus width (double data rate), GB/s.
    double peak_memory_bandwidth_gbs() const {
        return 2.0 * memory_clock_khz * 1e3 * (memory_bus_width_bits / 8.0) / 1e9;
    }
};

CudaRuntimeStatus cuda_runtime_status();
std::vector<DeviceInfo> cuda_devices();  // empty when none is usable
bool cuda_device_available();

// Human-readable CUDA version from the runtime's integer form: 13000 -> "13.0".
std::string cuda_version_string(int version);

}  // namespace ember
