// cpu_profile.cpp: CPU time from stack samples (cpu_profile.h).
#include "profiler/analysis/cpu_profile.h"

#include "common/nvtx_contract.h"
#include "profiler/analysis/python_gpu.h"
#include "profiler/store/schema.h"
#include "profiler/trace/step_names.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>

namespace ember::analysis {

namespace {

// A demangled name without its parameter lists, which overloads aside only repeat what
// the name says: "ember::ops::im2col<float>(float const*, ...)" -> "ember::ops::im2col<float>",
// "f(Tensor const&, ...)::{lambda(long, long)#1}::operator()(long, long) const" ->
// "f::{lambda#1}::operator()". "(anonymous namespace)" stays.
std::string without_parameters(const std::string& function) {
    static constexpr std::string_view kAnonymous = "(anonymous namespace)";
    static constexpr std::string_view kCallOperator = "operator()";
    std::string name;
    name.reserve(function.size());
    for (std::size_t i = 0; i < function.size();) {
        const std::string_view rest = std::string_view(function).substr(i);
        if (rest.rfind(kAnonymous, 0) == 0) {
            name += kAnonymous;
            i += kAnonymous.size();
        } else if (rest.rfind(kCallOperator, 0) == 0) {
            name += kCallOperator;
            i += kCallOperator.size();
        } else if (function[i] == '(') {
            int depth = 0;  // skip the balanced group
            for (; i < function.size(); ++i) {
                if (function[i] == '(')
                    ++depth;
                else if (function[i] == ')' && --depth == 0)
                    break;
            }
            if (i < function.size()) ++i;
        } else {
            name += function[i++];
        }
    }
    static constexpr std::string_view kConst = " const";
    if (name.size() > kConst.size() && name.compare(name.size() - kConst.size(), kConst.size(), kConst) == 0)
        name.resize(name.size() - kConst.size());
    return name.empty() ? function : name;
}

// A frame's name for grouping: the function, or its module for an unresolved address
// (a stripped library's code is one bucket, not a thousand addresses). An address in no
// module is code generated at run time (JIT: oneDNN's kernels, a JIT compiler's output);
// the collector names it from the process's perf map when the JIT writes one, and this
// bucket holds the rest.
std::string frame_name(const trace::FrameInfo& frame) {
    // A Python frame as py-spy names it: "function (file:line)".
    if (frame.is_python()) return frame.function + " (" + frame.module + ":" + std::to_string(frame.line) + ")";
    if (frame.function.empty() || frame.function.rfind("0x", 0) == 0) {
        const std::size_t slash = frame.module.rfind('/');
        return frame.module.empty() ? std::string("[JIT-generated code (no module; e.g. oneDNN kernels)]")
                                    : "[" + frame.module.substr(slash + 1) + "]";
    }
    return without_parameters(frame.function);
}

struct StackCache {
    const store::TraceReader& reader;
    std::unordered_map<trace::StackId, std::vector<trace::FrameInfo>> frames;
    const std::vector<trace::FrameInfo>& of(trace::StackId stack) {
        auto [found, inserted] = frames.try_emplace(stack);
        if (inserted) found->second = reader.stack_frames(stack);
        return found->second;
    }
};

struct Sample {
    trace::TimeNs time_ns = 0;
    trace::ThreadId thread_id = 0;
    trace::StackId stack_id = 0;
};

std::vector<Sample> read_samples(const store::TraceReader& reader, bool include_idle) {
    std::vector<Sample> samples;
    reader.for_each_stack_sample({}, [&](const trace::StackSample& sample) {
        // CPU time: a thread sampled while it slept or waited (the Python sampler reads
        // every thread, running or not) is not counted, unless asked.
        if (!counts_as_cpu_time(sample, include_idle)) return true;
        samples.push_back({sample.time_ns, sample.thread_id, sample.stack_id});
        return true;
    });
    return samples;
}

// Whether a sampled stack runs on an OpenMP runtime's worker thread (GNU libgomp, LLVM's
// libomp, Intel's libiomp5): the threads of a parallel region work for the thread that
// opened it.
bool on_an_openmp_team_thread(const std::vector<trace::FrameInfo>& frames) {
    for (const trace::FrameInfo& frame : frames) {
        const std::size_t slash = frame.module.rfind('/');
        const std::string_view file = std::string_view(frame.module).substr(slash == std::string::npos ? 0 : slash + 1);
        if (file.rfind("libgomp", 0) == 0 || file.rfind("libiomp", 0) == 0 || file.rfind("libomp", 0) == 0) return true;
        if (frame.function.rfind("gomp_thread_start", 0) == 0 || frame.function.rfind("__kmp_launch", 0) == 0)
            return true;
    }
    return false;
}

// A sample on an OpenMP team thread that records no ranges of its own (oneDNN's and
// the loops' worker threads, PyTorch's intra-op threads) is charged as the work of the
// thread that leads its team: of its process, the thread with the most push/pop ranges
// (the one running the steps), at the sample's time. Without this the team's share of
// every op would show up as "(no range)".
void charge_team_threads_to_their_leader(const store::TraceReader& reader, StackCache& stacks,
                                         std::vector<Sample>& samples) {
    std::map<trace::ThreadId, std::int64_t> ranges_of;
    for (const store::TrackSummary& track : reader.tracks())
        if (track.event_table == "ranges" && track.track.kind == trace::TrackKind::thread)
            ranges_of[track.track.id] += track.event_count;
    std::map<std::int64_t, std::pair<trace::ThreadId, std::int64_t>> leader_of_process;  // pid -> (thread, ranges)
    for (const auto& [thread_id, count] : ranges_of) {
        const trace::ThreadInfo* thread = reader.thread(thread_id);
        if (thread == nullptr) continue;
        auto [found, inserted] = leader_of_process.try_emplace(thread->pid, thread_id, count);
        if (!inserted && count > found->second.second) found->second = {thread_id, count};
    }
    for (Sample& sample : samples) {
        if (ranges_of.count(sample.thread_id) != 0) continue;
        const trace::ThreadInfo* thread = reader.thread(sample.thread_id);
        if (thread == nullptr) continue;
        auto leader = leader_of_process.find(thread->pid);
        if (leader == leader_of_process.end()) continue;
        if (on_an_openmp_team_thread(stacks.of(sample.stack_id))) sample.thread_id = leader->second.first;
    }
}

// The range path each sample is charged to ("" for none), in the samples' order: the
// innermost push/pop range open on its thread (an OpenMP team thread's: on the thread
// that leads the team).
std::vector<std::string> sample_range_paths(const store::TraceReader& reader, StackCache& stacks,
                                            const std::vector<Sample>& original) {
    std::vector<Sample> samples = original;
    charge_team_threads_to_their_leader(reader, stacks, samples);
    std::vector<std::size_t> order(samples.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
        const Sample& a = samples[x];
        const Sample& b = samples[y];
        return a.thread_id != b.thread_id ? a.thread_id < b.thread_id : a.time_ns < b.time_ns;
    });
    std::vector<std::string> paths(samples.size());
    std::size_t next = 0;
    while (next < order.size()) {
        const trace::ThreadId thread = samples[order[next]].thread_id;
        std::size_t end = next;
        while (end < order.size() && samples[order[end]].thread_id == thread) ++end;
        // The thread's ranges in start order (outer before inner at equal starts).
        std::vector<trace::RangeEvent> ranges;
        store::EventQuery query;
        query.track = thread;
        reader.for_each_range(query, [&](const trace::RangeEvent& range) {
            if (range.depth >= 0) ranges.push_back(range);
            return true;
        });
        std::stable_sort(ranges.begin(), ranges.end(), [](const trace::RangeEvent& a, const trace::RangeEvent& b) {
            return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.depth < b.depth;
        });
        std::vector<const trace::RangeEvent*> open;  // the ranges containing the current time
        std::size_t next_range = 0;
        for (std::size_t i = next; i < end; ++i) {
            const trace::TimeNs t = samples[order[i]].time_ns;
            while (next_range < ranges.size() && ranges[next_range].start_ns <= t) {
                const trace::RangeEvent& range = ranges[next_range++];
                while (!open.empty() && open.back()->end_ns <= range.start_ns) open.pop_back();
                open.push_back(&range);
            }
            while (!open.empty() && open.back()->end_ns <= t) open.pop_back();
            // Ranges that ended inside an enclosing one may sit below a live one: find the
            // innermost that still contains t.
            std::string path;
            std::vector<const trace::RangeEvent*> live;
            for (const trace::RangeEvent* range : open)
                if (range->start_ns <= t && t < range->end_ns) live.push_back(range);
            for (const trace::RangeEvent* range : live)
                path += (path.empty() ? "" : " > ") + std::string(reader.string(range->name_id));
            paths[order[i]] = std::move(path);
        }
        next = end;
    }
    return paths;
}

// A range path with PyTorch's numbered steps as one: "ProfilerStep#12 > forward" ->
// "ProfilerStep#* > forward", so the lines of every step add up.
std::string steps_as_one(const std::string& path) {
    static constexpr std::string_view kSeparator = " > ";
    std::string result;
    std::size_t at = 0;
    while (at <= path.size()) {
        std::size_t end = path.find(kSeparator, at);
        if (end == std::string::npos) end = path.size();
        const std::string_view part = std::string_view(path).substr(at, end - at);
        if (!result.empty() || at > 0) result += kSeparator;
        if (trace::profiler_step_number(part)) {
            result += nvtx::range::kProfilerStepPrefix;
            result += '*';
        } else {
            result += part;
        }
        at = end + kSeparator.size();
    }
    return result;
}

std::vector<CpuRangeRow> samples_by_range(const std::vector<std::string>& paths) {
    std::map<std::string, std::int64_t> counts;
    for (const std::string& path : paths) ++counts[path.empty() ? "(no range)" : path];
    std::vector<CpuRangeRow> rows;
    for (const auto& [path, count] : counts) rows.push_back({path, count});
    std::stable_sort(rows.begin(), rows.end(),
                     [](const CpuRangeRow& a, const CpuRangeRow& b) { return a.samples > b.samples; });
    return rows;
}

}  // namespace

