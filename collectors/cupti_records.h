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
#include <string>
#include <unordered_map>
#include <utility>

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

// Turns records into events in one file. Used from CUPTI's buffer-completion
// thread only (not thread-safe).
class ActivityRecorder {
public:
    explicit ActivityRecorder(store::TraceWriter& writer) : writer_(writer) {}

    // One record of any kind; unknown kinds are ignored. Returns true when it
    // produced an event.
    bool record(const CUpti_Activity& record);

    std::uint64_t kernels() const { return kernels_; }

    // nvtxNameCudaStream, resolved to CUPTI's id for the stream: names its row now if
    // it is written, else when it is. (Stream ids are matched across contexts, as
    // the priorities below are: CUPTI numbers streams process-wide in practice.)
    void name_stream(std::uint32_t stream_id, const std::string& name);

private:
    trace::StreamId stream(std::uint32_t device, std::uint32_t context, std::uint32_t stream_id);
    trace::DeviceId device_of_context(std::uint32_t context) const;
    trace::StringId kernel_name(const char* mangled);

    store::TraceWriter& writer_;
    std::map<std::pair<std::uint32_t, std::uint32_t>, trace::StreamId> streams_;  // (context, stream)
    std::unordered_map<std::uint32_t, std::uint32_t> stream_priorities_;         // stream -> priority
    std::unordered_map<std::uint32_t, trace::DeviceId> context_devices_;
    std::unordered_map<std::uint32_t, std::uint32_t> null_streams_;  // context -> its NULL stream id
    std::unordered_map<std::uint32_t, std::string> stream_names_;    // stream -> name given by NVTX
    std::unordered_map<const char*, trace::StringId> kernel_names_;  // CUPTI keeps names alive
    std::unordered_map<std::uint32_t, bool> devices_registered_;
    std::unordered_map<std::uint32_t, trace::StringId> overhead_names_;
    std::uint64_t kernels_ = 0;
};

}  // namespace ember::collector
