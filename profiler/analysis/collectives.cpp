// collectives.cpp: see collectives.h. Sections: reading a rank's collectives, the bytes
// shards exchange, clocks, the per-collective summaries, waits and the straggler, and
// what the straggler was doing instead.
#include "profiler/analysis/collectives.h"

#include "common/nvtx_contract.h"
#include "profiler/analysis/range_roles.h"
#include "profiler/analysis/rank_map.h"
#include "profiler/analysis/steps.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <queue>
#include <set>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace ember::analysis {

using trace::TimeNs;

std::int64_t RankCollectives::collective_count() const {
    std::int64_t count = 0;
    for (const CommunicatorOps& communicator : communicators)
        count += static_cast<std::int64_t>(communicator.ops.size());
    return count;
}

bool RankCollectives::host_arrivals() const {
    return std::any_of(communicators.begin(), communicators.end(), [](const CommunicatorOps& c) { return c.host; });
}

const RankWaitRow* JobCollectives::rank(std::int32_t number) const {
    for (const RankWaitRow& row : ranks)
        if (row.rank == number) return &row;
    return nullptr;
}

// ---------------------------------------------------------------------------
// [SECTION] Reading one file's ranks
// ---------------------------------------------------------------------------

namespace {

// The communicators of one rank while its file is read: by local track (a StreamId or
// a ThreadId), and by process group where the trace names it.
struct RankReading {
    std::map<std::uint32_t, CommunicatorOps> streams;      // communication kernels
    std::map<std::uint32_t, CommunicatorOps> threads;      // host calls
    std::map<std::string, CommunicatorOps> stream_groups;  // kernels of a named process group
    // Host calls: each op's process group, when a range in it names one (parallel to ops).
    std::map<std::uint32_t, std::vector<const trace::CollectiveCall*>> thread_calls;
};

// The ranks a "Process Group Ranks" text names ("[0, 1, 2]"); empty when it names none.
std::vector<std::int32_t> parse_ranks(std::string_view text) {
    std::vector<std::int32_t> ranks;
    std::int64_t value = -1;
    for (char c : text) {
        if (c >= '0' && c <= '9') {
            value = (value < 0 ? 0 : value) * 10 + (c - '0');
            if (value > std::numeric_limits<std::int32_t>::max()) return {};
        } else if (value >= 0) {
            ranks.push_back(static_cast<std::int32_t>(value));
            value = -1;
        }
    }
    if (value >= 0) ranks.push_back(static_cast<std::int32_t>(value));
    return ranks;
}

// Ranks in a few characters: "0-7", "0-1016 step 8", "0-3,8-11"; a long irregular list
// as its count, first rank and a hash of the whole list (still one key per group).
std::string compact_ranks(const std::vector<std::int32_t>& ranks) {
    if (ranks.empty()) return {};
    if (ranks.size() >= 3) {
        const std::int64_t step = std::int64_t{ranks[1]} - ranks[0];
        bool progression = step > 1;
        for (std::size_t i = 2; progression && i < ranks.size(); ++i) progression = ranks[i] - ranks[i - 1] == step;
        if (progression) return fmt::format("{}-{} step {}", ranks.front(), ranks.back(), step);
    }
    std::string text;
    for (std::size_t i = 0; i < ranks.size();) {
        std::size_t j = i;
        while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
        text +=
            (text.empty() ? "" : ",") + (j > i ? fmt::format("{}-{}", ranks[i], ranks[j]) : std::to_string(ranks[i]));
        i = j + 1;
    }
    if (text.size() <= 48) return text;
    std::uint64_t hash = 0xcbf29ce484222325ull;
    for (std::int32_t rank : ranks) {
        hash ^= static_cast<std::uint32_t>(rank);
        hash *= 0x100000001b3ull;
    }
    return fmt::format("{} ranks from {} #{:08x}", ranks.size(), ranks.front(), hash & 0xffffffffu);
}

// A process group as a communicator key the same on every member, and its size; nullopt
// for a call that names no group (or a group of one: nothing to match).
struct GroupKey {
    std::string key;
    std::int32_t members = 0;
};
std::optional<GroupKey> group_key(const store::TraceReader& reader, const trace::CollectiveCall& call) {
    const std::string_view name = reader.string(call.group_name_id);
    const std::vector<std::int32_t> ranks = parse_ranks(reader.string(call.group_ranks_id));
    if (name.empty() && ranks.empty()) return std::nullopt;
    GroupKey group;
    group.members = call.group_size > 0 ? call.group_size : static_cast<std::int32_t>(ranks.size());
    if (group.members == 1) return std::nullopt;
    const std::string_view description = reader.string(call.group_desc_id);
    group.key = fmt::format("pg {}", name.empty() ? "?" : name);
    if (!description.empty()) group.key += fmt::format(" ({})", description);
    if (!ranks.empty()) group.key += " ranks " + compact_ranks(ranks);
    return group;
}

// A call's kind, where its `Collective name` says one.
std::optional<CollectiveKind> kind_of_call(const store::TraceReader& reader, const trace::CollectiveCall& call) {
    const std::string_view name = reader.string(call.name_id);
    return name.empty() ? std::nullopt : collective_kind_of_collective_name(name);
}

// Sorts a communicator's ops by start and numbers them: by the process group's sequence
// numbers (held in index while reading; -1 unknown) when every op has one and they
// rise, else by position.
void number_ops(CommunicatorOps& communicator) {
    std::vector<CollectiveOp>& ops = communicator.ops;
    std::stable_sort(ops.begin(), ops.end(),
                     [](const CollectiveOp& a, const CollectiveOp& b) { return a.start_ns < b.start_ns; });
    bool by_sequence = !ops.empty();
    for (std::size_t k = 0; by_sequence && k < ops.size(); ++k)
        by_sequence = ops[k].index >= 0 && (k == 0 || ops[k].index > ops[k - 1].index);
    if (!by_sequence)
        for (std::size_t k = 0; k < ops.size(); ++k) ops[k].index = static_cast<std::int64_t>(k);
}

TimeNs median_of(std::vector<TimeNs> values) {
    if (values.empty()) return 0;
    const std::size_t middle = values.size() / 2;
    std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(middle), values.end());
    const TimeNs upper = values[middle];
    if (values.size() % 2) return upper;
    const TimeNs lower = *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(middle));
    return lower + (upper - lower) / 2;
}

// Numbers a rank's communicators by their first collective: the keys every rank shares.
std::vector<CommunicatorOps> numbered(std::map<std::uint32_t, CommunicatorOps>&& by_track, const char* prefix) {
    std::vector<CommunicatorOps> list;
    for (auto& [track, communicator] : by_track)
        if (!communicator.ops.empty()) list.push_back(std::move(communicator));
    for (CommunicatorOps& communicator : list) {
        for (CollectiveOp& op : communicator.ops) op.index = -1;
        number_ops(communicator);
    }
    std::stable_sort(list.begin(), list.end(), [](const CommunicatorOps& a, const CommunicatorOps& b) {
        return a.ops.front().start_ns < b.ops.front().start_ns;
    });
    for (std::size_t i = 0; i < list.size(); ++i) list[i].key = fmt::format("{} #{}", prefix, i);
    return list;
}

// A rank's process-group communicators (their ops' index holds the sequence number or -1),
// numbered and added to `list`.
void add_groups(std::vector<CommunicatorOps>& list, std::map<std::string, CommunicatorOps>&& groups) {
    for (auto& [key, communicator] : groups) {
        if (communicator.ops.empty()) continue;
        number_ops(communicator);
        list.push_back(std::move(communicator));
    }
}

}  // namespace

