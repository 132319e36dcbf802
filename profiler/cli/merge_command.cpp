// merge_command.cpp: `ember merge -o job.db rank0.db rank1.db ...` - one job trace from
// the per-rank files of a distributed run, on rank 0's time base.
//
// Clock alignment: dist::Context::record_clock_anchor() leaves a barrier on every rank
// and marks `clock/anchor` (payload: the anchor's sequence number), so anchors with
// equal numbers are simultaneous. Each rank is shifted by (rank 0's anchor - its
// anchor), using the first anchor number both files hold; a file without anchors falls
// back to wall-clock alignment (RunInfo::clock_offset_to_wall_ns), which is only as good
// as the hosts' NTP.
//
// Each rank becomes a process ("rank R") with its threads; host-side events are copied:
// NVTX ranges (nesting kept), marks, counters (named "rank R: name"). Device activity
// (kernels, copies, API calls) and stack samples are not merged yet: the command says
// how many it left out.
//
// It then prints per rank the host time in compute ranges (forward, backward,
// optimizer: category compute at depth <= 1) and in `allreduce/wait`, and names the
// straggler: the rank the others wait for, which waits least in allreduce/wait itself.
#include "profiler/cli/commands.h"
#include "profiler/store/reader.h"
#include "profiler/store/writer.h"

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>

namespace ember::cli {

namespace {

struct MergeOptions {
    std::string output;
    std::vector<std::string> inputs;
};

// Anchor sequence number -> time, from the `clock/anchor` marks of one file.
std::map<int64_t, trace::TimeNs> clock_anchors(const store::TraceReader& reader) {
    std::map<int64_t, trace::TimeNs> anchors;
    std::optional<trace::StringId> name = reader.find_string("clock/anchor");
    if (!name) return anchors;
    reader.for_each_mark({}, [&](const trace::MarkEvent& mark) {
        if (mark.name_id == *name)
            anchors.emplace(static_cast<int64_t>(std::llround(mark.payload.as_double())), mark.time_ns);
        return true;
    });
    return anchors;
}

// Copies one rank's host-side events into the writer, shifted by `shift_ns`.
struct RankCopier {
    const store::TraceReader& reader;
    store::TraceWriter& writer;
    int rank = 0;
    trace::TimeNs shift_ns = 0;
    std::unordered_map<trace::StringId, trace::StringId> strings;
    std::unordered_map<trace::ThreadId, trace::ThreadId> threads;
    std::unordered_map<trace::RangeId, trace::RangeId> ranges;
    std::unordered_map<trace::CounterId, trace::CounterId> counters;
    double compute_seconds = 0.0;
    double allreduce_wait_seconds = 0.0;

    trace::StringId string(trace::StringId id) {
        if (id == trace::kNoString) return id;
        auto it = strings.find(id);
        if (it != strings.end()) return it->second;
        const trace::StringId merged = writer.intern(reader.string(id));
        strings.emplace(id, merged);
        return merged;
    }
    trace::RangeId range(trace::RangeId id) {
        if (id == 0) return 0;
        auto it = ranges.find(id);
        if (it != ranges.end()) return it->second;
        const trace::RangeId merged = writer.next_range_id();
        ranges.emplace(id, merged);
        return merged;
    }
    trace::ThreadId thread(trace::ThreadId id) {
        auto it = threads.find(id);
        return it == threads.end() ? 0 : it->second;
    }

    void copy(int64_t merged_pid) {
        writer.register_process({merged_pid, fmt::format("rank {}", rank)});
        for (const trace::ThreadInfo& info : reader.threads()) {
            trace::ThreadInfo merged = info;
            merged.pid = merged_pid;
            merged.name = fmt::format("rank {}: {}", rank, info.name.empty() ? std::to_string(info.tid) : info.name);
            threads[info.thread_id] = writer.register_thread(merged);
        }
        for (const trace::CounterInfo& info : reader.counters()) {
            trace::CounterInfo merged = info;
            merged.name = fmt::format("rank {}: {}", rank, info.name);
            counters[info.counter_id] = writer.register_counter(merged);
        }
        reader.for_each_range({}, [&](const trace::RangeEvent& event) {
            trace::RangeEvent merged = event;
            merged.range_id = range(event.range_id);
            merged.parent_range_id = range(event.parent_range_id);
            merged.start_ns += shift_ns;
            merged.end_ns += shift_ns;
            merged.thread_id = thread(event.thread_id);
            merged.domain_id = string(event.domain_id);
            merged.name_id = string(event.name_id);
            writer.record_range(merged);
            const std::string_view name = reader.string(event.name_id);
            const double seconds = static_cast<double>(event.end_ns - event.start_ns) / 1e9;
            if (name == "allreduce/wait") allreduce_wait_seconds += seconds;
            else if (name == "forward" || name == "backward" || name == "optimizer" || name == "imbalance")
                compute_seconds += seconds;
            return true;
        });
        reader.for_each_mark({}, [&](const trace::MarkEvent& event) {
            trace::MarkEvent merged = event;
            merged.time_ns += shift_ns;
            merged.thread_id = thread(event.thread_id);
            merged.domain_id = string(event.domain_id);
            merged.name_id = string(event.name_id);
            writer.record_mark(merged);
            return true;
        });
        reader.for_each_counter_sample({}, [&](const trace::CounterSample& sample) {
            trace::CounterSample merged = sample;
            merged.time_ns += shift_ns;
            merged.counter_id = counters[sample.counter_id];
            writer.record_counter(merged);
            return true;
        });
    }
};

int run_merge(const MergeOptions& options) {
    std::vector<std::unique_ptr<store::TraceReader>> readers;
    for (const std::string& path : options.inputs) readers.push_back(std::make_unique<store::TraceReader>(path));
    // Order by recorded rank (file order when ranks are missing or repeated).
    std::vector<std::size_t> order(readers.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return readers[a]->run().rank < readers[b]->run().rank; });
    const store::TraceReader& base = *readers[order[0]];
    const std::map<int64_t, trace::TimeNs> base_anchors = clock_anchors(base);

