// kineto_importer.cpp: PyTorch profiler / Kineto JSON -> ember trace.
//
// Both generations of Kineto's categories map to the same ember events:
//   2021             current                            ember
//   Kernel           kernel                             kernels (launch config from grid/block/registers/shared memory)
//   Memcpy           gpu_memcpy                         memcpys (direction and memory kinds from the name)
//   Memset           gpu_memset                         memsets
//   Runtime          cuda_runtime, cuda_driver          api_calls (correlation id -> the GPU work)
//   -                cuda_sync                          synchronizations
//   Operator         cpu_op, user_annotation,           ranges, nested by time on their thread, domain =
//                    python_function                    the Kineto category
//   -                cpu_instant_event "[memory]"       counters "memory allocated" / "memory reserved";
//                                                       on a GPU also memory_events (see memory_sample),
//                                                       on the thread of its pid/tid (the op open there
//                                                       allocated it)
//   -                overhead                           collector_overhead
// ProfilerStep#N becomes ember's step range ("step", category step, payload N) and
// enumerate(DataLoader)...__next__ ember's "dataloader/wait" (category dataloader):
// the names profiler/analysis recognises. NCCL kernels run on a stream named
// "nccl"; nccl:* annotations and c10d ops are filed under category communication.
#include "profiler/import/importers.h"

#include "common/nvtx_contract.h"
#include "profiler/trace/step_names.h"
#include "profiler/import/json_trace_importer.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

namespace ember::importing {

namespace {

// ember's NVTX categories (common/nvtx_contract.h), the numbers analyses read.
constexpr std::uint32_t kCategoryStep = nvtx::number(nvtx::Category::step);
constexpr std::uint32_t kCategoryCompute = nvtx::number(nvtx::Category::compute);
constexpr std::uint32_t kCategoryDataloader = nvtx::number(nvtx::Category::dataloader);
constexpr std::uint32_t kCategoryCommunication = nvtx::number(nvtx::Category::communication);

enum class KinetoKind { kernel, memcpy, memset, runtime, sync, host_range, gpu_annotation, profiler_span, overhead };

KinetoKind kind_of_category(std::string_view category) {
    if (category == "kernel" || category == "Kernel") return KinetoKind::kernel;
    if (category == "gpu_memcpy" || category == "Memcpy") return KinetoKind::memcpy;
    if (category == "gpu_memset" || category == "Memset") return KinetoKind::memset;
    if (category == "cuda_runtime" || category == "Runtime" || category == "cuda_driver" || category == "Driver") {
        return KinetoKind::runtime;
    }
    if (category == "cuda_sync") return KinetoKind::sync;
    if (category == "gpu_user_annotation") return KinetoKind::gpu_annotation;
    if (category == "Trace") return KinetoKind::profiler_span;
    if (category == "overhead" || category == "Overhead") return KinetoKind::overhead;
    return KinetoKind::host_range;  // cpu_op, Operator, user_annotation, python_function, and anything new
}

bool is_dataloader_wait(std::string_view name) {
    return name.starts_with("enumerate(DataLoader)") && name.find("__next__") != std::string_view::npos;
}

bool is_communication_op(std::string_view name) {
    return name.starts_with("nccl:") || name.starts_with("c10d::") || name.starts_with("record_param_comms") ||
           name.starts_with("ProcessGroupNCCL");
}

trace::SyncKind sync_kind_from_name(std::string_view name) {
    if (name.find("Wait") != std::string_view::npos) return trace::SyncKind::stream_wait_event;
    if (name.find("Event") != std::string_view::npos) return trace::SyncKind::event_synchronize;
    if (name.find("Stream") != std::string_view::npos) return trace::SyncKind::stream_synchronize;
    if (name.find("Context") != std::string_view::npos || name.find("Device") != std::string_view::npos) {
        return trace::SyncKind::context_synchronize;
    }
    return trace::SyncKind::unknown;
}

// The synchronization a runtime or driver call waits in, by its name; nullopt for
// any other call.
std::optional<trace::SyncKind> synchronize_call_kind(std::string_view name) {
    if (name == "cudaDeviceSynchronize" || name == "cudaThreadSynchronize" || name == "cuCtxSynchronize")
        return trace::SyncKind::context_synchronize;
    if (name == "cudaStreamSynchronize" || name == "cuStreamSynchronize") return trace::SyncKind::stream_synchronize;
    if (name == "cudaEventSynchronize" || name == "cuEventSynchronize") return trace::SyncKind::event_synchronize;
    return std::nullopt;
}

// "stream 7" (the 2021 format's GPU tid) -> 7.
std::optional<std::int64_t> trailing_number(std::string_view text) {
    while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
    std::size_t digits = 0;
    while (digits < text.size() && digits < 18 && text[text.size() - 1 - digits] >= '0' &&
           text[text.size() - 1 - digits] <= '9') {
        ++digits;
    }
    if (digits == 0) return std::nullopt;
    std::int64_t number = 0;
    for (char c : text.substr(text.size() - digits)) number = number * 10 + (c - '0');
    return number;
}

class KinetoImporter final : public JsonTraceImporter {
  public:
    explicit KinetoImporter(ImportSink& sink) : JsonTraceImporter(sink) {}