std::vector<RankCollectives> rank_collectives(const store::TraceReader& reader, const std::string& path) {
    const RankMap ranks = rank_map(reader);
    std::map<std::int32_t, RankReading> reading;
    std::map<std::int32_t, RankCollectives> result;
    const trace::RunInfo& run = reader.run();
    for (std::int32_t rank : ranks.ranks) {
        RankCollectives& collectives = result[rank];
        collectives.path = path.empty() ? reader.path() : path;
        collectives.rank = rank;
        collectives.rank_from = ranks.job                  ? "job file"
                                : !run.rank_source.empty() ? run.rank_source
                                : run.world_size > 1       ? "run metadata"
                                                           : "";
        collectives.clock_offset_to_wall_ns = run.clock_offset_to_wall_ns;
        collectives.world_size = ranks.job ? static_cast<std::int32_t>(ranks.ranks.size()) : run.world_size;
        // A recorder that knew the wall clock gave an offset; Kineto without
        // baseTimeNanoseconds stamps Unix time itself.
        collectives.wall_clock_known =
            run.clock_offset_to_wall_ns != 0 || run.clock_name.find("Unix epoch") != std::string::npos;
        collectives.first_ns = std::numeric_limits<TimeNs>::max();
        collectives.last_ns = std::numeric_limits<TimeNs>::min();
    }
    auto widen = [&](std::int32_t rank, TimeNs start, TimeNs end) {
        auto found = result.find(rank);
        if (found == result.end()) return;
        found->second.first_ns = std::min(found->second.first_ns, start);
        found->second.last_ns = std::max(found->second.last_ns, end);
    };

    // Kineto's collective metadata, by the kernel or range it describes.
    const std::vector<trace::CollectiveCall> calls = reader.collective_calls();
    std::map<std::tuple<bool, std::uint32_t, TimeNs>, const trace::CollectiveCall*> call_of;
    for (const trace::CollectiveCall& call : calls)
        call_of.emplace(std::tuple(call.on_stream, call.track_id, call.start_ns), &call);
    auto find_call = [&](bool on_stream, std::uint32_t track, TimeNs start) -> const trace::CollectiveCall* {
        if (call_of.empty()) return nullptr;
        auto found = call_of.find(std::tuple(on_stream, track, start));
        return found == call_of.end() ? nullptr : found->second;
    };

    // Communication kernels, by process group where named, else by stream.
    std::unordered_map<trace::StringId, std::optional<CollectiveKind>> kernel_kinds;
    reader.for_each_kernel({}, [&](const trace::KernelEvent& kernel) {
        const std::int32_t rank = ranks.of_stream(kernel.stream_id);
        widen(rank, kernel.start_ns, kernel.end_ns);
        auto [kind, inserted] = kernel_kinds.try_emplace(kernel.name_id);
        if (inserted) {
            const std::string_view name = reader.string(kernel.name_id);
            if (is_communication_kernel(name)) kind->second = collective_kind_of_kernel(name);
        }
        if (!kind->second) return true;
        CollectiveOp op{kernel.start_ns, kernel.end_ns, *kind->second, -1};
        const trace::CollectiveCall* call = find_call(true, kernel.stream_id, kernel.start_ns);
        std::optional<GroupKey> group = call ? group_key(reader, *call) : std::nullopt;
        if (call) {
            if (std::optional<CollectiveKind> named = kind_of_call(reader, *call)) op.kind = *named;
            op.index = call->sequence;
        }
        RankReading& tracks = reading[rank];
        CommunicatorOps& communicator = group ? tracks.stream_groups[group->key] : tracks.streams[kernel.stream_id];
        if (communicator.where.empty()) {
            const trace::StreamInfo* stream = reader.stream(kernel.stream_id);
            communicator.where = stream ? fmt::format("device {} stream {}", stream->device_id, stream->cuda_stream_id)
                                        : fmt::format("stream {}", kernel.stream_id);
            if (group) {
                communicator.key = group->key;
                communicator.members = group->members;
            }
        }
        communicator.ops.push_back(op);
        return true;
    });

    // Host calls that issue collectives: the outermost on each thread (c10d::allreduce_
    // holds nccl:all_reduce, which holds record_param_comms: one collective). A range
    // inside it that carries the collective metadata names its process group.
    std::unordered_map<trace::StringId, std::optional<CollectiveKind>> operation_kinds;
    std::unordered_map<trace::RangeId, std::size_t> inside_collective;  // range -> its outermost op on the thread
    reader.for_each_range({}, [&](const trace::RangeEvent& range) {
        const std::int32_t rank = ranks.of_thread(range.thread_id);
        widen(rank, range.start_ns, range.end_ns);
        const trace::CollectiveCall* call = find_call(false, range.thread_id, range.start_ns);
        if (range.parent_range_id != 0) {
            auto outer = inside_collective.find(range.parent_range_id);
            if (outer != inside_collective.end()) {
                inside_collective.emplace(range.range_id, outer->second);
                std::vector<const trace::CollectiveCall*>& named = reading[rank].thread_calls[range.thread_id];
                if (call && !named[outer->second]) named[outer->second] = call;
                return true;
            }
        }
        auto [kind, inserted] = operation_kinds.try_emplace(range.name_id);
        if (inserted) kind->second = collective_kind_of_operation(reader.string(range.name_id));
        if (!kind->second) return true;
        RankReading& tracks = reading[rank];
        CommunicatorOps& communicator = tracks.threads[range.thread_id];
        if (communicator.where.empty()) {
            const trace::ThreadInfo* thread = reader.thread(range.thread_id);
            communicator.where = thread ? fmt::format("thread {} ({})", thread->tid, thread->name)
                                        : fmt::format("thread {}", range.thread_id);
            communicator.host = true;
        }
        inside_collective.emplace(range.range_id, communicator.ops.size());
        communicator.ops.push_back({range.start_ns, range.end_ns, *kind->second, -1});
        tracks.thread_calls[range.thread_id].push_back(call);
        return true;
    });

    // Clock anchors and steps.
    if (std::optional<trace::StringId> anchor = reader.find_string(nvtx::range::kClockAnchor)) {
        reader.for_each_mark({}, [&](const trace::MarkEvent& mark) {
            if (mark.name_id != *anchor) return true;
            auto found = result.find(ranks.of_thread(mark.thread_id));
            if (found != result.end())
                found->second.anchors.emplace(std::llround(mark.payload.as_double()), mark.time_ns);
            return true;
        });
    }
    for (const auto& [rank, steps] : step_ranges(reader, ranks)) {
        auto found = result.find(rank);
        if (found == result.end()) continue;
        for (const StepRange& step : steps) {
            found->second.steps += 1;
            found->second.step_ns += step.end_ns - step.start_ns;
            found->second.step_windows.emplace_back(step.start_ns, step.end_ns);
        }
    }

    std::vector<RankCollectives> list;
    for (auto& [rank, collectives] : result) {
        RankReading& tracks = reading[rank];
        // A rank with communication kernels is read from them; its host calls only
        // enqueued those kernels.
        if (!tracks.streams.empty() || !tracks.stream_groups.empty()) {
            collectives.communicators = numbered(std::move(tracks.streams), "stream");
            add_groups(collectives.communicators, std::move(tracks.stream_groups));
        } else {
            // Host calls whose metadata names their process group go to the group.
            std::map<std::string, CommunicatorOps> groups;
            for (auto& [thread, communicator] : tracks.threads) {
                const std::vector<const trace::CollectiveCall*>& named = tracks.thread_calls[thread];
                std::vector<CollectiveOp> unnamed;
                for (std::size_t k = 0; k < communicator.ops.size(); ++k) {
                    CollectiveOp op = communicator.ops[k];
                    std::optional<GroupKey> group = named[k] ? group_key(reader, *named[k]) : std::nullopt;
                    if (named[k]) {
                        if (std::optional<CollectiveKind> kind = kind_of_call(reader, *named[k])) op.kind = *kind;
                        op.index = named[k]->sequence;
                    }
                    if (!group) {
                        unnamed.push_back(op);
                        continue;
                    }
                    CommunicatorOps& grouped = groups[group->key];
                    if (grouped.where.empty()) {
                        grouped.key = group->key;
                        grouped.members = group->members;
                        grouped.where = communicator.where;
                        grouped.host = true;
                    }
                    grouped.ops.push_back(op);
                }
                communicator.ops = std::move(unnamed);
            }
            collectives.communicators = numbered(std::move(tracks.threads), "host");
            add_groups(collectives.communicators, std::move(groups));
        }
        if (collectives.first_ns > collectives.last_ns) collectives.first_ns = collectives.last_ns = 0;
        list.push_back(std::move(collectives));
    }
    return list;
}

