// stream.cpp: CUDA stream and event wrappers.
#include "engine/core/stream.h"

#include "engine/core/cuda_check.h"

#include <utility>

namespace ember {

Stream::Stream(bool non_blocking) {
    EMBER_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, non_blocking ? cudaStreamNonBlocking
                                                                      : cudaStreamDefault));
}

Stream::~Stream() {
    if (stream_) cudaStreamDestroy(stream_);
}

Stream::Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
    if (this != &other) {
        if (stream_) cudaStreamDestroy(stream_);
        stream_ = std::exchange(other.stream_, nullptr);
    }
    return *this;
}

void Stream::synchronize() const { EMBER_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

Event::Event(bool timing) {
    EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault
                                                              : cudaEventDisableTiming));
}

Event::~Event() {
    if (event_) cudaEventDestroy(event_);
}

Event::Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
    if (this != &other) {
        if (event_) cudaEventDestroy(event_);
        event_ = std::exchange(other.event_, nullptr);
    }
    return *this;
}

void Event::record(cudaStream_t stream) { EMBER_CUDA_CHECK(cudaEventRecord(event_, stream)); }
void Event::synchronize() const { EMBER_CUDA_CHECK(cudaEventSynchronize(event_)); }

bool Event::query() const {
    cudaError_t err = cudaEventQuery(event_);
    if (err == cudaErrorNotReady) {
        cudaGetLastError();
        return false;
    }
    EMBER_CUDA_CHECK(err);
    return true;
}

void Event::wait_on(cudaStream_t stream) const {
    EMBER_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0));
}

float Event::elapsed_ms(const Event& start, const Event& end) {
    float ms = 0.0f;
    EMBER_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, end.event_));
    return ms;
}

}  // namespace ember
