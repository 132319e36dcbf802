// chrome_importer.cpp: generic Chrome Trace Event JSON -> ember trace.
//
// Any Trace Event file imports: complete ("X") and "B"/"E" events become host
// ranges nested on their thread (domain = the event's category), "b"/"e" async
// events start/end ranges, instants marks, "C" events counters. Files written by
// `ember export --format chrome` (profiler/export/chrome_trace.cpp) come back as
// what they were: categories "kernel", "memcpy", "memset", "sync", "cuda_api",
// "nvtx[,DOMAIN]" and "ember_overhead"; GPUs are the processes with the GPU pids,
// their threads the streams ("Stream N name"), as profiler/trace/chrome_layout.h lays
// them out; the otherData.time_origin_ns header restores absolute times. So synth ->
// export -> import gives the same kernel, API and NVTX tables.
#include "profiler/import/importers.h"
#include "profiler/import/json_trace_importer.h"
#include "profiler/trace/chrome_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <unordered_map>

namespace ember::importing {

namespace {

namespace chrome = trace::chrome;

// "main (tid 10000)" -> ("main", 10000); "python train.py (pid 10000)" likewise with "pid".
std::pair<std::string_view, std::optional<std::int64_t>> split_id_suffix(std::string_view text, std::string_view word) {
    std::string opener = fmt::format(" ({} ", word);
    std::size_t at = text.rfind(opener);
    if (at == std::string_view::npos || text.back() != ')') return {text, std::nullopt};
    std::string_view digits = text.substr(at + opener.size(), text.size() - 1 - at - opener.size());
    if (digits.empty() || digits.size() > 18) return {text, std::nullopt};
    std::int64_t number = 0;
    bool negative = false;
    for (std::size_t i = 0; i < digits.size(); ++i) {
        char c = digits[i];
        if (i == 0 && c == '-') {
            negative = true;
            continue;
        }
        if (c < '0' || c > '9') return {text, std::nullopt};
        number = number * 10 + (c - '0');
    }
    return {text.substr(0, at), negative ? -number : number};
}

trace::SyncKind sync_kind_from_name(std::string_view name) {
    for (auto kind : {trace::SyncKind::event_synchronize, trace::SyncKind::stream_wait_event,
                      trace::SyncKind::stream_synchronize, trace::SyncKind::context_synchronize}) {
        if (name == trace::sync_kind_name(kind)) return kind;
    }
    return trace::SyncKind::unknown;
}

class ChromeImporter final : public JsonTraceImporter {
  public:
    explicit ChromeImporter(ImportSink& sink) : JsonTraceImporter(sink) {}

  private:
    struct GpuLane {
        std::uint64_t cuda_stream = 0;
        std::string name;
    };

    std::vector<std::string> wanted_top_level_keys() const override { return {"otherData"}; }

    void on_top_level(const JsonItem& item) override {
        ChromeOtherData data = parser_.other_data(item);
        // The origin shifts every time; it can only be applied before the first event.
        if (data.time_origin_ns && !events_seen_) {
            time_shift_ns_ = *data.time_origin_ns;
            sink_.run().start_ns = *data.time_origin_ns;  // the exported run's start
        }
        if (data.exporter.starts_with(chrome::kExporterPrefix)) sink_.run().clock_name = "chrome trace (ember export)";
    }

    // --- tracks --------------------------------------------------------------------------