CpuProfile cpu_profile(const store::TraceReader& reader, bool include_idle) {
    CpuProfile profile;
    profile.include_idle = include_idle;
    profile.period_ns = cpu_sample_period_ns(reader);
    const std::vector<Sample> samples = read_samples(reader, include_idle);
    profile.samples = static_cast<std::int64_t>(samples.size());
    if (samples.empty()) return profile;

    StackCache stacks{reader, {}};
    const GpuWaits waits(reader);
    std::map<std::tuple<std::string, std::string, std::string>, CpuGpuWaitRow> gpu_waits;
    std::map<std::string, CpuFunctionRow> functions;
    std::map<trace::ThreadId, std::int64_t> per_thread;
    std::map<std::string, CpuLineRow> lines;
    std::vector<const CpuLineRow*> innermost_line(samples.size(), nullptr);
    for (std::size_t index = 0; index < samples.size(); ++index) {
        const Sample& sample = samples[index];
        ++per_thread[sample.thread_id];
        const std::vector<trace::FrameInfo>& frames = stacks.of(sample.stack_id);
        std::set<std::string> seen_lines;
        for (std::size_t i = 0; i < frames.size(); ++i) {
            if (!frames[i].is_python()) continue;
            const std::string location = frames[i].module + ":" + std::to_string(frames[i].line);
            CpuLineRow& row = lines[location];
            if (row.location.empty()) {
                row.location = location;
                row.function = frames[i].function;
            }
            if (seen_lines.insert(location).second) ++row.total_samples;
            innermost_line[index] = &row;  // frames run outermost first: the last one wins
        }
        // Waiting on the GPU: the time is the GPU work's, not the innermost line's or frame's.
        const GpuWait* wait = waits.empty() ? nullptr : waits.at(sample.thread_id, sample.time_ns);
        if (wait) {
            ++profile.gpu_wait_samples;
            innermost_line[index] = nullptr;
            const CallSite site = call_site_of(frames);
            auto charge = [&](const std::string& work, double share) {
                CpuGpuWaitRow& row = gpu_waits[{site.location, site.function, work}];
                if (row.waited_for.empty()) row = {site.location, site.function, work, 0};
                row.samples += share;
            };
            if (wait->waited_for.empty()) charge(kNoGpuWorkRecorded, 1);
            for (const GpuWorkShare& share : wait->waited_for) charge(share.name, share.share);
            CpuFunctionRow& row = functions[kWaitingOnGpuFrame];
            if (row.function.empty()) row.function = kWaitingOnGpuFrame;
            ++row.self_samples;
            ++row.total_samples;
        }
        if (innermost_line[index]) ++lines[innermost_line[index]->location].self_samples;
        std::set<std::string> seen;
        for (std::size_t i = 0; i < frames.size(); ++i) {
            const std::string name = frame_name(frames[i]);
            CpuFunctionRow& row = functions[name];
            if (row.function.empty()) {
                row.function = name;
                row.module = frames[i].module;
            }
            if (seen.insert(name).second) ++row.total_samples;
            if (i + 1 == frames.size() && !wait) ++row.self_samples;
        }
    }
    for (auto& [key, row] : gpu_waits) profile.gpu_waits.push_back(std::move(row));
    std::stable_sort(profile.gpu_waits.begin(), profile.gpu_waits.end(),
                     [](const CpuGpuWaitRow& a, const CpuGpuWaitRow& b) { return a.samples > b.samples; });
    for (auto& [name, row] : functions) profile.functions.push_back(std::move(row));
    std::stable_sort(profile.functions.begin(), profile.functions.end(),
                     [](const CpuFunctionRow& a, const CpuFunctionRow& b) {
                         return a.self_samples != b.self_samples ? a.self_samples > b.self_samples
                                                                 : a.total_samples > b.total_samples;
                     });
    for (const auto& [thread_id, count] : per_thread) {
        const trace::ThreadInfo* thread = reader.thread(thread_id);
        profile.threads.push_back({thread_id, thread ? thread->tid : 0, thread ? thread->name : "", count});
    }
    // Threads never sampled ran too little to be caught: they are there with 0.
    for (const trace::ThreadInfo& thread : reader.threads())
        if (!per_thread.count(thread.thread_id))
            profile.threads.push_back({thread.thread_id, thread.tid, thread.name, 0});
    std::stable_sort(profile.threads.begin(), profile.threads.end(),
                     [](const CpuThreadRow& a, const CpuThreadRow& b) { return a.samples > b.samples; });
    const std::vector<std::string> paths = sample_range_paths(reader, stacks, samples);
    profile.by_range = samples_by_range(paths);
    for (auto& [location, row] : lines) profile.lines.push_back(row);
    std::stable_sort(profile.lines.begin(), profile.lines.end(), [](const CpuLineRow& a, const CpuLineRow& b) {
        return a.self_samples != b.self_samples ? a.self_samples > b.self_samples : a.total_samples > b.total_samples;
    });
    // A step's (a range's) time per line: only when some sample falls in a range.
    bool ranged = false;
    for (const std::string& path : paths) ranged = ranged || !path.empty();
    if (ranged) {
        std::map<std::pair<std::string, std::string>, CpuRangeLineRow> per_range_line;
        std::map<std::string, std::int64_t> range_samples;
        for (std::size_t index = 0; index < samples.size(); ++index) {
            const std::string range = paths[index].empty() ? "(no range)" : steps_as_one(paths[index]);
            ++range_samples[range];
            if (!innermost_line[index]) continue;
            CpuRangeLineRow& row = per_range_line[{range, innermost_line[index]->location}];
            if (row.location.empty())
                row = {range, innermost_line[index]->location, innermost_line[index]->function, 0};
            ++row.samples;
        }
        for (auto& [key, row] : per_range_line) profile.lines_by_range.push_back(row);
        // Ranges with the most samples first (then by name), lines by samples within each.
        std::stable_sort(profile.lines_by_range.begin(), profile.lines_by_range.end(),
                         [&](const CpuRangeLineRow& a, const CpuRangeLineRow& b) {
                             const std::int64_t ra = range_samples[a.range_path], rb = range_samples[b.range_path];
                             if (ra != rb) return ra > rb;
                             if (a.range_path != b.range_path) return a.range_path < b.range_path;
                             return a.samples > b.samples;
                         });
    }
    return profile;
}

