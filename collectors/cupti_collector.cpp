// cupti_collector.cpp: CUPTI setup, the activity buffer pool, the API-call
// subscriber and the CUDA driver's injection entry point (see cupti_collector.h).
#include "collectors/cupti_collector.h"

#include "collectors/clock.h"
#include "collectors/cupti_records.h"
#include "collectors/python_call_site.h"
#include "collectors/session.h"

#include <cupti.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace ember::collector {

namespace {

// ---------------------------------------------------------------------------
// [SECTION] Buffer pool
// ---------------------------------------------------------------------------

constexpr std::size_t kBufferBytes = 4u << 20;
constexpr std::size_t kPreallocatedBuffers = 8;
constexpr std::size_t kMaxPooledBuffers = 32;
constexpr std::size_t kBufferAlignment = 8;

struct BufferPool {
    std::mutex mutex;
    std::vector<std::uint8_t*> free_buffers;
    std::size_t allocated = 0;

    void preallocate() {
        std::lock_guard lock(mutex);
        while (free_buffers.size() < kPreallocatedBuffers) {
            free_buffers.push_back(static_cast<std::uint8_t*>(std::aligned_alloc(kBufferAlignment, kBufferBytes)));
            ++allocated;
        }
    }
    std::uint8_t* take() {
        std::lock_guard lock(mutex);
        if (!free_buffers.empty()) {
            std::uint8_t* buffer = free_buffers.back();
            free_buffers.pop_back();
            return buffer;
        }
        ++allocated;  // the pool grows rather than making CUPTI drop records
        return static_cast<std::uint8_t*>(std::aligned_alloc(kBufferAlignment, kBufferBytes));
    }
    void give_back(std::uint8_t* buffer) {
        std::lock_guard lock(mutex);
        if (free_buffers.size() < kMaxPooledBuffers) {
            free_buffers.push_back(buffer);
        } else {
            --allocated;
            std::free(buffer);
        }
    }
};

BufferPool& buffer_pool() {
    static BufferPool* pool = new BufferPool;  // CUPTI may hand buffers back during exit
    return *pool;
}

// ---------------------------------------------------------------------------
// [SECTION] State
// ---------------------------------------------------------------------------

struct CuptiState {
    std::mutex recorder_mutex;
    Session* session = nullptr;  // the session buffers are recorded into
    std::unique_ptr<ActivityRecorder> recorder;
    CUpti_SubscriberHandle subscriber = nullptr;
    bool callbacks_registered = false;
    bool running = false;
    std::unordered_map<std::uintptr_t, std::string> stream_names;  // by CUstream handle, all process long
    std::atomic<bool> memory{false};  // MEMORY2 and MEMORY_POOL records are on (--cuda-memory)
    MemoryCallThreads memory_calls;   // the thread of each allocating or freeing call
};

CuptiState& state() {
    static CuptiState* cupti = new CuptiState;
    return *cupti;
}

const CUpti_ActivityKind kActivityKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMCPY2,
    CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    CUPTI_ACTIVITY_KIND_OVERHEAD,
    CUPTI_ACTIVITY_KIND_DEVICE,
    CUPTI_ACTIVITY_KIND_CONTEXT,
    CUPTI_ACTIVITY_KIND_STREAM,
};

// Device memory (--cuda-memory): every allocation and free, and stream-ordered pools.
// Kept across pauses (a free needs its allocation for the totals to replay).
const CUpti_ActivityKind kMemoryActivityKinds[] = {CUPTI_ACTIVITY_KIND_MEMORY2, CUPTI_ACTIVITY_KIND_MEMORY_POOL};

std::string cupti_error(CUptiResult result) {
    const char* text = nullptr;
    cuptiGetResultString(result, &text);
    return text ? text : "CUPTI error " + std::to_string(int(result));
}

std::uint64_t CUPTIAPI cupti_timestamp() {
    return static_cast<std::uint64_t>(now_ns());
}

