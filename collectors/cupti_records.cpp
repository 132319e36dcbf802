// cupti_records.cpp: CUPTI activity records -> trace events (see cupti_records.h).
#include "collectors/cupti_records.h"

#include "collectors/elf_symbols.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace ember::collector {

trace::MemoryKind memory_kind_from_cupti(std::uint32_t cupti_memory_kind) {
    switch (cupti_memory_kind) {
        case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE:
            return trace::MemoryKind::pageable;
        case CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
            return trace::MemoryKind::pinned;
        case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
        case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC:
            return trace::MemoryKind::device;
        case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
        case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC:
            return trace::MemoryKind::managed;
        case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY:
            return trace::MemoryKind::array;
        default:
            return trace::MemoryKind::unknown;
    }
}

trace::MemcpyDirection direction_from_cupti(std::uint32_t cupti_copy_kind) {
    switch (cupti_copy_kind) {
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
            return trace::MemcpyDirection::host_to_device;
        case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
        case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
            return trace::MemcpyDirection::device_to_host;
        case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
        case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
        case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
        case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
            return trace::MemcpyDirection::device_to_device;
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
            return trace::MemcpyDirection::host_to_host;
        case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
            return trace::MemcpyDirection::peer_to_peer;
        default:
            return trace::MemcpyDirection::unknown;
    }
}

trace::SyncKind sync_kind_from_cupti(CUpti_ActivitySynchronizationType type) {
    switch (type) {
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
            return trace::SyncKind::event_synchronize;
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
            return trace::SyncKind::stream_wait_event;
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
            return trace::SyncKind::stream_synchronize;
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
            return trace::SyncKind::context_synchronize;
        default:
            return trace::SyncKind::unknown;
    }
}

std::string demangle(const char* name) {
    return demangle_symbol(name);
}

const char* overhead_name(CUpti_ActivityOverheadKind kind) {
    switch (kind) {
        case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER:
            return "driver compiler";
        case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH:
            return "cupti buffer flush";
        case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION:
            return "cupti instrumentation";
        case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE:
            return "cupti resource";
        case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING:
            return "module loading";
        case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING:
            return "lazy function loading";
        case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL:
            return "command buffer full";
        case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST:
            return "cupti buffer request";
        case CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT:
            return "unified memory activity init";
        default:
            return "cupti overhead";
    }
}

namespace {

// The fields of every GPU activity record: its interval, device, stream, correlation
// and CUDA graph (0 unless it ran through a graph launch).
template <typename Event, typename Record>
Event gpu_event(const Record& record, trace::StreamId stream) {
    Event event;
    event.start_ns = static_cast<trace::TimeNs>(record.start);
    event.end_ns = static_cast<trace::TimeNs>(record.end);
    event.device_id = static_cast<trace::DeviceId>(record.deviceId);
    event.stream_id = stream;
    event.correlation_id = record.correlationId;
    event.graph_id = record.graphId;
    event.graph_node_id = record.graphNodeId;
    return event;
}

// What a copy record says of the copy, peer or not.
template <typename Record>
trace::MemcpyEvent copy_event(const Record& record, trace::StreamId stream) {
    trace::MemcpyEvent event = gpu_event<trace::MemcpyEvent>(record, stream);
    event.direction = direction_from_cupti(record.copyKind);
    event.bytes = record.bytes;
    event.source_kind = memory_kind_from_cupti(record.srcKind);
    event.destination_kind = memory_kind_from_cupti(record.dstKind);
    return event;
}

}  // namespace

trace::KernelEvent kernel_event(const CUpti_ActivityKernel10& record, trace::StreamId stream, trace::StringId name) {
    trace::KernelEvent event = gpu_event<trace::KernelEvent>(record, stream);
    event.name_id = name;
    event.launch.grid_x = static_cast<std::uint32_t>(record.gridX);
    event.launch.grid_y = static_cast<std::uint32_t>(record.gridY);
    event.launch.grid_z = static_cast<std::uint32_t>(record.gridZ);
    event.launch.block_x = static_cast<std::uint32_t>(record.blockX);
    event.launch.block_y = static_cast<std::uint32_t>(record.blockY);
    event.launch.block_z = static_cast<std::uint32_t>(record.blockZ);
    event.launch.registers_per_thread = record.registersPerThread;
    event.launch.static_shared_bytes = static_cast<std::uint32_t>(record.staticSharedMemory);
    event.launch.dynamic_shared_bytes = static_cast<std::uint32_t>(record.dynamicSharedMemory);
    return event;
}

