// gpu_memory.cpp: the replay behind `ember stats --report gpu_memory` (gpu_memory.h).
// Two passes per device: the first finds the peaks, the churn and the OOMs; the second
// replays up to the allocated peak again to see what was live then (keeping a copy of
// the live blocks at every new maximum would cost a copy per rise).
#include "profiler/analysis/gpu_memory.h"

#include "profiler/analysis/operation_names.h"
#include "profiler/analysis/python_gpu.h"
#include "profiler/analysis/rank_map.h"
#include "profiler/analysis/steps.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <unordered_map>

namespace ember::analysis {

namespace {

using trace::MemoryAction;
using trace::MemoryEvent;

struct LiveBlock {
    std::int64_t bytes = 0;
    trace::StackId stack = 0;
    bool before_trace = false;
    trace::ThreadId thread = 0;
    trace::TimeNs time = 0;
};

// The tensor-creation ops every allocation happens inside: never the op to name.
bool is_allocation_helper(std::string_view name) {
    static constexpr std::string_view kNames[] = {"aten::empty",     "aten::empty_strided",     "aten::empty_like",
                                                  "aten::new_empty", "aten::new_empty_strided", "aten::resize_"};
    return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

// The allocating op among ranges of one thread: of those open at `time` (start <= time
// < end, depth >= 0), the innermost (deepest, then latest started) that is not an
// allocation helper, else the innermost.
class OpPicker {
  public:
    explicit OpPicker(const store::TraceReader& reader) : reader_(reader) {}

    template <typename Ranges>
    std::optional<trace::RangeEvent> pick(const Ranges& ranges, trace::TimeNs time) {
        const trace::RangeEvent* best = nullptr;
        const trace::RangeEvent* best_helper = nullptr;
        auto inner = [](const trace::RangeEvent* a, const trace::RangeEvent& b) {
            return a == nullptr || b.depth > a->depth || (b.depth == a->depth && b.start_ns > a->start_ns);
        };
        for (const trace::RangeEvent& range : ranges) {
            if (range.depth < 0 || range.start_ns > time || range.end_ns <= time) continue;
            const trace::RangeEvent*& slot = helper(range.name_id) ? best_helper : best;
            if (inner(slot, range)) slot = &range;
        }
        if (best != nullptr) return *best;
        if (best_helper != nullptr) return *best_helper;
        return std::nullopt;
    }

  private:
    bool helper(trace::StringId name) {
        auto found = helpers_.find(name);
        if (found != helpers_.end()) return found->second;
        return helpers_.emplace(name, is_allocation_helper(reader_.string(name))).first->second;
    }
    const store::TraceReader& reader_;
    std::unordered_map<trace::StringId, bool> helpers_;
};

// allocating_range for many (thread, time) queries: one pass over each thread's ranges
// in start order, keeping those that may still be open.
std::vector<std::optional<trace::RangeEvent>> allocating_ranges(
    const store::TraceReader& reader, const std::vector<std::pair<trace::ThreadId, trace::TimeNs>>& queries) {
    std::vector<std::optional<trace::RangeEvent>> result(queries.size());
    std::vector<std::size_t> order(queries.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return queries[a] < queries[b]; });
    OpPicker picker(reader);
    std::size_t at = 0;
    while (at < order.size()) {
        const trace::ThreadId thread = queries[order[at]].first;
        std::size_t end = at;
        while (end < order.size() && queries[order[end]].first == thread) ++end;
        if (thread == 0) {
            at = end;
            continue;
        }
        std::vector<trace::RangeEvent> open;  // in start order; some may have ended
        auto answer_before = [&](trace::TimeNs limit) {
            for (; at < end && queries[order[at]].second < limit; ++at) {
                const trace::TimeNs time = queries[order[at]].second;
                while (!open.empty() && open.back().end_ns <= time) open.pop_back();
                result[order[at]] = picker.pick(open, time);
            }
        };
        store::EventQuery query;
        query.track = thread;
        const trace::TimeNs last = queries[order[end - 1]].second;
        query.end_ns = last < std::numeric_limits<trace::TimeNs>::max() ? last + 1 : last;
        reader.for_each_range(query, [&](const trace::RangeEvent& range) {
            if (range.depth < 0) return true;
            answer_before(range.start_ns);
            if (at == end) return false;
            while (!open.empty() && open.back().end_ns <= range.start_ns) open.pop_back();
            open.push_back(range);
            return true;
        });
        answer_before(std::numeric_limits<trace::TimeNs>::max());
        at = end;
    }
    return result;
}

// Frames of the allocator, of tensor creation and of the stack capture itself,
// skipped when a C++ stack has no Python frame to name its user (a name may start with
// its return type: "at::TensorBase at::detail::_empty_generic<long>(...)").
bool is_allocator_frame(std::string_view function) {
    static constexpr std::string_view kParts[] = {
        "torch::unwind",           "torch::CapturedTraceback",
        "torch::cuda::(anonymous", "CUDACachingAllocator",
        "CachingDeviceAllocator",  "at::detail::empty",
        "at::detail::_empty",      "at::empty",
        "at::native::empty",       "create_out(",
        "set_output_raw_strided(", "c10::TensorImpl",
    };
    for (std::string_view part : kParts)
        if (function.find(part) != std::string_view::npos) return true;
    static constexpr std::string_view kPrefixes[] = {"std::", "_PyEval", "PyEval"};
    for (std::string_view prefix : kPrefixes)
        if (function.starts_with(prefix)) return true;
    return false;
}

// The frame that names a C++ stack's operation: an ATen kernel or an autograd
// function ("at::native::einsum", "torch::autograd::generated::BmmBackward0::apply").
bool is_operation_frame(std::string_view function) {
    return function.find("at::native::") != std::string_view::npos ||
           function.find("torch::autograd::generated::") != std::string_view::npos;
}

class Places {
  public:
    explicit Places(const store::TraceReader& reader) : reader_(reader) {}