// ---------------------------------------------------------------------------
// [SECTION] Bytes between shards
// ---------------------------------------------------------------------------

namespace {

class Bytes {
  public:
    void put(std::int64_t value) { data_.append(reinterpret_cast<const char*>(&value), sizeof value); }
    void put(double value) { data_.append(reinterpret_cast<const char*>(&value), sizeof value); }
    void put(const std::string& text) {
        put(static_cast<std::int64_t>(text.size()));
        data_.append(text);
    }
    std::string take() { return std::move(data_); }

  private:
    std::string data_;
};

class BytesReader {
  public:
    explicit BytesReader(const std::string& data) : data_(data) {}
    std::int64_t int64() { return read<std::int64_t>(); }
    double real() { return read<double>(); }
    std::string text() {
        const auto size = static_cast<std::size_t>(int64());
        need(size);
        std::string value = data_.substr(at_, size);
        at_ += size;
        return value;
    }
    bool done() const { return at_ == data_.size(); }

  private:
    template <typename T>
    T read() {
        need(sizeof(T));
        T value;
        std::memcpy(&value, data_.data() + at_, sizeof(T));
        at_ += sizeof(T);
        return value;
    }
    void need(std::size_t size) const {
        if (at_ + size > data_.size()) throw std::runtime_error("job analysis: a shard sent a truncated summary");
    }
    const std::string& data_;
    std::size_t at_ = 0;
};

// ---------------------------------------------------------------------------
// [SECTION] The reference members and the clocks
// ---------------------------------------------------------------------------

// What every shard needs of the others before it can align its ranks: the job's lowest
// rank (the clock every rank is put on: its anchors and wall-clock offset), and per
// communicator its reference member (its lowest rank) with that member's collectives,
// its size and the lowest collective number any member has.
struct Reference {
    std::int32_t rank = std::numeric_limits<std::int32_t>::max();
    std::int64_t clock_offset_to_wall_ns = 0;
    std::map<std::int64_t, TimeNs> anchors;
    struct Op {
        std::int64_t index = 0;
        TimeNs end = 0;
        std::int64_t kind = 0;
    };
    struct Communicator {
        std::int32_t member = std::numeric_limits<std::int32_t>::max();  // its reference member
        bool host = false;
        std::int32_t members = 0;  // 0: every rank
        std::int64_t first_index = std::numeric_limits<std::int64_t>::max();
        std::vector<Op> ops;  // the reference member's, by index