trace::MemcpyEvent memcpy_event(const CUpti_ActivityMemcpy6& record, trace::StreamId stream) {
    trace::MemcpyEvent event = copy_event(record, stream);
    // The runtime call (cudaMemcpy) when there is one, else the driver call.
    if (record.runtimeCorrelationId) event.correlation_id = record.runtimeCorrelationId;
    return event;
}

trace::MemcpyEvent peer_memcpy_event(const CUpti_ActivityMemcpyPtoP4& record, trace::StreamId stream) {
    trace::MemcpyEvent event = copy_event(record, stream);
    // The device that is not the one the copy ran on.
    std::uint32_t other = record.srcDeviceId == record.deviceId ? record.dstDeviceId : record.srcDeviceId;
    event.peer_device_id = static_cast<trace::DeviceId>(other);
    return event;
}

trace::MemsetEvent memset_event(const CUpti_ActivityMemset4& record, trace::StreamId stream) {
    trace::MemsetEvent event = gpu_event<trace::MemsetEvent>(record, stream);
    event.bytes = record.bytes;
    event.value = record.value;
    event.memory_kind = memory_kind_from_cupti(record.memoryKind);
    return event;
}

trace::SyncEvent sync_event(const CUpti_ActivitySynchronization2& record, trace::DeviceId device,
                            trace::StreamId stream) {
    trace::SyncEvent event;
    event.start_ns = static_cast<trace::TimeNs>(record.start);
    event.end_ns = static_cast<trace::TimeNs>(record.end);
    event.device_id = device;
    event.stream_id = stream;
    event.correlation_id = record.correlationId;
    event.kind = sync_kind_from_cupti(record.type);
    event.cuda_event_id = record.cudaEventId == CUPTI_SYNCHRONIZATION_INVALID_VALUE ? 0 : record.cudaEventId;
    return event;
}

trace::DeviceInfo device_info(const CUpti_ActivityDevice5& record) {
    trace::DeviceInfo info;
    info.device_id = static_cast<trace::DeviceId>(record.id);
    info.name = record.name ? record.name : "";
    char uuid[64];
    const auto* bytes = reinterpret_cast<const unsigned char*>(record.uuid.bytes);
    std::snprintf(uuid, sizeof uuid, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                  bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9],
                  bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]);
    info.uuid = uuid;
    info.compute_capability_major = static_cast<std::int32_t>(record.computeCapabilityMajor);
    info.compute_capability_minor = static_cast<std::int32_t>(record.computeCapabilityMinor);
    info.multiprocessor_count = static_cast<std::int32_t>(record.numMultiprocessors);
    info.memory_bytes = static_cast<std::int64_t>(record.globalMemorySize);
    info.memory_bandwidth_bytes_per_second = static_cast<double>(record.globalMemoryBandwidth) * 1000.0;  // kB/s
    return info;
}

// ---------------------------------------------------------------------------
// [SECTION] Device memory
// ---------------------------------------------------------------------------

bool allocates_or_frees_memory(const char* api_name) {
    if (!api_name) return false;
    const std::string_view name(api_name);
    if (name.starts_with("cudaMalloc") || name.starts_with("cudaFree") || name.starts_with("cuMemAlloc") ||
        name.starts_with("cuMemFree") || name.starts_with("cudaHostAlloc") || name.starts_with("cuMemHostAlloc"))
        return true;
    for (std::string_view pool : {"cudaMemPool", "cuMemPool"}) {
        if (!name.starts_with(pool)) continue;
        const std::string_view rest = name.substr(pool.size());
        return rest.starts_with("Create") || rest.starts_with("Destroy") || rest.starts_with("Trim");
    }
    return false;
}

void MemoryCallThreads::note(std::uint32_t correlation_id, trace::ThreadId thread) {
    std::lock_guard lock(mutex_);
    if (order_.size() >= kMaxPending) {
        // Calls whose record never came (host memory freed by name, a failed call):
        // forget the older half.
        const std::size_t forget = order_.size() / 2;
        for (std::size_t i = 0; i < forget; ++i) threads_.erase(order_[i]);
        order_.erase(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(forget));
    }
    if (threads_.insert_or_assign(correlation_id, thread).second) order_.push_back(correlation_id);
}

trace::ThreadId MemoryCallThreads::take(std::uint32_t correlation_id) {
    std::lock_guard lock(mutex_);
    auto found = threads_.find(correlation_id);
    if (found == threads_.end()) return 0;
    const trace::ThreadId thread = found->second;
    threads_.erase(found);
    // order_ keeps the id until it is forgotten with the older half (erasing it from
    // the middle would cost a scan per record).
    return thread;
}