    // The allocating line: the innermost Python frame of the program's own code
    // (python_user_frame: not an installed package, not the standard library), else the
    // innermost Python frame, else the innermost ATen kernel or autograd function, else
    // the innermost C++ frame outside the allocator.
    const std::string& line_of(trace::StackId stack, bool before_trace) {
        if (stack == 0) return before_trace ? kBefore : kUnknown;
        auto found = lines_.find(stack);
        if (found != lines_.end()) return found->second;
        const std::vector<trace::FrameInfo> frames = reader_.stack_frames(stack);
        std::string place;
        for (auto it = frames.rbegin(); it != frames.rend() && place.empty(); ++it)
            if (it->is_python() && python_user_frame(*it)) place = python_frame_name(*it);
        for (auto it = frames.rbegin(); it != frames.rend() && place.empty(); ++it)
            if (it->is_python()) place = python_frame_name(*it);
        for (auto it = frames.rbegin(); it != frames.rend() && place.empty(); ++it)
            if (is_operation_frame(it->function) && !is_allocator_frame(it->function)) place = it->function;
        for (auto it = frames.rbegin(); it != frames.rend() && place.empty(); ++it)
            if (!is_allocator_frame(it->function)) place = it->function;
        if (place.empty() && !frames.empty()) place = frames.back().function;
        return lines_.emplace(stack, place.empty() ? kUnknown : place).first->second;
    }

