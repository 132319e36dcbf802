// nvml_sampler.cpp: NVML through dlopen, so the collector has no link-time
// dependency on the driver (CI machines have none).
#include "collectors/nvml_sampler.h"

#include "collectors/clock.h"
#include "collectors/session.h"

#include <dlfcn.h>

#include <chrono>
#include <string>
#include <vector>

namespace ember::collector {

namespace {

// The few NVML types used, declared here (ABI-stable since NVML 4).
using NvmlDevice = void*;
struct NvmlUtilization {
    unsigned int gpu;
    unsigned int memory;
};
struct NvmlMemory {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
};
constexpr int kNvmlClockSm = 1;
constexpr int kNvmlTemperatureGpu = 0;
constexpr int kNvmlPcieTxBytes = 0;
constexpr int kNvmlPcieRxBytes = 1;

struct NvmlFunctions {
    int (*init)() = nullptr;
    int (*shutdown)() = nullptr;
    int (*device_count)(unsigned int*) = nullptr;
    int (*device_handle)(unsigned int, NvmlDevice*) = nullptr;
    int (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
    int (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
    int (*clock)(NvmlDevice, int, unsigned int*) = nullptr;
    int (*power)(NvmlDevice, unsigned int*) = nullptr;
    int (*temperature)(NvmlDevice, int, unsigned int*) = nullptr;
    int (*pcie)(NvmlDevice, int, unsigned int*) = nullptr;
};

template <typename Function>
void load(void* library, const char* name, Function& function) {
    function = reinterpret_cast<Function>(dlsym(library, name));
}

NvmlFunctions g_nvml;

}  // namespace

bool NvmlSampler::start(Session& session, double hz) {
    library_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!library_) {
        session.say("NVML not found (libnvidia-ml.so.1): no GPU counters");
        return false;
    }
    load(library_, "nvmlInit_v2", g_nvml.init);
    load(library_, "nvmlShutdown", g_nvml.shutdown);
    load(library_, "nvmlDeviceGetCount_v2", g_nvml.device_count);
    load(library_, "nvmlDeviceGetHandleByIndex_v2", g_nvml.device_handle);
    load(library_, "nvmlDeviceGetUtilizationRates", g_nvml.utilization);
    load(library_, "nvmlDeviceGetMemoryInfo", g_nvml.memory);
    load(library_, "nvmlDeviceGetClockInfo", g_nvml.clock);
    load(library_, "nvmlDeviceGetPowerUsage", g_nvml.power);
    load(library_, "nvmlDeviceGetTemperature", g_nvml.temperature);
    load(library_, "nvmlDeviceGetPcieThroughput", g_nvml.pcie);
    if (!g_nvml.init || !g_nvml.device_count || !g_nvml.device_handle || g_nvml.init() != 0) {
        session.say("NVML did not initialize: no GPU counters");
        return false;
    }
    unsigned int devices = 0;
    if (g_nvml.device_count(&devices) != 0 || devices == 0) {
        session.say("NVML sees no GPU: no GPU counters");
        if (g_nvml.shutdown) g_nvml.shutdown();
        return false;
    }
    thread_ = std::thread([this, &session, hz] { run(session, hz); });
    return true;
}

void NvmlSampler::run(Session& session, double hz) {
    struct Device {
        NvmlDevice handle = nullptr;
        trace::CounterId utilization, memory_used, sm_clock, power, temperature, pcie_tx, pcie_rx;
    };
    std::vector<Device> devices;
    unsigned int count = 0;
    g_nvml.device_count(&count);
    for (unsigned int index = 0; index < count; ++index) {
        Device device;
        if (g_nvml.device_handle(index, &device.handle) != 0) continue;
        auto ordinal = static_cast<trace::DeviceId>(index);
        device.utilization = session.counter("gpu utilization", "%", ordinal);
        device.memory_used = session.counter("gpu memory used", "bytes", ordinal);
        device.sm_clock = session.counter("sm clock", "MHz", ordinal);
        device.power = session.counter("power", "W", ordinal);
        device.temperature = session.counter("temperature", "C", ordinal);
        device.pcie_tx = session.counter("pcie tx", "bytes/s", ordinal);
        device.pcie_rx = session.counter("pcie rx", "bytes/s", ordinal);
        devices.push_back(device);
    }
    auto period = std::chrono::nanoseconds(static_cast<std::int64_t>(1e9 / hz));
    std::unique_lock lock(mutex_);
    while (!stop_requested_) {
        lock.unlock();
        if (session.capturing()) {
            store::TraceWriter& writer = session.writer();
            for (const Device& device : devices) {
                trace::TimeNs time = now_ns();
                NvmlUtilization utilization{};
                if (g_nvml.utilization && g_nvml.utilization(device.handle, &utilization) == 0)
                    writer.record_counter({device.utilization, time, double(utilization.gpu)});
                NvmlMemory memory{};
                if (g_nvml.memory && g_nvml.memory(device.handle, &memory) == 0)
                    writer.record_counter({device.memory_used, time, double(memory.used)});
                unsigned int value = 0;
                if (g_nvml.clock && g_nvml.clock(device.handle, kNvmlClockSm, &value) == 0)
                    writer.record_counter({device.sm_clock, time, double(value)});
                if (g_nvml.power && g_nvml.power(device.handle, &value) == 0)
                    writer.record_counter({device.power, time, value / 1000.0});  // mW -> W
                if (g_nvml.temperature && g_nvml.temperature(device.handle, kNvmlTemperatureGpu, &value) == 0)
                    writer.record_counter({device.temperature, time, double(value)});
                // PCIe throughput is sampled by the driver over 20 ms; KB/s.
                if (g_nvml.pcie && g_nvml.pcie(device.handle, kNvmlPcieTxBytes, &value) == 0)
                    writer.record_counter({device.pcie_tx, time, value * 1024.0});
                if (g_nvml.pcie && g_nvml.pcie(device.handle, kNvmlPcieRxBytes, &value) == 0)
                    writer.record_counter({device.pcie_rx, time, value * 1024.0});
            }
        }
        lock.lock();
        wake_.wait_for(lock, period, [this] { return stop_requested_; });
    }
}

void NvmlSampler::stop() {
    {
        std::lock_guard lock(mutex_);
        stop_requested_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) {
        thread_.join();
        if (g_nvml.shutdown) g_nvml.shutdown();
    }
}

}  // namespace ember::collector