  private:
    std::vector<std::string> wanted_top_level_keys() const override {
        return {"deviceProperties", "distributedInfo", "baseTimeNanoseconds", "host_name"};
    }

    void on_top_level(const JsonItem& item) override {
        trace::RunInfo& run = sink_.run();
        if (item.key == "deviceProperties") {
            for (const trace::DeviceInfo& device : parser_.device_properties(item)) sink_.describe_device(device);
        } else if (item.key == "distributedInfo") {
            KinetoDistributedInfo info = parser_.distributed_info(item);
            if (info.rank) distributed_rank_ = info.rank;
            if (info.world_size) distributed_world_size_ = info.world_size;
        } else if (item.key == "baseTimeNanoseconds") {
            if (std::optional<std::int64_t> base = parser_.integer(item)) {
                run.clock_offset_to_wall_ns = *base;
                has_base_time_ = true;
            }
        } else if (item.key == "host_name") {
            if (std::optional<std::string> host = parser_.string(item)) run.host = *host;
        }
    }

    void on_process_labels(std::int64_t pid, std::string_view labels) override {
        if (labels == "CPU" && host_pid_ == 0) host_pid_ = pid;
    }

    void on_process_name(std::int64_t pid, std::string_view name) override {
        // Kineto names every GPU pseudo-process after the host process too; only host
        // pids become processes (GPUs are devices).
        process_names_[pid] = std::string(name);
    }

    void on_thread_name(std::int64_t pid, std::int64_t tid, std::string_view name) override {
        // GPU lanes are named "stream 7 "; streams get ember's own names instead.
        if (name.starts_with("stream ")) return;
        sink_.name_thread(pid, tid, name);
    }

    RangeStyle range_style(const TraceEventFields& event) override {
        RangeStyle style;
        style.domain_id = sink_.intern(event.category);
        return style;
    }

    void on_complete(const TraceEventFields& event, const JsonItem& item) override {
        trace::TimeNs start = 0, end = 0;
        if (!complete_interval(event, item, start, end)) return;
        const KinetoKind kind = kind_of_category(event.category);
        switch (kind) {
            case KinetoKind::kernel:
            case KinetoKind::memcpy:
            case KinetoKind::memset:
            case KinetoKind::sync:
                return gpu_work(kind, event, item, start, end);
            case KinetoKind::runtime:
                return api_call(event, start, end);
            case KinetoKind::host_range:
                return host_range(event, start, end);
            case KinetoKind::gpu_annotation:
                // The GPU-side span of a host annotation Kineto already gave on the host.
                sink_.skip("gpu_user_annotation (GPU-side copy of a host annotation)");
                return;
            case KinetoKind::profiler_span:
                span_start_ = std::min(span_start_, start);
                span_end_ = std::max(span_end_, end);
                sink_.skip("profiler span (becomes the run's start and end)");
                return;
            case KinetoKind::overhead: {
                trace::OverheadEvent overhead{start, end, host_thread(event), sink_.intern(event.name)};
                note_host_pid(event);
                sink_.overhead(overhead);
                return;
            }
        }
    }

