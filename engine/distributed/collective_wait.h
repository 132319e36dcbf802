// collective_wait.h: the host waiting for a collective to finish: an `allreduce/wait`
// NVTX range (the trace's view of it) whose wall time is also added to a running total
// (the trainer's per-step all-reduce wait in its metrics and TensorBoard scalars).
#pragma once

#include "engine/core/nvtx.h"

#include <chrono>
#include <cstdint>
#include <optional>

namespace ember::distributed {

class CollectiveWait {
  public:
    // bytes: the NVTX payload (the collective's size), when known.
    explicit CollectiveWait(double& total_seconds, std::optional<std::uint64_t> bytes = std::nullopt)
        : range_(bytes ? nvtx::ScopedRange(nvtx::range::kAllreduceWait, nvtx::Category::communication, *bytes)
                       : nvtx::ScopedRange(nvtx::range::kAllreduceWait, nvtx::Category::communication)),
          total_seconds_(total_seconds) {}
    ~CollectiveWait() {
        total_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    }
    CollectiveWait(const CollectiveWait&) = delete;
    CollectiveWait& operator=(const CollectiveWait&) = delete;

  private:
    nvtx::ScopedRange range_;
    double& total_seconds_;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace ember::distributed
