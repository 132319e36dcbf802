// cupti_records.h: CUPTI activity records -> trace events. Pure conversions (one
// function per record kind) plus ActivityRecorder, which walks one completed CUPTI
// buffer's records, registers the devices/streams they mention and writes the
// events. Nothing here calls CUPTI or the driver, so CI tests it with hand-made
// records on a machine with no GPU.
#pragma once

#include "profiler/store/writer.h"
#include "profiler/trace/events.h"

#include <cupti.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ember::collector {

trace::MemoryKind memory_kind_from_cupti(std::uint32_t cupti_memory_kind);
trace::MemcpyDirection direction_from_cupti(std::uint32_t cupti_copy_kind);
trace::SyncKind sync_kind_from_cupti(CUpti_ActivitySynchronizationType type);
// The readable name of a C++ kernel ("void saxpy<float>(int, float const*, float*)");
// names that are not mangled come back unchanged (demangle_symbol of elf_symbols.h).
std::string demangle(const char* name);
const char* overhead_name(CUpti_ActivityOverheadKind kind);

// Each takes the record and the ids the recorder resolved for it.
trace::KernelEvent kernel_event(const CUpti_ActivityKernel10& record, trace::StreamId stream, trace::StringId name);
trace::MemcpyEvent memcpy_event(const CUpti_ActivityMemcpy6& record, trace::StreamId stream);
trace::MemcpyEvent peer_memcpy_event(const CUpti_ActivityMemcpyPtoP4& record, trace::StreamId stream);
trace::MemsetEvent memset_event(const CUpti_ActivityMemset4& record, trace::StreamId stream);
trace::SyncEvent sync_event(const CUpti_ActivitySynchronization2& record, trace::DeviceId device,
                            trace::StreamId stream);
trace::DeviceInfo device_info(const CUpti_ActivityDevice5& record);

// ---------------------------------------------------------------------------
// Device memory: CUPTI_ACTIVITY_KIND_MEMORY2 and MEMORY_POOL -> memory_events
// ---------------------------------------------------------------------------

// Whether an API call of this name (CUPTI's functionName, "cudaMalloc_v3020") may make
// a MEMORY2 or MEMORY_POOL record: an allocation, a free, a pool created, destroyed or
// trimmed. The collector keeps the thread of those calls only.
bool allocates_or_frees_memory(const char* api_name);

// The thread of each memory API call, by correlation id, from the calling threads
// (noted) to CUPTI's buffer thread (taken once, when the record arrives). Thread-safe.
// Bounded: past kMaxPending calls whose record never came, the oldest are forgotten
// (their records get thread 0).
class MemoryCallThreads {
  public:
    static constexpr std::size_t kMaxPending = 1 << 16;
    void note(std::uint32_t correlation_id, trace::ThreadId thread);
    // The thread noted for this call, forgotten as it is given; 0 when none was.
    trace::ThreadId take(std::uint32_t correlation_id);
    std::size_t pending() const;

  private:
    mutable std::mutex mutex_;
    std::unordered_map<std::uint32_t, trace::ThreadId> threads_;
    std::vector<std::uint32_t> order_;  // correlation ids in the order noted (for forgetting)
};

// MEMORY2 and MEMORY_POOL records -> memory_events of device memory (host, managed and
// array memory make none):
//  - an allocation -> alloc, a release -> free_completed, of `bytes` at `address`;
//  - memory not from a stream-ordered pool (cudaMalloc, cuMemAlloc: memoryPoolType
//    INVALID) is reserved from the driver as it is allocated: its alloc comes with a
//    segment_alloc and its free with a segment_free of the same block;
//  - a pool's reserved bytes are its size (memoryPoolConfig.pool.size of an allocation
//    from it, `size` of a pool record): each change is a segment_alloc or segment_free at
//    the pool's address; a destroyed pool releases all it held; a pool imported from
//    another process reserves nothing here.
// Stateful (each pool's last size); used from CUPTI's buffer thread only.
class GpuMemoryRecords {
  public:
    std::vector<trace::MemoryEvent> memory(const CUpti_ActivityMemory4& record, trace::ThreadId thread);
    std::vector<trace::MemoryEvent> pool(const CUpti_ActivityMemoryPool3& record, trace::ThreadId thread);

  private:
    void resize_pool(std::vector<trace::MemoryEvent>& out, trace::TimeNs time, trace::DeviceId device,
                     std::uint64_t address, std::int64_t size, trace::ThreadId thread);
    std::map<std::pair<trace::DeviceId, std::uint64_t>, std::int64_t> pool_sizes_;  // (device, pool address)
};

// Turns records into events in one file. Used from CUPTI's buffer-completion
// thread only (not thread-safe).
class ActivityRecorder {
  public:
    // `memory_calls`: where the threads of memory API calls are noted (null: thread 0).
    explicit ActivityRecorder(store::TraceWriter& writer, MemoryCallThreads* memory_calls = nullptr)
        : writer_(writer), memory_calls_(memory_calls) {}

    // One record of any kind; unknown kinds are ignored. Returns true when it
    // produced an event.
    bool record(const CUpti_Activity& record);

    std::uint64_t kernels() const { return kernels_; }
    std::uint64_t memory_events() const { return memory_events_; }

    // nvtxNameCudaStream, resolved to CUPTI's id for the stream: names its row now if
    // it is written, else when it is. (Stream ids are matched across contexts, as
    // the priorities below are: CUPTI numbers streams process-wide in practice.)
    void name_stream(std::uint32_t stream_id, const std::string& name);

  private:
    trace::StreamId stream(std::uint32_t device, std::uint32_t context, std::uint32_t stream_id);
    trace::DeviceId device_of_context(std::uint32_t context) const;
    trace::StringId kernel_name(const char* mangled);

    bool record_memory_events(const std::vector<trace::MemoryEvent>& events);

    store::TraceWriter& writer_;
    MemoryCallThreads* memory_calls_;
    GpuMemoryRecords gpu_memory_;
    std::uint64_t memory_events_ = 0;
    std::map<std::pair<std::uint32_t, std::uint32_t>, trace::StreamId> streams_;  // (context, stream)
    std::unordered_map<std::uint32_t, std::uint32_t> stream_priorities_;          // stream -> priority
    std::unordered_map<std::uint32_t, trace::DeviceId> context_devices_;
    std::unordered_map<std::uint32_t, std::uint32_t> null_streams_;  // context -> its NULL stream id
    std::unordered_map<std::uint32_t, std::string> stream_names_;    // stream -> name given by NVTX
    std::unordered_map<const char*, trace::StringId> kernel_names_;  // CUPTI keeps names alive
    std::unordered_map<std::uint32_t, bool> devices_registered_;
    std::unordered_map<std::uint32_t, trace::StringId> overhead_names_;
    std::uint64_t kernels_ = 0;
};

}  // namespace ember::collector
