// rank_summary.cpp: per-rank compute, all-reduce wait and the straggler.
#include "profiler/analysis/rank_summary.h"

#include <algorithm>
#include <charconv>
#include <unordered_map>
#include <unordered_set>

namespace ember::analysis {

namespace {

// The "ember" domain's compute category (docs/trace-schema.md lists the categories
// the trainer uses; engine/core/nvtx.h defines them).
constexpr std::uint32_t kComputeCategory = 2;

std::optional<std::int32_t> leading_rank(std::string_view text, std::string_view rest) {
    constexpr std::string_view prefix = "rank ";
    if (text.substr(0, prefix.size()) != prefix) return std::nullopt;
    text.remove_prefix(prefix.size());
    std::int32_t rank = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), rank);
    if (error != std::errc() || rank < 0) return std::nullopt;
    const std::string_view after(end, static_cast<std::size_t>(text.data() + text.size() - end));
    if (rest.empty() ? !after.empty() : after.substr(0, rest.size()) != rest) return std::nullopt;
    return rank;
}

}  // namespace

std::optional<std::int32_t> rank_of_process_name(std::string_view name) { return leading_rank(name, ""); }

std::optional<std::int32_t> rank_of_device_name(std::string_view name) { return leading_rank(name, ": "); }

RankSummary rank_summary(const store::TraceReader& reader) {
    RankSummary summary;
    const std::vector<trace::ProcessInfo>& processes = reader.processes();
    std::unordered_map<std::int64_t, std::size_t> rank_of_pid;
    for (std::size_t i = 0; i < processes.size(); ++i) {
        RankTimes times;
        times.pid = processes[i].pid;
        times.process_name = processes[i].name;
        if (std::optional<std::int32_t> named = rank_of_process_name(processes[i].name)) times.rank = *named;
        else times.rank = processes.size() == 1 ? reader.run().rank : static_cast<std::int32_t>(i);
        rank_of_pid.emplace(times.pid, summary.ranks.size());
        summary.ranks.push_back(std::move(times));
    }
    if (summary.ranks.empty()) return summary;

    std::unordered_map<trace::ThreadId, std::size_t> rank_of_thread;
    for (const trace::ThreadInfo& thread : reader.threads()) {
        auto it = rank_of_pid.find(thread.pid);
        if (it != rank_of_pid.end()) rank_of_thread.emplace(thread.thread_id, it->second);
    }
    const std::optional<trace::StringId> ember_domain = reader.find_string("ember");
    const std::optional<trace::StringId> step_name = reader.find_string("step");
    const std::optional<trace::StringId> allreduce_wait_name = reader.find_string("allreduce/wait");
    const std::optional<trace::StringId> dataloader_wait_name = reader.find_string("dataloader/wait");

    // Compute ranges already counted, or lying inside one that is: their children
    // are not counted again. Ranges stream in start order, so a parent is seen
    // before its children.
    std::unordered_set<trace::RangeId> inside_compute;
    reader.for_each_range({}, [&](const trace::RangeEvent& range) {
        auto owner = rank_of_thread.find(range.thread_id);
        if (owner == rank_of_thread.end()) return true;
        RankTimes& times = summary.ranks[owner->second];
        const trace::TimeNs length = range.end_ns - range.start_ns;
        if (step_name && range.name_id == *step_name) {
            times.steps += 1;
            times.step_ns += length;
        } else if (allreduce_wait_name && range.name_id == *allreduce_wait_name) {
            times.allreduce_wait_ns += length;
        } else if (dataloader_wait_name && range.name_id == *dataloader_wait_name) {
            times.dataloader_wait_ns += length;
        }
        const bool parent_inside = range.parent_range_id != 0 && inside_compute.count(range.parent_range_id) > 0;
        const bool is_compute = ember_domain && range.domain_id == *ember_domain && range.category == kComputeCategory;
        if (parent_inside) {
            inside_compute.insert(range.range_id);
        } else if (is_compute) {
            times.compute_ns += length;
            inside_compute.insert(range.range_id);
        }
        return true;
    });

    std::sort(summary.ranks.begin(), summary.ranks.end(),
              [](const RankTimes& a, const RankTimes& b) { return a.rank < b.rank; });
    // The straggler waits least; it is named only when the others really waited for
    // it: a unique least wait, and the others' mean wait above it by at least 1% of its
    // step time (ranks that wait alike have no straggler).
    std::size_t least_waiting = 0;
    for (std::size_t i = 1; i < summary.ranks.size(); ++i)
        if (summary.ranks[i].allreduce_wait_ns < summary.ranks[least_waiting].allreduce_wait_ns) least_waiting = i;
    if (summary.ranks.size() >= 2) {
        const RankTimes& slow = summary.ranks[least_waiting];
        bool unique = true;
        trace::TimeNs others_wait = 0;
        for (std::size_t i = 0; i < summary.ranks.size(); ++i) {
            if (i == least_waiting) continue;
            others_wait += summary.ranks[i].allreduce_wait_ns;
            if (summary.ranks[i].allreduce_wait_ns <= slow.allreduce_wait_ns) unique = false;
        }
        const double others_mean = static_cast<double>(others_wait) / static_cast<double>(summary.ranks.size() - 1);
        const double margin = 0.01 * static_cast<double>(slow.step_ns);
        if (unique && others_mean - static_cast<double>(slow.allreduce_wait_ns) >= margin) {
            summary.straggler = least_waiting;
            summary.others_wait_ns = others_wait;
        }
    }
    return summary;
}

}  // namespace ember::analysis