    void on_instant(const TraceEventFields& event, const JsonItem& item) override {
        if (event.name == "[memory]") {
            memory_sample(event, item);
            return;
        }
        if (event.pid.is_text || !event.pid.present) {
            sink_.skip("instant on a profiler pseudo-process (\"Traces\", \"Spans\")");
            return;
        }
        note_host_pid(event);
        JsonTraceImporter::on_instant(event, item);
    }

    // --- GPU work ------------------------------------------------------------------------

    // The device and stream of a GPU event: its args, or the pid/tid Kineto files it under.
    // A synchronization without a stream (Kineto's "Context Sync": stream -1) waits for
    // the whole device: stream 0, as ember's collector records it.
    bool gpu_track(const TraceEventFields& event, const JsonItem& item, trace::StreamId& stream,
                   trace::DeviceId& device, bool sync = false) {
        std::optional<std::int64_t> device_number = event.args.device;
        if (!device_number && event.pid.present && !event.pid.is_text) device_number = event.pid.number;
        std::optional<std::int64_t> stream_number = event.args.stream;
        if (!stream_number && event.tid.present) {
            stream_number = event.tid.is_text ? trailing_number(event.tid.text) : std::optional(event.tid.number);
        }
        if (sync && device_number && *device_number >= 0 && *device_number <= 1'000'000 &&
            (!stream_number || *stream_number < 0)) {
            device = static_cast<trace::DeviceId>(*device_number);
            stream = 0;
            return true;
        }
        if (!device_number || !stream_number) {
            return reject(item, "GPU event without device or stream",
                          fmt::format("GPU event \"{}\" names no device or stream", event.name));
        }
        if (*device_number < 0 || *device_number > 1'000'000 || *stream_number < 0) {
            return reject(
                item, "GPU event on an impossible device or stream",
                fmt::format("GPU event \"{}\" is on device {} stream {}", event.name, *device_number, *stream_number));
        }
        device = static_cast<trace::DeviceId>(*device_number);
        std::uint32_t context = static_cast<std::uint32_t>(event.args.context.value_or(0));
        stream = sink_.stream(device, static_cast<std::uint64_t>(*stream_number), context);
        return true;
    }

    // A kernel, copy, memset or wait, on its device stream.
    void gpu_work(KinetoKind kind, const TraceEventFields& event, const JsonItem& item, trace::TimeNs start,
                  trace::TimeNs end) {
        trace::StreamId stream = 0;
        trace::DeviceId device = 0;
        if (!gpu_track(event, item, stream, device, kind == KinetoKind::sync)) return;
        if (kind == KinetoKind::kernel) {
            kernel(event, kernel_of(event, start, end, stream, device));
        } else if (kind == KinetoKind::memcpy) {
            sink_.memcpy(memcpy_of(event, start, end, stream, device));
        } else if (kind == KinetoKind::memset) {
            trace::MemsetEvent set = memset_of(event, start, end, stream, device);
            set.memory_kind = memset_kind_from_name(event.name);
            sink_.memset(set);
        } else {
            trace::SyncEvent wait = sync_of(event, start, end, stream, device);
            wait.kind = sync_kind_from_name(event.name);
            sink_.sync(wait);
            cuda_sync_seen_ = true;
        }
        gpu_devices_.insert(device);
    }