        const Op* find(std::int64_t index) const {
            auto found = std::lower_bound(ops.begin(), ops.end(), index,
                                          [](const Op& op, std::int64_t wanted) { return op.index < wanted; });
            return found != ops.end() && found->index == index ? &*found : nullptr;
        }
    };
    std::map<std::string, Communicator> communicators;
};

std::string encode_reference(const std::vector<RankCollectives>& shard) {
    Bytes bytes;
    if (shard.empty()) {
        bytes.put(std::int64_t{-1});
        bytes.put(std::int64_t{0});
        return bytes.take();
    }
    const RankCollectives& lowest = *std::min_element(
        shard.begin(), shard.end(), [](const RankCollectives& a, const RankCollectives& b) { return a.rank < b.rank; });
    bytes.put(std::int64_t{lowest.rank});
    bytes.put(lowest.clock_offset_to_wall_ns);
    bytes.put(static_cast<std::int64_t>(lowest.anchors.size()));
    for (const auto& [sequence, time] : lowest.anchors) {
        bytes.put(sequence);
        bytes.put(time);
    }
    // Each communicator's lowest member in this shard, and its lowest number here.
    struct Held {
        const RankCollectives* rank = nullptr;
        const CommunicatorOps* ops = nullptr;
        std::int64_t first_index = std::numeric_limits<std::int64_t>::max();
        std::int32_t members = 0;
    };
    std::map<std::string, Held> held;
    for (const RankCollectives& rank : shard) {
        for (const CommunicatorOps& communicator : rank.communicators) {
            Held& entry = held[communicator.key];
            if (!entry.rank || rank.rank < entry.rank->rank) {
                entry.rank = &rank;
                entry.ops = &communicator;
            }
            if (!communicator.ops.empty())
                entry.first_index = std::min(entry.first_index, communicator.ops.front().index);
            entry.members = std::max(entry.members, communicator.members);
        }
    }
    bytes.put(static_cast<std::int64_t>(held.size()));
    for (const auto& [key, entry] : held) {
        bytes.put(key);
        bytes.put(std::int64_t{entry.rank->rank});
        bytes.put(std::int64_t{entry.ops->host});
        bytes.put(std::int64_t{entry.members});
        bytes.put(entry.first_index);
        bytes.put(static_cast<std::int64_t>(entry.ops->ops.size()));
        for (const CollectiveOp& op : entry.ops->ops) {
            bytes.put(op.index);
            bytes.put(op.end_ns);
            bytes.put(static_cast<std::int64_t>(op.kind));
        }
    }
    return bytes.take();
}

Reference decode_reference(const std::vector<std::string>& parts) {
    Reference reference;
    for (const std::string& part : parts) {
        BytesReader in(part);
        const std::int64_t rank = in.int64();
        const std::int64_t offset = in.int64();
        std::map<std::int64_t, TimeNs> anchors;
        if (rank >= 0)
            for (std::int64_t n = in.int64(); n > 0; --n) {
                const std::int64_t sequence = in.int64();
                anchors[sequence] = in.int64();
            }
        if (rank >= 0 && rank < reference.rank) {
            reference.rank = static_cast<std::int32_t>(rank);
            reference.clock_offset_to_wall_ns = offset;
            reference.anchors = std::move(anchors);
        }
        if (rank < 0) continue;
        for (std::int64_t n = in.int64(); n > 0; --n) {
            const std::string key = in.text();
            Reference::Communicator& communicator = reference.communicators[key];
            const auto member = static_cast<std::int32_t>(in.int64());
            const bool host = in.int64() != 0;
            communicator.members = std::max(communicator.members, static_cast<std::int32_t>(in.int64()));
            communicator.first_index = std::min(communicator.first_index, in.int64());
            const bool lower = member < communicator.member;
            if (lower) {
                communicator.member = member;
                communicator.host = host;
                communicator.ops.clear();
            }
            for (std::int64_t ops = in.int64(); ops > 0; --ops) {
                Reference::Op op;
                op.index = in.int64();
                op.end = in.int64();
                op.kind = in.int64();
                if (lower) communicator.ops.push_back(op);
            }
            if (lower)
                std::sort(communicator.ops.begin(), communicator.ops.end(),
                          [](const Reference::Op& a, const Reference::Op& b) { return a.index < b.index; });
        }
    }
    return reference;
}

// Which of a rank's collectives are matched: the same kind as its communicator's
// reference member's collective of the same number (or either kind unknown). Returns
// one flag per op, per communicator.
std::vector<std::vector<char>> matched_flags(const RankCollectives& rank, const Reference& reference,
                                             std::int64_t& kind_mismatches) {
    std::vector<std::vector<char>> flags;
    for (const CommunicatorOps& communicator : rank.communicators) {
        std::vector<char>& flag = flags.emplace_back(communicator.ops.size(), 1);
        auto found = reference.communicators.find(communicator.key);
        if (found == reference.communicators.end()) continue;
        for (std::size_t k = 0; k < communicator.ops.size(); ++k) {
            const Reference::Op* theirs = found->second.find(communicator.ops[k].index);
            if (!theirs) continue;
            const auto their_kind = static_cast<CollectiveKind>(theirs->kind);
            const CollectiveKind mine = communicator.ops[k].kind;
            if (mine != CollectiveKind::unknown && their_kind != CollectiveKind::unknown && mine != their_kind) {
                flag[k] = 0;
                ++kind_mismatches;
            }
        }
    }
    return flags;
}

// A rank's clock against the reference member of each communicator it shares (kernels
// only: host calls do not end together), pooled per member: the median of (member's
// end - rank's end) over the collectives both ran.
struct ClockEdge {
    std::int32_t rank = 0, member = 0;
    TimeNs offset_ns = 0;  // rank's time + offset = member's time
    std::int64_t collectives = 0;
};

std::vector<ClockEdge> clock_edges(const RankCollectives& rank, const Reference& reference,
                                   const std::vector<std::vector<char>>& flags) {
    std::map<std::int32_t, std::vector<TimeNs>> differences;
    for (std::size_t c = 0; c < rank.communicators.size(); ++c) {
        const CommunicatorOps& communicator = rank.communicators[c];
        auto found = reference.communicators.find(communicator.key);
        if (communicator.host || found == reference.communicators.end() || found->second.host ||
            found->second.member == rank.rank)
            continue;
        for (std::size_t k = 0; k < communicator.ops.size(); ++k) {
            if (!flags[c][k]) continue;
            if (const Reference::Op* theirs = found->second.find(communicator.ops[k].index))
                differences[found->second.member].push_back(theirs->end - communicator.ops[k].end_ns);
        }
    }
    std::vector<ClockEdge> edges;
    for (auto& [member, values] : differences)
        edges.push_back({rank.rank, member, median_of(values), static_cast<std::int64_t>(values.size())});
    return edges;
}

// Without a shared communicator: the clock anchors both recorded, else the wall clock.
RankClock fallback_clock(const RankCollectives& rank, const Reference& reference) {
    RankClock clock{rank.rank, 0, "reference", 0};
    if (rank.rank == reference.rank) return clock;
    for (const auto& [sequence, time] : rank.anchors) {
        auto found = reference.anchors.find(sequence);
        if (found == reference.anchors.end()) continue;
        clock.offset_ns = found->second - time;
        clock.how = fmt::format("clock anchor {}", sequence);
        return clock;
    }
    clock.offset_ns = rank.clock_offset_to_wall_ns - reference.clock_offset_to_wall_ns;
    clock.how = "wall clock";
    return clock;
}

std::string encode_clocks(const std::vector<RankClock>& fallbacks, const std::vector<ClockEdge>& edges) {
    Bytes bytes;
    bytes.put(static_cast<std::int64_t>(fallbacks.size()));
    for (const RankClock& clock : fallbacks) {
        bytes.put(std::int64_t{clock.rank});
        bytes.put(clock.offset_ns);
        bytes.put(clock.how);
    }
    bytes.put(static_cast<std::int64_t>(edges.size()));
    for (const ClockEdge& edge : edges)
        for (std::int64_t value :
             {std::int64_t{edge.rank}, std::int64_t{edge.member}, edge.offset_ns, edge.collectives})
            bytes.put(value);
    return bytes.take();
}

// Every rank's clock, the same on every process: from the job's lowest rank outwards,
// each rank joins through the edge of the most collectives to a rank already aligned;
// a rank no chain reaches (and then its own group) starts from its fallback.
std::map<std::int32_t, RankClock> resolve_clocks(const std::vector<std::string>& parts, std::int32_t root) {
    std::map<std::int32_t, RankClock> fallback;
    std::vector<ClockEdge> edges;
    for (const std::string& part : parts) {
        BytesReader in(part);
        for (std::int64_t n = in.int64(); n > 0; --n) {
            RankClock clock;
            clock.rank = static_cast<std::int32_t>(in.int64());
            clock.offset_ns = in.int64();
            clock.how = in.text();
            fallback[clock.rank] = clock;
        }
        for (std::int64_t n = in.int64(); n > 0; --n) {
            ClockEdge edge;
            edge.rank = static_cast<std::int32_t>(in.int64());
            edge.member = static_cast<std::int32_t>(in.int64());
            edge.offset_ns = in.int64();
            edge.collectives = in.int64();
            edges.push_back(edge);
        }
    }
    std::map<std::int32_t, std::vector<const ClockEdge*>> touching;
    for (const ClockEdge& edge : edges) {
        touching[edge.rank].push_back(&edge);
        touching[edge.member].push_back(&edge);
    }
    std::map<std::int32_t, RankClock> clocks;
    // Candidates: (collectives, -rank, edge); the most collectives first, then the lowest rank.
    using Candidate = std::tuple<std::int64_t, std::int32_t, const ClockEdge*>;
    std::priority_queue<Candidate> frontier;
    auto join = [&](const RankClock& clock) {
        clocks[clock.rank] = clock;
        for (const ClockEdge* edge : touching[clock.rank]) {
            const std::int32_t other = edge->rank == clock.rank ? edge->member : edge->rank;
            if (!clocks.count(other)) frontier.emplace(edge->collectives, -other, edge);
        }
        while (!frontier.empty()) {
            auto [collectives, negative_rank, edge] = frontier.top();
            frontier.pop();
            const std::int32_t next = -negative_rank;
            if (clocks.count(next)) continue;
            const bool forward = edge->rank == next;  // next's time + offset = member's time
            const std::int32_t through = forward ? edge->member : edge->rank;
            const RankClock& known = clocks[through];
            RankClock clock;
            clock.rank = next;
            clock.offset_ns = forward ? known.offset_ns + edge->offset_ns : known.offset_ns - edge->offset_ns;
            clock.collectives_used = collectives;
            clock.how = through == root || known.how == "reference"
                            ? fmt::format("ends of {} collective{}", collectives, collectives == 1 ? "" : "s")
                            : fmt::format("ends of {} collective{} with rank {}", collectives,
                                          collectives == 1 ? "" : "s", through);
            clocks[next] = clock;
            for (const ClockEdge* further : touching[next]) {
                const std::int32_t other = further->rank == next ? further->member : further->rank;
                if (!clocks.count(other)) frontier.emplace(further->collectives, -other, further);
            }
        }
    };
    if (fallback.count(root)) join(fallback[root]);
    for (const auto& [rank, clock] : fallback)
        if (!clocks.count(rank)) join(clock);
    return clocks;
}

// ---------------------------------------------------------------------------
// [SECTION] Per-collective summaries
// ---------------------------------------------------------------------------

// One collective over the ranks of a shard, then of the job.
struct Summary {
    std::int64_t ranks = 0;
    TimeNs first_arrival = std::numeric_limits<TimeNs>::max();
    TimeNs last_arrival = std::numeric_limits<TimeNs>::min();
    std::int64_t last_rank = -1;
    TimeNs runner_up = std::numeric_limits<TimeNs>::min();  // the latest arrival but the last one
    TimeNs first_end = std::numeric_limits<TimeNs>::max();
    TimeNs last_end = std::numeric_limits<TimeNs>::min();
    TimeNs longest = 0;
    std::int64_t kind = 0;
    std::int64_t host = 0;
    TimeNs total_wait = 0;  // filled once the last arrival is known