    // The stack: its Python frames outermost first ("a (f.py:1);b (f.py:9)"), else its C++
    // frames outside the allocator (at most 8 innermost).
    const std::string& stack_of(trace::StackId stack, bool before_trace) {
        if (stack == 0) return before_trace ? kBefore : kUnknown;
        auto found = stacks_.find(stack);
        if (found != stacks_.end()) return found->second;
        const std::vector<trace::FrameInfo> frames = reader_.stack_frames(stack);
        std::vector<std::string> parts;
        for (const trace::FrameInfo& frame : frames)
            if (frame.is_python()) parts.push_back(python_frame_name(frame));
        if (parts.empty()) {
            for (const trace::FrameInfo& frame : frames)
                if (!is_allocator_frame(frame.function)) parts.push_back(frame.function);
            if (parts.size() > 8) parts.erase(parts.begin(), parts.end() - 8);
        }
        std::string text;
        for (const std::string& part : parts) text += (text.empty() ? "" : ";") + part;
        return stacks_.emplace(stack, text.empty() ? kUnknown : text).first->second;
    }

  private:
    inline static const std::string kBefore = kAllocatedBeforeTrace;
    inline static const std::string kUnknown = "(no stack recorded)";
    const store::TraceReader& reader_;
    std::unordered_map<trace::StackId, std::string> lines_, stacks_;
};

template <typename Key>
std::vector<GpuMemoryPlace> grouped(const std::unordered_map<std::uint64_t, LiveBlock>& live, Key key) {
    std::map<std::string, GpuMemoryPlace> by_place;
    for (const auto& [address, block] : live) {
        const std::string& place = key(address, block);
        GpuMemoryPlace& row = by_place[place];
        row.place = place;
        ++row.blocks;
        row.bytes += block.bytes;
        row.largest_block_bytes = std::max(row.largest_block_bytes, block.bytes);
    }
    std::vector<GpuMemoryPlace> rows;
    rows.reserve(by_place.size());
    for (auto& [place, row] : by_place) rows.push_back(std::move(row));
    std::sort(rows.begin(), rows.end(), [](const GpuMemoryPlace& a, const GpuMemoryPlace& b) {
        return a.bytes != b.bytes ? a.bytes > b.bytes : a.place < b.place;
    });
    return rows;
}

// The allocating op of each live block that names its thread, by address.
class BlockOps {
  public:
    BlockOps(const store::TraceReader& reader, const std::unordered_map<std::uint64_t, LiveBlock>& live)
        : reader_(reader) {
        std::vector<std::uint64_t> addresses;
        std::vector<std::pair<trace::ThreadId, trace::TimeNs>> queries;
        for (const auto& [address, block] : live) {
            if (block.thread == 0) continue;
            addresses.push_back(address);
            queries.push_back({block.thread, block.time});
        }
        std::vector<std::optional<trace::RangeEvent>> ranges = allocating_ranges(reader, queries);
        for (std::size_t i = 0; i < addresses.size(); ++i) ranges_.emplace(addresses[i], std::move(ranges[i]));
    }

    bool any() const { return !ranges_.empty(); }

    std::optional<trace::RangeEvent> range(std::uint64_t address) const {
        auto found = ranges_.find(address);
        return found == ranges_.end() ? std::nullopt : found->second;
    }

    std::string name(std::uint64_t address, const LiveBlock& block) const {
        if (block.thread == 0) return block.before_trace ? kAllocatedBeforeTrace : kNoThreadRecorded;
        std::optional<trace::RangeEvent> open = range(address);
        return open ? std::string(reader_.string(open->name_id)) : std::string(kNoOpOpen);
    }

    std::vector<GpuMemoryPlace> places(const std::unordered_map<std::uint64_t, LiveBlock>& live) const {
        if (!any()) return {};
        return grouped(live, [&](std::uint64_t address, const LiveBlock& b) { return name(address, b); });
    }

  private:
    const store::TraceReader& reader_;
    std::unordered_map<std::uint64_t, std::optional<trace::RangeEvent>> ranges_;
};

struct Step {
    trace::TimeNs start_ns = 0, end_ns = 0;
    std::string name;
};

std::vector<Step> all_steps(const store::TraceReader& reader) {
    std::vector<Step> steps;
    for (const auto& [rank, ranges] : step_ranges(reader, rank_map(reader))) {
        for (const StepRange& range : ranges) {
            Step step{
                range.start_ns, range.end_ns,
                range.number ? fmt::format("step {}", *range.number) : fmt::format("step at {} ns", range.start_ns)};
            steps.push_back(std::move(step));
        }
    }
    std::sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) { return a.start_ns < b.start_ns; });
    return steps;
}