    void kernel(const TraceEventFields& event, const trace::KernelEvent& kernel) {
        if (is_nccl_kernel(event.name)) {
            sink_.count_nccl_kernel();
            if (nccl_streams_.insert(kernel.stream_id).second) {
                std::uint64_t stream_number = static_cast<std::uint64_t>(event.args.stream.value_or(
                    event.tid.is_text ? trailing_number(event.tid.text).value_or(0) : event.tid.number));
                sink_.name_stream(kernel.device_id, stream_number, "nccl");
            }
        }
        sink_.kernel(kernel);
        collective_call(event, kernel.start_ns, kernel.stream_id, true);
    }

    // --- host ----------------------------------------------------------------------------

    void note_host_pid(const TraceEventFields& event) {
        if (host_pid_ == 0 && event.pid.present && !event.pid.is_text) host_pid_ = event.pid.number;
    }

    void api_call(const TraceEventFields& event, trace::TimeNs start, trace::TimeNs end) {
        note_host_pid(event);
        const trace::ApiEvent call = api_call_of(event, start, end);
        sink_.api_call(call);
        // A synchronizing call: its wait, should the trace hold no cuda_sync events.
        if (std::optional<trace::SyncKind> kind = synchronize_call_kind(event.name))
            runtime_syncs_.push_back({call, *kind, event.args.device, event.args.stream});
    }

    void host_range(const TraceEventFields& event, trace::TimeNs start, trace::TimeNs end) {
        if (event.pid.is_text) {
            sink_.skip(fmt::format("{} event on a profiler pseudo-process",
                                   event.category.empty() ? "untyped" : event.category));
            return;
        }
        note_host_pid(event);
        RangeStyle style = range_style(event);
        std::string_view name = event.name;
        trace::Payload payload;
        if (std::optional<std::int64_t> step = trace::profiler_step_number(name)) {
            // ember's step: the range analyses split into compute, copies and waits.
            name = nvtx::range::kStep;
            style.category = kCategoryStep;
            payload = trace::Payload::of_integer(*step);
        } else if (is_dataloader_wait(name)) {
            name = nvtx::range::kDataloaderWait;
            style.category = kCategoryDataloader;
        } else if (is_communication_op(name)) {
            style.category = kCategoryCommunication;
        } else if (event.category == "cpu_op" || event.category == "Operator") {
            style.category = kCategoryCompute;
        }
        if (style.category != 0) used_categories_.insert({style.domain_id, style.category});
        const trace::ThreadId thread = host_thread(event);
        add_host_range(thread, start, end, name, style, payload);
        collective_call(event, start, thread, false);
    }

    void memory_sample(const TraceEventFields& event, const JsonItem& item) {
        const TraceEventArgs& args = event.args;
        if (!event.has_ts) {
            reject(item, "event without \"ts\"", "a \"[memory]\" event has no \"ts\"");
            return;
        }
        if (!args.total_allocated && !args.total_reserved) {
            // Early Kineto wrote only the change ("Bytes"), not the totals a counter needs.
            sink_.skip("[memory] event without totals (older Kineto)");
            return;
        }
        // Device Type 1 is CUDA; anything else is host memory.
        trace::DeviceId device =
            args.memory_device_type.value_or(0) == 1 && args.memory_device_id
                ? static_cast<trace::DeviceId>(std::clamp<std::int64_t>(*args.memory_device_id, -1, 1'000'000))
                : trace::kNoDevice;
        trace::TimeNs time = event_time(event.ts_ns);
        if (args.total_allocated) {
            sink_.counter_sample(
                {sink_.counter("memory allocated", "bytes", device), time, static_cast<double>(*args.total_allocated)});
        }
        if (args.total_reserved) {
            sink_.counter_sample(
                {sink_.counter("memory reserved", "bytes", device), time, static_cast<double>(*args.total_reserved)});
        }
        if (device != trace::kNoDevice && args.bytes && args.memory_address) {
            // The host thread that asked: the same ember thread as the ops of its pid/tid,
            // so the range open there at `time` is the allocating op.
            const trace::ThreadId thread =
                event.pid.present && !event.pid.is_text && event.tid.present ? host_thread(event) : 0;
            gpu_memory_event(device, time, args, thread);
        }
    }

