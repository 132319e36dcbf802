// job_overview.cpp: see job_overview.h.
#include "viewer/model/job_overview.h"

#include "profiler/analysis/communication.h"
#include "profiler/analysis/rank_map.h"
#include "profiler/job/job.h"
#include "profiler/store/reader.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace ember::viewer {

using trace::TimeNs;

namespace {

// Runs work(i) for i in [0, count) on every core; the first exception is rethrown.
void parallel_for(std::size_t count, const std::function<void(std::size_t)>& work) {
    std::atomic<std::size_t> next{0};
    std::mutex failure_mutex;
    std::exception_ptr failure;
    auto worker = [&] {
        for (std::size_t i = next++; i < count; i = next++) {
            try {
                work(i);
            } catch (...) {
                std::lock_guard<std::mutex> lock(failure_mutex);
                if (!failure) failure = std::current_exception();
                next = count;
            }
        }
    };
    const unsigned threads = static_cast<unsigned>(
        std::min<std::size_t>(std::max(1u, std::thread::hardware_concurrency()), std::max<std::size_t>(count, 1)));
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
    worker();
    for (std::thread& thread : pool) thread.join();
    if (failure) std::rethrow_exception(failure);
}

// Shares of each bin while a row is filled (float: overlapping kernels add up).
struct BinFill {
    TimeNs begin = 0, bin = 1;
    std::vector<std::array<float, kJobActivityCount>> shares;
    void add(TimeNs start, TimeNs end, JobActivity activity) {
        start = std::max(start, begin);
        if (end <= start || shares.empty()) return;
        const auto last_bin = static_cast<TimeNs>(shares.size()) - 1;
        for (TimeNs b = std::min(last_bin, (start - begin) / bin); b <= last_bin; ++b) {
            const TimeNs bin_start = begin + b * bin, bin_end = bin_start + bin;
            if (bin_start >= end) break;
            const TimeNs overlap = std::min(end, bin_end) - std::max(start, bin_start);
            if (overlap > 0)
                shares[static_cast<std::size_t>(b)][static_cast<int>(activity)] +=
                    static_cast<float>(overlap) / static_cast<float>(bin);
        }
    }
};

}  // namespace

std::array<double, kJobActivityCount> JobOverview::activity(int row, TimeNs start, TimeNs end) const {
    std::array<double, kJobActivityCount> shares{};
    const JobRankRow& rank = ranks[static_cast<std::size_t>(row)];
    if (rank.bins.empty() || end <= start) return shares;
    const TimeNs bin = bin_ns();
    const TimeNs first = std::max<TimeNs>(0, (start - begin_ns) / bin);
    const TimeNs last = std::min<TimeNs>(static_cast<TimeNs>(rank.bins.size()) - 1, (end - 1 - begin_ns) / bin);
    double weight = 0;
    for (TimeNs b = first; b <= last; ++b) {
        const TimeNs bin_start = begin_ns + b * bin;
        const double overlap = static_cast<double>(std::min(end, bin_start + bin) - std::max(start, bin_start));
        if (overlap <= 0) continue;
        for (int a = 0; a < kJobActivityCount; ++a)
            shares[a] += overlap * rank.bins[static_cast<std::size_t>(b)][a] / 255.0;
        weight += overlap;
    }
    if (weight > 0)
        for (double& share : shares) share /= weight;
    return shares;
}

std::vector<int> JobOverview::row_order(JobOrder order) const {
    std::vector<int> rows(ranks.size());
    for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int>(i);
    auto key = [&](int row) -> TimeNs {
        const analysis::RankWaitRow* numbers = ranks[static_cast<std::size_t>(row)].numbers;
        if (!numbers) return 0;
        return order == JobOrder::lateness ? numbers->median_lateness_ns : numbers->wait_ns;
    };
    if (order != JobOrder::rank)
        std::stable_sort(rows.begin(), rows.end(), [&](int a, int b) { return key(a) > key(b); });
    return rows;
}

