// stream.h: RAII wrappers for CUDA streams and events. Creating either needs a
// device (EMBER_CUDA_CHECK throws ember::CudaError otherwise).
#pragma once

#include <cuda_runtime_api.h>

namespace ember {

class Stream {
public:
    // non_blocking: does not synchronize with the legacy default stream.
    explicit Stream(bool non_blocking = true);
    ~Stream();
    Stream(Stream&& other) noexcept;
    Stream& operator=(Stream&& other) noexcept;
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;

    cudaStream_t get() const { return stream_; }
    void synchronize() const;

private:
    cudaStream_t stream_ = nullptr;
};

class Event {
public:
    // timing=false creates a cheaper event usable only for ordering.
    explicit Event(bool timing = true);
    ~Event();
    Event(Event&& other) noexcept;
    Event& operator=(Event&& other) noexcept;
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;

    void record(cudaStream_t stream);
    void synchronize() const;
    bool query() const;  // true when the recorded work has completed
    // Makes `stream` wait for this event (cross-stream dependency without host sync).
    void wait_on(cudaStream_t stream) const;
    cudaEvent_t get() const { return event_; }

    static float elapsed_ms(const Event& start, const Event& end);

private:
    cudaEvent_t event_ = nullptr;
};

}  // namespace ember
