// job.cpp: see job.h.
#include "profiler/job/job.h"

#include "profiler/import/import.h"
#include "profiler/merge/merge.h"
#include "profiler/store/reader.h"
#include "profiler/store/trace_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <filesystem>
#include <thread>

namespace ember::job {

namespace {

// One file's ranks as read.
struct FileRanks {
    std::size_t position = 0;  // on the command line
    std::string trace;         // the ember trace read
    std::vector<analysis::RankCollectives> ranks;
};

// Reads this process's files, `threads` at a time.
std::vector<FileRanks> read_shard(const std::vector<std::string>& paths, const std::vector<std::size_t>& mine,
                                  const JobFilesOptions& options) {
    std::vector<FileRanks> files(mine.size());
    std::atomic<std::size_t> next{0};
    std::mutex failure_mutex;
    std::exception_ptr failure;
    auto work = [&] {
        for (std::size_t i = next++; i < mine.size(); i = next++) {
            try {
                FileRanks& file = files[i];
                file.position = mine[i];
                const std::string& path = paths[mine[i]];
                file.trace = options.ember_trace_for ? options.ember_trace_for(path) : path;
                store::TraceReader reader(file.trace);
                file.ranks = analysis::rank_collectives(reader, path);
            } catch (...) {
                std::lock_guard<std::mutex> lock(failure_mutex);
                if (!failure) failure = std::current_exception();
                next = mine.size();
            }
        }
    };
    unsigned threads = options.threads ? options.threads : std::max(1u, std::thread::hardware_concurrency());
    threads = static_cast<unsigned>(std::min<std::size_t>(threads, std::max<std::size_t>(1, mine.size())));
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
    for (std::thread& thread : pool) thread.join();
    if (failure) std::rethrow_exception(failure);
    return files;
}

// The job's rank numbers: the files' own when every rank is known and none repeats,
// else command-line order. Decided from what every process read (the same everywhere).
// Returns, per file position, own rank -> job rank.
std::map<std::size_t, std::map<std::int32_t, std::int32_t>> job_ranks(const std::vector<FileRanks>& shard,
                                                                      analysis::CollectiveExchange& exchange,
                                                                      std::string& how) {
    std::string mine;
    auto put = [&](std::int64_t value) { mine.append(reinterpret_cast<const char*>(&value), sizeof value); };
    for (const FileRanks& file : shard)
        for (const analysis::RankCollectives& rank : file.ranks) {
            put(static_cast<std::int64_t>(file.position));
            put(rank.rank);
            put(rank.rank_from.empty() ? 0 : 1);
        }
    struct Entry {
        std::int64_t position, rank, known;
    };
    std::vector<Entry> all;
    for (const std::string& part : exchange.all_gather(mine)) {
        for (std::size_t at = 0; at + 3 * sizeof(std::int64_t) <= part.size(); at += 3 * sizeof(std::int64_t)) {
            Entry entry;
            std::memcpy(&entry, part.data() + at, sizeof entry);
            all.push_back(entry);
        }
    }
    std::sort(all.begin(), all.end(), [](const Entry& a, const Entry& b) {
        return std::tie(a.position, a.rank) < std::tie(b.position, b.rank);
    });
    std::set<std::int64_t> seen;
    bool unknown = false, repeated = false;
    for (const Entry& entry : all) {
        unknown = unknown || entry.known == 0;
        repeated = repeated || !seen.insert(entry.rank).second;
    }
    std::map<std::size_t, std::map<std::int32_t, std::int32_t>> renumbering;
    if (!unknown && !repeated) return renumbering;
    how = unknown ? "command-line order (a file records no rank)" : "command-line order (files repeat a rank)";
    std::int32_t next = 0;
    for (const Entry& entry : all)
        renumbering[static_cast<std::size_t>(entry.position)][static_cast<std::int32_t>(entry.rank)] = next++;
    return renumbering;
}

}  // namespace

analysis::JobCollectives analyze_job_files(const std::vector<std::string>& paths, const JobFilesOptions& options,
                                           analysis::CollectiveExchange* exchange) {
    analysis::LocalExchange local;
    if (!exchange) exchange = &local;
    // Each rank's file once: the same file twice would be two ranks that always agree.
    {
        std::map<std::string, std::size_t> seen;
        for (std::size_t i = 0; i < paths.size(); ++i) {
            std::error_code error;
            const std::string canonical = std::filesystem::weakly_canonical(paths[i], error).string();
            auto [first, inserted] = seen.emplace(error ? paths[i] : canonical, i);
            if (!inserted)
                throw store::TraceError(
                    store::TraceErrorKind::bad_value, paths[i],
                    fmt::format("given twice (the same file as {}): give each rank's file once", paths[first->second]));
        }
    }
    std::vector<std::size_t> mine;
    for (std::size_t i = 0; i < paths.size(); ++i)
        if (static_cast<int>(i % static_cast<std::size_t>(exchange->processes())) == exchange->process())
            mine.push_back(i);
    std::vector<FileRanks> shard = read_shard(paths, mine, options);
    std::map<std::size_t, std::string> traces_read;  // position -> the ember trace read for it
    for (const FileRanks& file : shard) traces_read[file.position] = file.trace;

    std::string how;
    const auto renumbering = job_ranks(shard, *exchange, how);
    std::vector<analysis::RankCollectives> ranks;
    for (FileRanks& file : shard) {
        for (analysis::RankCollectives& rank : file.ranks) {
            auto in_file = renumbering.find(file.position);
            if (in_file != renumbering.end()) {
                rank.rank = in_file->second.at(rank.rank);
                rank.rank_from = how;
            }
            ranks.push_back(std::move(rank));
        }
        file.ranks.clear();
    }
    analysis::JobCollectives job = analysis::analyze_job(std::move(ranks), exchange);

    // What the straggler did instead: its file and the reference ranks' files, read again
    // by the first process alone (the one that prints).
    if (job.straggler && options.activity_rows > 0 && exchange->process() == 0) {
        std::set<std::int32_t> wanted(job.reference_ranks.begin(), job.reference_ranks.end());
        wanted.insert(*job.straggler);
        std::set<std::string> files;
        for (const analysis::RankWaitRow& row : job.ranks)
            if (wanted.count(row.rank)) files.insert(row.path);
        std::vector<std::unique_ptr<store::TraceReader>> readers;
        std::vector<const store::TraceReader*> pointers;
        std::vector<std::map<std::int32_t, std::int32_t>> job_rank;
        for (std::size_t i = 0; i < paths.size(); ++i) {
            if (!files.count(paths[i])) continue;
            auto read = traces_read.find(i);
            const std::string trace = read != traces_read.end() ? read->second
                                      : options.ember_trace_for ? options.ember_trace_for(paths[i])
                                                                : paths[i];
            readers.push_back(std::make_unique<store::TraceReader>(trace));
            pointers.push_back(readers.back().get());
            auto in_file = renumbering.find(i);
            job_rank.push_back(in_file != renumbering.end() ? in_file->second : std::map<std::int32_t, std::int32_t>{});
        }
        job.doing_instead = analysis::straggler_activity(pointers, job, options.activity_rows, &job_rank);
    }
    return job;
}

std::vector<merge::RankPlacement> rank_placements(const std::vector<std::string>& paths,
                                                  const analysis::JobCollectives& job) {
    std::vector<merge::RankPlacement> placements;
    for (std::size_t i = 0; i < paths.size(); ++i) {
        const analysis::RankWaitRow* row = nullptr;
        for (const analysis::RankWaitRow& candidate : job.ranks)
            if (candidate.path == paths[i]) {
                if (row)
                    throw store::TraceError(store::TraceErrorKind::bad_value, paths[i],
                                            "holds several ranks (a job file): give the rank files instead");
                row = &candidate;
            }
        merge::RankPlacement placement;
        if (row) {
            placement.rank = row->rank;
            for (const analysis::RankClock& clock : job.clocks)
                if (clock.rank == row->rank) {
                    placement.shift_ns = clock.offset_ns;
                    placement.how = clock.how;
                }
        } else {
            placement.rank = static_cast<int>(i);
            placement.how = "command-line order";
        }
        placements.push_back(placement);
    }
    return placements;
}

std::string job_trace_file(const std::vector<std::string>& paths, const std::vector<std::string>& traces,
                           const analysis::JobCollectives& job) {
    std::vector<merge::RankPlacement> placements = rank_placements(paths, job);
    std::string key = "ember job v1";
    for (std::size_t i = 0; i < paths.size(); ++i) {
        const merge::RankPlacement& placement = placements[i];
        struct stat info {};
        if (::stat(traces[i].c_str(), &info) != 0)
            throw store::TraceError(store::TraceErrorKind::not_found, traces[i], "cannot open");
        std::error_code ignored;
        key += fmt::format("|{}|{}|{}|{}|{}", std::filesystem::absolute(traces[i], ignored).string(), info.st_size,
                           static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec,
                           placement.rank, placement.shift_ns);
    }
    std::uint64_t hash = 0xcbf29ce484222325ull;
    for (char c : key) {
        hash ^= static_cast<unsigned char>(c);
        hash *= 0x100000001b3ull;
    }
    const std::filesystem::path folder = importing::user_cache_directory();
    std::error_code error;
    std::filesystem::create_directories(folder, error);
    const std::string output = (folder / fmt::format("job-{:016x}.db", hash)).string();
    if (std::filesystem::exists(output, error)) {
        try {
            store::TraceReader cached(output);
            if (cached.complete() && cached.metadata("job_inputs") == key) return output;
        } catch (const store::TraceError&) {
            // an unreadable or foreign file: written again below
        }
    }
    const std::string temporary = output + fmt::format(".{}.tmp", ::getpid());
    merge::MergeOptions options;
    options.placements = std::move(placements);
    options.metadata.emplace_back("job_inputs", key);
    try {
        merge::merge_traces(traces, temporary, options);
    } catch (...) {
        store::remove_trace_files(temporary);
        throw;
    }
    // Onto the cache's name only once complete; a stale -wal of an older job file there is
    // removed first, so it is never replayed into this one.
    store::move_trace_into_place(temporary, output, "the job file");
    return output;
}

}  // namespace ember::job