    void add(TimeNs arrival, TimeNs end, std::int32_t rank, CollectiveKind op_kind, bool host_call) {
        Summary one;
        one.ranks = 1;
        one.first_arrival = one.last_arrival = arrival;
        one.last_rank = rank;
        one.first_end = one.last_end = end;
        one.longest = end - arrival;
        one.kind = static_cast<std::int64_t>(op_kind);
        one.host = host_call;
        merge(one);
    }
    void merge(const Summary& other) {
        if (other.ranks == 0) return;
        if (ranks == 0 || (kind == 0 && other.kind != 0)) kind = other.kind;
        ranks += other.ranks;
        first_arrival = std::min(first_arrival, other.first_arrival);
        if (other.last_arrival > last_arrival) {
            runner_up = std::max(last_arrival, other.runner_up);
            last_arrival = other.last_arrival;
            last_rank = other.last_rank;
        } else {
            runner_up = std::max(runner_up, other.last_arrival);
        }
        first_end = std::min(first_end, other.first_end);
        last_end = std::max(last_end, other.last_end);
        longest = std::max(longest, other.longest);
        host = host || other.host;
        total_wait += other.total_wait;
    }
    void put(Bytes& bytes) const {
        for (std::int64_t value : {ranks, first_arrival, last_arrival, last_rank, runner_up, first_end, last_end,
                                   longest, kind, host, total_wait})
            bytes.put(value);
    }
    static Summary get(BytesReader& in) {
        Summary s;
        for (std::int64_t* field : {&s.ranks, &s.first_arrival, &s.last_arrival, &s.last_rank, &s.runner_up,
                                    &s.first_end, &s.last_end, &s.longest, &s.kind, &s.host, &s.total_wait})
            *field = in.int64();
        return s;
    }
};

using Summaries = std::map<std::string, std::vector<Summary>>;  // by communicator key, then k

std::string encode_summaries(const Summaries& summaries) {
    Bytes bytes;
    bytes.put(static_cast<std::int64_t>(summaries.size()));
    for (const auto& [key, list] : summaries) {
        bytes.put(key);
        bytes.put(static_cast<std::int64_t>(list.size()));
        for (const Summary& summary : list) summary.put(bytes);
    }
    return bytes.take();
}

Summaries merge_summaries(const std::vector<std::string>& parts) {
    Summaries merged;
    for (const std::string& part : parts) {
        BytesReader in(part);
        for (std::int64_t n = in.int64(); n > 0; --n) {
            std::vector<Summary>& list = merged[in.text()];
            const auto count = static_cast<std::size_t>(in.int64());
            if (list.size() < count) list.resize(count);
            for (std::size_t k = 0; k < count; ++k) list[k].merge(Summary::get(in));
        }
    }
    return merged;
}

// ---------------------------------------------------------------------------
// [SECTION] Rows of a shard, sent whole
// ---------------------------------------------------------------------------

void put_row(Bytes& bytes, const RankWaitRow& row, const RankClock& clock) {
    bytes.put(std::int64_t{row.rank});
    bytes.put(row.path);
    bytes.put(row.rank_from);
    for (std::int64_t value :
         {row.collectives, row.wait_ns, row.transfer_ns, row.steps, row.step_ns, row.arrived_last,
          row.median_lateness_ns, std::int64_t{row.host_arrivals}, std::int64_t{row.world_size}, row.wall_start_ns})
        bytes.put(value);
    bytes.put(row.wait_percent);
    bytes.put(static_cast<std::int64_t>(row.step_waits.size()));
    for (TimeNs wait : row.step_waits) bytes.put(wait);
    bytes.put(clock.offset_ns);
    bytes.put(clock.how);
    bytes.put(clock.collectives_used);
}

std::pair<RankWaitRow, RankClock> get_row(BytesReader& in) {
    RankWaitRow row;
    row.rank = static_cast<std::int32_t>(in.int64());
    row.path = in.text();
    row.rank_from = in.text();
    std::int64_t host = 0, world = 0;
    for (std::int64_t* field : {&row.collectives, &row.wait_ns, &row.transfer_ns, &row.steps, &row.step_ns,
                                &row.arrived_last, &row.median_lateness_ns, &host, &world, &row.wall_start_ns})
        *field = in.int64();
    row.host_arrivals = host != 0;
    row.world_size = static_cast<std::int32_t>(world);
    row.wait_percent = in.real();
    for (std::int64_t n = in.int64(); n > 0; --n) row.step_waits.push_back(in.int64());
    RankClock clock;
    clock.rank = row.rank;
    clock.offset_ns = in.int64();
    clock.how = in.text();
    clock.collectives_used = in.int64();
    return {row, clock};
}

// ---------------------------------------------------------------------------
// [SECTION] The straggler
// ---------------------------------------------------------------------------

// A last rank that had waited at its previous collective: `inherited_ns` of its margin
// over the next-latest rank came from that wait.
struct Inheritance {
    std::string key;
    std::int64_t index = 0;
    std::string previous_key;
    std::int64_t previous_index = 0;
    TimeNs inherited_ns = 0;
};

// What each rank's lateness cost the others (RankWaitRow::held_back_ns): each collective's
// held-back time goes to its last rank, except the part of the last rank's margin it
// inherited by waiting at its previous collective, which goes (in the same shares) to
// whoever held that one back. A tensor-parallel partner made late by the straggler is
// not blamed for the data-parallel ranks that then wait for it.
void attribute_held_back(JobCollectives& job, const std::vector<Inheritance>& inheritances) {
    std::map<std::pair<std::string, std::int64_t>, const Inheritance*> inherited_at;
    for (const Inheritance& inheritance : inheritances)
        inherited_at[{inheritance.key, inheritance.index}] = &inheritance;
    std::vector<const CollectiveRow*> by_last;
    for (const CollectiveRow& row : job.collectives)
        if (row.last_rank >= 0) by_last.push_back(&row);
    std::stable_sort(by_last.begin(), by_last.end(), [](const CollectiveRow* a, const CollectiveRow* b) {
        return a->last_arrival_ns < b->last_arrival_ns;
    });
    // Each collective's shares of blame by rank (at most 8 ranks kept: the largest).
    std::map<std::pair<std::string, std::int64_t>, std::vector<std::pair<std::int32_t, double>>> shares;
    std::map<std::int32_t, double> caused;
    for (const CollectiveRow* row : by_last) {
        const TimeNs margin = row->last_arrival_ns - row->runner_up_arrival_ns;
        std::map<std::int32_t, double> share;
        double inherited = 0.0;
        auto found = inherited_at.find({row->communicator, row->index});
        if (found != inherited_at.end() && margin > 0) {
            auto previous = shares.find({found->second->previous_key, found->second->previous_index});
            if (previous != shares.end()) {
                inherited =
                    static_cast<double>(std::min(found->second->inherited_ns, margin)) / static_cast<double>(margin);
                for (const auto& [rank, fraction] : previous->second) share[rank] += inherited * fraction;
            }
        }
        share[row->last_rank] += 1.0 - inherited;
        std::vector<std::pair<std::int32_t, double>> list(share.begin(), share.end());
        std::stable_sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
        if (list.size() > 8) list.resize(8);
        for (const auto& [rank, fraction] : list) caused[rank] += fraction * static_cast<double>(row->held_back_ns);
        shares[{row->communicator, row->index}] = std::move(list);
    }
    for (RankWaitRow& rank : job.ranks) rank.held_back_ns = std::llround(caused[rank.rank]);
}

void name_straggler(JobCollectives& job, std::int64_t collectives_with_a_last) {
    if (job.ranks.size() < 2) return;
    // What each rank's lateness cost (attribute_held_back), and the waits at the
    // collectives it arrived last to.
    std::map<std::int32_t, TimeNs> caused, waits_at;
    for (const RankWaitRow& row : job.ranks) caused[row.rank] = row.held_back_ns;
    for (const CollectiveRow& row : job.collectives)
        if (row.last_rank >= 0) waits_at[row.last_rank] += row.total_wait_ns;
    std::vector<const RankWaitRow*> by_last;
    for (const RankWaitRow& row : job.ranks) by_last.push_back(&row);
    std::stable_sort(by_last.begin(), by_last.end(), [&](const RankWaitRow* a, const RankWaitRow* b) {
        return std::make_pair(a->arrived_last, caused[a->rank]) > std::make_pair(b->arrived_last, caused[b->rank]);
    });
    const RankWaitRow& top = *by_last[0];
    const std::int64_t second = by_last[1]->arrived_last;
    const TimeNs recoverable = caused[top.rank];
    TimeNs others_caused = 0;
    for (const auto& [rank, cost] : caused)
        if (rank != top.rank) others_caused = std::max(others_caused, cost);
    // It stands out when it was last clearly more often than any other rank and its
    // lateness cost the others clearly more than any other rank's did.
    const bool stands_out = top.arrived_last >= 3 &&
                            static_cast<double>(top.arrived_last) >= 1.5 * static_cast<double>(second) &&
                            recoverable > 0 && recoverable >= 2 * others_caused;
    if (!stands_out) return;
    job.straggler = top.rank;
    job.recoverable_ns = recoverable;
    job.straggler_waits_ns = waits_at[top.rank];
    const double share = collectives_with_a_last > 0 ? 100.0 * static_cast<double>(top.arrived_last) /
                                                           static_cast<double>(collectives_with_a_last)
                                                     : 0.0;
    job.straggler_evidence = fmt::format(
        "rank {} arrived last at {} of the {} collectives that had a clear last rank ({:.0f}%; the next rank {} "
        "times), {:.3f} ms after the first rank at the median; the other ranks waited {:.3f} ms at those "
        "collectives, and rank {}'s lateness held them back {:.3f} ms (what they would not have waited had it "
        "arrived with the next-latest rank, counting ranks that were late only because they waited for it){}",
        top.rank, top.arrived_last, collectives_with_a_last, share, second, top.median_lateness_ns / 1e6,
        job.straggler_waits_ns / 1e6, top.rank, recoverable / 1e6,
        others_caused > 0 ? fmt::format(", {:.0f} times what any other rank's lateness cost them",
                                        static_cast<double>(recoverable) / static_cast<double>(others_caused))
                          : std::string("; no other rank's lateness cost them anything"));
}

// The ranks the straggler is compared with: up to four whose median lateness is nearest
// the median rank's.
std::vector<std::int32_t> typical_ranks(const JobCollectives& job) {
    std::vector<const RankWaitRow*> others;
    std::vector<TimeNs> lateness;
    for (const RankWaitRow& row : job.ranks) {
        if (job.straggler && row.rank == *job.straggler) continue;
        others.push_back(&row);
        lateness.push_back(row.median_lateness_ns);
    }
    const TimeNs middle = median_of(lateness);
    std::stable_sort(others.begin(), others.end(), [&](const RankWaitRow* a, const RankWaitRow* b) {
        return std::llabs(a->median_lateness_ns - middle) < std::llabs(b->median_lateness_ns - middle);
    });
    std::vector<std::int32_t> chosen;
    for (std::size_t i = 0; i < others.size() && i < 4; ++i) chosen.push_back(others[i]->rank);
    std::sort(chosen.begin(), chosen.end());
    return chosen;
}

}  // namespace

