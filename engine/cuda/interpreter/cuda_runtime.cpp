// cuda_runtime.cpp: the CUDA runtime API as a program linked with the kernel
// interpreter sees it (it links this instead of libcudart). One "device": the
// interpreter. Device memory is host memory the registry below knows, so kernels and
// memcheck can tell a device pointer from anything else; every call is synchronous, a
// kernel launch included, and streams and events only keep order and time. A stream
// being captured records launches, copies and memsets into a graph that
// cudaGraphLaunch replays. Functions a test links but this file lacks are link errors,
// not silent calls into a missing driver: the library calls (cuBLAS, cuDNN, NCCL,
// CUPTI) stay device-only on purpose.
//
// [SECTION] errors
// [SECTION] the memory registry
// [SECTION] memory
// [SECTION] the device
// [SECTION] streams, events and graphs
#include "engine/cuda/interpreter/simt.h"

#include <sys/sysinfo.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>

namespace ember::cuda_interpreter::detail {

using namespace std::string_literals;

void execute_launch(const LaunchRequest& request);  // scheduler.cpp

namespace {

// ============================================================================================
// [SECTION] errors
// ============================================================================================

thread_local cudaError_t t_last_error = cudaSuccess;
thread_local cudaError_t t_detail_code = cudaSuccess;
thread_local std::string t_detail;        // what the interpreter knows about t_detail_code
thread_local std::string t_error_string;  // cudaGetErrorString's answer, kept alive

cudaError_t fail(cudaError_t code, const std::string& detail) {
    t_last_error = code;
    t_detail_code = code;
    t_detail = detail;
    return code;
}

// The codes the interpreter returns, each with cudaGetErrorName's and
// cudaGetErrorString's answer (libcudart's texts).
struct ErrorDescription {
    cudaError_t code;
    const char* name;
    const char* text;
};
constexpr ErrorDescription kErrorDescriptions[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
    {cudaErrorIllegalState, "cudaErrorIllegalState", "the operation is not permitted in the current state"},
};

const ErrorDescription* describe_error(cudaError_t code) {
    for (const ErrorDescription& description : kErrorDescriptions)
        if (description.code == code) return &description;
    return nullptr;
}

std::string hex_address(const void* pointer) {
    char text[32];
    std::snprintf(text, sizeof text, "%p", pointer);
    return text;
}

// ============================================================================================
// [SECTION] the memory registry
// ============================================================================================

struct FreedBlock {
    MemoryBlock block;
};

class Registry {
  public:
    // Never destroyed: static allocators free their blocks during exit, after any
    // function-local static here would be gone.
    static Registry& instance() {
        static Registry* registry = new Registry;
        return *registry;
    }

    void add(void* base, std::size_t bytes, const char* origin) {
        std::lock_guard lock(mutex_);
        auto next = std::make_shared<MemoryMap>(*map_);
        MemoryBlock block{reinterpret_cast<uintptr_t>(base), bytes, origin};
        next->insert(std::upper_bound(next->begin(), next->end(), block.base,
                                      [](uintptr_t a, const MemoryBlock& b) { return a < b.base; }),
                     block);
        map_ = std::move(next);
    }

    // The block that starts at `base`, removed; bytes == 0 when there is none.
    MemoryBlock remove(void* base, const char* origin) {
        std::lock_guard lock(mutex_);
        const uintptr_t address = reinterpret_cast<uintptr_t>(base);
        for (std::size_t i = 0; i < map_->size(); ++i) {
            const MemoryBlock& block = (*map_)[i];
            if (block.base != address || std::strcmp(block.origin, origin) != 0) continue;
            MemoryBlock removed = block;
            auto next = std::make_shared<MemoryMap>(*map_);
            next->erase(next->begin() + static_cast<std::ptrdiff_t>(i));
            map_ = std::move(next);
            freed_.push_back(removed);
            if (freed_.size() > kFreedRemembered) freed_.pop_front();
            return removed;
        }
        return {};
    }

    std::shared_ptr<const MemoryMap> snapshot() const {
        std::lock_guard lock(mutex_);
        return map_;
    }

    // Whether a recently freed block contained the address (for the report).
    bool freed_block(uintptr_t address, MemoryBlock& found) const {
        std::lock_guard lock(mutex_);
        for (auto it = freed_.rbegin(); it != freed_.rend(); ++it)
            if (address >= it->base && address < it->base + it->bytes) {
                found = *it;
                return true;
            }
        return false;
    }

