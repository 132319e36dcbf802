// stream.h: RAII wrappers for CUDA streams and events. Creating either needs a
// device (EMBER_CUDA_CHECK throws ember::CudaError otherwise). Each owns its handle
// through a std::unique_ptr, so both move and neither copies.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

namespace ember {

// The unique_ptr deleter of a CUDA handle: `Destroy` (cudaStreamDestroy, cudaEventDestroy).
template <auto Destroy>
struct CudaHandleDestroy {
    template <class Handle>
    void operator()(Handle* handle) const {
        Destroy(handle);
    }
};

class Stream {
  public:
    // non_blocking: does not synchronize with the legacy default stream.
    explicit Stream(bool non_blocking = true);

    cudaStream_t get() const { return stream_.get(); }
    void synchronize() const;

  private:
    std::unique_ptr<CUstream_st, CudaHandleDestroy<cudaStreamDestroy>> stream_;
};

class Event {
  public:
    // timing=false creates a cheaper event usable only for ordering.
    explicit Event(bool timing = true);

    void record(cudaStream_t stream);
    void synchronize() const;
    bool query() const;  // true when the recorded work has completed
    // Makes `stream` wait for this event (cross-stream dependency without host sync).
    void wait_on(cudaStream_t stream) const;
    cudaEvent_t get() const { return event_.get(); }

    static float elapsed_ms(const Event& start, const Event& end);

  private:
    std::unique_ptr<CUevent_st, CudaHandleDestroy<cudaEventDestroy>> event_;
};

}  // namespace ember