    void on_process_name(std::int64_t pid, std::string_view name) override {
        if (chrome::is_gpu_pid(pid)) {
            // "GPU 0 NVIDIA H100 80GB HBM3"
            trace::DeviceInfo device;
            device.device_id = static_cast<trace::DeviceId>(chrome::device_of_gpu_pid(pid));
            std::string prefix = fmt::format("{}{}", chrome::kGpuProcessPrefix, device.device_id);
            std::string_view rest = name.starts_with(prefix) ? name.substr(prefix.size()) : name;
            if (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
            device.name = std::string(rest);
            sink_.describe_device(device);
            return;
        }
        auto [process, pid_in_name] = split_id_suffix(name, chrome::kPidWord);
        sink_.name_process(pid, process);
        if (first_host_pid_ == 0) first_host_pid_ = pid;
    }

    void on_thread_name(std::int64_t pid, std::int64_t tid, std::string_view name) override {
        if (chrome::is_gpu_pid(pid)) {
            if (chrome::is_sync_tid(tid)) return;  // "Synchronizations, stream N": the stream's own name is enough
            // "Stream 7 compute"
            GpuLane lane;
            lane.cuda_stream = static_cast<std::uint64_t>(std::max<std::int64_t>(tid, 0));
            std::string_view rest = name;
            if (rest.starts_with(chrome::kStreamThreadPrefix)) {
                rest.remove_prefix(chrome::kStreamThreadPrefix.size());
                std::size_t digits = 0;
                std::uint64_t number = 0;
                while (digits < rest.size() && digits < 19 && rest[digits] >= '0' && rest[digits] <= '9') {
                    number = number * 10 + static_cast<std::uint64_t>(rest[digits] - '0');
                    ++digits;
                }
                if (digits > 0) {
                    lane.cuda_stream = number;
                    rest.remove_prefix(digits);
                    if (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
                    lane.name = std::string(rest);
                }
            } else {
                lane.name = std::string(name);
            }
            gpu_lanes_[IdPair{pid, tid}] = lane;
            if (!lane.name.empty())
                sink_.name_stream(static_cast<trace::DeviceId>(chrome::device_of_gpu_pid(pid)), lane.cuda_stream,
                                  lane.name);
            return;
        }
        auto [thread, os_tid] = split_id_suffix(name, chrome::kTidWord);
        if (os_tid) os_tids_[IdPair{pid, tid}] = *os_tid;
        sink_.name_thread(pid, os_tid.value_or(tid), thread);
    }

    trace::ThreadId host_thread(const TraceEventFields& event) override {
        std::int64_t pid = id_number(event.pid);
        std::int64_t tid = id_number(event.tid);
        auto os = os_tids_.find(IdPair{pid, tid});
        if (first_host_pid_ == 0) first_host_pid_ = pid;
        return sink_.thread(pid, os != os_tids_.end() ? os->second : tid);
    }

    bool gpu_track(const TraceEventFields& event, const JsonItem& item, trace::StreamId& stream,
                   trace::DeviceId& device) {
        std::int64_t pid = id_number(event.pid);
        std::int64_t tid = id_number(event.tid);
        if (chrome::is_gpu_pid(pid)) {
            device = static_cast<trace::DeviceId>(chrome::device_of_gpu_pid(pid));
        } else if (event.args.device && *event.args.device >= 0 && *event.args.device < chrome::kDeviceLimit) {
            device = static_cast<trace::DeviceId>(*event.args.device);
        } else {
            device = 0;
        }
        if (chrome::is_sync_tid(tid)) tid -= chrome::kSyncTidBase;  // the synchronization lane of a stream
        if (tid < 0) {
            return reject(item, "GPU event on an impossible stream",
                          fmt::format("GPU event \"{}\" is on stream {}", event.name, tid));
        }
        auto lane = gpu_lanes_.find(IdPair{pid, tid});
        std::uint64_t cuda_stream =
            lane != gpu_lanes_.end() ? lane->second.cuda_stream : static_cast<std::uint64_t>(tid);
        stream = sink_.stream(device, cuda_stream);
        return true;
    }

    // --- events --------------------------------------------------------------------------

    RangeStyle range_style(const TraceEventFields& event) override {
        RangeStyle style;
        std::string_view category = event.category;
        if (category == chrome::kNvtxCategory) {
            style.domain_id = trace::kNoString;  // the default domain
        } else if (category.starts_with(chrome::kNvtxDomainCategoryPrefix)) {
            style.domain_id = sink_.intern(category.substr(chrome::kNvtxDomainCategoryPrefix.size()));
        } else {
            style.domain_id = sink_.intern(category);
        }
        if (event.args.nvtx_category && *event.args.nvtx_category >= 0 && *event.args.nvtx_category <= 0xffffffffll) {
            style.category = static_cast<std::uint32_t>(*event.args.nvtx_category);
        }
        return style;
    }

    void on_complete(const TraceEventFields& event, const JsonItem& item) override {
        trace::TimeNs start = 0, end = 0;
        if (!complete_interval(event, item, start, end)) return;
        std::string_view category = event.category;
        // The GPU lanes of the export: placed on their stream first (or rejected).
        const bool gpu = category == chrome::kKernelCategory || category == chrome::kMemcpyCategory ||
                         category == chrome::kMemsetCategory || category == chrome::kSyncCategory;
        trace::StreamId stream = 0;
        trace::DeviceId device = 0;
        if (gpu && !gpu_track(event, item, stream, device)) return;
        if (category == chrome::kKernelCategory) {
            trace::KernelEvent kernel = kernel_of(event, start, end, stream, device);
            if (is_nccl_kernel(event.name)) sink_.count_nccl_kernel();
            sink_.kernel(kernel);
            collective_call(event, kernel.start_ns, kernel.stream_id, true);
        } else if (category == chrome::kMemcpyCategory) {
            trace::MemcpyEvent copy = memcpy_of(event, start, end, stream, device);
            sink_.memcpy(copy);
        } else if (category == chrome::kMemsetCategory) {
            trace::MemsetEvent set = memset_of(event, start, end, stream, device);
            set.value =
                static_cast<std::uint32_t>(std::clamp<std::int64_t>(event.args.value.value_or(0), 0, 0xffffffffll));
            set.memory_kind = trace::MemoryKind::device;
            sink_.memset(set);
        } else if (category == chrome::kSyncCategory) {
            trace::SyncEvent wait = sync_of(event, start, end, stream, device);
            wait.kind = sync_kind_from_name(event.name);
            sink_.sync(wait);
        } else if (category == chrome::kCudaApiCategory || category == "cuda_runtime" || category == "cuda_driver") {
            sink_.api_call(api_call_of(event, start, end));
        } else if (category == chrome::kOverheadCategory) {
            sink_.overhead({start, end, host_thread(event), sink_.intern(event.name)});
        } else {
            const trace::ThreadId thread = host_thread(event);
            add_host_range(thread, start, end, event.name, range_style(event), event.args.payload);
            collective_call(event, start, thread, false);
        }
    }

    trace::CounterId counter_for(const TraceEventFields& event, std::string_view key) override {
        // ember writes "name (unit)" with one "value" series.
        std::string_view name = event.name;
        std::string_view unit;
        if (name.size() > 3 && name.back() == ')') {
            std::size_t open = name.rfind(" (");
            if (open != std::string_view::npos) {
                unit = name.substr(open + 2, name.size() - open - 3);
                name = name.substr(0, open);
            }
        }
        std::string full(name);
        if (key != "value") full += fmt::format(".{}", key);
        std::int64_t pid = id_number(event.pid);
        trace::DeviceId device =
            chrome::is_gpu_pid(pid) ? static_cast<trace::DeviceId>(chrome::device_of_gpu_pid(pid)) : trace::kNoDevice;
        return sink_.counter(full, unit, device);
    }

    void finish_dialect() override {
        trace::RunInfo& run = sink_.run();
        const ImportOptions& options = sink_.options();
        run.rank = options.rank.value_or(0);
        run.world_size = options.world_size.value_or(1);
        if (options.rank) run.rank_source = "--rank";
        run.pid = first_host_pid_;
        if (run.clock_name == "CLOCK_MONOTONIC") run.clock_name = "chrome trace";
    }

    std::unordered_map<IdPair, GpuLane, IdPairHash> gpu_lanes_;
    std::unordered_map<IdPair, std::int64_t, IdPairHash> os_tids_;
    std::int64_t first_host_pid_ = 0;
};

}  // namespace

void import_chrome_json(ImportSink& sink) {
    ChromeImporter importer(sink);
    importer.run();
}

}  // namespace ember::importing