// The step holding `time` (the latest one starting at or before it), or nullptr.
const Step* step_at(const std::vector<Step>& steps, trace::TimeNs time) {
    auto it = std::upper_bound(steps.begin(), steps.end(), time,
                               [](trace::TimeNs t, const Step& s) { return t < s.start_ns; });
    if (it == steps.begin()) return nullptr;
    --it;
    return time < it->end_ns ? &*it : nullptr;
}

struct Replay {
    std::unordered_map<std::uint64_t, LiveBlock> live;
    std::int64_t allocated = 0;
    std::int64_t reserved = 0;

    void apply(const MemoryEvent& e) {
        switch (e.action) {
            case MemoryAction::alloc:
            case MemoryAction::live_at_start: {
                auto [it, inserted] = live.try_emplace(e.address);
                if (!inserted) allocated -= it->second.bytes;  // allocated again without a free: the latest counts
                it->second = {e.bytes, e.stack_id, e.action == MemoryAction::live_at_start, e.thread_id, e.time_ns};
                allocated += e.bytes;
                return;
            }
            case MemoryAction::free_completed: {
                auto it = live.find(e.address);
                if (it == live.end()) return;
                allocated -= it->second.bytes;
                live.erase(it);
                return;
            }
            case MemoryAction::segment_alloc:
            case MemoryAction::segment_map:
            case MemoryAction::segment_live_at_start:
                reserved += e.bytes;
                return;
            case MemoryAction::segment_free:
            case MemoryAction::segment_unmap:
                reserved -= e.bytes;
                return;
            default:
                return;
        }
    }
};

}  // namespace

std::string memory_device_text(trace::DeviceId device) {
    return device == trace::kNoDevice ? std::string("the host") : "GPU " + std::to_string(device);
}