// ---------------------------------------------------------------------------
// [SECTION] Activity buffers
// ---------------------------------------------------------------------------

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
    *buffer = buffer_pool().take();
    *size = *buffer ? kBufferBytes : 0;
    *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext context, std::uint32_t stream_id, std::uint8_t* buffer, std::size_t,
                               std::size_t valid_bytes) {
    CuptiState& cupti = state();
    {
        std::lock_guard lock(cupti.recorder_mutex);
        Session* session = cupti.session;
        if (session && cupti.recorder) {
            trace::TimeNs begin = now_ns();
            CUpti_Activity* record = nullptr;
            while (cuptiActivityGetNextRecord(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
                // GPU work is kept when it started inside a capture window.
                std::uint64_t start = 0;
                switch (record->kind) {
                    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
                        start = reinterpret_cast<CUpti_ActivityKernel10*>(record)->start;
                        break;
                    case CUPTI_ACTIVITY_KIND_MEMCPY:
                        start = reinterpret_cast<CUpti_ActivityMemcpy6*>(record)->start;
                        break;
                    case CUPTI_ACTIVITY_KIND_MEMSET:
                        start = reinterpret_cast<CUpti_ActivityMemset4*>(record)->start;
                        break;
                    default:
                        start = 0;
                        break;
                }
                if (start != 0 && !session->captured_at(static_cast<trace::TimeNs>(start))) continue;
                cupti.recorder->record(*record);
            }
            std::size_t dropped = 0;
            if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS && dropped > 0) {
                session->add_cupti_dropped(dropped);
                session->writer().record_dropped({now_ns(), session->writer().intern("cupti"), 0, dropped});
            }
            trace::OverheadEvent overhead;
            overhead.start_ns = begin;
            overhead.end_ns = now_ns();
            overhead.thread_id = session->this_thread();
            overhead.name_id = session->writer().intern("cupti buffer processing");
            session->writer().record_overhead(overhead);
        }
    }
    buffer_pool().give_back(buffer);
}

// ---------------------------------------------------------------------------
// [SECTION] API calls (subscriber callback, on the calling thread)
// ---------------------------------------------------------------------------

struct OpenCall {
    trace::TimeNs start_ns;
    bool runtime;
    trace::StackId stack_id;  // the Python stack that made the call; 0 = none or unknown
};

struct ApiThreadState {
    std::vector<OpenCall> open_calls;
    int runtime_depth = 0;
    std::uint32_t generation = 0;
    std::unordered_map<const char*, trace::StringId> names;  // CUPTI's names are static strings
    PythonCallSiteCache call_sites;
};

// The Python stack of the calling thread, for the outermost API call on it (a driver
// call made by the runtime is part of the runtime call); read before the call's start
// is taken, so the API call's duration does not include it.
trace::StackId python_stack_of_this_call(Session& session, ApiThreadState& thread) {
    PythonCallSites* sites = session.python_call_sites();
    if (!sites || !thread.open_calls.empty() || !session.capturing()) return 0;
    const std::uint64_t thread_state = sites->current_thread_state();
    return thread_state == 0 ? 0 : sites->stack_of(thread_state, thread.call_sites);
}

void on_profiler_control(Session& session, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                         CUpti_ApiCallbackSite site) {
    bool start = (domain == CUPTI_CB_DOMAIN_RUNTIME_API && id == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000) ||
                 (domain == CUPTI_CB_DOMAIN_DRIVER_API && id == CUPTI_DRIVER_TRACE_CBID_cuProfilerStart);
    bool stop = (domain == CUPTI_CB_DOMAIN_RUNTIME_API && id == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000) ||
                (domain == CUPTI_CB_DOMAIN_DRIVER_API && id == CUPTI_DRIVER_TRACE_CBID_cuProfilerStop);
    if (start && site == CUPTI_API_ENTER) session.set_capturing(true);
    if (stop && site == CUPTI_API_EXIT) session.set_capturing(false);
}