    // The block holding [address, address + bytes), or nullptr.
    const MemoryBlock* find(const MemoryMap& map, const void* pointer, std::size_t bytes) const {
        const uintptr_t address = reinterpret_cast<uintptr_t>(pointer);
        auto next = std::upper_bound(map.begin(), map.end(), address,
                                     [](uintptr_t a, const MemoryBlock& b) { return a < b.base; });
        if (next == map.begin()) return nullptr;
        const MemoryBlock& block = *std::prev(next);
        return address - block.base + bytes <= block.bytes ? &block : nullptr;
    }

  private:
    static constexpr std::size_t kFreedRemembered = 256;
    mutable std::mutex mutex_;
    std::shared_ptr<const MemoryMap> map_ = std::make_shared<MemoryMap>();
    std::deque<MemoryBlock> freed_;
};

}  // namespace

std::shared_ptr<const MemoryMap> memory_snapshot() {
    return Registry::instance().snapshot();
}

std::string describe_address(const MemoryMap& memory, uintptr_t address, std::size_t bytes) {
    const auto block_text = [](const MemoryBlock& block) {
        char base[32];
        std::snprintf(base, sizeof base, "0x%llx", static_cast<unsigned long long>(block.base));
        return "the " + std::to_string(block.bytes) + "-byte " + block.origin + " block at " + base;
    };
    auto next = std::upper_bound(memory.begin(), memory.end(), address,
                                 [](uintptr_t a, const MemoryBlock& b) { return a < b.base; });
    if (next != memory.begin()) {
        const MemoryBlock& before = *std::prev(next);
        if (address < before.base + before.bytes)  // starts inside, runs past the end
            return std::to_string(address + bytes - (before.base + before.bytes)) + " bytes run past the end of " +
                   block_text(before);
    }
    // Outside every block: name a neighbour close enough to be the one meant.
    std::string text = "outside every live cudaMalloc and cudaHostAlloc block";
    MemoryBlock freed;
    if (Registry::instance().freed_block(address, freed))
        return text + "; it is inside " + block_text(freed) + ", which was freed";
    if (next != memory.begin()) {
        const MemoryBlock& before = *std::prev(next);
        if (address - (before.base + before.bytes) < 256)
            return text + "; it is " + std::to_string(address - (before.base + before.bytes)) +
                   " bytes past the end of " + block_text(before);
    }
    if (next != memory.end() && next->base - address < 256)
        return text + "; it is " + std::to_string(next->base - address) + " bytes before " + block_text(*next);
    return text;
}

void set_last_error(cudaError_t code, const std::string& detail) {
    fail(code, detail);
}

namespace {

// ============================================================================================
// [SECTION] memory
// ============================================================================================

// cudaMalloc's alignment; new memory holds the NaN pattern of f32, f16 and bf16 (0xff
// bytes), so an output element no kernel wrote cannot pass a comparison.
void* allocate(std::size_t bytes, const char* origin) {
    void* pointer = nullptr;
    if (posix_memalign(&pointer, 256, bytes) != 0) return nullptr;
    std::memset(pointer, 0xff, bytes);
    Registry::instance().add(pointer, bytes, origin);
    return pointer;
}

cudaError_t release(void* pointer, const char* origin, const char* call) {
    if (!pointer) return cudaSuccess;
    const MemoryBlock removed = Registry::instance().remove(pointer, origin);
    if (removed.bytes == 0)
        return fail(cudaErrorInvalidValue,
                    std::string(call) + "(" + hex_address(pointer) + "): not the start of a live " + origin + " block");
    std::free(pointer);
    return cudaSuccess;
}

// A device-side range of a copy or memset must lie in one block.
cudaError_t check_range(const void* pointer, std::size_t bytes, const char* call, const char* role) {
    if (bytes == 0) return cudaSuccess;
    auto map = Registry::instance().snapshot();
    if (Registry::instance().find(*map, pointer, bytes)) return cudaSuccess;
    return fail(cudaErrorInvalidValue, std::string(call) + ": the " + role + " range of " + std::to_string(bytes) +
                                           " bytes at " + hex_address(pointer) + " is not device memory: " +
                                           describe_address(*map, reinterpret_cast<uintptr_t>(pointer), bytes));
}

cudaError_t copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, const char* call) {
    const bool device_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool device_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (device_dst)
        if (cudaError_t e = check_range(dst, bytes, call, "destination"); e != cudaSuccess) return e;
    if (device_src)
        if (cudaError_t e = check_range(src, bytes, call, "source"); e != cudaSuccess) return e;
    if (bytes) std::memmove(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t set(void* dst, int value, std::size_t bytes, const char* call) {
    if (cudaError_t e = check_range(dst, bytes, call, "destination"); e != cudaSuccess) return e;
    if (bytes) std::memset(dst, value, bytes);
    return cudaSuccess;
}

// ============================================================================================
// [SECTION] streams, events and graphs
// ============================================================================================

using GraphNode = std::function<cudaError_t()>;

bool is_default_stream(cudaStream_t stream) {
    return stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread;
}

}  // namespace
}  // namespace ember::cuda_interpreter::detail

struct CUstream_st {
    bool capturing = false;
    std::vector<ember::cuda_interpreter::detail::GraphNode> captured;
};
struct CUevent_st {
    std::chrono::steady_clock::time_point when;
    bool recorded = false;
};
struct CUgraph_st {
    std::vector<ember::cuda_interpreter::detail::GraphNode> nodes;
};
struct CUgraphExec_st {
    std::vector<ember::cuda_interpreter::detail::GraphNode> nodes;
};

namespace ember::cuda_interpreter::detail {

namespace {
// Runs `node` now, or records it when `stream` is being captured.
cudaError_t run_or_capture(cudaStream_t stream, GraphNode node) {
    if (!is_default_stream(stream) && stream->capturing) {
        stream->captured.push_back(std::move(node));
        return cudaSuccess;
    }
    return node();
}
}  // namespace

bool capture_launch(const LaunchRequest& request) {
    if (is_default_stream(request.stream) || !request.stream->capturing) return false;
    request.stream->captured.push_back([request] {
        execute_launch(request);
        return t_last_error;
    });
    return true;
}

}  // namespace ember::cuda_interpreter::detail

using namespace ember::cuda_interpreter::detail;

extern "C" {

// ---- errors ------------------------------------------------------------------------------
cudaError_t cudaGetLastError(void) {
    const cudaError_t error = t_last_error;
    t_last_error = cudaSuccess;
    return error;
}

cudaError_t cudaPeekAtLastError(void) {
    return t_last_error;
}

const char* cudaGetErrorName(cudaError_t error) {
    const ErrorDescription* description = describe_error(error);
    return description ? description->name : "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
    const ErrorDescription* description = describe_error(error);
    const char* text = description ? description->text : "unknown error";
    if (error != cudaSuccess && error == t_detail_code && !t_detail.empty()) {
        t_error_string = std::string(text) + "; kernel interpreter: " + t_detail;
        return t_error_string.c_str();
    }
    return text;
}

// ---- memory ------------------------------------------------------------------------------
cudaError_t cudaMalloc(void** pointer, size_t bytes) {
    if (!pointer) return fail(cudaErrorInvalidValue, "cudaMalloc: null result pointer");
    *pointer = nullptr;
    if (bytes == 0) return cudaSuccess;
    *pointer = allocate(bytes, "cudaMalloc");
    return *pointer ? cudaSuccess
                    : fail(cudaErrorMemoryAllocation, "cudaMalloc of " + std::to_string(bytes) + " bytes");
}

cudaError_t cudaFree(void* pointer) {
    return release(pointer, "cudaMalloc", "cudaFree");
}

cudaError_t cudaHostAlloc(void** pointer, size_t bytes, unsigned int) {
    if (!pointer) return fail(cudaErrorInvalidValue, "cudaHostAlloc: null result pointer");
    *pointer = allocate(bytes ? bytes : 1, "cudaHostAlloc");
    return *pointer ? cudaSuccess
                    : fail(cudaErrorMemoryAllocation, "cudaHostAlloc of " + std::to_string(bytes) + " bytes");
}

cudaError_t cudaMallocHost(void** pointer, size_t bytes) {
    return cudaHostAlloc(pointer, bytes, 0);
}

cudaError_t cudaFreeHost(void* pointer) {
    return release(pointer, "cudaHostAlloc", "cudaFreeHost");
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    return copy(dst, src, bytes, kind, "cudaMemcpy");
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
    return run_or_capture(stream, [=] { return copy(dst, src, bytes, kind, "cudaMemcpyAsync"); });
}

cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
    return set(dst, value, bytes, "cudaMemset");
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
    return run_or_capture(stream, [=] { return set(dst, value, bytes, "cudaMemsetAsync"); });
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
    struct sysinfo info {};
    sysinfo(&info);
    if (free_bytes) *free_bytes = size_t(info.freeram) * info.mem_unit;
    if (total_bytes) *total_bytes = size_t(info.totalram) * info.mem_unit;
    return cudaSuccess;
}

// ---- the device ------------------------------------------------------------------------------
cudaError_t cudaGetDeviceCount(int* count) {
    *count = 1;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
    *device = 0;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
    return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice, "the kernel interpreter is device 0, the only one");
}