GpuMemoryReport gpu_memory(const store::TraceReader& reader) {
    GpuMemoryReport report;
    if (reader.memory_event_count() == 0 && reader.memory_blocks().empty()) return report;
    const std::vector<Step> steps = all_steps(reader);
    report.has_steps = !steps.empty();
    Places places(reader);

    // Pass 1: peaks, churn, OOMs, per device.
    std::map<trace::DeviceId, GpuMemoryDevice> devices;
    std::map<trace::DeviceId, std::int64_t> peak_index;  // events of the device up to and including the peak
    {
        trace::DeviceId current = -1;
        bool started = false;
        Replay replay;
        GpuMemoryDevice* device = nullptr;
        std::map<std::string, GpuMemoryChurn> churn;
        std::int64_t index = 0;
        auto close_device = [&] {
            if (device == nullptr) return;
            for (auto& [name, row] : churn) device->churn.push_back(row);
            churn.clear();
        };
        reader.for_each_memory_event([&](const MemoryEvent& e) {
            if (!started || e.device_id != current) {
                close_device();
                started = true;
                current = e.device_id;
                replay = Replay();
                index = 0;
                device = &devices[current];
                device->device = current;
            }
            ++index;
            ++device->events;
            replay.apply(e);
            if (e.action == MemoryAction::live_at_start) device->allocated_before_trace_bytes += e.bytes;
            if (replay.allocated > device->peak_allocated_bytes) {
                device->peak_allocated_bytes = replay.allocated;
                device->peak_allocated_ns = e.time_ns;
                device->reserved_at_peak_bytes = replay.reserved;
                peak_index[current] = index;
            }
            if (replay.reserved > device->peak_reserved_bytes) {
                device->peak_reserved_bytes = replay.reserved;
                device->peak_reserved_ns = e.time_ns;
            }
            if (e.action == MemoryAction::alloc || e.action == MemoryAction::free_completed) {
                const Step* step = steps.empty() ? nullptr : step_at(steps, e.time_ns);
                static const std::string kWholeTrace = "(whole trace)", kOutsideSteps = "(outside steps)";
                const std::string& name = steps.empty() ? kWholeTrace : step ? step->name : kOutsideSteps;
                GpuMemoryChurn& row = churn[name];
                row.step = name;
                if (e.action == MemoryAction::alloc) {
                    ++row.allocs;
                    row.alloc_bytes += e.bytes;
                } else {
                    ++row.frees;
                    row.freed_bytes += e.bytes;
                }
            }
            if (e.action == MemoryAction::oom) {
                GpuMemoryOom oom;
                oom.time_ns = e.time_ns;
                oom.request_bytes = e.bytes;
                oom.device_free_bytes = e.device_free_bytes;
                oom.allocated_bytes = replay.allocated;
                oom.reserved_bytes = replay.reserved;
                oom.live_blocks = static_cast<std::int64_t>(replay.live.size());
                oom.live_by_line = grouped(replay.live, [&](std::uint64_t, const LiveBlock& b) -> const std::string& {
                    return places.line_of(b.stack, b.before_trace);
                });
                device->ooms.push_back(std::move(oom));
            }
            return true;
        });
        close_device();
    }
    // Churn rows in step order (the map ordered them by name): each name's first start,
    // looked up once per row (rows outside every step last).
    std::unordered_map<std::string_view, trace::TimeNs> first_start;
    for (const Step& step : steps) first_start.try_emplace(step.name, step.start_ns);
    const auto start_of = [&](const GpuMemoryChurn& row) {
        auto found = first_start.find(row.step);
        return found != first_start.end() ? found->second : std::numeric_limits<trace::TimeNs>::max();
    };
    for (auto& [id, device] : devices) {
        std::stable_sort(device.churn.begin(), device.churn.end(),
                         [&](const GpuMemoryChurn& a, const GpuMemoryChurn& b) { return start_of(a) < start_of(b); });
    }

    // Pass 2: what was live at each device's allocated peak.
    for (auto& [id, device] : devices) {
        auto found = peak_index.find(id);
        if (found == peak_index.end()) continue;
        Replay replay;
        std::int64_t index = 0;
        const std::int64_t stop = found->second;
        reader.for_each_memory_event(
            [&](const MemoryEvent& e) {
                replay.apply(e);
                return ++index < stop;
            },
            id);
        device.live_blocks_at_peak = static_cast<std::int64_t>(replay.live.size());
        device.at_peak_by_op = BlockOps(reader, replay.live).places(replay.live);
        device.at_peak_by_line = grouped(replay.live, [&](std::uint64_t, const LiveBlock& b) -> const std::string& {
            return places.line_of(b.stack, b.before_trace);
        });
        device.at_peak_by_stack = grouped(replay.live, [&](std::uint64_t, const LiveBlock& b) -> const std::string& {
            return places.stack_of(b.stack, b.before_trace);
        });
        if (const Step* step = steps.empty() ? nullptr : step_at(steps, device.peak_allocated_ns))
            device.peak_step = step->name;
        store::EventQuery query;
        query.begin_ns = device.peak_allocated_ns;
        query.end_ns = device.peak_allocated_ns + 1;
        std::int32_t deepest = -2;
        reader.for_each_range(query, [&](const trace::RangeEvent& range) {
            if (range.depth >= deepest) {
                deepest = range.depth;
                device.peak_range = std::string(reader.string(range.name_id));
            }
            return true;
        });
    }

    // The allocator's state: its free blocks.
    for (const trace::MemoryBlock& block : reader.memory_blocks()) {
        GpuMemoryDevice& device = devices[block.device_id];
        device.device = block.device_id;
        if (device.largest_free_block_bytes < 0) device.largest_free_block_bytes = device.free_blocks_bytes = 0;
        if (block.state == trace::MemoryBlockState::inactive) {
            device.largest_free_block_bytes = std::max(device.largest_free_block_bytes, block.bytes);
            device.free_blocks_bytes += block.bytes;
        }
    }
    for (auto& [id, device] : devices) report.devices.push_back(std::move(device));
    return report;
}

