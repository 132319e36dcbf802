// chrome_layout.h: how an ember trace is laid out in Chrome's Trace Event Format, the
// contract between `ember export --format chrome` (profiler/export/chrome_trace.cpp)
// and the Chrome importer (profiler/import/chrome_importer.cpp), so that an exported
// file imports back as what it was. Host threads keep their process's OS pid and their
// thread id; each GPU is a process of its own whose threads are its streams, with a
// second lane per stream for the host's synchronizations on it (a host wait overlaps
// the stream's kernels). The names below are what the exporter writes and what the
// importer parses back.
#pragma once

#include <cstdint>
#include <string_view>

namespace ember::trace::chrome {

// ---------------------------------------------------------------------------
// [SECTION] Processes and threads
// ---------------------------------------------------------------------------

// GPU `device` (0 <= device < kDeviceLimit) is process kGpuPidBase + device: far above
// any OS pid (Linux caps them at 2^22).
inline constexpr std::int64_t kDeviceLimit = 1'000'000;
inline constexpr std::int64_t kGpuPidBase = 1'000'000'000;
inline constexpr std::int64_t kGpuPidLimit = kGpuPidBase + kDeviceLimit;
// Stream s of a GPU is its thread s; the stream's synchronizations are thread
// kSyncTidBase + s of the same process.
inline constexpr std::int64_t kSyncTidBase = 1'000'000'000;

constexpr std::int64_t gpu_pid(std::int64_t device) {
    return kGpuPidBase + device;
}
constexpr bool is_gpu_pid(std::int64_t pid) {
    return pid >= kGpuPidBase && pid < kGpuPidLimit;
}
constexpr std::int64_t device_of_gpu_pid(std::int64_t pid) {
    return pid - kGpuPidBase;
}
constexpr std::int64_t sync_tid(std::int64_t stream) {
    return kSyncTidBase + stream;
}
constexpr bool is_sync_tid(std::int64_t tid) {
    return tid >= kSyncTidBase;
}

// Process and thread names ("M" events): "GPU 0 NVIDIA H100", "Stream 7 compute",
// "Synchronizations, stream 7", "python train.py (pid 4242)", "main (tid 4242)".
inline constexpr std::string_view kGpuProcessPrefix = "GPU ";
inline constexpr std::string_view kStreamThreadPrefix = "Stream ";
inline constexpr std::string_view kSyncThreadPrefix = "Synchronizations, stream ";
inline constexpr std::string_view kPidWord = "pid";  // "NAME (pid N)"
inline constexpr std::string_view kTidWord = "tid";  // "NAME (tid N)"

// ---------------------------------------------------------------------------
// [SECTION] Categories ("cat") of the events ember writes
// ---------------------------------------------------------------------------

inline constexpr std::string_view kKernelCategory = "kernel";
inline constexpr std::string_view kMemcpyCategory = "memcpy";
inline constexpr std::string_view kMemsetCategory = "memset";
inline constexpr std::string_view kSyncCategory = "sync";
inline constexpr std::string_view kCudaApiCategory = "cuda_api";
inline constexpr std::string_view kOverheadCategory = "ember_overhead";
// NVTX ranges: "nvtx" for the default domain, "nvtx,DOMAIN" for the others.
inline constexpr std::string_view kNvtxCategory = "nvtx";
inline constexpr std::string_view kNvtxDomainCategoryPrefix = "nvtx,";

// The header object: otherData.exporter starts with this for a file ember wrote, and
// otherData.time_origin_ns holds the run's start (event times are relative to it).
inline constexpr std::string_view kExporterPrefix = "ember";

}  // namespace ember::trace::chrome