    trace::RunInfo run = base.run();
    run.command_line = "ember merge";
    for (const std::string& path : options.inputs) run.command_line += " " + path;
    run.rank = 0;
    run.world_size = static_cast<int32_t>(readers.size());
    store::TraceWriter writer(options.output, run);

    std::set<int64_t> pids;
    trace::TimeNs end_ns = 0;
    int64_t left_out = 0;
    struct RankTimes {
        int rank;
        double compute, wait;
    };
    std::vector<RankTimes> times;
    for (std::size_t position = 0; position < order.size(); ++position) {
        const store::TraceReader& reader = *readers[order[position]];
        const int rank = order.size() == 1 ? reader.run().rank : static_cast<int>(position);
        trace::TimeNs shift = 0;
        std::string how = "reference";
        if (position > 0) {
            const std::map<int64_t, trace::TimeNs> anchors = clock_anchors(reader);
            bool aligned = false;
            for (const auto& [sequence, time] : anchors) {
                auto it = base_anchors.find(sequence);
                if (it == base_anchors.end()) continue;
                shift = it->second - time;
                how = fmt::format("clock anchor {}", sequence);
                aligned = true;
                break;
            }
            if (!aligned) {
                shift = reader.run().clock_offset_to_wall_ns - base.run().clock_offset_to_wall_ns;
                how = "wall clock (no common clock/anchor marks)";
            }
        }
        int64_t pid = reader.run().pid;
        while (pids.count(pid)) pid += 1000000000;  // same pid on two hosts
        pids.insert(pid);
        RankCopier copier{reader, writer, rank, shift};
        copier.copy(pid);
        times.push_back({rank, copier.compute_seconds, copier.allreduce_wait_seconds});
        if (reader.run().end_ns) end_ns = std::max(end_ns, reader.run().end_ns + shift);
        for (const char* table : {"kernels", "memcpys", "memsets", "synchronizations", "api_calls", "stack_samples"})
            left_out += std::max<int64_t>(0, reader.event_count(table));
        fmt::print("rank {}: {} shifted by {:+.3f} ms ({})\n", rank, reader.path(), shift / 1e6, how);
    }
    if (end_ns) writer.set_end_time(end_ns);
    writer.close();
    fmt::print("wrote {} ({} ranks)", options.output, readers.size());
    if (left_out) fmt::print("; {} device/API/stack events not merged (host ranges, marks and counters only)", left_out);
    fmt::print("\n");
    if (times.size() > 1) {
        fmt::print("{:>6} {:>14} {:>20}\n", "rank", "compute (s)", "allreduce/wait (s)");
        std::size_t slowest = 0;
        for (std::size_t i = 0; i < times.size(); ++i) {
            fmt::print("{:>6} {:>14.6f} {:>20.6f}\n", times[i].rank, times[i].compute, times[i].wait);
            // The straggler is the rank the others wait for: it waits least itself.
            // (Its compute can look smaller than theirs when communication work is
            // done inside their backward passes.)
            if (times[i].wait < times[slowest].wait) slowest = i;
        }
        double others_wait = 0.0;
        for (std::size_t i = 0; i < times.size(); ++i)
            if (i != slowest) others_wait += times[i].wait;
        fmt::print("straggler: rank {} ({:.6f} s compute); the other ranks waited {:.6f} s in allreduce/wait\n",
                   times[slowest].rank, times[slowest].compute, others_wait);
    }
    return 0;
}

}  // namespace

void add_merge_command(CLI::App& app) {
    auto options = std::make_shared<MergeOptions>();
    CLI::App* command = app.add_subcommand(
        "merge", "One job trace from the per-rank files of a distributed run, aligned on clock anchors.");
    command->add_option("-o,--output", options->output, "the merged trace file")->required();
    command->add_option("files", options->inputs, "per-rank trace files")->required()->check(CLI::ExistingFile);
    command->callback([options] {
        const int status = run_merge(*options);
        if (status != 0) throw CLI::RuntimeError(status);
    });
}

}  // namespace ember::cli