std::vector<Table> gpu_memory_tables(const GpuMemoryReport& report, const trace::RunInfo& run, std::size_t top) {
    const std::size_t limit = top > 0 ? top : 10;
    auto since_start = [&](trace::TimeNs t) -> std::int64_t { return t - run.start_ns; };
    auto optional_bytes = [](std::int64_t bytes) -> Cell {
        if (bytes < 0) return std::monostate{};
        return bytes;
    };
    std::vector<Table> tables;

    Table summary{"gpu_memory",
                  "GPU memory by device (allocated = requested bytes of live blocks; reserved = segments)",
                  {{"device", "Device", ColumnKind::integer},
                   {"peak_allocated_bytes", "Peak Allocated (B)", ColumnKind::integer},
                   {"peak_allocated_at_ns", "At", ColumnKind::time},
                   {"peak_step", "Step", ColumnKind::text},
                   {"peak_range", "Range", ColumnKind::text},
                   {"live_blocks_at_peak", "Live Blocks", ColumnKind::integer},
                   {"peak_reserved_bytes", "Peak Reserved (B)", ColumnKind::integer},
                   {"peak_reserved_at_ns", "At", ColumnKind::time},
                   {"reserved_at_peak_bytes", "Reserved At Peak (B)", ColumnKind::integer},
                   {"fragmentation_bytes", "Reserved - Allocated At Peak (B)", ColumnKind::integer},
                   {"largest_free_block_bytes", "Largest Free Block (B)", ColumnKind::integer},
                   {"allocated_before_trace_bytes", "Allocated Before Trace (B)", ColumnKind::integer},
                   {"events", "Events", ColumnKind::integer},
                   {"ooms", "OOMs", ColumnKind::integer}},
                  {},
                  "no GPU memory events or allocator state in this trace (a PyTorch memory snapshot has "
                  "them)"};
    for (const GpuMemoryDevice& d : report.devices) {
        summary.rows.push_back({static_cast<std::int64_t>(d.device), d.peak_allocated_bytes,
                                since_start(d.peak_allocated_ns), d.peak_step.empty() ? std::string("-") : d.peak_step,
                                d.peak_range.empty() ? std::string("-") : d.peak_range, d.live_blocks_at_peak,
                                d.peak_reserved_bytes, since_start(d.peak_reserved_ns), d.reserved_at_peak_bytes,
                                d.reserved_at_peak_bytes - d.peak_allocated_bytes,
                                optional_bytes(d.largest_free_block_bytes), d.allocated_before_trace_bytes, d.events,
                                static_cast<std::int64_t>(d.ooms.size())});
    }
    summary.notes.push_back("largest free block: of the allocator's state when the snapshot was taken");
    tables.push_back(std::move(summary));

    auto place_table = [&](const char* key, const char* title, const char* place_title,
                           std::vector<GpuMemoryPlace> GpuMemoryDevice::*member, const char* empty_note) {
        Table table{key,
                    title,
                    {{"device", "Device", ColumnKind::integer},
                     {"place", place_title, ColumnKind::text},
                     {"blocks", "Blocks", ColumnKind::integer},
                     {"bytes", "Bytes", ColumnKind::integer},
                     {"percent", "% Of Peak", ColumnKind::percent},
                     {"largest_block_bytes", "Largest Block (B)", ColumnKind::integer}},
                    {},
                    empty_note};
        for (const GpuMemoryDevice& d : report.devices) {
            const std::vector<GpuMemoryPlace>& rows = d.*member;
            for (std::size_t i = 0; i < rows.size() && i < limit; ++i) {
                const double percent = d.peak_allocated_bytes > 0 ? 100.0 * static_cast<double>(rows[i].bytes) /
                                                                        static_cast<double>(d.peak_allocated_bytes)
                                                                  : 0.0;
                table.rows.push_back({static_cast<std::int64_t>(d.device), rows[i].place, rows[i].blocks, rows[i].bytes,
                                      percent, rows[i].largest_block_bytes});
            }
            if (rows.size() > limit)
                table.notes.push_back(
                    fmt::format("device {}: {} more places (--top N shows more)", d.device, rows.size() - limit));
        }
        tables.push_back(std::move(table));
    };
    place_table("gpu_memory_at_peak_by_op", "Live at the allocated peak, by allocating op", "Allocating Op",
                &GpuMemoryDevice::at_peak_by_op,
                "no block live at the peak names the thread that allocated it (a PyTorch memory snapshot "
                "records stacks: see the line and stack tables)");
    place_table("gpu_memory_at_peak_by_line", "Live at the allocated peak, by allocating line", "Allocated At",
                &GpuMemoryDevice::at_peak_by_line, "nothing was allocated");
    place_table("gpu_memory_at_peak_by_stack", "Live at the allocated peak, by stack", "Stack (outermost first)",
                &GpuMemoryDevice::at_peak_by_stack, "nothing was allocated");

    Table churn{"gpu_memory_churn",
                "Allocation churn",
                {{"device", "Device", ColumnKind::integer},
                 {"step", "Step", ColumnKind::text},
                 {"allocs", "Allocs", ColumnKind::integer},
                 {"alloc_bytes", "Alloc Bytes", ColumnKind::integer},
                 {"frees", "Frees", ColumnKind::integer},
                 {"freed_bytes", "Freed Bytes", ColumnKind::integer}},
                {},
                "no allocations in the trace"};
    for (const GpuMemoryDevice& d : report.devices)
        for (const GpuMemoryChurn& row : d.churn)
            churn.rows.push_back({static_cast<std::int64_t>(d.device), row.step, row.allocs, row.alloc_bytes, row.frees,
                                  row.freed_bytes});
    tables.push_back(std::move(churn));

    Table oom{"gpu_memory_oom",
              "Out of memory: the request, and the live blocks that could not be released",
              {{"device", "Device", ColumnKind::integer},
               {"at_ns", "At", ColumnKind::time},
               {"request_bytes", "Request (B)", ColumnKind::integer},
               {"device_free_bytes", "Device Free (B)", ColumnKind::integer},
               {"allocated_bytes", "Allocated (B)", ColumnKind::integer},
               {"reserved_bytes", "Reserved (B)", ColumnKind::integer},
               {"place", "Live Blocks Allocated At", ColumnKind::text},
               {"blocks", "Blocks", ColumnKind::integer},
               {"bytes", "Bytes", ColumnKind::integer}},
              {},
              "no out-of-memory event"};
    for (const GpuMemoryDevice& d : report.devices) {
        for (const GpuMemoryOom& o : d.ooms) {
            const std::size_t shown = std::max<std::size_t>(1, std::min(limit, o.live_by_line.size()));
            for (std::size_t i = 0; i < shown; ++i) {
                const bool any = i < o.live_by_line.size();
                oom.rows.push_back({static_cast<std::int64_t>(d.device), since_start(o.time_ns), o.request_bytes,
                                    optional_bytes(o.device_free_bytes), o.allocated_bytes, o.reserved_bytes,
                                    any ? o.live_by_line[i].place : std::string("(none live)"),
                                    any ? o.live_by_line[i].blocks : std::int64_t{0},
                                    any ? o.live_by_line[i].bytes : std::int64_t{0}});
            }
        }
    }
    tables.push_back(std::move(oom));
    return tables;
}