void CUPTIAPI api_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
    if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
    Session* session = current_session();
    if (!session) return;
    const auto* call = static_cast<const CUpti_CallbackData*>(data);
    on_profiler_control(*session, domain, id, call->callbackSite);
    thread_local ApiThreadState thread;
    if (thread.generation != session->generation()) {
        thread = ApiThreadState{};
        thread.generation = session->generation();
    }
    bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
    if (call->callbackSite == CUPTI_API_ENTER && state().memory && allocates_or_frees_memory(call->functionName)) {
        // The runtime call and the driver call it makes both: the memory record may
        // carry either's correlation id.
        state().memory_calls.note(call->correlationId, session->this_thread());
    }
    if (call->callbackSite == CUPTI_API_ENTER) {
        const trace::StackId stack = python_stack_of_this_call(*session, thread);
        if (runtime) ++thread.runtime_depth;
        thread.open_calls.push_back({now_ns(), runtime, stack});
        return;
    }
    trace::TimeNs end = now_ns();
    if (thread.open_calls.empty()) return;
    OpenCall open = thread.open_calls.back();
    thread.open_calls.pop_back();
    if (runtime) --thread.runtime_depth;
    // A driver call made by the runtime is part of the runtime call; record only
    // the outermost layer, as a user wrote it.
    if (!runtime && thread.runtime_depth > 0) return;
    if (!session->capturing()) return;
    trace::ApiEvent event;
    event.start_ns = open.start_ns;
    event.end_ns = end;
    event.thread_id = session->this_thread();
    event.correlation_id = call->correlationId;
    event.stack_id = open.stack_id;
    auto name = thread.names.find(call->functionName);
    if (name == thread.names.end())
        name = thread.names
                   .emplace(call->functionName, session->writer().intern(call->functionName ? call->functionName : ""))
                   .first;
    event.name_id = name->second;
    if (call->functionReturnValue) event.result = *static_cast<const int*>(call->functionReturnValue);
    session->writer().record_api_call(event);
}

// In-process: is there a driver and a device at all? (Injected, the driver called
// us, so there is.)
bool cuda_device_present(std::string* reason) {
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!driver) {
        *reason = "libcuda.so.1 not found";
        return false;
    }
    using InitFunction = int (*)(unsigned int);
    using CountFunction = int (*)(int*);
    auto init = reinterpret_cast<InitFunction>(dlsym(driver, "cuInit"));
    auto count = reinterpret_cast<CountFunction>(dlsym(driver, "cuDeviceGetCount"));
    if (!init || !count) {
        *reason = "libcuda.so.1 lacks cuInit";
        return false;
    }
    int result = init(0);
    if (result != 0) {
        *reason = "cuInit failed with CUresult " + std::to_string(result);
        return false;
    }
    int devices = 0;
    if (count(&devices) != 0 || devices == 0) {
        *reason = "no device";
        return false;
    }
    return true;
}

// CUPTI's id of the stream with this handle, when CUPTI knows it.
bool cupti_stream_id(std::uintptr_t handle, std::uint32_t& stream_id) {
    return cuptiGetStreamIdEx(nullptr, reinterpret_cast<CUstream>(handle), 0, &stream_id) == CUPTI_SUCCESS;
}

// Gives every stream named so far to a new recorder. CUPTI is asked without the
// recorder lock held (CUPTI may complete a buffer, which takes it, on this thread).
void apply_remembered_stream_names(CuptiState& cupti) {
    std::unordered_map<std::uintptr_t, std::string> names;
    {
        std::lock_guard lock(cupti.recorder_mutex);
        names = cupti.stream_names;
    }
    std::vector<std::pair<std::uint32_t, std::string>> resolved;
    for (const auto& [handle, name] : names) {
        std::uint32_t stream_id = 0;
        if (cupti_stream_id(handle, stream_id)) resolved.emplace_back(stream_id, name);
    }
    std::lock_guard lock(cupti.recorder_mutex);
    if (!cupti.recorder) return;
    for (const auto& [stream_id, name] : resolved) cupti.recorder->name_stream(stream_id, name);
}

}  // namespace

void name_cuda_stream(std::uintptr_t handle, const std::string& name) {
    CuptiState& cupti = state();
    bool recording = false;
    {
        std::lock_guard lock(cupti.recorder_mutex);
        cupti.stream_names[handle] = name;
        recording = cupti.recorder != nullptr;
    }
    std::uint32_t stream_id = 0;
    if (!recording || !cupti_stream_id(handle, stream_id)) return;  // applied when CUPTI starts
    std::lock_guard lock(cupti.recorder_mutex);
    if (cupti.recorder) cupti.recorder->name_stream(stream_id, name);
}