StackTree cpu_stack_tree(const store::TraceReader& reader, bool include_idle) {
    StackTree tree;
    const trace::TimeNs period = cpu_sample_period_ns(reader);
    StackCache stacks{reader, {}};
    const std::vector<Sample> samples = read_samples(reader, include_idle);
    if (samples.empty()) return tree;
    const GpuWaits waits(reader);
    const trace::TimeNs weight = period > 0 ? period : 1;
    for (const Sample& sample : samples) {
        const trace::ThreadInfo* thread = reader.thread(sample.thread_id);
        std::uint32_t node = tree.child(StackTree::kRoot, thread && !thread->name.empty()
                                                              ? thread->name + " (" + std::to_string(thread->tid) + ")"
                                                              : "thread " + std::to_string(sample.thread_id));
        for (const trace::FrameInfo& frame : stacks.of(sample.stack_id)) node = tree.child(node, frame_name(frame));
        const GpuWait* wait = waits.empty() ? nullptr : waits.at(sample.thread_id, sample.time_ns);
        if (!wait) {
            tree.add_weight(node, weight);
            continue;
        }
        // "[waiting on GPU: gemm]": the sample split over the work waited for.
        if (wait->waited_for.empty())
            tree.add_weight(tree.child(node, waiting_on_gpu_frame(kNoGpuWorkRecorded)), weight);
        for (const GpuWorkShare& share : wait->waited_for)
            tree.add_weight(tree.child(node, waiting_on_gpu_frame(share.name)),
                            static_cast<std::int64_t>(std::llround(static_cast<double>(weight) * share.share)));
    }
    return tree;
}

std::string cpu_frame_name(const trace::FrameInfo& frame) {
    return frame_name(frame);
}

trace::TimeNs cpu_sample_period_ns(const store::TraceReader& reader) {
    const std::optional<std::string> period = reader.metadata(store::metadata_key::cpu_sample_period_ns);
    return period ? std::strtoll(period->c_str(), nullptr, 10) : 0;
}

bool counts_as_cpu_time(const trace::StackSample& sample, bool include_idle) {
    return include_idle || !sample.idle;
}

}  // namespace ember::analysis