std::optional<std::uint32_t> JobOverview::collective_at(int row, TimeNs time, TimeNs slack) const {
    const std::vector<JobCollectiveMark>& marks = ranks[static_cast<std::size_t>(row)].collectives;
    // The latest mark that arrives by `time + slack`, then the ones before it that are
    // still running (collectives of several communicators may overlap).
    auto it = std::upper_bound(marks.begin(), marks.end(), time + slack,
                               [](TimeNs t, const JobCollectiveMark& m) { return t < m.arrival_ns; });
    std::optional<std::uint32_t> best;
    TimeNs best_distance = std::numeric_limits<TimeNs>::max();
    for (int looked = 0; it != marks.begin() && looked < 8; ++looked) {
        --it;
        const TimeNs distance = time < it->arrival_ns ? it->arrival_ns - time
                                : time > it->end_ns   ? time - it->end_ns
                                                      : 0;
        if (distance <= slack && distance < best_distance) {
            best = it->collective;
            best_distance = distance;
        }
    }
    return best;
}

std::vector<TimeNs> JobOverview::shifts_for(const std::vector<std::string>& traces) const {
    std::vector<TimeNs> shifts;
    for (const std::string& trace : traces) {
        TimeNs shift = 0;
        for (const JobRankRow& row : ranks)
            if (row.trace == trace) shift = row.offset_ns;
        shifts.push_back(shift);
    }
    return shifts;
}

std::size_t JobOverview::memory_bytes() const {
    std::size_t bytes = 0;
    for (const JobRankRow& row : ranks)
        bytes += row.bins.capacity() * sizeof(row.bins[0]) + row.collectives.capacity() * sizeof(JobCollectiveMark) +
                 row.mark_of_collective.capacity() * sizeof(std::int32_t);
    return bytes + job.collectives.capacity() * sizeof(analysis::CollectiveRow);
}

