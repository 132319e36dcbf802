// trace_diff_name_tables.cpp: the name tables of `ember diff` (trace_diff_name_tables.h):
// GROUP BY aggregates of every event table, names matched through normalise_name.
#include "profiler/analysis/trace_diff_name_tables.h"

#include "profiler/analysis/cpu_profile.h"
#include "profiler/analysis/operation_names.h"
#include "profiler/store/table_sql.h"
#include "profiler/store/schema.h"

#include <cstdlib>
#include <map>
#include <unordered_map>
#include <utility>

namespace ember::analysis {

using trace::TimeNs;

namespace {

// Totals by (domain, normalised name), filled from GROUP BY rows.
class NameTotals {
  public:
    void add(const std::string& domain, const std::string& name, TimeNs total, std::int64_t instances) {
        NameTotal& row = rows_[{domain, name}];
        row.domain = domain;
        row.name = name;
        row.total_ns += total;
        row.instances += instances;
    }
    std::vector<NameTotal> rows() const {
        std::vector<NameTotal> rows;
        for (const auto& [key, row] : rows_) rows.push_back(row);
        return rows;
    }

  private:
    std::map<std::pair<std::string, std::string>, NameTotal> rows_;
};

class NameTableReader {
  public:
    NameTableReader(const store::TraceReader& reader, const RankMap& ranks, std::optional<std::int32_t> rank)
        : reader_(reader), ranks_(ranks), rank_(rank) {}

    std::vector<NameTotal> gpu_operations() {
        NameTotals totals;
        store::Statement kernels = store::query(
            reader_,
            "SELECT name_id, stream_id, SUM(end_ns - start_ns), COUNT(*) FROM kernels GROUP BY name_id, stream_id");
        while (kernels.next_row())
            if (stream_in_scope(kernels.column_int64(1)))
                totals.add("", normalised(kernels.column_int64(0)), kernels.column_int64(2), kernels.column_int64(3));
        store::Statement copies = store::query(
            reader_,
            "SELECT direction, stream_id, SUM(end_ns - start_ns), COUNT(*) FROM memcpys GROUP BY direction, stream_id");
        while (copies.next_row())
            if (stream_in_scope(copies.column_int64(1)))
                totals.add("", memcpy_name(copies.column_int64(0)), copies.column_int64(2), copies.column_int64(3));
        store::Statement memsets =
            store::query(reader_, "SELECT stream_id, SUM(end_ns - start_ns), COUNT(*) FROM memsets GROUP BY stream_id");
        while (memsets.next_row())
            if (stream_in_scope(memsets.column_int64(0)))
                totals.add("", std::string(kMemsetOperationName), memsets.column_int64(1), memsets.column_int64(2));
        return totals.rows();
    }

    std::vector<NameTotal> api_calls() {
        NameTotals totals;
        store::Statement query = store::query(
            reader_,
            "SELECT name_id, thread_id, SUM(end_ns - start_ns), COUNT(*) FROM api_calls GROUP BY name_id, thread_id");
        while (query.next_row())
            if (thread_in_scope(query.column_int64(1)))
                totals.add("", normalised(query.column_int64(0)), query.column_int64(2), query.column_int64(3));
        return totals.rows();
    }

    std::vector<NameTotal> ranges() {
        NameTotals totals;
        store::Statement query =
            store::query(reader_,
                         "SELECT domain_id, name_id, thread_id, SUM(end_ns - start_ns), COUNT(*) FROM ranges "
                         "GROUP BY domain_id, name_id, thread_id");
        while (query.next_row())
            if (thread_in_scope(query.column_int64(2)))
                totals.add(std::string(reader_.string(static_cast<trace::StringId>(query.column_int64(0)))),
                           normalised(query.column_int64(1)), query.column_int64(3), query.column_int64(4));
        return totals.rows();
    }

    // Self time of the sampled stacks: each sample is one sampling period of CPU time,
    // charged to its innermost frame. Empty when the file has no samples or no period.
    std::vector<NameTotal> cpu_functions(bool& sampled) {
        NameTotals totals;
        sampled = false;
        const std::optional<std::string> period_text = reader_.metadata(store::metadata_key::cpu_sample_period_ns);
        const TimeNs period = period_text ? std::strtoll(period_text->c_str(), nullptr, 10) : 0;
        if (period <= 0 || reader_.event_count("stack_samples") == 0) return {};
        sampled = true;
        store::Statement query = store::query(
            reader_, "SELECT stack_id, thread_id, COUNT(*) FROM stack_samples GROUP BY stack_id, thread_id");
        while (query.next_row()) {
            if (!thread_in_scope(query.column_int64(1))) continue;
            const std::vector<trace::FrameInfo> frames =
                reader_.stack_frames(static_cast<trace::StackId>(query.column_int64(0)));
            const std::string name = frames.empty() ? "(empty stack)" : frame_name(frames.back());
            totals.add("", name, query.column_int64(2) * period, query.column_int64(2));
        }
        return totals.rows();
    }

  private:
    bool stream_in_scope(std::int64_t stream) const {
        return !rank_ || ranks_.of_stream(static_cast<trace::StreamId>(stream)) == *rank_;
    }
    bool thread_in_scope(std::int64_t thread) const {
        return !rank_ || ranks_.of_thread(static_cast<trace::ThreadId>(thread)) == *rank_;
    }
    const std::string& normalised(std::int64_t name) {
        auto [found, inserted] = names_.try_emplace(static_cast<trace::StringId>(name));
        if (inserted) found->second = normalise_name(reader_.string(static_cast<trace::StringId>(name)));
        return found->second;
    }
    // Nsight Systems' names, as `ember stats memory` prints them.
    static std::string memcpy_name(std::int64_t direction) {
        return memcpy_operation_name(static_cast<trace::MemcpyDirection>(direction));
    }
    // The name `ember stats` gives the frame (cpu_profile.h), with templates
    // collapsed so builds that differ only in template arguments match.
    static std::string frame_name(const trace::FrameInfo& frame) { return normalise_name(cpu_frame_name(frame)); }

    const store::TraceReader& reader_;
    const RankMap& ranks_;
    std::optional<std::int32_t> rank_;
    std::unordered_map<trace::StringId, std::string> names_;
};

}  // namespace

void read_name_tables(const store::TraceReader& reader, const RankMap& ranks, std::optional<std::int32_t> rank,
                      RunProfile& profile) {
    NameTableReader tables(reader, ranks, rank);  // no rank: every rank adds up
    profile.kernels = tables.gpu_operations();
    profile.ranges = tables.ranges();
    profile.api = tables.api_calls();
    profile.cpu_functions = tables.cpu_functions(profile.cpu_sampled);
}

}  // namespace ember::analysis
