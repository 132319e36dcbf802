// rank_summary.cpp: per-rank compute, all-reduce wait and the straggler.
#include "profiler/analysis/rank_summary.h"

#include "common/nvtx_contract.h"
#include "profiler/analysis/communication.h"
#include "profiler/analysis/rank_map.h"
#include "profiler/analysis/steps.h"

#include <algorithm>
#include <charconv>
#include <unordered_map>
#include <unordered_set>

namespace ember::analysis {

namespace {

constexpr std::uint32_t kComputeCategory = nvtx::number(nvtx::Category::compute);

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

std::optional<std::int32_t> rank_of_process_name(std::string_view name) {
    return leading_rank(name, "");
}

std::optional<std::int32_t> rank_of_device_name(std::string_view name) {
    return leading_rank(name, ": ");
}

RankSummary rank_summary(const store::TraceReader& reader, const JobCollectives* job) {
    RankSummary summary;
    const std::vector<trace::ProcessInfo>& processes = reader.processes();
    if (processes.empty()) return summary;
    // The ranks of rank_map.h; each row names the rank's process: "rank R" in a job
    // trace, else the run's own process (the first when the file does not say).
    const RankMap ranks = rank_map(reader);
    std::unordered_map<std::int32_t, std::size_t> row_of_rank;
    for (std::int32_t rank : ranks.ranks) {
        row_of_rank.emplace(rank, summary.ranks.size());
        summary.ranks.push_back(RankTimes{.rank = rank});
    }
    for (const trace::ProcessInfo& process : processes) {
        const std::optional<std::int32_t> named = rank_of_process_name(process.name);
        const std::int32_t rank = ranks.job ? named.value_or(-1) : ranks.single_rank;
        auto row = row_of_rank.find(rank);
        if (row == row_of_rank.end()) continue;
        RankTimes& times = summary.ranks[row->second];
        const bool first = times.process_name.empty() && times.pid == 0;
        if (first || (!ranks.job && process.pid == reader.run().pid)) {
            times.pid = process.pid;
            times.process_name = process.name;
        }
    }

    const std::optional<trace::StringId> ember_domain = reader.find_string(nvtx::kDomain);
    const std::optional<trace::StringId> allreduce_wait_name = reader.find_string(nvtx::range::kAllreduceWait);
    const std::optional<trace::StringId> dataloader_wait_name = reader.find_string(nvtx::range::kDataloaderWait);
    std::unordered_map<trace::StringId, bool> step_names;  // by name: is it a step (steps.h)?
    auto is_step = [&](trace::StringId name) {
        auto [found, inserted] = step_names.try_emplace(name, false);
        if (inserted) found->second = is_step_range_name(reader.string(name));
        return found->second;
    };

    // Compute ranges already counted, or lying inside one that is: their children
    // are not counted again. Ranges stream in start order, so a parent is seen
    // before its children.
    std::unordered_set<trace::RangeId> inside_compute;
    reader.for_each_range({}, [&](const trace::RangeEvent& range) {
        auto owner = row_of_rank.find(ranks.of_thread(range.thread_id));
        if (owner == row_of_rank.end()) return true;
        RankTimes& times = summary.ranks[owner->second];
        const trace::TimeNs length = range.end_ns - range.start_ns;
        if (is_step(range.name_id)) {
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
    // A rank without ember's compute ranges (a PyTorch or Nsight trace): its compute is
    // its GPU compute, the union of its kernels that are not communication.
    {
        std::unordered_map<std::int32_t, std::size_t> row_of;
        for (std::size_t i = 0; i < summary.ranks.size(); ++i)
            if (summary.ranks[i].compute_ns == 0) row_of[summary.ranks[i].rank] = i;
        if (!row_of.empty()) {
            std::unordered_map<trace::StringId, bool> communication;
            std::unordered_map<std::int32_t, std::pair<trace::TimeNs, trace::TimeNs>> open;  // the union's last piece
            reader.for_each_kernel({}, [&](const trace::KernelEvent& kernel) {
                const std::int32_t rank = ranks.of_stream(kernel.stream_id);
                auto row = row_of.find(rank);
                if (row == row_of.end()) return true;
                auto [is, inserted] = communication.try_emplace(kernel.name_id, false);
                if (inserted) is->second = is_communication_kernel(reader.string(kernel.name_id));
                if (is->second) return true;
                RankTimes& times = summary.ranks[row->second];
                auto [piece, first] = open.try_emplace(rank, kernel.start_ns, kernel.end_ns);
                if (first) return true;
                if (kernel.start_ns <= piece->second.second) {
                    piece->second.second = std::max(piece->second.second, kernel.end_ns);
                } else {
                    times.compute_ns += piece->second.second - piece->second.first;
                    piece->second = {kernel.start_ns, kernel.end_ns};
                }
                return true;
            });
            for (const auto& [rank, piece] : open) {
                RankTimes& times = summary.ranks[row_of[rank]];
                times.compute_ns += piece.second - piece.first;
                times.compute_from_gpu = true;
            }
        }
    }
    if (job && job->matched > 0) {
        summary.from_collectives = true;
        for (std::size_t i = 0; i < summary.ranks.size(); ++i) {
            RankTimes& times = summary.ranks[i];
            if (const RankWaitRow* row = job->rank(times.rank)) {
                times.collectives = row->collectives;
                times.collective_wait_ns = row->wait_ns;
                times.arrived_last = row->arrived_last;
            }
            if (job->straggler && *job->straggler == times.rank) summary.straggler = i;
        }
        if (summary.straggler) {
            summary.others_wait_ns = job->recoverable_ns;
            summary.straggler_evidence = job->straggler_evidence;
        }
        return summary;
    }
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
