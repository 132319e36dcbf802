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

namespace ember::collector {

class Session;

// false (with one line said) when there is no device or CUPTI is taken.
bool cupti_start(Session& session);
// Hands completed buffers to the recorder; forced also takes partly filled ones.
void cupti_flush(bool forced);
// Forced flush, then stops CUPTI.
void cupti_stop();

}  // namespace ember::collector

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void);