    // A GPU "[memory]" event as the caching allocator's: an alloc ("Bytes" > 0) or a
    // completed free ("Bytes" < 0) of the block at "Addr", and the reserved bytes' change
    // since the device's previous event as a segment reserved or released. What was
    // allocated before the trace began is put in at its start (finish_gpu_memory), so the
    // replay of the events gives "Total Allocated" at every event.
    void gpu_memory_event(trace::DeviceId device, trace::TimeNs time, const TraceEventArgs& args,
                          trace::ThreadId thread) {
        GpuMemory& memory = gpu_memory_[device];
        const std::int64_t bytes = *args.bytes;
        const auto address = static_cast<std::uint64_t>(*args.memory_address);
        if (!memory.seen) {
            memory.seen = true;
            memory.first_ns = time;
            if (args.total_allocated) memory.allocated_before = *args.total_allocated - bytes;
            if (args.total_reserved) memory.reserved_before = *args.total_reserved;
            memory.last_reserved = memory.reserved_before;
        }
        memory.first_ns = std::min(memory.first_ns, time);
        trace::MemoryEvent event;
        event.time_ns = time;
        event.device_id = device;
        event.address = address;
        event.thread_id = thread;
        if (bytes >= 0) {
            event.action = trace::MemoryAction::alloc;
            event.bytes = bytes;
            memory.live.insert_or_assign(address, bytes);
        } else {
            event.action = trace::MemoryAction::free_completed;
            event.bytes = -bytes;
            // A block the trace never allocated was live when it began.
            if (memory.live.erase(address) == 0) memory.live_at_start.emplace_back(address, -bytes);
        }
        sink_.memory_event(event);
        if (args.total_reserved && *args.total_reserved != memory.last_reserved) {
            trace::MemoryEvent segment;
            segment.time_ns = time;
            segment.device_id = device;
            segment.thread_id = thread;
            const std::int64_t change = *args.total_reserved - memory.last_reserved;
            segment.action = change > 0 ? trace::MemoryAction::segment_alloc : trace::MemoryAction::segment_free;
            segment.bytes = change > 0 ? change : -change;
            sink_.memory_event(segment);
            memory.last_reserved = *args.total_reserved;
        }
    }

    // Memory allocated and reserved before each device's first "[memory]" event, 1 ns
    // before it: the blocks the trace frees without allocating them, at their addresses,
    // and the rest of what "Total Allocated" said was in use as one block at address 0.
    void finish_gpu_memory() {
        for (const auto& [device, memory] : gpu_memory_) {
            trace::MemoryEvent event;
            event.time_ns = memory.first_ns - 1;
            event.device_id = device;
            event.action = trace::MemoryAction::live_at_start;
            std::int64_t known = 0;
            for (const auto& [address, bytes] : memory.live_at_start) {
                event.address = address;
                event.bytes = bytes;
                sink_.memory_event(event);
                known += bytes;
            }
            if (memory.allocated_before > known) {
                event.address = 0;
                event.bytes = memory.allocated_before - known;
                sink_.memory_event(event);
            }
            if (memory.reserved_before > 0) {
                event.action = trace::MemoryAction::segment_live_at_start;
                event.address = 0;
                event.bytes = memory.reserved_before;
                sink_.memory_event(event);
            }
        }
    }