cudaError_t cudaDeviceSynchronize(void) {
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
    *version = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
    *version = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
    if (device != 0)
        return fail(cudaErrorInvalidDevice, "cudaGetDeviceProperties: no device " + std::to_string(device));
    std::memset(prop, 0, sizeof *prop);
    std::snprintf(prop->name, sizeof prop->name, "ember kernel interpreter (%d CPU workers)",
                  ember::cuda_interpreter::workers());
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    prop->totalGlobalMem = total_bytes;
    prop->sharedMemPerBlock = kSharedLimitBytes;
    prop->sharedMemPerBlockOptin = kSharedLimitBytes;
    prop->warpSize = kWarpSize;
    prop->maxThreadsPerBlock = 1024;
    prop->maxThreadsDim[0] = 1024;
    prop->maxThreadsDim[1] = 1024;
    prop->maxThreadsDim[2] = 64;
    prop->maxGridSize[0] = 0x7fffffff;
    prop->maxGridSize[1] = 65535;
    prop->maxGridSize[2] = 65535;
    prop->major = 9;  // what the kernels are built for (CMAKE_CUDA_ARCHITECTURES)
    prop->minor = 0;
    prop->multiProcessorCount = ember::cuda_interpreter::workers();
    prop->maxThreadsPerMultiProcessor = 1024;
    prop->unifiedAddressing = 1;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) {
    if (device != 0) return fail(cudaErrorInvalidDevice, "cudaDeviceGetAttribute: no device " + std::to_string(device));
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);  // the one description of the device
    switch (attribute) {
        case cudaDevAttrMaxThreadsPerBlock:
            *value = prop.maxThreadsPerBlock;
            break;
        case cudaDevAttrWarpSize:
            *value = prop.warpSize;
            break;
        case cudaDevAttrMaxSharedMemoryPerBlock:
            *value = static_cast<int>(prop.sharedMemPerBlock);
            break;
        case cudaDevAttrMultiProcessorCount:
            *value = prop.multiProcessorCount;
            break;
        case cudaDevAttrComputeCapabilityMajor:
            *value = prop.major;
            break;
        case cudaDevAttrComputeCapabilityMinor:
            *value = prop.minor;
            break;
        default:
            *value = 0;
            break;  // clocks, bus widths: nothing to say about a CPU
    }
    return cudaSuccess;
}

