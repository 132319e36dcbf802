// python_gpu.cpp: Python call sites of GPU work and host waits on it (python_gpu.h).
#include "profiler/analysis/python_gpu.h"

#include "profiler/analysis/operation_names.h"

#include <algorithm>
#include <array>
#include <unordered_map>

namespace ember::analysis {

namespace {

// The API name without the suffixes of its versions and per-thread-stream variants.
std::string_view base_api_name(std::string_view name) {
    for (bool trimmed = true; trimmed;) {
        trimmed = false;
        for (std::string_view suffix : {"_v2", "_v3", "_ptds", "_ptsz"}) {
            if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix) {
                name.remove_suffix(suffix.size());
                trimmed = true;
            }
        }
    }
    return name;
}

constexpr std::array<std::string_view, 24> kSynchronizingCalls = {
    // runtime
    "cudaDeviceSynchronize",
    "cudaStreamSynchronize",
    "cudaEventSynchronize",
    "cudaThreadSynchronize",
    "cudaMemcpy",
    "cudaMemcpy2D",
    "cudaMemcpy3D",
    "cudaMemcpyFromSymbol",
    "cudaMemcpyToSymbol",
    "cudaMemcpyPeer",
    "cudaMemcpyFromArray",
    "cudaMemcpy2DFromArray",
    // driver
    "cuCtxSynchronize",
    "cuStreamSynchronize",
    "cuEventSynchronize",
    "cuMemcpy",
    "cuMemcpyDtoH",
    "cuMemcpyHtoD",
    "cuMemcpyDtoD",
    "cuMemcpy2D",
    "cuMemcpy3D",
    "cuMemcpyPeer",
    "cuMemcpyAtoH",
    "cuMemcpy2DUnaligned",
};

bool is_async_copy(std::string_view name) {
    name = base_api_name(name);
    return name.size() > 5 && name.substr(name.size() - 5) == "Async" && name.find("Memcpy") != std::string_view::npos;
}

// A piece of GPU work with its name, for the waits.
struct GpuOperation {
    trace::TimeNs start_ns = 0;
    trace::TimeNs end_ns = 0;
    trace::DeviceId device_id = 0;
    trace::StreamId stream_id = 0;
    trace::CorrelationId correlation_id = 0;
    std::string name;
};

std::vector<GpuOperation> gpu_operations(const store::TraceReader& reader) {
    std::vector<GpuOperation> operations;
    reader.for_each_kernel({}, [&](const trace::KernelEvent& e) {
        operations.push_back(
            {e.start_ns, e.end_ns, e.device_id, e.stream_id, e.correlation_id, std::string(reader.string(e.name_id))});
        return true;
    });
    reader.for_each_memcpy({}, [&](const trace::MemcpyEvent& e) {
        operations.push_back(
            {e.start_ns, e.end_ns, e.device_id, e.stream_id, e.correlation_id, memcpy_operation_name(e.direction)});
        return true;
    });
    reader.for_each_memset({}, [&](const trace::MemsetEvent& e) {
        operations.push_back(
            {e.start_ns, e.end_ns, e.device_id, e.stream_id, e.correlation_id, std::string(kMemsetOperationName)});
        return true;
    });
    std::sort(operations.begin(), operations.end(),
              [](const GpuOperation& a, const GpuOperation& b) { return a.start_ns < b.start_ns; });
    return operations;
}

// Where a synchronizing call waited: a device and stream (0: any), from its
// synchronization record or its copy.
struct WaitScope {
    bool device_known = false;
    trace::DeviceId device_id = 0;
    trace::StreamId stream_id = 0;  // 0: the whole device
};

// The work that ran on `scope` during [start, end], weighted by its overlap.
std::vector<GpuWorkShare> work_during(const std::vector<GpuOperation>& operations, trace::TimeNs longest,
                                      trace::TimeNs start, trace::TimeNs end, const WaitScope& scope) {
    std::map<std::string, double> overlap;
    double total = 0;
    auto first = std::lower_bound(operations.begin(), operations.end(), start - longest,
                                  [](const GpuOperation& op, trace::TimeNs t) { return op.start_ns < t; });
    for (auto op = first; op != operations.end() && op->start_ns < end; ++op) {
        if (scope.device_known && op->device_id != scope.device_id) continue;
        if (scope.stream_id != 0 && op->stream_id != scope.stream_id) continue;
        const trace::TimeNs shared = std::min(end, op->end_ns) - std::max(start, op->start_ns);
        if (shared <= 0) continue;
        overlap[op->name] += static_cast<double>(shared);
        total += static_cast<double>(shared);
    }
    std::vector<GpuWorkShare> shares;
    for (const auto& [name, time] : overlap) shares.push_back({name, time / total});
    std::stable_sort(shares.begin(), shares.end(),
                     [](const GpuWorkShare& a, const GpuWorkShare& b) { return a.share > b.share; });
    return shares;
}

// Frames of stacks, read once each.
struct StackFrames {
    const store::TraceReader& reader;
    std::unordered_map<trace::StackId, CallSite> sites;
    const CallSite& site(trace::StackId stack) {
        auto [found, inserted] = sites.try_emplace(stack);
        if (inserted)
            found->second = stack == 0 ? CallSite{kNoPythonStack, ""} : call_site_of(reader.stack_frames(stack));
        return found->second;
    }
};

}  // namespace