GpuMemoryAt gpu_memory_at(const store::TraceReader& reader, trace::DeviceId device, trace::TimeNs time,
                          std::size_t block_limit) {
    Replay replay;
    reader.for_each_memory_event(
        [&](const MemoryEvent& e) {
            if (e.time_ns > time) return false;
            replay.apply(e);
            return true;
        },
        device);
    Places places(reader);
    GpuMemoryAt at;
    at.allocated_bytes = replay.allocated;
    at.reserved_bytes = replay.reserved;
    at.live_blocks = static_cast<std::int64_t>(replay.live.size());
    const BlockOps ops(reader, replay.live);
    at.by_op = ops.places(replay.live);
    at.by_line = grouped(replay.live, [&](std::uint64_t, const LiveBlock& b) -> const std::string& {
        return places.line_of(b.stack, b.before_trace);
    });
    at.by_stack = grouped(replay.live, [&](std::uint64_t, const LiveBlock& b) -> const std::string& {
        return places.stack_of(b.stack, b.before_trace);
    });
    if (block_limit > 0) {
        std::vector<std::pair<std::uint64_t, const LiveBlock*>> largest;
        largest.reserve(replay.live.size());
        for (const auto& [address, block] : replay.live) largest.push_back({address, &block});
        const std::size_t kept = std::min(block_limit, largest.size());
        std::partial_sort(largest.begin(), largest.begin() + static_cast<std::ptrdiff_t>(kept), largest.end(),
                          [](const auto& a, const auto& b) {
                              return a.second->bytes != b.second->bytes ? a.second->bytes > b.second->bytes
                                                                        : a.first < b.first;
                          });
        for (std::size_t i = 0; i < kept; ++i) {
            const auto& [address, block] = largest[i];
            GpuMemoryBlock row;
            row.address = address;
            row.bytes = block->bytes;
            row.alloc_ns = block->time;
            row.thread_id = block->thread;
            row.stack_id = block->stack;
            row.before_trace = block->before_trace;
            row.line = places.line_of(block->stack, block->before_trace);
            row.op = ops.name(address, *block);
            row.op_range = ops.range(address);
            at.blocks.push_back(std::move(row));
        }
    }
    return at;
}