// ---------------------------------------------------------------------------
// [SECTION] The job
// ---------------------------------------------------------------------------

JobCollectives analyze_job(std::vector<RankCollectives> shard, CollectiveExchange* exchange) {
    LocalExchange local;
    if (!exchange) exchange = &local;
    std::sort(shard.begin(), shard.end(),
              [](const RankCollectives& a, const RankCollectives& b) { return a.rank < b.rank; });

    // 1. The reference members, from whichever shards hold them; which of each rank's
    //    collectives match their kinds; each rank's clock, through the communicators it
    //    shares.
    const Reference reference = decode_reference(exchange->all_gather(encode_reference(shard)));
    std::vector<std::vector<std::vector<char>>> flags;
    std::int64_t kind_mismatches = 0;
    std::vector<RankClock> fallbacks;
    std::vector<ClockEdge> edges;
    for (const RankCollectives& rank : shard) {
        flags.push_back(matched_flags(rank, reference, kind_mismatches));
        fallbacks.push_back(fallback_clock(rank, reference));
        for (const ClockEdge& edge : clock_edges(rank, reference, flags.back())) edges.push_back(edge);
    }
    const std::map<std::int32_t, RankClock> all_clocks =
        resolve_clocks(exchange->all_gather(encode_clocks(fallbacks, edges)), reference.rank);
    std::vector<RankClock> clocks;
    for (const RankCollectives& rank : shard) clocks.push_back(all_clocks.at(rank.rank));
    // A collective's place in its communicator's list: its number less the lowest any member has.
    auto slot = [&](const std::string& key, std::int64_t index) -> std::size_t {
        auto found = reference.communicators.find(key);
        const std::int64_t first = found == reference.communicators.end() ? 0 : found->second.first_index;
        return static_cast<std::size_t>(index - first);
    };

    // 2. Every collective over the job: its first and last arrival (aligned), its last
    //    rank, its end spread.
    Summaries partial;
    for (std::size_t r = 0; r < shard.size(); ++r) {
        const RankCollectives& rank = shard[r];
        for (std::size_t c = 0; c < rank.communicators.size(); ++c) {
            const CommunicatorOps& communicator = rank.communicators[c];
            if (communicator.ops.empty()) continue;
            std::vector<Summary>& list = partial[communicator.key];
            const std::size_t size = slot(communicator.key, communicator.ops.back().index) + 1;
            if (list.size() < size) list.resize(size);
            for (std::size_t k = 0; k < communicator.ops.size(); ++k) {
                if (!flags[r][c][k]) continue;
                const CollectiveOp& op = communicator.ops[k];
                list[slot(communicator.key, op.index)].add(op.start_ns + clocks[r].offset_ns,
                                                           op.end_ns + clocks[r].offset_ns, rank.rank, op.kind,
                                                           communicator.host);
            }
        }
    }
    Summaries summaries = merge_summaries(exchange->all_gather(encode_summaries(partial)));
    // How well the clocks agree: the spread of the collectives' ends after alignment
    // (kernels only). A rank arrived last only when it came later than every other rank
    // by more than twice that (and 1 µs): closer arrivals are ties within the clocks'
    // agreement.
    std::vector<TimeNs> spreads;
    for (const auto& [key, list] : summaries)
        for (const Summary& s : list)
            if (s.ranks >= 2 && !s.host) spreads.push_back(s.last_end - s.first_end);
    const TimeNs residual_max = spreads.empty() ? 0 : *std::max_element(spreads.begin(), spreads.end());
    const TimeNs residual_median = median_of(spreads);
    const TimeNs margin = std::max<TimeNs>(2 * residual_median, 1000);
    auto last_rank_of = [&](const Summary& s) -> std::int64_t {
        return s.ranks >= 2 && s.last_arrival - s.runner_up > margin ? s.last_rank : -1;
    };

    // 3. Each rank's waits, and each collective's summed wait.
    std::vector<RankWaitRow> rows;
    std::vector<Inheritance> inheritances;
    Summaries waits;  // total_wait only
    for (const auto& [key, list] : summaries) waits[key].resize(list.size());
    for (std::size_t r = 0; r < shard.size(); ++r) {
        const RankCollectives& rank = shard[r];
        RankWaitRow row;
        row.rank = rank.rank;
        row.path = rank.path;
        row.rank_from = rank.rank_from;
        row.steps = rank.steps;
        row.step_ns = rank.steps > 0 ? rank.step_ns : rank.last_ns - rank.first_ns;
        row.host_arrivals = rank.host_arrivals();
        row.world_size = rank.world_size;
        row.wall_start_ns = rank.wall_clock_known ? rank.first_ns + rank.clock_offset_to_wall_ns : 0;
        row.step_waits.assign(rank.step_windows.size(), 0);
        // The step a collective's arrival lies in (steps by start; the last that began by then).
        auto step_of = [&](TimeNs arrival) -> std::optional<std::size_t> {
            auto after = std::upper_bound(rank.step_windows.begin(), rank.step_windows.end(), arrival,
                                          [](TimeNs t, const std::pair<TimeNs, TimeNs>& w) { return t < w.first; });
            if (after == rank.step_windows.begin()) return std::nullopt;
            const auto index = static_cast<std::size_t>(after - rank.step_windows.begin() - 1);
            if (arrival >= rank.step_windows[index].second) return std::nullopt;
            return index;
        };
        std::vector<TimeNs> lateness;
        // Its matched collectives in arrival order: (arrival, communicator, index, wait, summary).
        struct Arrived {
            TimeNs arrival;
            const std::string* key;
            std::int64_t index;
            TimeNs wait;
            const Summary* summary;
        };
        std::vector<Arrived> arrived;
        for (std::size_t c = 0; c < rank.communicators.size(); ++c) {
            const CommunicatorOps& communicator = rank.communicators[c];
            const std::vector<Summary>& list_of = summaries[communicator.key];
            std::vector<Summary>& waits_of = waits[communicator.key];
            for (std::size_t k = 0; k < communicator.ops.size(); ++k) {
                const CollectiveOp& op = communicator.ops[k];
                const std::size_t at = slot(communicator.key, op.index);
                const Summary& summary = list_of[at];
                if (!flags[r][c][k] || summary.ranks < 2) continue;
                const TimeNs arrival = op.start_ns + clocks[r].offset_ns;
                const TimeNs length = op.end_ns - op.start_ns;
                TimeNs wait = std::max<TimeNs>(0, summary.last_arrival - arrival);
                if (!communicator.host) wait = std::min(wait, length);  // a kernel waits inside itself
                row.collectives += 1;
                row.wait_ns += wait;
                if (std::optional<std::size_t> step = step_of(op.start_ns)) row.step_waits[*step] += wait;
                row.transfer_ns += std::max<TimeNs>(0, length - wait);
                lateness.push_back(arrival - summary.first_arrival);
                const bool last = last_rank_of(summary) == rank.rank;
                row.arrived_last += last;
                waits_of[at].total_wait += wait;
                waits_of[at].ranks = 1;  // marks the entry as sent
                arrived.push_back({arrival, &communicator.key, op.index, wait, &summary});
            }
        }
        // Where it arrived last having waited at its previous collective, that much of its
        // lateness was another rank's: the previous collective's last rank held it back.
        std::sort(arrived.begin(), arrived.end(),
                  [](const Arrived& a, const Arrived& b) { return a.arrival < b.arrival; });
        for (std::size_t i = 1; i < arrived.size(); ++i) {
            const Summary& summary = *arrived[i].summary;
            if (last_rank_of(summary) != rank.rank || arrived[i - 1].wait <= 0) continue;
            const TimeNs inherited = std::min(summary.last_arrival - summary.runner_up, arrived[i - 1].wait);
            inheritances.push_back(
                {*arrived[i].key, arrived[i].index, *arrived[i - 1].key, arrived[i - 1].index, inherited});
        }
        row.median_lateness_ns = median_of(std::move(lateness));
        row.wait_percent =
            row.step_ns > 0 ? 100.0 * static_cast<double>(row.wait_ns) / static_cast<double>(row.step_ns) : 0.0;
        rows.push_back(std::move(row));
    }
    Bytes rows_out;
    rows_out.put(static_cast<std::int64_t>(rows.size()));
    for (std::size_t r = 0; r < rows.size(); ++r) put_row(rows_out, rows[r], clocks[r]);
    rows_out.put(kind_mismatches);
    rows_out.put(encode_summaries(waits));
    rows_out.put(static_cast<std::int64_t>(inheritances.size()));
    for (const Inheritance& inheritance : inheritances) {
        rows_out.put(inheritance.key);
        rows_out.put(inheritance.index);
        rows_out.put(inheritance.previous_key);
        rows_out.put(inheritance.previous_index);
        rows_out.put(inheritance.inherited_ns);
    }

    // 4. The job, the same on every process.
    JobCollectives job;
    std::int64_t all_kind_mismatches = 0;
    std::vector<Inheritance> all_inheritances;
    Summaries wait_totals;
    {
        std::vector<std::string> wait_parts;
        for (const std::string& part : exchange->all_gather(rows_out.take())) {
            BytesReader in(part);
            for (std::int64_t n = in.int64(); n > 0; --n) {
                auto [row, clock] = get_row(in);
                job.ranks.push_back(std::move(row));
                job.clocks.push_back(std::move(clock));
            }
            all_kind_mismatches += in.int64();
            wait_parts.push_back(in.text());
            for (std::int64_t n = in.int64(); n > 0; --n) {
                Inheritance inheritance;
                inheritance.key = in.text();
                inheritance.index = in.int64();
                inheritance.previous_key = in.text();
                inheritance.previous_index = in.int64();
                inheritance.inherited_ns = in.int64();
                all_inheritances.push_back(std::move(inheritance));
            }
        }
        wait_totals = merge_summaries(wait_parts);
    }
    std::sort(job.ranks.begin(), job.ranks.end(),
              [](const RankWaitRow& a, const RankWaitRow& b) { return a.rank < b.rank; });
    std::sort(job.clocks.begin(), job.clocks.end(),
              [](const RankClock& a, const RankClock& b) { return a.rank < b.rank; });
    job.host_arrivals =
        std::any_of(job.ranks.begin(), job.ranks.end(), [](const RankWaitRow& r) { return r.host_arrivals; });

    std::int64_t single_rank = 0, partial_ranks = 0, collectives_with_a_last = 0;
    const auto rank_count = static_cast<std::int64_t>(job.ranks.size());
    for (const auto& [key, list] : summaries) {
        for (std::size_t k = 0; k < list.size(); ++k) {
            const Summary& s = list[k];
            if (s.ranks == 0) continue;
            if (s.ranks < 2) {
                ++single_rank;
                continue;
            }
            // The members among the files given (a process group's size, at most the ranks given).
            auto found = reference.communicators.find(key);
            const std::int64_t group = found == reference.communicators.end() ? 0 : found->second.members;
            const std::int64_t members = group > 0 ? std::min(group, rank_count) : rank_count;
            if (s.ranks < members) ++partial_ranks;
            CollectiveRow row;
            row.communicator = key;
            row.index =
                static_cast<std::int64_t>(k) + (found == reference.communicators.end() ? 0 : found->second.first_index);
            row.kind = static_cast<CollectiveKind>(s.kind);
            row.ranks = static_cast<std::int32_t>(s.ranks);
            row.members = static_cast<std::int32_t>(members);
            row.first_arrival_ns = s.first_arrival;
            row.last_arrival_ns = s.last_arrival;
            row.last_rank = static_cast<std::int32_t>(last_rank_of(s));
            row.runner_up_arrival_ns = s.runner_up;
            if (row.last_rank >= 0) row.held_back_ns = (s.ranks - 1) * (s.last_arrival - s.runner_up);
            row.end_spread_ns = s.last_end - s.first_end;
            row.longest_ns = s.longest;
            row.total_wait_ns = wait_totals[key].size() > k ? wait_totals[key][k].total_wait : 0;
            if (row.last_rank >= 0) ++collectives_with_a_last;
            job.collectives.push_back(std::move(row));
        }
    }
    std::sort(job.collectives.begin(), job.collectives.end(), [](const CollectiveRow& a, const CollectiveRow& b) {
        return std::tie(a.first_arrival_ns, a.communicator, a.index) <
               std::tie(b.first_arrival_ns, b.communicator, b.index);
    });
    job.matched = static_cast<std::int64_t>(job.collectives.size());
    job.residual_median_ns = residual_median;
    job.residual_max_ns = residual_max;
    if (all_kind_mismatches > 0)
        job.unmatched.push_back(
            {"its kind differs from the collective of the same number on its communicator's "
             "lowest rank (counted per rank)",
             all_kind_mismatches});
    if (single_rank > 0)
        job.unmatched.push_back(
            {"only one rank ran it (a rank's trace is shorter, sampled, or the communicator "
             "has one member here)",
             single_rank});
    if (partial_ranks > 0)
        job.unmatched.push_back(
            {"matched on fewer than its communicator's ranks (some ranks' traces lack it)", partial_ranks});
    // Files that are hardly one job.
    std::set<std::int32_t> world_sizes;
    std::int64_t earliest = std::numeric_limits<std::int64_t>::max(), latest = std::numeric_limits<std::int64_t>::min();
    for (const RankWaitRow& row : job.ranks) {
        if (row.world_size > 1) world_sizes.insert(row.world_size);
        if (row.wall_start_ns != 0) {
            earliest = std::min(earliest, row.wall_start_ns);
            latest = std::max(latest, row.wall_start_ns);
        }
    }
    if (world_sizes.size() > 1) {
        std::string sizes;
        for (std::int32_t size : world_sizes) sizes += (sizes.empty() ? "" : ", ") + std::to_string(size);
        job.warnings.push_back("the files record different world sizes (" + sizes +
                               "): they may not be ranks of one job");
    }
    constexpr std::int64_t kHour = 3'600'000'000'000;
    if (earliest < latest && latest - earliest > kHour)
        job.warnings.push_back(
            fmt::format("the files were recorded {:.1f} hours apart (their wall clocks): they may "
                        "not be ranks of one job",
                        static_cast<double>(latest - earliest) / static_cast<double>(kHour)));
    attribute_held_back(job, all_inheritances);
    name_straggler(job, collectives_with_a_last);
    job.reference_ranks = typical_ranks(job);
    return job;
}

