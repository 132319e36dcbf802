// cupti_collector.h: CUDA activity through CUPTI. Activity records (concurrent
// kernels, memcpy with memory kinds, memset, synchronization, CUPTI overhead,
// devices, contexts, streams) arrive in buffers from a pre-allocated pool and are
// converted by ActivityRecorder; runtime and driver API calls are timed by a
// CUPTI subscriber on the calling thread, which also sees cudaProfilerStart/Stop.
// Every timestamp comes from now_ns() (CUPTI's timestamp callback).
//
// Also defines InitializeInjection, the entry point the CUDA driver calls when
// CUDA_INJECTION64_PATH names this library.
#pragma once

#include <cstdint>
#include <string>

namespace ember::collector {

class Session;

// false (with one line said) when there is no device or CUPTI is taken.
bool cupti_start(Session& session);
// Hands completed buffers to the recorder; forced also takes partly filled ones.
void cupti_flush(bool forced);
// Forced flush, then stops CUPTI.
void cupti_stop();

// nvtxNameCudaStream / nvtxNameCuStream: remembers the name of the stream with this
// handle for the life of the process and, while CUPTI records (the only source of
// stream rows), gives it to the stream's row, written or to come.
void name_cuda_stream(std::uintptr_t handle, const std::string& name);
// The name last given to a stream handle, "" when none.
std::string cuda_stream_name(std::uintptr_t handle);

}  // namespace ember::collector

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void);