// ---- streams -------------------------------------------------------------------------------------
cudaError_t cudaStreamCreate(cudaStream_t* stream) {
    *stream = new CUstream_st;
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
    return cudaStreamCreate(stream);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    if (is_default_stream(stream))
        return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy of the default stream");
    delete stream;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    if (!is_default_stream(stream) && stream->capturing)
        return fail(cudaErrorStreamCaptureUnsupported, "cudaStreamSynchronize of a capturing stream");
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t) {
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned int) {
    return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
    if (is_default_stream(stream))
        return fail(cudaErrorStreamCaptureUnsupported, "cudaStreamBeginCapture on the default stream");
    if (stream->capturing)
        return fail(cudaErrorIllegalState, "cudaStreamBeginCapture: the stream is already capturing");
    stream->capturing = true;
    stream->captured.clear();
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
    if (is_default_stream(stream) || !stream->capturing)
        return fail(cudaErrorIllegalState, "cudaStreamEndCapture: the stream is not capturing");
    *graph = new CUgraph_st{std::move(stream->captured)};
    stream->captured.clear();
    stream->capturing = false;
    return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
    *status =
        !is_default_stream(stream) && stream->capturing ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}

// ---- events ---------------------------------------------------------------------------------------
cudaError_t cudaEventCreate(cudaEvent_t* event) {
    *event = new CUevent_st;
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
    return cudaEventCreate(event);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
    delete event;
    return cudaSuccess;
}

// Work before the record is done (every call is synchronous): the time is now.
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t) {
    if (!event) return fail(cudaErrorInvalidResourceHandle, "cudaEventRecord of a null event");
    event->when = std::chrono::steady_clock::now();
    event->recorded = true;
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t) {
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t) {
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
    if (!start || !end || !start->recorded || !end->recorded)
        return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event was never recorded");
    *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
    return cudaSuccess;
}

// ---- graphs ------------------------------------------------------------------------------------
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
    *exec = new CUgraphExec_st{graph->nodes};
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
    for (const GraphNode& node : exec->nodes) {
        const cudaError_t error = run_or_capture(stream, node);
        if (error != cudaSuccess) return error;
    }
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    delete exec;
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    delete graph;
    return cudaSuccess;
}

}  // extern "C"