std::size_t MemoryCallThreads::pending() const {
    std::lock_guard lock(mutex_);
    return threads_.size();
}

void GpuMemoryRecords::resize_pool(std::vector<trace::MemoryEvent>& out, trace::TimeNs time, trace::DeviceId device,
                                   std::uint64_t address, std::int64_t size, trace::ThreadId thread) {
    std::int64_t& held = pool_sizes_[{device, address}];
    if (size == held) return;
    trace::MemoryEvent segment;
    segment.time_ns = time;
    segment.device_id = device;
    segment.address = address;
    segment.action = size > held ? trace::MemoryAction::segment_alloc : trace::MemoryAction::segment_free;
    segment.bytes = size > held ? size - held : held - size;
    segment.thread_id = thread;
    out.push_back(segment);
    held = size;
}

namespace {
std::int64_t signed_bytes(std::uint64_t bytes) {
    return static_cast<std::int64_t>(std::min<std::uint64_t>(bytes, std::uint64_t{1} << 62));
}
}  // namespace

std::vector<trace::MemoryEvent> GpuMemoryRecords::memory(const CUpti_ActivityMemory4& record, trace::ThreadId thread) {
    std::vector<trace::MemoryEvent> out;
    if (memory_kind_from_cupti(record.memoryKind) != trace::MemoryKind::device) return out;
    const bool allocation = record.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
    if (!allocation && record.memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) return out;
    trace::MemoryEvent event;
    event.time_ns = static_cast<trace::TimeNs>(record.timestamp);
    event.device_id = static_cast<trace::DeviceId>(record.deviceId);
    event.action = allocation ? trace::MemoryAction::alloc : trace::MemoryAction::free_completed;
    event.address = record.address;
    event.bytes = signed_bytes(record.bytes);
    event.cuda_stream = record.streamId == CUPTI_INVALID_STREAM_ID ? 0 : record.streamId;
    event.thread_id = thread;
    out.push_back(event);
    switch (record.memoryPoolConfig.memoryPoolType) {
        case CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL:
            resize_pool(out, event.time_ns, event.device_id, record.memoryPoolConfig.address,
                        signed_bytes(record.memoryPoolConfig.pool.size), thread);
            break;
        case CUPTI_ACTIVITY_MEMORY_POOL_TYPE_IMPORTED:
            break;  // reserved by the exporting process
        default: {
            trace::MemoryEvent segment = event;
            segment.action = allocation ? trace::MemoryAction::segment_alloc : trace::MemoryAction::segment_free;
            out.push_back(segment);
            break;
        }
    }
    return out;
}

std::vector<trace::MemoryEvent> GpuMemoryRecords::pool(const CUpti_ActivityMemoryPool3& record,
                                                       trace::ThreadId thread) {
    std::vector<trace::MemoryEvent> out;
    if (record.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL || record.isManagedPool) return out;
    std::int64_t size = 0;
    switch (record.memoryPoolOperationType) {
        case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED:
        case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED:
            size = signed_bytes(record.size);
            break;
        case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED:
            size = 0;
            break;
        default:
            return out;
    }
    resize_pool(out, static_cast<trace::TimeNs>(record.timestamp), static_cast<trace::DeviceId>(record.deviceId),
                record.address, size, thread);
    return out;
}

// ---------------------------------------------------------------------------
// [SECTION] ActivityRecorder
// ---------------------------------------------------------------------------

trace::DeviceId ActivityRecorder::device_of_context(std::uint32_t context) const {
    auto found = context_devices_.find(context);
    return found == context_devices_.end() ? 0 : found->second;
}

void ActivityRecorder::name_stream(std::uint32_t stream_id, const std::string& name) {
    stream_names_[stream_id] = name;
    for (const auto& [key, id] : streams_)
        if (key.second == stream_id) writer_.set_stream_name(id, name);
}

trace::StreamId ActivityRecorder::stream(std::uint32_t device, std::uint32_t context, std::uint32_t stream_id) {
    auto key = std::make_pair(context, stream_id);
    auto found = streams_.find(key);
    if (found != streams_.end()) return found->second;
    trace::StreamInfo info;
    info.device_id = static_cast<trace::DeviceId>(device);
    info.context_id = context;
    info.cuda_stream_id = stream_id;
    auto priority = stream_priorities_.find(stream_id);
    if (priority != stream_priorities_.end()) info.priority = static_cast<std::int32_t>(priority->second);
    auto null_stream = null_streams_.find(context);
    if (null_stream != null_streams_.end() && null_stream->second == stream_id) info.name = "default";
    auto named = stream_names_.find(stream_id);
    if (named != stream_names_.end()) info.name = named->second;
    trace::StreamId id = writer_.register_stream(info);
    streams_.emplace(key, id);
    return id;
}