JobOverview build_job_overview(const std::vector<std::string>& traces, const std::vector<std::string>& shown_as,
                               int bin_count) {
    JobOverview overview;
    overview.job = job::analyze_job_files(traces);
    const analysis::JobCollectives& job = overview.job;
    std::map<std::pair<std::string, std::int64_t>, std::uint32_t> collective_index;
    for (std::size_t c = 0; c < job.collectives.size(); ++c)
        collective_index[{job.collectives[c].communicator, job.collectives[c].index}] = static_cast<std::uint32_t>(c);
    std::map<std::int32_t, TimeNs> offsets;
    for (const analysis::RankClock& clock : job.clocks) offsets[clock.rank] = clock.offset_ns;

    // Rows by rank; which rows each file holds.
    std::unordered_map<std::string, std::size_t> file_of;
    for (std::size_t f = 0; f < traces.size(); ++f) file_of[traces[f]] = f;
    std::vector<std::vector<std::size_t>> rows_of_file(traces.size());
    for (const analysis::RankWaitRow& numbers : job.ranks) {
        JobRankRow row;
        row.rank = numbers.rank;
        row.trace = numbers.path;
        auto file = file_of.find(numbers.path);
        row.shown_as = file != file_of.end() && file->second < shown_as.size() ? shown_as[file->second] : numbers.path;
        row.offset_ns = offsets[numbers.rank];
        row.numbers = &numbers;
        if (file != file_of.end()) rows_of_file[file->second].push_back(overview.ranks.size());
        overview.ranks.push_back(std::move(row));
    }

    // The job's span on the aligned clock, from the files' track summaries.
    std::vector<std::pair<TimeNs, TimeNs>> spans(
        traces.size(), {std::numeric_limits<TimeNs>::max(), std::numeric_limits<TimeNs>::min()});
    parallel_for(traces.size(), [&](std::size_t f) {
        if (rows_of_file[f].empty()) return;
        store::TraceReader reader(traces[f]);
        const TimeNs offset = overview.ranks[rows_of_file[f].front()].offset_ns;
        for (const store::TrackSummary& track : reader.tracks()) {
            if (track.event_count == 0) continue;
            spans[f].first = std::min(spans[f].first, track.first_start_ns + offset);
            spans[f].second = std::max(spans[f].second, track.last_end_ns + offset);
        }
    });
    overview.begin_ns = std::numeric_limits<TimeNs>::max();
    overview.end_ns = std::numeric_limits<TimeNs>::min();
    for (const auto& [first, last] : spans) {
        if (first > last) continue;
        overview.begin_ns = std::min(overview.begin_ns, first);
        overview.end_ns = std::max(overview.end_ns, last);
    }
    if (overview.begin_ns > overview.end_ns) overview.begin_ns = overview.end_ns = 0;
    overview.end_ns = std::max(overview.end_ns, overview.begin_ns + 1);
    overview.bin_count = std::max(1, bin_count);
    const TimeNs bin = overview.bin_ns();

    // Each rank's activity and collectives.
    parallel_for(traces.size(), [&](std::size_t f) {
        if (rows_of_file[f].empty()) return;
        store::TraceReader reader(traces[f]);
        const analysis::RankMap map = analysis::rank_map(reader);
        std::map<std::int32_t, std::size_t> row_of_rank;
        for (std::size_t row : rows_of_file[f]) row_of_rank[overview.ranks[row].rank] = row;
        // A file of one rank is that row whatever its own number (command-line order).
        auto row_for = [&](std::int32_t own) -> JobRankRow* {
            if (rows_of_file[f].size() == 1) return &overview.ranks[rows_of_file[f].front()];
            auto found = row_of_rank.find(own);
            return found == row_of_rank.end() ? nullptr : &overview.ranks[found->second];
        };
        std::map<JobRankRow*, BinFill> fills;
        for (std::size_t row : rows_of_file[f])
            fills[&overview.ranks[row]] = {
                overview.begin_ns, bin,
                std::vector<std::array<float, kJobActivityCount>>(static_cast<std::size_t>(overview.bin_count))};
        std::unordered_map<trace::StringId, bool> communication;
        reader.for_each_kernel({}, [&](const trace::KernelEvent& kernel) {
            auto [is, inserted] = communication.try_emplace(kernel.name_id, false);
            if (inserted) is->second = analysis::is_communication_kernel(reader.string(kernel.name_id));
            if (is->second) return true;
            JobRankRow* row = row_for(map.of_stream(kernel.stream_id));
            if (row)
                fills[row].add(kernel.start_ns + row->offset_ns, kernel.end_ns + row->offset_ns, JobActivity::compute);
            return true;
        });
        for (const analysis::RankCollectives& rank : analysis::rank_collectives(reader)) {
            JobRankRow* row = row_for(rank.rank);
            if (!row) continue;
            BinFill& fill = fills[row];
            for (const analysis::CommunicatorOps& communicator : rank.communicators) {
                for (const analysis::CollectiveOp& op : communicator.ops) {
                    auto found = collective_index.find({communicator.key, op.index});
                    if (found == collective_index.end()) continue;
                    JobCollectiveMark mark;
                    mark.collective = found->second;
                    mark.arrival_ns = op.start_ns + row->offset_ns;
                    mark.end_ns = op.end_ns + row->offset_ns;
                    const TimeNs last = job.collectives[found->second].last_arrival_ns;
                    mark.wait_end_ns =
                        std::max(mark.arrival_ns, communicator.host ? last : std::min(last, mark.end_ns));
                    mark.end_ns = std::max(mark.end_ns, mark.wait_end_ns);
                    fill.add(mark.arrival_ns, mark.wait_end_ns, JobActivity::wait);
                    fill.add(mark.wait_end_ns, mark.end_ns, JobActivity::transfer);
                    row->collectives.push_back(mark);
                }
            }
        }
        for (auto& [row, fill] : fills) {
            row->bins.resize(fill.shares.size());
            for (std::size_t b = 0; b < fill.shares.size(); ++b)
                for (int a = 0; a < kJobActivityCount; ++a)
                    row->bins[b][a] =
                        static_cast<std::uint8_t>(std::clamp(fill.shares[b][a] * 255.0f + 0.5f, 0.0f, 255.0f));
            std::sort(
                row->collectives.begin(), row->collectives.end(),
                [](const JobCollectiveMark& a, const JobCollectiveMark& b) { return a.arrival_ns < b.arrival_ns; });
            row->mark_of_collective.assign(job.collectives.size(), -1);
            for (std::size_t m = 0; m < row->collectives.size(); ++m)
                row->mark_of_collective[row->collectives[m].collective] = static_cast<std::int32_t>(m);
        }
    });
    return overview;
}

}  // namespace ember::viewer