std::optional<trace::RangeEvent> allocating_range(const store::TraceReader& reader, trace::ThreadId thread,
                                                  trace::TimeNs time) {
    if (thread == 0) return std::nullopt;
    store::EventQuery query;
    query.track = thread;
    query.begin_ns = time;
    query.end_ns = time < std::numeric_limits<trace::TimeNs>::max() ? time + 1 : time;
    std::vector<trace::RangeEvent> open;
    reader.for_each_range(query, [&](const trace::RangeEvent& range) {
        open.push_back(range);
        return true;
    });
    OpPicker picker(reader);
    return picker.pick(open, time);
}

void for_each_memory_total(const store::TraceReader& reader, const MemoryTotalVisitor& visit,
                           std::optional<trace::DeviceId> only) {
    struct Instant {
        trace::DeviceId device = 0;
        trace::TimeNs time = 0;
        std::int64_t events = 0;
    };
    std::optional<Instant> open;  // the instant being replayed, not yet visited
    Replay replay;
    bool go_on = true;
    auto close = [&] {
        if (open) go_on = visit(open->device, open->time, replay.allocated, replay.reserved, open->events);
        return go_on;
    };
    reader.for_each_memory_event(
        [&](const MemoryEvent& e) {
            if (open && open->device == e.device_id && open->time == e.time_ns) {
                ++open->events;
            } else {
                if (!close()) return false;
                if (!open || open->device != e.device_id) replay = Replay{};
                open = Instant{e.device_id, e.time_ns, 1};
            }
            replay.apply(e);
            return true;
        },
        only);
    if (go_on) close();
}

}  // namespace ember::analysis
