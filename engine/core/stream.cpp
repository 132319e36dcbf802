// stream.cpp: CUDA stream and event wrappers.
#include "engine/core/stream.h"

#include "engine/core/cuda_check.h"

namespace ember {

Stream::Stream(bool non_blocking) {
    cudaStream_t stream = nullptr;
    EMBER_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, non_blocking ? cudaStreamNonBlocking : cudaStreamDefault));
    stream_.reset(stream);
}

void Stream::synchronize() const {
    EMBER_CUDA_CHECK(cudaStreamSynchronize(get()));
}

Event::Event(bool timing) {
    cudaEvent_t event = nullptr;
    EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&event, timing ? cudaEventDefault : cudaEventDisableTiming));
    event_.reset(event);
}

void Event::record(cudaStream_t stream) {
    EMBER_CUDA_CHECK(cudaEventRecord(get(), stream));
}
void Event::synchronize() const {
    EMBER_CUDA_CHECK(cudaEventSynchronize(get()));
}

bool Event::query() const {
    cudaError_t err = cudaEventQuery(get());
    if (err == cudaErrorNotReady) {
        cudaGetLastError();
        return false;
    }
    EMBER_CUDA_CHECK(err);
    return true;
}

void Event::wait_on(cudaStream_t stream) const {
    EMBER_CUDA_CHECK(cudaStreamWaitEvent(stream, get(), 0));
}

float Event::elapsed_ms(const Event& start, const Event& end) {
    float ms = 0.0f;
    EMBER_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), end.get()));
    return ms;
}

}  // namespace ember
