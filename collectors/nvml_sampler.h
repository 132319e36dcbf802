// nvml_sampler.h: GPU counters from NVML (utilization, memory used, SM clock,
// power, temperature, PCIe throughput), sampled on a thread at a fixed rate into
// counter tracks. libnvidia-ml.so.1 is loaded at run time: without it the sampler
// says so once and does nothing.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace ember::collector {

class Session;

class NvmlSampler {
  public:
    ~NvmlSampler() { stop(); }
    // false when NVML is absent or has no device (one line said).
    bool start(Session& session, double hz);
    void stop();

  private:
    void run(Session& session, double hz);
    std::thread thread_;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stop_requested_ = false;
    void* library_ = nullptr;
};

}  // namespace ember::collector