bool waits_for_gpu(std::string_view api_name) {
    const std::string_view name = base_api_name(api_name);
    return std::find(kSynchronizingCalls.begin(), kSynchronizingCalls.end(), name) != kSynchronizingCalls.end();
}

bool waits_for_gpu(std::string_view api_name, const trace::MemcpyEvent* copy) {
    if (waits_for_gpu(api_name)) return true;
    return copy && is_async_copy(api_name) && copy->direction == trace::MemcpyDirection::device_to_host &&
           copy->destination_kind == trace::MemoryKind::pageable;
}

bool python_user_frame(const trace::FrameInfo& frame) {
    if (!frame.is_python()) return false;
    const std::string& file = frame.module;
    if (file.empty() || file[0] == '<') return false;
    if (file.find("/site-packages/") != std::string::npos || file.find("/dist-packages/") != std::string::npos)
        return false;
    const std::size_t lib = file.find("/lib/python");
    return lib == std::string::npos;
}

CallSite call_site_of(const std::vector<trace::FrameInfo>& frames) {
    if (frames.empty()) return {kNoPythonStack, ""};
    const trace::FrameInfo* python = nullptr;
    for (auto frame = frames.rbegin(); frame != frames.rend(); ++frame) {
        if (!frame->is_python()) continue;
        if (python_user_frame(*frame)) return {frame->module + ":" + std::to_string(frame->line), frame->function};
        if (!python) python = &*frame;
    }
    if (python) return {python->module + ":" + std::to_string(python->line), python->function};
    return {frames.back().module, frames.back().function};
}

// ---------------------------------------------------------------------------
// [SECTION] GPU waits
// ---------------------------------------------------------------------------

GpuWaits::GpuWaits(const store::TraceReader& reader) : reader_(reader) {
    // The synchronizing calls, and where each waited.
    std::unordered_map<trace::CorrelationId, WaitScope> scopes;
    reader.for_each_sync({}, [&](const trace::SyncEvent& sync) {
        scopes[sync.correlation_id] = {true, sync.device_id, sync.stream_id};
        return true;
    });
    std::unordered_map<trace::CorrelationId, trace::MemcpyEvent> copies;
    reader.for_each_memcpy({}, [&](const trace::MemcpyEvent& copy) {
        copies.emplace(copy.correlation_id, copy);
        return true;
    });
    std::unordered_map<trace::StringId, bool> synchronizing;  // by API name
    std::vector<WaitScope> wait_scopes;                       // beside waits_
    reader.for_each_api_call({}, [&](const trace::ApiEvent& call) {
        auto known = synchronizing.find(call.name_id);
        if (known == synchronizing.end())
            known = synchronizing.emplace(call.name_id, waits_for_gpu(reader.string(call.name_id))).first;
        const auto copy = copies.find(call.correlation_id);
        const trace::MemcpyEvent* made = copy == copies.end() ? nullptr : &copy->second;
        if (!known->second && !waits_for_gpu(reader.string(call.name_id), made)) return true;
        if (call.end_ns <= call.start_ns) return true;
        waits_.push_back(
            {call.thread_id, call.start_ns, call.end_ns, std::string(reader.string(call.name_id)), call.stack_id, {}});
        WaitScope scope;
        if (auto sync = scopes.find(call.correlation_id); sync != scopes.end())
            scope = sync->second;
        else if (made)
            scope = {true, made->device_id, made->stream_id};
        wait_scopes.push_back(scope);
        return true;
    });
    if (waits_.empty()) return;

    const std::vector<GpuOperation> operations = gpu_operations(reader);
    trace::TimeNs longest = 0;
    for (const GpuOperation& op : operations) longest = std::max(longest, op.end_ns - op.start_ns);
    for (std::size_t index = 0; index < waits_.size(); ++index)
        waits_[index].waited_for =
            work_during(operations, longest, waits_[index].start_ns, waits_[index].end_ns, wait_scopes[index]);

    // By OS thread and start; a wait inside another (a runtime call and the driver call
    // it made, both imported) is left to the outer one.
    std::vector<std::size_t> order(waits_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return waits_[a].start_ns < waits_[b].start_ns; });
    for (std::size_t index : order) {
        std::vector<std::size_t>& list = by_thread_[key_of(waits_[index].thread_id)];
        if (!list.empty() && waits_[list.back()].end_ns >= waits_[index].end_ns) continue;
        list.push_back(index);
    }
    for (const auto& [key, list] : by_thread_) by_merged_key_[merged_key(key)].push_back(key);
}