trace::StringId ActivityRecorder::kernel_name(const char* mangled) {
    auto found = kernel_names_.find(mangled);
    if (found != kernel_names_.end()) return found->second;
    trace::StringId id = writer_.intern(demangle(mangled));
    kernel_names_.emplace(mangled, id);
    return id;
}

bool ActivityRecorder::record(const CUpti_Activity& record) {
    switch (record.kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
            const auto& kernel = reinterpret_cast<const CUpti_ActivityKernel10&>(record);
            trace::StreamId id = stream(kernel.deviceId, kernel.contextId, kernel.streamId);
            ++kernels_;
            return writer_.record_kernel(kernel_event(kernel, id, kernel_name(kernel.name)));
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            const auto& copy = reinterpret_cast<const CUpti_ActivityMemcpy6&>(record);
            return writer_.record_memcpy(memcpy_event(copy, stream(copy.deviceId, copy.contextId, copy.streamId)));
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY2: {
            const auto& copy = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4&>(record);
            return writer_.record_memcpy(peer_memcpy_event(copy, stream(copy.deviceId, copy.contextId, copy.streamId)));
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
            const auto& set = reinterpret_cast<const CUpti_ActivityMemset4&>(record);
            return writer_.record_memset(memset_event(set, stream(set.deviceId, set.contextId, set.streamId)));
        }
        case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
            const auto& sync = reinterpret_cast<const CUpti_ActivitySynchronization2&>(record);
            trace::DeviceId device = device_of_context(sync.contextId);
            trace::StreamId id = sync.streamId == CUPTI_SYNCHRONIZATION_INVALID_VALUE
                                     ? 0
                                     : stream(static_cast<std::uint32_t>(device), sync.contextId, sync.streamId);
            return writer_.record_sync(sync_event(sync, device, id));
        }
        case CUPTI_ACTIVITY_KIND_OVERHEAD: {
            const auto& overhead = reinterpret_cast<const CUpti_ActivityOverhead3&>(record);
            auto name = overhead_names_.find(overhead.overheadKind);
            if (name == overhead_names_.end())
                name =
                    overhead_names_.emplace(overhead.overheadKind, writer_.intern(overhead_name(overhead.overheadKind)))
                        .first;
            trace::OverheadEvent event;
            event.start_ns = static_cast<trace::TimeNs>(overhead.start);
            event.end_ns = static_cast<trace::TimeNs>(overhead.end);
            event.name_id = name->second;
            return writer_.record_overhead(event);
        }
        case CUPTI_ACTIVITY_KIND_DEVICE: {
            const auto& device = reinterpret_cast<const CUpti_ActivityDevice5&>(record);
            if (devices_registered_[device.id]) return false;
            devices_registered_[device.id] = true;
            writer_.register_device(device_info(device));
            return false;
        }
        case CUPTI_ACTIVITY_KIND_CONTEXT: {
            const auto& context = reinterpret_cast<const CUpti_ActivityContext3&>(record);
            context_devices_[context.contextId] = static_cast<trace::DeviceId>(context.deviceId);
            null_streams_[context.contextId] = context.nullStreamId;
            return false;
        }
        case CUPTI_ACTIVITY_KIND_STREAM: {
            const auto& created = reinterpret_cast<const CUpti_ActivityStream&>(record);
            stream_priorities_[created.streamId] = created.priority;
            return false;
        }
        case CUPTI_ACTIVITY_KIND_MEMORY2: {
            const auto& memory = reinterpret_cast<const CUpti_ActivityMemory4&>(record);
            // Taken whatever the memory kind, so host allocations' calls do not pile up.
            const trace::ThreadId thread = memory_calls_ ? memory_calls_->take(memory.correlationId) : 0;
            return record_memory_events(gpu_memory_.memory(memory, thread));
        }
        case CUPTI_ACTIVITY_KIND_MEMORY_POOL: {
            const auto& pool = reinterpret_cast<const CUpti_ActivityMemoryPool3&>(record);
            const trace::ThreadId thread = memory_calls_ ? memory_calls_->take(pool.correlationId) : 0;
            return record_memory_events(gpu_memory_.pool(pool, thread));
        }
        default:
            return false;
    }
}

bool ActivityRecorder::record_memory_events(const std::vector<trace::MemoryEvent>& events) {
    bool recorded = false;
    for (const trace::MemoryEvent& event : events) {
        if (!writer_.record_memory_event(event)) continue;
        recorded = true;
        ++memory_events_;
    }
    return recorded;
}

}  // namespace ember::collector