    // Traces without cuda_sync events (Kineto before them, or recorded without): the
    // synchronizing runtime calls become the synchronizations, on the device the call
    // names, else the trace's one GPU (a trace of several GPUs that names none is
    // counted, not guessed); a stream sync on the stream it names, else stream 0.
    void synchronizations_from_runtime_calls() {
        if (cuda_sync_seen_ || runtime_syncs_.empty()) return;
        for (const RuntimeSync& pending : runtime_syncs_) {
            std::optional<trace::DeviceId> device;
            if (pending.device && *pending.device >= 0 && *pending.device <= 1'000'000)
                device = static_cast<trace::DeviceId>(*pending.device);
            else if (gpu_devices_.size() == 1)
                device = *gpu_devices_.begin();
            if (!device) {
                sink_.skip("synchronizing runtime call on no GPU the trace names (several GPUs, none named)");
                continue;
            }
            trace::SyncEvent wait;
            wait.start_ns = pending.call.start_ns;
            wait.end_ns = pending.call.end_ns;
            wait.device_id = *device;
            wait.stream_id =
                pending.kind == trace::SyncKind::stream_synchronize && pending.stream && *pending.stream >= 0
                    ? sink_.stream(*device, static_cast<std::uint64_t>(*pending.stream))
                    : 0;
            wait.correlation_id = pending.call.correlation_id;
            wait.kind = pending.kind;
            sink_.sync(wait);
            sink_.count_synchronizations_from_calls(1);
        }
        sink_.note(
            fmt::format("{} synchronizations from the synchronizing runtime calls (the trace has no cuda_sync "
                        "events)",
                        runtime_syncs_.size()));
    }

    void finish_dialect() override {
        synchronizations_from_runtime_calls();
        finish_gpu_memory();
        trace::RunInfo& run = sink_.run();
        const ImportOptions& options = sink_.options();
        run.rank = options.rank.value_or(distributed_rank_.value_or(0));
        run.rank_source = options.rank ? "--rank" : distributed_rank_ ? "distributedInfo.rank" : "";
        run.world_size = options.world_size.value_or(distributed_world_size_.value_or(1));
        run.pid = host_pid_;
        run.clock_name = has_base_time_ ? "kineto (ns since baseTimeNanoseconds)" : "kineto (Unix epoch)";
        auto name = process_names_.find(host_pid_);
        if (name != process_names_.end()) sink_.name_process(host_pid_, name->second);
        if (span_start_ <= span_end_) {
            run.start_ns = sink_.any_event() ? std::min(span_start_, sink_.earliest_ns()) : span_start_;
            run.end_ns = sink_.any_event() ? std::max(span_end_, sink_.latest_ns()) : span_end_;
        }
        for (const auto& [domain, category] : used_categories_) {
            const std::string_view category_name = nvtx::category_name(static_cast<nvtx::Category>(category));
            if (!category_name.empty()) sink_.name_nvtx_category(domain, category, category_name);
        }
    }

    std::int64_t host_pid_ = 0;
    std::optional<std::int32_t> distributed_rank_;
    std::optional<std::int32_t> distributed_world_size_;
    bool has_base_time_ = false;
    trace::TimeNs span_start_ = std::numeric_limits<trace::TimeNs>::max();
    trace::TimeNs span_end_ = std::numeric_limits<trace::TimeNs>::min();
    std::map<std::int64_t, std::string> process_names_;
    std::set<trace::StreamId> nccl_streams_;
    struct RuntimeSync {
        trace::ApiEvent call;
        trace::SyncKind kind;
        std::optional<std::int64_t> device, stream;
    };
    std::vector<RuntimeSync> runtime_syncs_;
    bool cuda_sync_seen_ = false;
    std::set<trace::DeviceId> gpu_devices_;
    std::set<std::pair<trace::StringId, std::uint32_t>> used_categories_;
    // The "[memory]" events of each GPU (gpu_memory_event).
    struct GpuMemory {
        bool seen = false;
        trace::TimeNs first_ns = 0;
        std::int64_t allocated_before = 0;  // "Total Allocated" less the first event's own bytes
        std::int64_t reserved_before = 0;   // the first event's "Total Reserved"
        std::int64_t last_reserved = 0;
        std::unordered_map<std::uint64_t, std::int64_t> live;               // blocks the trace allocated
        std::vector<std::pair<std::uint64_t, std::int64_t>> live_at_start;  // freed, never allocated in it
    };
    std::map<trace::DeviceId, GpuMemory> gpu_memory_;
};

}  // namespace

void import_kineto_json(ImportSink& sink) {
    KinetoImporter importer(sink);
    importer.run();
}

}  // namespace ember::importing