std::string cuda_stream_name(std::uintptr_t handle) {
    CuptiState& cupti = state();
    std::lock_guard lock(cupti.recorder_mutex);
    auto found = cupti.stream_names.find(handle);
    return found == cupti.stream_names.end() ? std::string() : found->second;
}

bool cupti_start(Session& session) {
    CuptiState& cupti = state();
    if (!session.options().injected) {
        std::string reason;
        if (!cuda_device_present(&reason)) {
            session.say("no CUDA device (" + reason + "): recording NVTX and host data only");
            return false;
        }
    } else if (!dlopen("libcuda.so.1", RTLD_LAZY | RTLD_GLOBAL)) {
        // Injected and started by NVTX before any CUDA call: cuInit may not be called
        // from here (the driver would call InitializeInjection inside it), but a
        // machine without the driver library has no device for certain.
        session.say("no CUDA device (libcuda.so.1 not found): recording NVTX and host data only");
        return false;
    }
    CUptiResult result = cuptiSubscribe(&cupti.subscriber, reinterpret_cast<CUpti_CallbackFunc>(api_callback), nullptr);
    if (result != CUPTI_SUCCESS) {
        cupti.subscriber = nullptr;
        if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
            session.say(
                "another tool holds CUPTI (the PyTorch profiler, Nsight, ...): "
                "no CUDA activity in this file; NVTX and host data are still recorded");
        else
            session.say("CUDA tracing disabled: cuptiSubscribe: " + cupti_error(result));
        return false;
    }
    cuptiEnableDomain(1, cupti.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
    cuptiEnableDomain(1, cupti.subscriber, CUPTI_CB_DOMAIN_DRIVER_API);

    buffer_pool().preallocate();
    {
        std::lock_guard lock(cupti.recorder_mutex);
        cupti.session = &session;
        cupti.recorder = std::make_unique<ActivityRecorder>(session.writer(), &cupti.memory_calls);
    }
    result = cuptiActivityRegisterTimestampCallback(cupti_timestamp);
    if (result != CUPTI_SUCCESS)
        session.say("cuptiActivityRegisterTimestampCallback: " + cupti_error(result) +
                    " (GPU times may be on CUPTI's clock)");
    if (!cupti.callbacks_registered) {
        result = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
        if (result != CUPTI_SUCCESS) {
            session.say("CUDA activity disabled: cuptiActivityRegisterCallbacks: " + cupti_error(result));
            cuptiUnsubscribe(cupti.subscriber);
            cupti.subscriber = nullptr;
            return false;
        }
        cupti.callbacks_registered = true;
    }
    for (CUpti_ActivityKind kind : kActivityKinds) {
        result = cuptiActivityEnable(kind);
        if (result != CUPTI_SUCCESS &&
            (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || kind == CUPTI_ACTIVITY_KIND_MEMCPY))
            session.say("cuptiActivityEnable(" + std::to_string(int(kind)) + "): " + cupti_error(result));
    }
    if (session.options().trace_cuda_memory) {
        bool enabled = true;
        for (CUpti_ActivityKind kind : kMemoryActivityKinds) {
            result = cuptiActivityEnable(kind);
            if (result != CUPTI_SUCCESS) {
                enabled = false;
                session.say("GPU memory not recorded: cuptiActivityEnable(" + std::to_string(int(kind)) +
                            "): " + cupti_error(result));
            }
        }
        cupti.memory = enabled;
    }
    cupti.running = true;
    apply_remembered_stream_names(cupti);
    return true;
}

void cupti_flush(bool forced) {
    if (!state().running) return;
    cuptiActivityFlushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
}

void cupti_stop() {
    CuptiState& cupti = state();
    if (!cupti.running) return;
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (CUpti_ActivityKind kind : kActivityKinds) cuptiActivityDisable(kind);
    for (CUpti_ActivityKind kind : kMemoryActivityKinds) cuptiActivityDisable(kind);
    cupti.memory = false;
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (cupti.subscriber) cuptiUnsubscribe(cupti.subscriber);
    cupti.subscriber = nullptr;
    std::lock_guard lock(cupti.recorder_mutex);
    cupti.session = nullptr;
    cupti.recorder.reset();
    cupti.running = false;
}

}  // namespace ember::collector

extern "C" int InitializeInjection(void) {
    ember::collector::start_session_from_environment_once();
    return 1;
}