GpuWaits::ThreadKey GpuWaits::merged_key(const ThreadKey& key) {
    return ThreadKey{trace::original_pid(key.first), key.second};
}

GpuWaits::ThreadKey GpuWaits::key_of(trace::ThreadId thread) const {
    const trace::ThreadInfo* info = reader_.thread(thread);
    if (info && info->tid != 0) return {info->pid, info->tid};
    return {-1, static_cast<std::int64_t>(thread)};
}

const GpuWait* GpuWaits::at(trace::ThreadId thread, trace::TimeNs time) const {
    const ThreadKey key = key_of(thread);
    auto found = by_thread_.find(key);
    if (found == by_thread_.end()) {
        // Another copy of the same OS thread (ember merge), when exactly one has waits.
        const auto copies = by_merged_key_.find(merged_key(key));
        if (copies == by_merged_key_.end() || copies->second.size() != 1) return nullptr;
        found = by_thread_.find(copies->second.front());
    }
    const std::vector<std::size_t>& list = found->second;
    auto after = std::upper_bound(list.begin(), list.end(), time,
                                  [&](trace::TimeNs t, std::size_t index) { return t < waits_[index].start_ns; });
    if (after == list.begin()) return nullptr;
    const GpuWait& wait = waits_[*(after - 1)];
    return time <= wait.end_ns ? &wait : nullptr;
}

// ---------------------------------------------------------------------------
// [SECTION] The report
// ---------------------------------------------------------------------------

PythonGpuReport python_gpu(const store::TraceReader& reader) {
    PythonGpuReport report;
    struct Launch {
        trace::StackId stack_id = 0;
        bool counted = false;  // the call is in its site's `calls`
    };
    std::unordered_map<trace::CorrelationId, Launch> launches;
    reader.for_each_api_call({}, [&](const trace::ApiEvent& call) {
        launches[call.correlation_id] = {call.stack_id, false};
        report.has_call_stacks = report.has_call_stacks || call.stack_id != 0;
        return true;
    });
    StackFrames stacks{reader, {}};
    std::map<CallSite, PythonGpuSiteRow> sites;
    std::map<CallSite, std::map<std::string, trace::TimeNs>> work_of_site;
    for (const GpuOperation& op : gpu_operations(reader)) {
        auto launch = launches.find(op.correlation_id);
        if (op.correlation_id == 0 || launch == launches.end()) continue;
        const CallSite& site = stacks.site(launch->second.stack_id);
        PythonGpuSiteRow& row = sites[site];
        row.site = site;
        const trace::TimeNs duration = std::max<trace::TimeNs>(0, op.end_ns - op.start_ns);
        row.gpu_ns += duration;
        ++row.operations;
        if (!launch->second.counted) {
            launch->second.counted = true;
            ++row.calls;
        }
        work_of_site[site][op.name] += duration;
        report.gpu_ns += duration;
    }
    for (auto& [site, row] : sites) {
        for (const auto& [name, time] : work_of_site[site]) row.top_work.emplace_back(name, time);
        std::stable_sort(row.top_work.begin(), row.top_work.end(),
                         [](const auto& a, const auto& b) { return a.second > b.second; });
        if (row.top_work.size() > 3) row.top_work.resize(3);
        report.sites.push_back(std::move(row));
    }
    std::stable_sort(report.sites.begin(), report.sites.end(),
                     [](const PythonGpuSiteRow& a, const PythonGpuSiteRow& b) { return a.gpu_ns > b.gpu_ns; });

    const GpuWaits waits(reader);
    std::map<std::tuple<CallSite, std::string, std::string>, PythonGpuWaitRow> wait_rows;
    for (const GpuWait& wait : waits.all()) {
        const CallSite& site = stacks.site(wait.stack_id);
        const double length = static_cast<double>(wait.end_ns - wait.start_ns);
        auto add = [&](const std::string& work, double share) {
            PythonGpuWaitRow& row = wait_rows[{site, wait.api, work}];
            row.site = site;
            row.api = wait.api;
            row.waited_for = work;
            row.wait_ns += length * share;
            ++row.waits;
        };
        if (wait.waited_for.empty()) add(kNoGpuWorkRecorded, 1.0);
        for (const GpuWorkShare& share : wait.waited_for) add(share.name, share.share);
    }
    for (auto& [key, row] : wait_rows) report.waits.push_back(std::move(row));
    std::stable_sort(report.waits.begin(), report.waits.end(),
                     [](const PythonGpuWaitRow& a, const PythonGpuWaitRow& b) { return a.wait_ns > b.wait_ns; });
    return report;
}

}  // namespace ember::analysis