JobCollectives job_collectives(const store::TraceReader& reader, std::size_t activity_rows) {
    JobCollectives job = analyze_job(rank_collectives(reader));
    if (job.straggler && activity_rows > 0) job.doing_instead = straggler_activity({&reader}, job, activity_rows);
    return job;
}

// ---------------------------------------------------------------------------
// [SECTION] What the straggler was doing instead
// ---------------------------------------------------------------------------

namespace {

struct Window {
    TimeNs start = 0, end = 0;
};

// The windows of one rank before the collectives named in `late` (key -> indices):
// from its arrival at its previous collective (any communicator) to its arrival at this
// one: the work it did between two collectives. (From the previous collective's end
// would charge the straggler with work the other ranks did while they waited for it.)
std::vector<Window> windows_before(const RankCollectives& rank,
                                   const std::map<std::string, std::set<std::int64_t>>& late) {
    struct Timed {
        TimeNs start, end;
        bool late;
    };
    std::vector<Timed> ops;
    for (const CommunicatorOps& communicator : rank.communicators) {
        auto wanted = late.find(communicator.key);
        for (const CollectiveOp& op : communicator.ops)
            ops.push_back({op.start_ns, op.end_ns, wanted != late.end() && wanted->second.count(op.index) > 0});
    }
    std::sort(ops.begin(), ops.end(), [](const Timed& a, const Timed& b) { return a.start < b.start; });
    std::vector<Window> windows;
    TimeNs previous = rank.first_ns;
    for (const Timed& op : ops) {
        if (op.late && op.start > previous) windows.push_back({previous, op.start});
        previous = std::max(previous, op.start);
    }
    return windows;
}

TimeNs overlap_with(const std::vector<Window>& windows, TimeNs start, TimeNs end) {
    TimeNs total = 0;
    auto first =
        std::upper_bound(windows.begin(), windows.end(), start, [](TimeNs t, const Window& w) { return t < w.end; });
    for (auto it = first; it != windows.end() && it->start < end; ++it)
        total += std::max<TimeNs>(0, std::min(end, it->end) - std::max(start, it->start));
    return total;
}

}  // namespace

std::vector<ActivityRow> straggler_activity(const std::vector<const store::TraceReader*>& readers,
                                            const JobCollectives& job, std::size_t top,
                                            const std::vector<std::map<std::int32_t, std::int32_t>>* job_rank) {
    if (!job.straggler) return {};
    std::map<std::string, std::set<std::int64_t>> late;
    for (const CollectiveRow& row : job.collectives)
        if (row.last_rank == *job.straggler) late[row.communicator].insert(row.index);
    std::set<std::int32_t> wanted(job.reference_ranks.begin(), job.reference_ranks.end());
    wanted.insert(*job.straggler);

    // Per rank: time per (what, name) inside its windows.
    std::map<std::int32_t, std::map<std::pair<std::string, std::string>, TimeNs>> time_of;
    for (std::size_t r = 0; r < readers.size(); ++r) {
        const store::TraceReader* reader = readers[r];
        auto renumbered = [&](std::int32_t own) {
            if (!job_rank || r >= job_rank->size()) return own;
            auto found = (*job_rank)[r].find(own);
            return found == (*job_rank)[r].end() ? own : found->second;
        };
        std::vector<RankCollectives> ranks = rank_collectives(*reader);
        const RankMap own_map = rank_map(*reader);
        // The file's ranks as the job numbers them.
        struct JobRankMap {
            const RankMap& own;
            std::function<std::int32_t(std::int32_t)> job;
            std::int32_t of_stream(trace::StreamId s) const { return job(own.of_stream(s)); }
            std::int32_t of_thread(trace::ThreadId t) const { return job(own.of_thread(t)); }
        } map{own_map, renumbered};
        std::map<std::int32_t, std::vector<Window>> windows;
        for (const RankCollectives& rank : ranks)
            if (wanted.count(renumbered(rank.rank))) windows[renumbered(rank.rank)] = windows_before(rank, late);
        if (windows.empty()) continue;
        std::unordered_map<trace::StringId, bool> communication;
        reader->for_each_kernel({}, [&](const trace::KernelEvent& kernel) {
            auto found = windows.find(map.of_stream(kernel.stream_id));
            if (found == windows.end()) return true;
            auto [is, inserted] = communication.try_emplace(kernel.name_id, false);
            if (inserted) is->second = is_communication_kernel(reader->string(kernel.name_id));
            if (is->second) return true;
            if (TimeNs inside = overlap_with(found->second, kernel.start_ns, kernel.end_ns))
                time_of[found->first][{"kernel", std::string(reader->string(kernel.name_id))}] += inside;
            return true;
        });
        // Steps and communication (collective calls, waits for them) say nothing of the work.
        RangeRoles roles(*reader);
        reader->for_each_range({}, [&](const trace::RangeEvent& range) {
            auto found = windows.find(map.of_thread(range.thread_id));
            if (found == windows.end()) return true;
            const RangeRole role = roles.of(range.domain_id, range.name_id, range.category);
            if (role == RangeRole::step || role == RangeRole::communication) return true;
            if (TimeNs inside = overlap_with(found->second, range.start_ns, range.end_ns))
                time_of[found->first][{"range", std::string(reader->string(range.name_id))}] += inside;
            return true;
        });
    }

    std::vector<ActivityRow> rows;
    const std::map<std::pair<std::string, std::string>, TimeNs> mine = time_of[*job.straggler];
    std::set<std::pair<std::string, std::string>> names;
    for (const auto& [rank, times] : time_of)
        for (const auto& [name, time] : times) names.insert(name);
    for (const auto& name : names) {
        std::vector<TimeNs> typical;
        for (std::int32_t rank : job.reference_ranks) {
            const auto& times = time_of[rank];
            auto found = times.find(name);
            typical.push_back(found != times.end() ? found->second : 0);
        }
        auto own = mine.find(name);
        ActivityRow row{name.first, name.second, own == mine.end() ? 0 : own->second, median_of(typical), 0};
        row.extra_ns = row.straggler_ns - row.typical_ns;
        if (row.extra_ns > 0) rows.push_back(std::move(row));
    }
    std::stable_sort(rows.begin(), rows.end(), [](const ActivityRow& a, const ActivityRow& b) {
        return std::tie(b.extra_ns, a.what, a.name) < std::tie(a.extra_ns, b.what, b.name);
    });
    // What ran clearly longer: at least 5% of the largest excess, a tenth more than on
    // the typical rank, and 5% of how late the straggler was in all (its margins over the
    // next-latest rank summed): microseconds of jitter explain no milliseconds of lateness.
    if (!rows.empty()) {
        const TimeNs largest = rows.front().extra_ns;
        const TimeNs lateness = job.recoverable_ns / std::max<TimeNs>(1, static_cast<TimeNs>(job.ranks.size()) - 1);
        rows.erase(std::remove_if(rows.begin(), rows.end(),
                                  [&](const ActivityRow& row) {
                                      return row.extra_ns * 20 < largest || row.extra_ns * 10 < row.typical_ns ||
                                             row.extra_ns * 20 < lateness;
                                  }),
                   rows.end());
    }
    if (rows.size() > top) rows.resize(top);
    return rows;
}

}  // namespace ember::analysis
